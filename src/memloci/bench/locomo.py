"""`memloci bench locomo`: turn-level recall@k on LoCoMo through the real MCP server.

Protocol (DESIGN.md §7): one fresh library per conversation; every turn stored with
store_memory(content="<speaker>: <text>" [+ " [image: <caption>]"], tags=["dia:<id>"],
memory_type="dialogue", metadata={dia_id, session, date}), one call per turn; each question
sent as retrieve_memory(query=<question>, n_results=<k>) with no other argument; a hit's
turn is read from its tag; recall@k is the share of the question's evidence turns among
the top k. The data is read from the given path and never copied.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, save_report
from memloci.bench.locomo_protocol import CATEGORIES, evidence_ids, recall, turns_of
from memloci.core.settings import Settings

_DEVNULL = open(os.devnull, "w")


async def _run_conversation(sample: dict[str, Any], k_max: int, home: Path, on_step,
                            embedder: str | None = None) -> dict[str, Any]:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "MEMLOCI_HOME": str(home), "MEMLOCI_LIBRARIES": f"bench:{home / (sample['sample_id'] + '.db')}",
           **({"MEMLOCI_EMBEDDER": embedder} if embedder is not None else {})}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
    turns = turns_of(sample)
    questions = [q for q in sample["qa"] if evidence_ids(q.get("evidence", []))]
    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with client_session_class()(read, write) as session:
            await session.initialize()
            await session.list_tools()
            started = time.perf_counter()
            for t in turns:
                result = await session.call_tool("store_memory", {
                    "content": t["content"], "tags": [f"dia:{t['dia_id']}"], "memory_type": "dialogue",
                    "metadata": {"dia_id": t["dia_id"], "session": t["session"], "date": t["date"]}})
                if result.is_error:
                    raise RuntimeError(f"store_memory failed: {result.content[0].text[:300]}")
                on_step()
            stored = time.perf_counter() - started
            while True:  # every memory embedded before the first question
                health = (await session.call_tool("check_database_health", {})).structured_content
                if health["embedder"].get("pending", 0) == 0 or not health["embedder"]["loaded"]:
                    break
                await _sleep(0.02)
            embedded = time.perf_counter() - started
            rows, latencies = [], []
            for q in questions:
                t0 = time.perf_counter()
                result = await session.call_tool("retrieve_memory", {"query": q["question"], "n_results": k_max})
                latencies.append((time.perf_counter() - t0) * 1000)
                if result.is_error:
                    raise RuntimeError(f"retrieve_memory failed: {result.content[0].text[:300]}")
                ranked = [next((t[4:] for t in m["tags"] if t.startswith("dia:")), None)
                          for m in result.structured_content["memories"]]
                rows.append({"category": q["category"], "evidence": evidence_ids(q["evidence"]), "ranked": ranked})
                on_step()
    return {"id": sample["sample_id"], "turns": len(turns), "stored_s": stored, "embedded_s": embedded,
            "rows": rows, "latencies": latencies, "embedder": health["embedder"]}


async def _sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)


def run(*, data: Path, ks: list[int], out: Path, console: Any, limit: int | None = None,
        embedder: str | None = None) -> dict[str, Any]:
    """`embedder`: the servers' MEMLOCI_EMBEDDER (default: as this process's environment says)."""
    import anyio
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    samples = json.loads(data.read_text(encoding="utf-8"))[:limit]
    k_max = max(ks)
    total = sum(len(turns_of(s)) + sum(1 for q in s["qa"] if evidence_ids(q.get("evidence", []))) for s in samples)
    results = []
    with tempfile.TemporaryDirectory(prefix="memloci-locomo-") as tmp, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as progress:
        task = progress.add_task("LoCoMo: store turns, ask questions", total=total)
        for sample in samples:
            progress.update(task, description=f"LoCoMo {sample['sample_id']}")
            results.append(anyio.run(_run_conversation, sample, k_max, Path(tmp), lambda: progress.advance(task),
                                     embedder))

    rows = [r for res in results for r in res["rows"]]
    by_cat: dict[Any, list] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    table = Table(title=f"LoCoMo turn-level recall@k — {len(samples)} conversations, {len(rows)} questions")
    table.add_column("category")
    table.add_column("questions", justify="right")
    for k in ks:
        table.add_column(f"R@{k}", justify="right")
    report: dict[str, Any] = {"bench": "locomo", "data": str(data), "conversations": [r["id"] for r in results],
                              "k": ks, "recall": {}}
    for cat in sorted(by_cat):
        name = f"{cat} {CATEGORIES.get(cat, '')}".strip()
        report["recall"][name] = {f"@{k}": round(100 * recall(by_cat[cat], k), 1) for k in ks}
        table.add_row(name, str(len(by_cat[cat])), *(f"{100 * recall(by_cat[cat], k):.1f}" for k in ks))
    report["recall"]["overall"] = {f"@{k}": round(100 * recall(rows, k), 1) for k in ks}
    table.add_row("overall", str(len(rows)), *(f"{100 * recall(rows, k):.1f}" for k in ks), style="bold")
    console.print(table)
    # Per conversation: how far one conversation's figure strays from the others (the spread
    # a held-out split of other conversations can be expected to show).
    report["recall_by_conversation"] = {res["id"]: {f"@{k}": round(100 * recall(res["rows"], k), 1) for k in ks}
                                        for res in results}
    shown = 10 if 10 in ks else k_max
    console.print(f"by conversation, R@{shown}: " + ", ".join(
        f"{cid} {v[f'@{shown}']}" for cid, v in report["recall_by_conversation"].items()))

    turns = sum(r["turns"] for r in results)
    stored = sum(r["stored_s"] for r in results)
    embedded = sum(r["embedded_s"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    report["ingest"] = {"memories": turns, "stored_per_s": round(turns / stored, 1),
                        "stored_and_embedded_per_s": round(turns / embedded, 1)}
    report["query_ms"] = {"p50": round(statistics.median(latencies), 2),
                          "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2)}
    report["embedder"] = results[0]["embedder"] if results else None
    console.print(f"ingest: {turns} memories, {report['ingest']['stored_per_s']}/s stored, "
                  f"{report['ingest']['stored_and_embedded_per_s']}/s stored and embedded; "
                  f"retrieve_memory p50 {report['query_ms']['p50']} ms, p95 {report['query_ms']['p95']} ms")
    save_report(report, out, console)
    return report


def run_folds(*, data: Path, k: int, out: Path, console: Any, cache: Path, settings: Settings,
              limit: int | None = None) -> dict[str, Any]:
    """Leave one conversation out (in-process, bench/locomo_lab.py): the retrieval weights are
    chosen on the other conversations and measured on the one left out, in turn; printed beside
    the plain figures of the shipped weights, per category. `cache`: where the lab keeps the
    libraries it builds, and reuses them."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from memloci.bench.locomo_lab import GRID, folds, owner_of

    samples = json.loads(data.read_text(encoding="utf-8"))[:limit]
    runs = 1
    for values in GRID.values():
        runs *= len(values)
    runs += any(getattr(owner_of(n), n) not in values for n, values in GRID.items())  # the shipped ones, if off the grid
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("LoCoMo folds: one run per weight setting", total=runs)
        report = folds(samples, cache, settings, k=k, on_step=lambda: progress.advance(task))
    table = Table(title=f"LoCoMo turn-level recall@{k} — {len(samples)} conversations, leave one out")
    table.add_column("category")
    table.add_column("shipped weights", justify="right")
    table.add_column("leave-one-out", justify="right")
    for name in report["plain"]:
        table.add_row(name, f"{report['plain'][name]:.1f}", f"{report['leave_one_out'][name]:.1f}",
                      style="bold" if name == "overall" else None)
    console.print(table)
    console.print("shipped: " + ", ".join(f"{n}={v}" for n, v in report["shipped"].items()))
    for cid, weights in report["chosen"].items():
        console.print(f"chosen without {cid}: " + ", ".join(f"{n}={v}" for n, v in weights.items()))
    report = {"bench": "locomo-folds", "data": str(data), "k": k, **report}
    save_report(report, out, console)
    return report
