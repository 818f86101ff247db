"""`memloci bench models`: what each embedder costs and what it finds.

For each model spec (MEMLOCI_EMBEDDER values: minilm, multilingual, use-multilingual, ...):

- cost, measured in a fresh process per model so nothing of one model counts for another:
  load time, resident memory after load (and its growth over the bare process), stored
  texts embedded per second (as the embedding worker does it: one list), and the time to
  embed one query;
- the CJK set (bench/data/cjk_recall.json: 60 short memories in English, Japanese and
  Chinese, 180 queries, one per language per memory), hit@1 and hit@3 per query -> memory
  language pair (en->ja, ja->en, zh->zh, ...), twice: by meaning alone (cosine over the
  model's vectors) and through the real MCP server (store_memory / retrieve_memory, words
  and meaning together, as a user gets it);
- LoCoMo turn-level recall@k on the given split, with bench/locomo.py's runner and protocol
  (DESIGN.md §7), the server started with MEMLOCI_EMBEDDER set to the model.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, save_report

CJK_SET = Path(__file__).parent / "data" / "cjk_recall.json"
LANGS = ("en", "ja", "zh")
PAIRS = [f"{q}->{m}" for q in LANGS for m in LANGS]
_DEVNULL = open(os.devnull, "w")


def load_cjk(path: Path = CJK_SET) -> dict[str, Any]:
    """The CJK set at `path`; ValueError naming the file, what is wrong and the shape expected."""
    shape = '{"memories": [{"id", "text", "lang"}, ...], "queries": [{"text", "lang", "expected": [ids]}, ...]}'
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        valid = [m["id"] for m in data["memories"] if isinstance(m["text"], str) and isinstance(m["lang"], str)]
        queries = [(q["text"], q["lang"], list(q["expected"])) for q in data["queries"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path}: not a CJK set ({type(exc).__name__}: {exc}); expected {shape}") from None
    ids = set(valid)
    if len(valid) != len(data["memories"]) or not queries:
        raise ValueError(f"{path}: every memory needs a text and a lang, and the set a query; expected {shape}")
    for text, _, expected in queries:  # a set that names a memory it lacks would score nonsense
        if not expected or not set(expected) <= ids:
            raise ValueError(f"{path}: query {text!r} expects {expected}, not all in the set")
    return data


def pair_scores(data: dict[str, Any], ranked: list[list[str]]) -> dict[str, dict[str, float]]:
    """hit@1 / hit@3 (percent) per query -> memory language pair, plus 'all' and 'cross' (languages differ)."""
    lang_of = {m["id"]: m["lang"] for m in data["memories"]}
    groups: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for q, ids in zip(data["queries"], ranked):
        expected = set(q["expected"])
        hit = (bool(expected & set(ids[:1])), bool(expected & set(ids[:3])))
        target = lang_of[q["expected"][0]]
        groups[f"{q['lang']}->{target}"].append(hit)
        groups["all"].append(hit)
        if q["lang"] != target:
            groups["cross"].append(hit)
    return {name: {"hit@1": round(100 * sum(h[0] for h in hits) / len(hits), 1),
                   "hit@3": round(100 * sum(h[1] for h in hits) / len(hits), 1), "queries": len(hits)}
            for name, hits in groups.items()}


def _rss_mb() -> float:
    """Resident memory of this process now (Linux /proc), else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def probe(spec: str, data_path: Path = CJK_SET) -> dict[str, Any]:
    """Run in a fresh process: load one model, time it, rank the CJK set by meaning alone."""
    import numpy as np

    from memloci.search.embedder import create_embedder

    data = load_cjk(data_path)
    bare = _rss_mb()
    t0 = time.perf_counter()
    model = create_embedder(spec)
    load_s = time.perf_counter() - t0
    if model is None:
        raise ValueError(f"'{spec}' embeds nothing: no model to measure")
    loaded = _rss_mb()
    embed_query = getattr(model, "embed_query", model.embed)
    texts = [m["text"] for m in data["memories"]]
    model.embed(texts[:4])  # warm-up: first-call allocations are not throughput
    corpus = texts * 4
    t0 = time.perf_counter()
    stored = model.embed(corpus)
    per_s = len(corpus) / (time.perf_counter() - t0)
    queries = [q["text"] for q in data["queries"]]
    single = []
    for text in queries[:60]:
        t0 = time.perf_counter()
        embed_query([text])
        single.append((time.perf_counter() - t0) * 1000)
    q_vectors = embed_query(queries)
    memory_vectors = stored[: len(texts)]
    order = np.argsort(-(q_vectors @ memory_vectors.T), axis=1)[:, :3]
    ranked = [[data["memories"][j]["id"] for j in row] for row in order]
    return {"spec": spec, "model": model.model_id, "dimension": model.dimension, "load_s": round(load_s, 2),
            "rss_mb": round(_rss_mb(), 1), "rss_model_mb": round(loaded - bare, 1),
            "texts_per_s": round(per_s, 1), "query_ms_p50": round(statistics.median(single), 1),
            "cjk_meaning": pair_scores(data, ranked)}


def _probe_in_subprocess(spec: str, data_path: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "memloci.bench.models", "probe", spec, str(data_path)],
                          capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"model '{spec}' could not be measured: {tail[0]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


async def cjk_through_server(spec: str, data: dict[str, Any], home: Path, on_step=None) -> dict[str, Any]:
    """The CJK set through a real `memloci serve` over stdio with MEMLOCI_EMBEDDER=spec."""
    import anyio
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "MEMLOCI_EMBEDDER": spec, "MEMLOCI_HOME": str(home),
           "MEMLOCI_LIBRARIES": f"bench:{home / 'cjk.db'}"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with client_session_class()(read, write) as session:
            await session.initialize()
            for m in data["memories"]:
                result = await session.call_tool("store_memory", {"content": m["text"], "tags": [f"cjk:{m['id']}"]})
                if result.is_error:
                    raise RuntimeError(f"store_memory failed: {result.content[0].text[:300]}")
                if on_step:
                    on_step()
            while True:  # every memory embedded before the first question
                health = (await session.call_tool("check_database_health", {})).structured_content
                embedder = health["embedder"]
                if embedder.get("state") == "failed":
                    raise RuntimeError(f"embedder '{spec}' failed in the server: {embedder.get('error')}")
                if embedder.get("pending", 0) == 0 and embedder.get("loaded"):
                    break
                await anyio.sleep(0.05)
            ranked = []
            for q in data["queries"]:
                result = await session.call_tool("retrieve_memory", {"query": q["text"], "n_results": 3})
                if result.is_error:
                    raise RuntimeError(f"retrieve_memory failed: {result.content[0].text[:300]}")
                ranked.append([next((t[4:] for t in m["tags"] if t.startswith("cjk:")), "")
                               for m in result.structured_content["memories"]])
                if on_step:
                    on_step()
    return {"search": embedder.get("search"), "model": embedder.get("model"), "scores": pair_scores(data, ranked)}


def run(*, specs: list[str], locomo_data: Path | None, ks: list[int], conversations: int | None, out: Path,
        console: Any, cjk_path: Path = CJK_SET) -> dict[str, Any]:
    import anyio
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    data = load_cjk(cjk_path)
    report: dict[str, Any] = {"bench": "models", "cjk_set": str(cjk_path), "locomo_data": str(locomo_data) if locomo_data else None,
                              "machine": {"cpus": os.cpu_count()}, "models": {}}
    per_model = 1 + len(data["memories"]) + len(data["queries"])
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("models", total=per_model * len(specs))
        for spec in specs:
            progress.update(task, description=f"{spec}: load, speed, memory, meaning")
            entry: dict[str, Any] = {}
            try:
                entry.update(_probe_in_subprocess(spec, cjk_path))
            except RuntimeError as exc:
                entry["error"] = str(exc)
                report["models"][spec] = entry
                progress.advance(task, per_model)
                continue
            progress.advance(task)
            progress.update(task, description=f"{spec}: CJK set through the MCP server")
            with tempfile.TemporaryDirectory(prefix="memloci-models-") as tmp:
                entry["cjk_server"] = anyio.run(cjk_through_server, spec, data, Path(tmp), lambda: progress.advance(task))
            report["models"][spec] = entry
    if locomo_data is not None:
        from memloci.bench.locomo import run as run_locomo

        for spec, entry in report["models"].items():
            if "error" in entry:
                continue
            console.print(f"LoCoMo with MEMLOCI_EMBEDDER={spec}")
            result = run_locomo(data=locomo_data, ks=ks, out=out.with_name(f"{out.stem}-locomo-{spec}.json"),
                                console=console, limit=conversations, embedder=spec)  # the servers' model
            entry["locomo"] = {"recall": result["recall"], "ingest": result["ingest"], "query_ms": result["query_ms"]}

    summary = Table(title="Embedders: cost; CJK set hit@3 by meaning alone, then through the server; LoCoMo")
    for column in ("model", "dim", "load s", "RSS MB", "+model MB", "texts/s", "query ms",
                   "CJK h@3", "cross h@3", "server h@3", "server cross", f"LoCoMo R@{max(ks)}"):
        summary.add_column(column, justify="left" if column == "model" else "right")
    for spec, e in report["models"].items():
        if "error" in e:
            summary.add_row(spec, *(["-"] * 11))
            continue
        meaning, server = e["cjk_meaning"], e["cjk_server"]["scores"]
        locomo = e.get("locomo", {}).get("recall", {}).get("overall", {}).get(f"@{max(ks)}")
        summary.add_row(f"{spec} ({e['model']})", str(e["dimension"]), f"{e['load_s']:.2f}", f"{e['rss_mb']:.0f}",
                        f"{e['rss_model_mb']:.0f}", f"{e['texts_per_s']:.0f}", f"{e['query_ms_p50']:.1f}",
                        f"{meaning['all']['hit@3']:.1f}", f"{meaning['cross']['hit@3']:.1f}",
                        f"{server['all']['hit@3']:.1f}", f"{server['cross']['hit@3']:.1f}",
                        "-" if locomo is None else f"{locomo:.1f}")
    console.print(summary)
    for spec, e in report["models"].items():
        if "error" in e:
            console.print(f"{spec}: {e['error']}")
    pairs = Table(title="CJK set, hit@1 / hit@3 per query -> memory language (meaning alone | through the server)")
    pairs.add_column("pair")
    measured = [s for s, e in report["models"].items() if "error" not in e]
    for spec in measured:
        pairs.add_column(spec, justify="right")
    for pair in PAIRS + ["cross", "all"]:
        cells = []
        for spec in measured:
            m, s = report["models"][spec]["cjk_meaning"].get(pair), report["models"][spec]["cjk_server"]["scores"].get(pair)
            cells.append("-" if not m else f"{m['hit@1']:.0f}/{m['hit@3']:.0f} | {s['hit@1']:.0f}/{s['hit@3']:.0f}")
        pairs.add_row(pair, *cells)
    console.print(pairs)
    save_report(report, out, console)
    return report


if __name__ == "__main__":  # `python -m memloci.bench.models probe SPEC [CJK_SET]`: one model, one process
    if len(sys.argv) >= 3 and sys.argv[1] == "probe":
        print(json.dumps(probe(sys.argv[2], Path(sys.argv[3]) if len(sys.argv) > 3 else CJK_SET)))
    else:
        sys.exit("usage: python -m memloci.bench.models probe SPEC [CJK_SET]")
