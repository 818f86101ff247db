"""`memloci bench ingest`: a run per number of store_memory calls in flight, each storing every
turn and waiting until every memory has its vector (the figures themselves are the bench's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_question_cues import sample


@pytest.mark.full  # server processes that load the model
def test_bench_ingest_stores_every_turn_with_each_number_in_flight(tmp_path: Path):
    data = tmp_path / "locomo.json"
    one = sample()
    data.write_text(json.dumps([one]))
    turns = sum(len(v) for k, v in one["conversation"].items() if k.startswith("session_") and isinstance(v, list))
    out = tmp_path / "ingest.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "ingest", "--data", str(data), "--in-flight", "1,4",
                           "--embedder", "minilm", "--out", str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [r["in_flight"] for r in report["runs"]] == [1, 4]
    for row in report["runs"]:
        assert row["memories"] == turns and row["stored_and_embedded_per_s"] > 0, row
        assert row["stored_per_s"] >= row["stored_and_embedded_per_s"], row
    bad = subprocess.run([sys.executable, "-m", "memloci", "bench", "ingest", "--data", str(data), "--in-flight", "0"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 1 and "--in-flight" in bad.stderr, bad.stderr


def test_bench_ingest_refuses_data_that_is_not_locomo_before_any_server_starts(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    for name, text in (("words.json", "not json"), ("object.json", '{"sample_id": "x"}'), ("empty.json", "[]"),
                       ("no-turns.json", '[{"sample_id": "x", "conversation": {}}]')):
        (tmp_path / name).write_text(text)
        bad = subprocess.run([sys.executable, "-m", "memloci", "bench", "ingest", "--data", str(tmp_path / name),
                              "--out", str(tmp_path / "ingest.json")], capture_output=True, text=True, timeout=120, env=env)
        assert bad.returncode == 1 and "Traceback" not in bad.stderr and "--data" in bad.stderr, bad.stderr
        assert name in bad.stderr and not (tmp_path / "ingest.json").exists()
