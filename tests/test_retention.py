"""Retention (rules/retention.py): memorix's relevance, importance by type, immunity and zones;
the same relevance as decay in ranking; the service's clock in retrieval, zones, health and
archive candidates, through the service and the MCP tools on real SQLite libraries.

Every date here is fixed: memories are imported with their own times, uses are set as a
migration sets them, and the service's clock is a constant, so no test depends on today.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import anyio
import pytest
from conftest import Client
from mcp import Client as SdkClient

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput, Memory
from memloci.formats.official import MemoryLine, OfficialFile
from memloci.mcp.server import build_server
from memloci.rules import retention as rules
from memloci.search.decay import decay_factor
from memloci.service.facade import MemoryService

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def memory(days_old: float = 0, *, memory_type: str = "note", importance: str = "medium", tags: tuple[str, ...] = (),
           uses: int = 0, used_days_ago: float | None = None) -> Memory:
    used = iso(NOW - timedelta(days=used_days_ago)) if used_days_ago is not None else None
    created = iso(NOW - timedelta(days=days_old))
    return Memory(1, "text", "hash", tags, memory_type, importance, {}, created, created, uses, used, None)


# -- the rules, with no engine ------------------------------------------------------------------

def test_importance_is_the_memorys_own_unless_default_else_its_types():
    assert {t: rules.type_importance(t) for t in ("gotcha", "decision", "trade-off", "reasoning")} == dict.fromkeys(
        ("gotcha", "decision", "trade-off", "reasoning"), "high")
    assert {rules.type_importance(t) for t in ("problem-solution", "how-it-works", "why-it-exists")} == {"medium"}
    assert {rules.type_importance(t) for t in ("what-changed", "discovery", "session-request", "probe")} == {"low"}
    assert rules.type_importance("note") == rules.type_importance("dialogue") == "medium"  # any other type
    assert rules.type_importance("Decision") == "high"  # types are matched casefolded
    assert rules.importance_of(memory(memory_type="decision")) == "high"  # stored without one: the type's
    assert rules.importance_of(memory(memory_type="decision", importance="low")) == "low"  # its own wins
    assert rules.importance_of(memory(memory_type="discovery", importance="critical")) == "critical"
    assert rules.importance_of(memory(memory_type="discovery")) == "low"
    assert rules.importance_of(memory(importance="unheard-of")) == "medium"  # not an importance: the type's


def test_relevance_is_base_times_decay_times_use():
    kept = rules.retention(memory(45, uses=2), NOW)
    assert (kept.base, kept.retention_days, kept.access_boost) == (0.5, 90.0, 1.2)
    assert kept.age_days == pytest.approx(45) and kept.decay == pytest.approx(math.exp(-0.5))
    assert kept.score == pytest.approx(0.5 * math.exp(-0.5) * 1.2) == rules.relevance(memory(45, uses=2), NOW)
    assert (kept.immune, kept.immunity_reason, kept.zone) == (False, None, "active")
    low = rules.retention(memory(10, memory_type="what-changed"), NOW)
    assert (low.base, low.retention_days) == (0.3, 30.0) and low.score == pytest.approx(0.3 * math.exp(-1 / 3))
    assert rules.retention(memory(0, uses=25), NOW).access_boost == 2.0  # capped at twice
    assert rules.retention(memory(-3), NOW).age_days == 0  # a date after now is no age
    # a probe keeps 7 days whatever its importance; critical memories a year
    assert rules.retention_days(memory(memory_type="probe", importance="critical")) == 7
    assert rules.retention_days(memory(importance="critical")) == 365


def test_immunity_keeps_half_relevance_and_says_why():
    for old, reason in [(memory(900, importance="high"), "importance high"),
                        (memory(900, memory_type="gotcha"), "importance high"),
                        (memory(900, importance="critical"), "importance critical"),
                        (memory(900, uses=3), "used 3 times"),
                        (memory(900, tags=("ops", "PINNED")), "tag PINNED"),
                        (memory(900, tags=("Keep",)), "tag Keep"),
                        (memory(900, tags=("important",)), "tag important"),
                        (memory(900, tags=("critical",)), "tag critical")]:
        kept = rules.retention(old, NOW)
        assert (kept.immune, kept.immunity_reason, kept.zone) == (True, reason, "active"), old
        assert kept.score == 0.5 and kept.base * kept.decay * kept.access_boost < 0.5
    assert rules.immunity(memory(900, uses=2)) is None and rules.immunity(memory(900, tags=("keeper",))) is None
    probe = rules.retention(memory(30, memory_type="probe", tags=("pinned",), uses=5), NOW)
    assert (probe.immune, probe.zone) == (False, "archive-candidate")  # a heartbeat is never immune


def test_zones_by_share_of_retention_and_recent_use():
    assert rules.zone(memory(45), NOW) == "active"  # half of 90 days: still active
    assert rules.zone(memory(45.5), NOW) == "stale"
    assert rules.zone(memory(90), NOW) == "stale"
    assert rules.zone(memory(90.5), NOW) == "archive-candidate"
    assert rules.zone(memory(16, memory_type="discovery"), NOW) == "stale"  # low: 30 days
    assert rules.zone(memory(200, memory_type="decision"), NOW) == "active"  # high is immune
    assert rules.zone(memory(400, used_days_ago=6.9), NOW) == "active"  # used this week
    assert rules.zone(memory(400, used_days_ago=7), NOW) == "archive-candidate"
    old = memory(400)
    assert rules.zone(replace(old, archived_at=iso(NOW)), NOW) == "archived"
    assert rules.zone(replace(old, superseded_by="abc"), NOW) == "superseded"
    assert {rules.zone(m, NOW) for m in (old, replace(old, archived_at="x"), replace(old, superseded_by="y"),
                                         memory(60), memory())} == set(rules.ZONES)


def test_decay_in_ranking_is_the_relevance_as_a_gentle_factor():
    assert decay_factor(memory(0), NOW) == 1.0  # a fresh medium memory is neutral
    assert decay_factor(memory(0, uses=20), NOW) == pytest.approx(2 ** 0.15)  # much used: x1.11
    assert decay_factor(memory(90), NOW) == pytest.approx(math.exp(-1) ** 0.15)  # x0.86
    assert decay_factor(memory(365, importance="low"), NOW) == pytest.approx((0.6 * math.exp(-365 / 30)) ** 0.15)
    assert decay_factor(memory(900, memory_type="decision"), NOW) == 1.0  # immune: never under the floor
    assert decay_factor(memory(900, memory_type="decision", importance="low"), NOW) < 0.2


# -- through the service, on a SQLite library, with the service's clock --------------------------

@pytest.fixture(params=["sqlite", "markdown"])
def clocked(tmp_path, request):
    """A service whose clock stands at NOW, on a SQLite library or a Markdown one (its index)."""
    where = tmp_path / ("lib.db" if request.param == "sqlite" else "notes")
    registry = LibraryRegistry([LibrarySpec("default", where, request.param)])
    service = MemoryService(registry, clock=lambda: NOW)
    yield service
    service.close()


def imported(service: MemoryService, *items: tuple[str, float, str, str, tuple[str, ...]]) -> dict[str, Memory]:
    """Memories (content, days old, type, importance, tags) with their own dates; content -> memory."""
    lines = [(i + 1, MemoryLine(content, tags, kind, importance, {}, iso(NOW - timedelta(days=days)),
                                iso(NOW - timedelta(days=days))))
             for i, (content, days, kind, importance, tags) in enumerate(items)]
    service.import_everything(OfficialFile([], [], [], lines))
    found, _ = service.list_memories(page_size=100)
    return {m.content: m for m in found}


LIBRARY = [
    ("fresh note about the cache", 10, "note", "medium", ()),
    ("stale note about the cache", 60, "note", "medium", ()),
    ("forgotten note about the cache", 120, "note", "medium", ()),
    ("old decision about the cache", 300, "decision", "medium", ()),
    ("pinned note about the cache", 400, "note", "medium", ("pinned",)),
    ("old discovery about the cache", 40, "discovery", "medium", ()),
    ("old low note about the cache", 500, "note", "low", ()),
]


def test_health_counts_zones_and_archive_candidates_are_listed(clocked):
    memories = imported(clocked, *LIBRARY)
    clocked.create_entities([EntityInput("Cache", "module", ("the cache is old",))])  # an observation: not counted
    assert clocked.health()["statistics"]["zones"] == {"active": 3, "stale": 1, "archive_candidate": 3, "immune": 2}
    assert [m.content for m in clocked.archive_candidates()] == [  # newest first
        "old discovery about the cache", "forgotten note about the cache", "old low note about the cache"]
    assert {m.content: clocked.zone_of(m) for m in memories.values()} == {
        "fresh note about the cache": "active", "stale note about the cache": "stale",
        "forgotten note about the cache": "archive-candidate", "old decision about the cache": "active",
        "pinned note about the cache": "active", "old discovery about the cache": "archive-candidate",
        "old low note about the cache": "archive-candidate"}
    # listing changed nothing; a tag that keeps a memory, and uses this week, take it out of the candidates
    clocked.update_memory(memories["forgotten note about the cache"].content_hash, tags=["keep"])
    store = clocked.store()
    stale = memories["old discovery about the cache"]
    store.restore_memory_state([(stale.id, stale.created_at, stale.updated_at, 1, iso(NOW - timedelta(days=2)))])
    assert [m.content for m in clocked.archive_candidates()] == ["old low note about the cache"]
    # the clock moves: a year on, the fresh note is a candidate too
    clocked.clock = lambda: NOW + timedelta(days=365)
    assert {m.content for m in clocked.archive_candidates()} == {"fresh note about the cache", "stale note about the cache",
                                                                "old discovery about the cache",
                                                                "old low note about the cache"}


def test_the_clock_dates_time_phrases_and_decay_in_retrieval(clocked):
    imported(clocked, ("shipped the cache layer", 8, "note", "medium", ()),  # last week, as of NOW (a Sunday)
             ("shipped the search layer", 2, "note", "medium", ()),
             ("decided the cache layer stays", 200, "decision", "medium", ()),
             ("noted the cache layer stays", 200, "note", "medium", ()))
    result = clocked.retrieve_memory("what did we ship last week")
    assert result.time_range is not None and result.time_range.iso() == ("2025-05-19T00:00:00Z", "2025-05-26T00:00:00Z")
    assert [h.memory.content for h in result.hits][:1] == ["shipped the cache layer"]
    clocked.vectors.accesses.drain()  # the hits' uses, recorded off the request path, are in before the next search
    listed, total = clocked.list_memories(time="yesterday")
    assert (listed, total) == ([], 0)
    listed, total = clocked.list_memories(time="past 3 days")
    assert [m.content for m in listed] == ["shipped the search layer"]
    # equally old and equally matching: the decision (high by its type, so immune) ranks first, the
    # note after it (the memory the first search found, used once since, may come between them)
    ranked = [h.memory.content for h in clocked.retrieve_memory("cache layer stays").hits]
    assert ranked[0] == "decided the cache layer stays" and "noted the cache layer stays" in ranked[1:3]


def test_tool_replies_show_each_memorys_zone_and_health_its_counts(clocked):
    memories = imported(clocked, *LIBRARY)
    server = build_server(clocked)
    zones = {c: clocked.zone_of(m) for c, m in memories.items()}

    async def body(client: Client):
        listed, _ = await client.ok("list_memories", page_size=20)
        assert {m["content"]: m["zone"] for m in listed["memories"]} == zones
        tagged, _ = await client.ok("search_by_tag", tags=["pinned"])
        assert [m["zone"] for m in tagged["memories"]] == ["active"]
        updated, _ = await client.ok("update_memory", content_hash=memories["stale note about the cache"].content_hash,
                                     importance="critical")
        assert updated["memory"]["zone"] == "active"  # critical: immune
        health, _ = await client.ok("check_database_health")
        assert health["statistics"]["zones"] == {"active": 4, "stale": 0, "archive_candidate": 3, "immune": 3}
        zones["stale note about the cache"] = "active"
        found, _ = await client.ok("retrieve_memory", query="note about the cache", n_results=10)
        assert len(found["memories"]) == 7 and all(m["zone"] == zones[m["content"]] for m in found["memories"])

    async def main():
        async with SdkClient(server, mode="legacy", cache=None) as sdk:
            await body(Client(sdk.session))

    anyio.run(main)


def test_the_command_line_stats_count_zones(monkeypatch, tmp_path):
    """`memloci stats` runs on the real clock, so these zones hold on any day: immune memories
    are active whatever their age, and a low one from 2000 is long past its 30 days."""
    from typer.testing import CliRunner

    from memloci.cli.main import app

    source = tmp_path / "memories.jsonl"
    source.write_text("".join(json.dumps({"type": "memory", "content": content, "tags": tags, "memory_type": kind,
                                          "importance": "medium", "metadata": {}, "created_at": "2000-01-01T00:00:00Z",
                                          "updated_at": "2000-01-01T00:00:00Z"}) + "\n"
                              for content, kind, tags in [("we chose SQLite", "decision", []),
                                                          ("the cache is pinned", "note", ["pinned"]),
                                                          ("found a stray log file", "discovery", [])]))
    for name in [k for k in os.environ if k.startswith("MEMLOCI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMLOCI_EMBEDDER", "none")
    home = str(tmp_path / "home")
    assert CliRunner().invoke(app, ["--home", home, "import", "jsonl", str(source)]).exit_code == 0
    out = CliRunner().invoke(app, ["--home", home, "stats"], env={"COLUMNS": "200"}).stdout
    assert "default: free memories by retention zone: 2 active, 0 stale, 1 archive candidate (2 immune)" in out
