"""`memloci bench dashboard` at a tiny size, run as a command (the tests do not import the
benches): every read the page makes answers 200 on a real HTTP server, stores go through
`POST /api/memories`, and the live stream sees a write made over MCP. No timing is asserted
(the figures are the bench's job)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_bench_dashboard_times_every_read_of_the_page(tmp_path):
    out = tmp_path / "dashboard.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "dashboard", "--memories", "12", "--entities", "6",
                           "--calls", "2", "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["stores"]["calls"] == 12
    assert {label: stats["calls"] for label, stats in saved["reads"].items()} == {
        label: 2 for label in ("memories, newest first", "memories, by importance", "memories, by uses",
                               "memories, zone active", "memories, a tag", "search, all kinds", "entities matching",
                               "one entity", "neighbourhood, depth 2", "history", "health")}
    assert len(saved["events"]) == 5 and all(e["event_ms"] > 0 and e["reply_ms"] > 0 for e in saved["events"])
    assert "GET health" in done.stdout


def test_bench_dashboard_refuses_a_bad_count(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "dashboard", "--memories", "0"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--memories" in done.stderr
