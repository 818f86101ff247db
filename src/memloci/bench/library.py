"""`memloci bench library --files N`: index a Markdown library of N files, cold and warm.

The folder is generated once (entity documents with front matter, three observations, two
sections and two [[wikilinks]] each). Timed, median of `--repeat` runs:
- cold: a fresh index (none on disk) built from all files, without embeddings;
- warm: opening the library again with nothing changed (the scan finds no change);
- through MCP: `memloci serve` start to the answer of a `list_entities` call, warm;
- with embeddings: cold index plus every observation embedded by the default model (once).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, save_report
from memloci.bench.graph import SEED, SyntheticGraph


def make_library(folder: Path, n: int) -> None:
    words = SyntheticGraph(10).words
    rng = random.Random(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        sub = folder / f"area-{i % 20}"
        sub.mkdir(exist_ok=True)
        links = " and ".join(f"[[note-{rng.randrange(n)}]]" for _ in range(2))
        observations = "\n".join(f"- {' '.join(rng.choice(words) for _ in range(rng.randint(6, 14)))}" for _ in range(3))
        (sub / f"note-{i}.md").write_text(
            f"---\ntype: {rng.choice(['note', 'project', 'person', 'concept'])}\naliases: [n{i}]\n"
            f"tags: [{rng.choice(words)}]\nrelations:\n  - {{type: related_to, to: note-{rng.randrange(n)}}}\n"
            f"created: 2026-01-01T00:00:00Z\nmodified: 2026-01-01T00:00:00Z\nreviewed_by: someone\n---\n"
            f"# note-{i}\n\n## Observations\n{observations}\n\n## Summary\n"
            f"{' '.join(rng.choice(words) for _ in range(40))}\n\n## Links\nSee {links}.\n")


def _open(folder: Path, embedder: str = "none") -> tuple[float, Any]:
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry([LibrarySpec("bench", folder, "markdown")]), EmbedderHandle(embedder))
    started = time.perf_counter()
    service.store("bench")
    return time.perf_counter() - started, service


def run(*, files: int, repeat: int, embeddings: bool, out: Path, console: Any) -> dict[str, Any]:
    import anyio
    from rich.table import Table

    tmp = Path(tempfile.mkdtemp(prefix="memloci-library-"))
    folder = tmp / "lib"
    console.print(f"writing {files} Markdown files to {folder} ...")
    make_library(folder, files)
    report: dict[str, Any] = {"bench": "library", "files": files, "repeat": repeat}
    cold, warm = [], []
    for _ in range(repeat):
        shutil.rmtree(folder / ".memloci", ignore_errors=True)
        seconds, service = _open(folder)
        stats = service.stats(library="bench")
        service.close()
        cold.append(seconds)
        seconds, service = _open(folder)
        service.close()
        warm.append(seconds)
    report["entities"], report["observations"], report["relations"] = stats.entities, stats.observations, stats.relations
    report["cold_s"] = round(statistics.median(cold), 3)
    report["cold_files_per_s"] = round(files / statistics.median(cold))
    report["warm_s"] = round(statistics.median(warm), 3)

    async def serve_start() -> float:
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = {**os.environ, "MEMLOCI_LIBRARIES": f"bench:{folder}", "MEMLOCI_EMBEDDER": "none"}
        params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
        started = time.perf_counter()
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (read, write):
                async with client_session_class()(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("list_entities", {"entity_glob": "note-1"})
                    assert not result.is_error, result.content[0].text
                    return time.perf_counter() - started

    starts = [anyio.run(serve_start) for _ in range(repeat)]
    report["serve_warm_first_answer_s"] = round(statistics.median(starts), 3)

    if embeddings:
        shutil.rmtree(folder / ".memloci", ignore_errors=True)
        started = time.perf_counter()
        seconds, service = _open(folder, "minilm")
        service.flush_embeddings(library="bench", timeout=3600)
        report["cold_with_embeddings_s"] = round(time.perf_counter() - started, 1)
        report["cold_index_part_s"] = round(seconds, 1)
        service.close()
        seconds, service = _open(folder, "minilm")
        service.close()
        report["warm_with_embeddings_s"] = round(seconds, 3)

    table = Table(title=f"memloci bench library — {files} files ({report['observations']} observations, "
                        f"{report['relations']} relations), median of {repeat}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("cold index, no embeddings", f"{report['cold_s']:.2f} s ({report['cold_files_per_s']} files/s)")
    table.add_row("warm open (nothing changed)", f"{report['warm_s'] * 1000:.0f} ms")
    table.add_row("serve start to first answer, warm", f"{report['serve_warm_first_answer_s'] * 1000:.0f} ms")
    if embeddings:
        table.add_row("cold index + every observation embedded", f"{report['cold_with_embeddings_s']:.1f} s")
        table.add_row("warm open, with embedder", f"{report['warm_with_embeddings_s'] * 1000:.0f} ms")
    console.print(table)
    save_report(report, out, console)
    shutil.rmtree(tmp, ignore_errors=True)
    return report
