"""`memloci bench start --rounds N`: start to `tools/list`, as an MCP client sees it when it
launches its servers, for `memloci serve` (stdio) and the official Node server in the same run.

Each round starts each server once on a temporary MEMLOCI_HOME (a warm-up start of each comes
first and is not counted), in alternating order so none always runs in one place, and times
spawn -> `initialize` reply -> `tools/list` reply on the wall clock. Where /proc exists it also
reads the server's CPU time at that reply (less shaken by a busy machine than the wall clock).
memloci is started twice a round: again with the configuration the warm-up served, so it answers
`initialize` and `tools/list` from the SDK's replies it recorded then (mcp/early.py), and for the
first time with a configuration (a new working folder each start), so the SDK answers them.
Then one more memloci start under `python -X importtime`, stopped at its `tools/list` reply:
the imports on the path to the first replies, for the JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memloci.bench.common import save_report

OFFICIAL = Path(".official/node_modules/@modelcontextprotocol/server-memory/dist/index.js")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "memloci-bench-start", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
TIMEOUT_S = 60.0
FIRST = "memloci, first start"


class StartFailed(RuntimeError):
    """A server that did not answer its handshake: what it wrote on stderr says why."""


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a running process (all its threads), from /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reply(process: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    """The next message on the server's stdout that answers `request_id` (notifications skipped)."""
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if not line:
            raise StartFailed("the server closed its stdout before answering")
        message = json.loads(line)
        if message.get("id") == request_id:
            if "result" not in message:
                raise StartFailed(f"request {request_id} was refused: {message.get('error')}")
            return message


def time_start(command: list[str], env: dict[str, str], *, stop_at_reply: bool = False,
               cwd: Path | None = None) -> dict[str, Any]:
    """One start: wall seconds from spawn to the `tools/list` reply, the server's CPU seconds then,
    and the number of tools. `stop_at_reply`: SIGKILL the server at that reply (and return its
    stderr), so nothing it does afterwards is counted."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, cwd=cwd)
    timer = threading.Timer(TIMEOUT_S, process.kill)
    timer.start()
    stderr = bytearray()
    drain = threading.Thread(target=lambda: stderr.extend(process.stderr.read() if process.stderr else b""),
                             daemon=True)
    drain.start()
    try:
        assert process.stdin is not None
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.flush()
        _reply(process, 1)
        process.stdin.write((json.dumps(INITIALIZED) + "\n" + json.dumps(TOOLS_LIST) + "\n").encode())
        process.stdin.flush()
        tools = _reply(process, 2)["result"].get("tools", [])
        wall = time.perf_counter() - started
        cpu = _cpu_seconds(process.pid)
        if stop_at_reply:
            process.send_signal(signal.SIGKILL)
        else:
            process.stdin.close()
        process.wait(timeout=TIMEOUT_S)
    except (StartFailed, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        process.kill()
        process.wait()
        drain.join(5)
        raise StartFailed(f"{' '.join(command)}: {exc}; stderr: {stderr.decode(errors='replace')[-2000:]}") from None
    finally:
        timer.cancel()
    drain.join(5)
    return {"wall_s": wall, "cpu_s": cpu, "tools": len(tools), "stderr": stderr.decode(errors="replace")}


def importtime(lines: str, top: int = 15) -> dict[str, Any]:
    """The `-X importtime` report: the `top` imports by cumulative time (any depth), self time
    summed by top-level package, and the number of modules imported."""
    rows = []
    for line in lines.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_field, cumulative_field, name = line[len("import time:"):].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((name.strip(), int(self_field), int(cumulative_field), depth))
    by_package: dict[str, int] = {}
    for name, self_us, _, _ in rows:
        parts = name.split(".")
        package = ".".join(parts[:2]) if parts[0] == "memloci" else parts[0]
        by_package[package] = by_package.get(package, 0) + self_us
    ranked = sorted(rows, key=lambda r: -r[2])[:top]
    return {"modules_imported": len(rows),
            "top_cumulative": [{"module": n, "cumulative_ms": round(c / 1000, 1), "self_ms": round(s / 1000, 1),
                                "depth": d} for n, s, c, d in ranked],
            "self_ms_by_package": {k: round(v / 1000, 1) for k, v in
                                   sorted(by_package.items(), key=lambda kv: -kv[1])[:top]}}


def _stats(values: list[float]) -> dict[str, float]:
    """median and p90 (nearest rank) in ms."""
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"median_ms": round(statistics.median(ordered) * 1000, 1), "p90_ms": round(p90 * 1000, 1)}


def _official(official: Path) -> tuple[list[str] | None, str]:
    """The official server's command, or None and why it is not run."""
    node = shutil.which("node")
    if node is None:
        return None, "not run: node is not on PATH"
    if not official.is_file():
        return None, f"not run: {official} not found (npm install @modelcontextprotocol/server-memory there)"
    return [node, str(official)], ""


def run(*, rounds: int, official: Path, out: Path, console: Any) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="memloci-bench-start-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update(MEMLOCI_HOME=str(tmp / "home"), MEMORY_FILE_PATH=str(tmp / "official-memory.jsonl"))
    script = Path(sys.executable).parent / "memloci"  # the installed script, as a client runs it
    memloci = [str(script)] if script.exists() else [sys.executable, "-m", "memloci"]
    # memloci twice: as it starts again with a configuration it has served (its first replies
    # recorded, mcp/early.py), and as it starts the first time (a new working folder each time:
    # a new configuration, nothing recorded, the SDK answers)
    commands: dict[str, list[str]] = {"memloci": [*memloci, "serve"], FIRST: [*memloci, "serve"]}
    official_command, official_note = _official(official)
    if official_command is not None:
        commands["official"] = official_command
    starts = iter(range(1 << 30))

    def folder(name: str) -> Path | None:
        if name != FIRST:
            return None
        path = tmp / "first" / str(next(starts))
        path.mkdir(parents=True)
        return path

    tools = {name: time_start(command, env, cwd=folder(name))["tools"] for name, command in commands.items()}  # warm-up
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(rounds):
        for name in (list(commands) if i % 2 == 0 else list(reversed(commands))):
            measured = time_start(commands[name], env, cwd=folder(name))
            wall[name].append(measured["wall_s"])
            if measured["cpu_s"] is not None:
                cpu[name].append(measured["cpu_s"])
    traced = time_start([sys.executable, "-X", "importtime", "-m", "memloci", "serve"], env, stop_at_reply=True)
    traced_first = time_start([sys.executable, "-X", "importtime", "-m", "memloci", "serve"], env, stop_at_reply=True,
                              cwd=folder(FIRST))
    servers: dict[str, Any] = {}
    for name in commands:
        servers[name] = {"command": " ".join(commands[name]), "tools": tools[name], "wall": _stats(wall[name]),
                         "cpu": _stats(cpu[name]) if cpu[name] else None,
                         "wall_ms": [round(v * 1000, 1) for v in wall[name]]}
    report: dict[str, Any] = {"rounds": rounds, "cpus": os.cpu_count(), "load_average": _load(), "servers": servers,
                              "official": official_note or "run", "importtime": importtime(traced["stderr"]),
                              "importtime_first_start": importtime(traced_first["stderr"])}
    if "official" in servers:
        for name, key in (("memloci", "ratio"), (FIRST, "first_start_ratio")):
            report[f"{key}_median"] = round(servers[name]["wall"]["median_ms"] / servers["official"]["wall"]["median_ms"], 2)
            if servers[name]["cpu"] and servers["official"]["cpu"]:
                report[f"{key}_cpu_median"] = round(servers[name]["cpu"]["median_ms"] /
                                                    servers["official"]["cpu"]["median_ms"], 2)
    _print(report, console)
    save_report(report, out, console)
    shutil.rmtree(tmp, ignore_errors=True)
    return report


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _print(report: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"Start to tools/list over stdio ({report['rounds']} rounds, interleaved)")
    for column in ("server", "tools", "median ms", "p90 ms", "CPU median ms"):
        table.add_column(column, justify="left" if column == "server" else "right")
    for name, server in report["servers"].items():
        cpu = server["cpu"]
        table.add_row(name, str(server["tools"]), f"{server['wall']['median_ms']:.0f}", f"{server['wall']['p90_ms']:.0f}",
                      f"{cpu['median_ms']:.0f}" if cpu else "-")
    if "official" not in report["servers"]:
        table.add_row("official", "", report["official"], "", "")
    else:
        for name, key in (("memloci", "ratio"), (FIRST, "first_start_ratio")):
            cpu_ratio = report.get(f"{key}_cpu_median")
            table.add_row(f"{name} / official", "", f"{report[f'{key}_median']:.2f}x", "",
                          f"{cpu_ratio:.2f}x" if cpu_ratio else "-")
    console.print(table)
    for key, which in (("importtime", "memloci"), ("importtime_first_start", FIRST)):
        top = report[key]["self_ms_by_package"]
        console.print(f"{which}: {report[key]['modules_imported']} modules imported before the reply; most time "
                      "(self ms): " + ", ".join(f"{k} {v:.0f}" for k, v in list(top.items())[:8]))
