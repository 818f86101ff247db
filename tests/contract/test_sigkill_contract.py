"""SIGKILL mid-batch, on every engine: a real writer process is killed at points spread over
its write (`memloci bench crash` builds the library, measures the write, kills and checks), and
the library it leaves holds the whole batch or none of it. tests/test_crash.py runs every
write kind on SQLite and Markdown; `memloci bench crash` runs more rounds."""

from __future__ import annotations

import os

import pytest
from sigkill import kill_rounds

ROUNDS = int(os.environ.get("MEMLOCI_CRASH_ROUNDS", "3"))
# entities each write touches (delete, rename, merge and reindex: tests/test_crash.py)
SIZES = {"create": 200, "add_observations": 200, "duplicates": 200}


@pytest.mark.parametrize("kind", list(SIZES))
def test_a_writer_killed_mid_batch_leaves_all_or_nothing(engine, kind, tmp_path):
    url = engine.pg_url if engine.name == "postgres" else None
    result = kill_rounds(kind, engine.name, ROUNDS, tmp_path / "work", size=SIZES[kind], url=url)
    assert not result["failures"], "\n".join(result["failures"])
    assert result["all"] + result["none"] == ROUNDS
