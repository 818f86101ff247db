"""Consolidation on a schedule: off unless configured; a run is a process of its own at low
priority and leaves a preview (executes only when the config says so); a bad value in the
config is refused, naming the key."""

from __future__ import annotations

import time

import pytest

from memloci.app.config import check_lifecycle, lifecycle_schedule
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import parse_library_specs
from memloci.core.errors import ValidationError
from memloci.search.embedder import EmbedderHandle
from memloci.service.background import Schedule
from memloci.service.facade import MemoryService


def test_off_by_default_and_checked():
    assert lifecycle_schedule({}) == ("off", "weekly", False)
    assert lifecycle_schedule({"lifecycle": {"schedule": "daily"}}) == ("daily", "daily", False)
    assert lifecycle_schedule({"lifecycle": {"schedule": "weekly", "schedule_horizon": "monthly",
                                             "schedule_execute": True}}) == ("weekly", "monthly", True)
    with pytest.raises(ValidationError, match="schedule: must be one of off, daily, weekly, monthly"):
        check_lifecycle({"schedule": "hourly"}, "[lifecycle]")
    with pytest.raises(ValidationError, match="schedule_execute: must be true or false"):
        check_lifecycle({"schedule_execute": "yes"}, "[lifecycle]")


@pytest.mark.parametrize("execute", [False, True])
def test_a_scheduled_run_leaves_a_preview_unless_told_to_execute(tmp_path, execute):
    specs = parse_library_specs(f"main:{tmp_path / 'main.db'}")
    service = MemoryService(LibraryRegistry(specs), EmbedderHandle("none"))
    try:
        service.store_memory("Rotate the API keys monthly.")
        schedule = Schedule(specs, tmp_path / "home", 0.2, "weekly", execute=execute)
        schedule.start()
        deadline = time.monotonic() + 60
        while schedule.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        schedule.stop()
        assert schedule.runs >= 1
        previews = service.lifecycle.previews(pending=False)
        history = [e.action for e in service.history(limit=5)]
        if execute:
            assert not previews  # nothing to change: an execute with nothing to do writes no entry
        else:
            assert previews and previews[0]["kind"] == "consolidate" and previews[0]["executed_at"] is None
        assert "consolidate" not in history
    finally:
        service.close()
