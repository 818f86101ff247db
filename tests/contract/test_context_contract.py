"""The task context (the library's "hot" state) on every engine: updated field by field, read
back whole (by this service and by another on the same library), checked before anything is kept."""

from __future__ import annotations

import pytest

from memloci.core.errors import ValidationError


def without_time(context: dict) -> dict:
    assert context == {} or context["updated_at"].endswith("Z")
    return {k: v for k, v in context.items() if k != "updated_at"}


def test_context_is_updated_field_by_field(engine):
    spec = engine.spec_text()
    s, other = engine.open(spec), engine.open(spec)
    assert s.read_context() == {}
    first = s.update_context(active_task="ship the beta", status="in_progress", next_steps=["tag", "announce"])
    assert without_time(first) == {"active_task": "ship the beta", "status": "IN_PROGRESS",
                                   "next_steps": ["tag", "announce"]}
    other.update_context(reason="waiting for review")
    with pytest.raises(ValidationError, match="status: 'bogus' is not one of"):
        s.update_context(status="bogus", reason="never kept")
    assert without_time(s.read_context()) == {"active_task": "ship the beta", "status": "IN_PROGRESS",
                                              "next_steps": ["tag", "announce"], "reason": "waiting for review"}
    assert other.read_context() == s.read_context()


def test_an_emptied_list_reads_back_empty(engine):
    s = engine.service
    s.update_context(active_task="ship", next_steps=["tag"])
    answered = s.update_context(next_steps=[])
    assert answered["next_steps"] == [] and s.read_context() == answered
