"""`memloci bench graph --backlog` at a tiny size, run as a command (the tests do not import the
benches): search_nodes is timed on a server whose embedding worker works through the graph's
observations, and the JSON says how many waited for a vector at the first and the last call.
No timing is asserted (the figures are the bench's job)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _bench(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`memloci bench ARGS` in a process of its own, with a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "memloci", "bench", *args], env=env, capture_output=True, text=True,
                          timeout=900)


def test_bench_graph_backlog_times_search_nodes_while_the_worker_embeds(tmp_path):
    out = tmp_path / "graph.json"
    n = 400
    done = _bench(tmp_path, "graph", "--backlog", "--n", str(n), "--calls", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["mode"] == "backlog" and saved["embedder"] == "minilm" and saved["pause_ms"] == 50
    assert {tool: stats["calls"] for tool, stats in saved["memloci"].items()} == {
        "search_nodes": 2, "search_nodes common-word": 2, "search_nodes common-word note": 2, "search_nodes typo": 2,
        "search_nodes few-words": 2}
    start, end = saved["backlog"]["start"], saved["backlog"]["end"]
    # the warm-up's observation joins the 3 x n imported; the first vectors were saved before the first call
    assert isinstance(start, int) and isinstance(end, int) and 0 <= end <= start < 3 * n + 1
    assert "waiting for a vector" in done.stdout


def test_bench_graph_pause_is_for_the_backlog_only_and_never_negative(tmp_path):
    for args, said in ((["--pause-ms", "10"], "--pause-ms: only with --backlog"),
                       (["--backlog", "--pause-ms", "-1"], "--pause-ms: must be 0 or more")):
        refused = _bench(tmp_path, "graph", "--n", "1", "--calls", "1", "--out", str(tmp_path / "g.json"), *args)
        assert refused.returncode == 1 and said in refused.stderr
    assert not (tmp_path / "g.json").exists()


def test_bench_graph_backlog_refuses_the_official_server(tmp_path):
    refused = _bench(tmp_path, "graph", "--backlog", "--vs-official", "--n", "1", "--calls", "1",
                     "--out", str(tmp_path / "g.json"))
    assert refused.returncode == 1 and "--backlog: not with --vs-official" in refused.stderr
    assert not (tmp_path / "g.json").exists()
