"""`memloci bench import`: `memloci import jsonl` of one synthetic graph into each engine.

The same memory.jsonl (N entities with three observations each, M relations between them,
written once) is imported into a fresh SQLite library and a fresh Markdown library through
the path `memloci import jsonl` takes (read_official, then the service's import_everything,
the embedder off as the command has it). Timed per run: wall seconds from reading the file
to the library closed (a Markdown library's files are all in place and synced by then), and
the CPU seconds of the process. The median of `--repeat` runs is reported, and the Markdown
time as a multiple of the SQLite time (runs of the two engines alternate, so a busy machine
weighs on both alike).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import save_report
from memloci.bench.graph import SyntheticGraph

ENGINES = ("sqlite", "markdown")


def write_jsonl(path: Path, entities: int, relations: int) -> None:
    """memory.jsonl as the official server writes it: entity i, and relation j from entity
    j mod N to another entity (a target in an earlier, the same or a later batch)."""
    graph = SyntheticGraph(max(entities, 1))
    with path.open("w", encoding="utf-8") as out:
        for i in range(entities):
            name, entity_type, observations = graph.entity(i)
            out.write(json.dumps({"type": "entity", "name": name, "entityType": entity_type,
                                  "observations": list(observations)}) + "\n")
        for j in range(relations if entities else 0):
            a = graph.name(j % entities)
            b = graph.name((j * 7 + 1 + j // entities) % entities)
            out.write(json.dumps({"type": "relation", "from": a, "to": b,
                                  "relationType": ["knows", "uses", "owns", "depends_on"][j % 4]}) + "\n")


def import_once(source: Path, library: Path, kind: str, progress=None) -> dict[str, Any]:
    """One `memloci import jsonl` into a new library; its timings and counts."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.formats.official import read_official
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    wall, cpu = time.perf_counter(), time.process_time()
    service = MemoryService(LibraryRegistry([LibrarySpec("bench", library, kind)], create_missing=True),
                            EmbedderHandle("none"))
    try:
        report, _, _ = service.import_everything(read_official(source), library="bench", progress=progress)
        stats = service.stats(library="bench")
    finally:
        service.close()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "entities": stats.entities, "observations": stats.observations, "relations": stats.relations,
            "relations_created": report.relations_created}


def run(*, engines: list[str], entities: int, relations: int, repeat: int, out: Path, console: Any) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    tmp = Path(tempfile.mkdtemp(prefix="memloci-import-"))
    source = tmp / "memory.jsonl"
    write_jsonl(source, entities, relations)
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            for r in range(repeat):
                for engine in engines:  # alternating: a busy machine slows both engines alike
                    task = bar.add_task(f"{engine} run {r + 1}/{repeat}", total=entities + relations)
                    library = tmp / f"{engine}-{r}{'.db' if engine == 'sqlite' else ''}"
                    runs[engine].append(import_once(source, library, engine, lambda n, task=task: bar.advance(task, n)))
                    bar.remove_task(task)
                    shutil.rmtree(library, ignore_errors=True) if library.is_dir() else library.unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report: dict[str, Any] = {"bench": "import", "entities": entities, "relations": relations,
                              "observations_per_entity": 3, "repeat": repeat, "engines": {}}
    for engine, done in runs.items():
        report["engines"][engine] = {
            "wall_s": round(statistics.median(d["wall_s"] for d in done), 2),
            "cpu_s": round(statistics.median(d["cpu_s"] for d in done), 2),
            "runs_wall_s": [round(d["wall_s"], 2) for d in done],
            "entities": done[-1]["entities"], "observations": done[-1]["observations"],
            "relations": done[-1]["relations"],
        }
    if "sqlite" in runs and "markdown" in runs:
        md, sq = report["engines"]["markdown"], report["engines"]["sqlite"]
        report["markdown_vs_sqlite_wall"] = round(md["wall_s"] / sq["wall_s"], 2)
        report["markdown_vs_sqlite_cpu"] = round(md["cpu_s"] / sq["cpu_s"], 2)
    table = Table(title=f"memloci bench import: {entities} entities (3 observations each), {relations} relations, "
                        f"median of {repeat}")
    for column in ("engine", "wall s", "CPU s", "entities/s", "in the library"):
        table.add_column(column, justify="left" if column in ("engine", "in the library") else "right")
    for engine, r in report["engines"].items():
        table.add_row(engine, f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", f"{entities / r['wall_s']:.0f}",
                      f"{r['entities']} entities, {r['observations']} observations, {r['relations']} relations")
    console.print(table)
    if "markdown_vs_sqlite_wall" in report:
        console.print(f"markdown / sqlite: {report['markdown_vs_sqlite_wall']}x wall, "
                      f"{report['markdown_vs_sqlite_cpu']}x CPU", highlight=False)
    save_report(report, out, console)
    return report
