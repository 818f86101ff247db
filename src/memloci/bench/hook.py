"""`memloci bench hook --runs N`: the wall time of `memloci hook claude-code`, process start to
exit, as an agent sees it (the agents allow 2 s; the hook's own deadline is 1.8 s).

Each case runs N real processes on a temp MEMLOCI_HOME: a memory stored in a project's
`.mcp/` library, one stored in the default SQLite library (SessionEnd events with a fresh
transcript each, so neither the cooldown nor the content hash skips them), a noise command
skipped, and input that is not JSON. `python -m memloci.hooks` (no Typer/Rich start-up) is
timed too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import percentiles, save_report


def _event(case: str, root: Path, transcript: Path) -> bytes:
    if case == "garbage":
        return b"this is not JSON"
    if case == "noise":
        return json.dumps({"session_id": "b", "cwd": str(root), "hook_event_name": "PostToolUse", "tool_name": "Bash",
                           "tool_input": {"command": "ls -la"}, "tool_response": {"stdout": "x " * 200}}).encode()
    return json.dumps({"session_id": "b", "transcript_path": str(transcript), "cwd": str(root),
                       "hook_event_name": "SessionEnd", "reason": "exit"}).encode()


def run(*, runs: int, out: Path, console: Any) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="memloci-bench-hook-"))
    home, project, plain = tmp / "home", tmp / "project", tmp / "plain"
    for repo in (project, plain):
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (project / ".mcp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(home)
    script = Path(sys.executable).parent / "memloci"  # the installed script, as an agent runs it
    memloci = [str(script)] if script.exists() else [sys.executable, "-m", "memloci"]
    commands = {"memloci hook": [*memloci, "hook", "claude-code"],
                "python -m memloci.hooks": [sys.executable, "-m", "memloci.hooks", "claude-code"]}
    cases = {"store in project": project, "store in default": plain, "noise": plain, "garbage": plain}
    results: dict[str, Any] = {}
    slowest = 0.0
    for label, command in commands.items():
        for case, root in cases.items():
            times = []
            for i in range(runs):
                transcript = tmp / f"t-{label[:6]}-{case[:5]}-{i}.jsonl"
                transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
                    {"type": "text", "text": f"Run {i} of {case} via {label}: the cart TTL is refreshed on every "
                                             "request because idle carts must expire after an hour."}]}}) + "\n")
                data = _event("noise" if case == "noise" else "garbage" if case == "garbage" else "store", root,
                              transcript)
                started = time.perf_counter()
                subprocess.run(command, input=data, capture_output=True, env=env, timeout=60)
                times.append((time.perf_counter() - started) * 1000)
            stats = {**percentiles(times, digits=3), "max_ms": round(max(times), 3)}
            slowest = max(slowest, stats["max_ms"])
            results[f"{label}: {case}"] = stats
    log = (home / "logs" / "hook.log").read_text()
    report = {"runs": runs, "cases": results, "slowest_ms": round(slowest, 1),
              "deadline_hits": log.count("deadline of"), "cpus": os.cpu_count()}
    from rich.table import Table

    table = Table(title=f"memloci hook, wall time per process ({runs} runs each)")
    for column in ("command: case", "p50 ms", "p95 ms", "max ms"):
        table.add_column(column, justify="left" if column.startswith("command") else "right")
    for name, stats in results.items():
        table.add_row(name, f"{stats['p50_ms']:.0f}", f"{stats['p95_ms']:.0f}", f"{stats['max_ms']:.0f}")
    console.print(table)
    console.print(f"Deadline reached in {report['deadline_hits']} of {runs * len(results)} runs.")
    save_report(report, out, console)
    return report
