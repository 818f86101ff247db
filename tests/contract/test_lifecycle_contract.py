"""The memory lifecycle on every engine: a preview changes nothing and lists exactly what its
execute changes; an execute is one journal entry that `undo` takes back to the byte and the row;
a preview whose memories changed since is refused, naming them, with nothing changed;
superseded and archived memories stay, and search leaves them out unless asked.
"""

from __future__ import annotations

import json

import pytest

from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import EVERY_MEMORY, MemoryFilter


def dump(s) -> list:
    """Every free and observed memory, every field but use dates, archived and superseded too."""
    memories, _ = s.list_memories(page_size=1000, filters=EVERY_MEMORY)
    return sorted((m.content, m.content_hash, m.tags, m.memory_type, m.importance,
                   json.dumps(m.metadata, sort_keys=True), m.created_at, m.superseded_by, m.archived_at)
                  for m in memories)


def seed(s) -> dict[str, str]:
    hashes = {}
    for key, text, tags in [
        ("deploy", "We deploy on Fridays.", ["ops"]),
        ("deploy2", "we deploy on fridays", ["release"]),
        ("deploy3", "We  deploy on Fridays!", ["ops", "Weekly"]),
        ("db", "The database is PostgreSQL 16.", ["db"]),
        ("tmp1", "Scratch note one.", ["temporary"]),
        ("tmp2", "Scratch note two.", ["temporary", "ops"]),
    ]:
        m, _ = s.store_memory(text, tags=tags)
        hashes[key] = m.content_hash
    return hashes


def test_duplicates_preview_execute_undo(engine):
    s = engine.service
    h = seed(s)
    before = dump(s)
    preview = s.lifecycle.cleanup_duplicates(dry_run=True)
    assert not preview.executed and preview.preview_id
    assert dump(s) == before  # a preview changes nothing
    assert preview.counts == {"changed": 1, "deleted": 2, "created": 0}
    named = {i["content_hash"]: i["action"] for i in preview.items}
    assert named == {h["deploy"]: "keep", h["deploy2"]: "delete", h["deploy3"]: "delete"}
    done = s.lifecycle.execute_preview(preview.preview_id)
    assert done.executed and done.change_id
    memories, _ = s.list_memories(page_size=100)
    texts = sorted(m.content for m in memories)
    assert texts == ["Scratch note one.", "Scratch note two.", "The database is PostgreSQL 16.", "We deploy on Fridays."]
    kept = next(m for m in memories if m.content_hash == h["deploy"])
    assert list(kept.tags) == ["ops", "release", "Weekly"]  # every tag, first casing seen
    # nothing outside the preview changed
    after = {d[1]: d for d in dump(s)}
    for row in before:
        if row[1] not in (h["deploy"], h["deploy2"], h["deploy3"]):
            assert after[row[1]] == row
    entry = s.history(limit=1)[0]
    assert entry.id == done.change_id and entry.action == "cleanup_duplicates"
    s.undo(done.change_id)
    assert dump(s) == before
    with pytest.raises(ConflictError, match="was executed"):
        s.lifecycle.execute_preview(preview.preview_id)


def test_stale_preview_is_refused_naming_the_memory(engine):
    s = engine.service
    h = seed(s)
    preview = s.lifecycle.delete_by_tag(["temporary"], dry_run=True)
    assert {i["content_hash"] for i in preview.items} == {h["tmp1"], h["tmp2"]}
    s.update_memory(h["tmp2"], tags=["temporary", "ops", "keep"])
    before = dump(s)
    with pytest.raises(ConflictError) as exc:
        s.lifecycle.execute_preview(preview.preview_id)
    assert h["tmp2"][:12] in str(exc.value) and "changed since the preview" in str(exc.value)
    assert dump(s) == before


def test_delete_by_tag_and_time_are_undone(engine):
    s = engine.service
    seed(s)
    before = dump(s)
    done = s.lifecycle.delete_by_tag("temporary,db", match_all=False)
    assert done.executed and done.counts["deleted"] == 3
    assert s.search_by_tag(["temporary"]) == []
    s.undo(done.change_id)
    assert dump(s) == before
    with pytest.raises(ValidationError, match="start_date"):
        s.lifecycle.delete_by_time(start=None, end=None)
    done = s.lifecycle.delete_by_time(start="2000-01-01", end="2999-01-01", tag="ops")
    assert done.counts["deleted"] == 3
    s.undo(done.change_id)
    assert dump(s) == before


def test_supersession_keeps_the_old_one_out_of_search(engine):
    s = engine.service
    old, _ = s.store_memory("The staging database runs on port 5432.", tags=["db"])
    new, created = s.store_memory("The staging database runs on port 6543.", tags=["db"], supersedes=old.content_hash)
    assert created
    listed, _ = s.list_memories(page_size=10)
    assert [m.content_hash for m in listed] == [new.content_hash]
    everything, _ = s.list_memories(page_size=10, filters=MemoryFilter(include_superseded=True))
    assert {m.content_hash: m.superseded_by for m in everything} == {old.content_hash: new.content_hash,
                                                                     new.content_hash: None}
    hits = s.retrieve_memory("staging database port", n_results=5).hits
    assert [h.memory.content_hash for h in hits] == [new.content_hash]
    assert [m.content_hash for m in s.search_by_tag(["db"])] == [new.content_hash]
    entry = s.history(limit=1)[0]
    assert entry.action == "supersede"
    s.undo(entry.id)  # the newer memory goes, the older is live again
    listed, _ = s.list_memories(page_size=10)
    assert [(m.content_hash, m.superseded_by) for m in listed] == [(old.content_hash, None)]
    with pytest.raises(NotFoundError, match="supersedes"):
        s.store_memory("x", supersedes="0" * 16)


def test_supersession_cycle_refused(engine):
    s = engine.service
    a, _ = s.store_memory("Version A of the plan.")
    b, _ = s.store_memory("Version B of the plan.")
    s.update_memory(b.content_hash, supersedes=a.content_hash)
    with pytest.raises(ValidationError, match="cycle"):
        s.update_memory(a.content_hash, supersedes=b.content_hash)


def test_update_memory_metadata(engine):
    s = engine.service
    h = seed(s)
    before = dump(s)
    preview = s.lifecycle.update_metadata(h["db"], {"tags": ["db", "infra"], "memory_type": "fact",
                                                    "metadata": {"source": "standup"}}, dry_run=True)
    assert dump(s) == before
    done = s.lifecycle.execute_preview(preview.preview_id)
    (m,) = [m for m in s.list_memories(page_size=100)[0] if m.content_hash == h["db"]]
    assert (list(m.tags), m.memory_type, m.metadata) == (["db", "infra"], "fact", {"source": "standup"})
    assert m.content == "The database is PostgreSQL 16."
    s.undo(done.change_id)
    assert dump(s) == before
    with pytest.raises(ValidationError, match="unknown key"):
        s.lifecycle.update_metadata(h["db"], {"colour": "red"})


def test_archive_and_back(engine):
    s = engine.service
    h = seed(s)
    memories = {m.content_hash: m for m in s.list_memories(page_size=100)[0]}
    done = s.lifecycle.archive([memories[h["tmp1"]]], s.store(), dry_run=False, why=lambda m: "test", args={})
    assert h["tmp1"] not in {m.content_hash for m in s.list_memories(page_size=100)[0]}
    assert s.retrieve_memory("Scratch note one", n_results=5).hits[0].memory.content_hash != h["tmp1"]
    archived = [m for m in s.list_memories(page_size=100, filters=MemoryFilter(include_archived=True))[0]
                if m.archived_at]
    assert [m.content_hash for m in archived] == [h["tmp1"]]
    back = s.lifecycle.unarchive([h["tmp1"]])
    assert back.counts["changed"] == 1
    assert h["tmp1"] in {m.content_hash for m in s.list_memories(page_size=100)[0]}
    s.undo(back.change_id)
    s.undo(done.change_id)
    assert h["tmp1"] in {m.content_hash for m in s.list_memories(page_size=100)[0]}


def test_tags_and_analysis(engine):
    s = engine.service
    seed(s)
    assert s.lifecycle.tags()[:2] == [("ops", 3), ("temporary", 2)]
    report = s.lifecycle.analysis()
    assert report["total_memories"] == 6 and report["exact_duplicates"] == 2
    text = s.lifecycle.export("text", tags=["db"])
    assert text.endswith("The database is PostgreSQL 16.\n") and text.count("\n") == 1


def files(s) -> dict[str, bytes]:
    """A Markdown library's files, memloci's day files included (not the index nor the journal,
    which a change appends to)."""
    root = s.store().root
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".memloci/index" not in str(p) and not p.name.startswith("journal")
            and p.suffix == ".md"}


def test_undo_brings_back_every_byte_of_a_markdown_library(engine):
    if engine.name != "markdown":
        pytest.skip("the bytes of files: a Markdown library's")
    s = engine.service
    h = seed(s)
    s.store_memory("The cache is Redis 7.", tags=["infra"])
    s.store_memory("The cache is Redis 8.", supersedes=s.list_memories(page_size=50)[0][0].content_hash)
    before = files(s)
    assert any(rel.startswith(".memloci/memories/") for rel in before)
    for outcome in (s.lifecycle.cleanup_duplicates(), s.lifecycle.delete_by_tag(["temporary"]),
                    s.lifecycle.update_metadata(h["db"], {"tags": ["db", "prod"], "importance": "high"})):
        assert outcome.change_id
    assert files(s) != before
    for entry in s.history(limit=3):
        s.undo(entry.id)
    assert files(s) == before


def test_a_free_memory_keeps_its_links_to_the_entities_it_mentions(engine):
    from memloci.core.model import EntityInput

    s = engine.service
    s.create_entities([EntityInput("AuthService", "component")])
    m, _ = s.store_memory("We fixed the token refresh in AuthService because sessions expired.", memory_type="fix")
    (stored,) = [x for x in s.list_memories(page_size=10)[0] if x.content_hash == m.content_hash]
    assert [(link.type, link.entity) for link in stored.links] == [("causes", "AuthService")]
    entry = s.history(limit=1)[0]
    s.undo(entry.id)
    assert not s.list_memories(page_size=10)[0]


CLUSTERS = [
    ["The API is deployed with a blue-green switch behind the load balancer.",
     "Deploys of the API use a blue-green switch at the load balancer.",
     "For the API we deploy blue-green, switching the load balancer over.",
     "The load balancer switches between blue and green when the API is deployed."],
    ["Maria drinks her coffee black with no sugar.",
     "Maria takes her coffee black, without sugar.",
     "Black coffee, no sugar, is how Maria likes it."],
]


def test_consolidation_preview_execute_undo(engine):
    s = engine.library(embedder="minilm")
    for cluster in CLUSTERS:
        for text in cluster:
            s.store_memory(text, tags=["team"])
    s.store_memory("The staging database listens on port 5432.", tags=["db"])
    s.store_memory("The staging database listens on port 6543.", tags=["db"])
    assert s.flush_embeddings(timeout=120)
    before = dump(s)
    preview = s.consolidate("weekly", dry_run=True)
    assert dump(s) == before and preview.preview_id
    assert preview.report["considered"] == 9 and preview.report["summaries"] == 2, preview.report
    supersede = [i for i in preview.items if "supersede" in i["action"]]
    assert len(supersede) == 1 and "5432" in supersede[0]["content"] and "number" in supersede[0]["why"]
    # one cluster's summary is a new memory; in the other, one member says it all and stands for the rest
    assert preview.counts["created"] == 1
    done = s.lifecycle.execute_preview(preview.preview_id)
    summarizing = [m for m in s.list_memories(page_size=50)[0] if any(link.type == "summarizes" for link in m.links)]
    assert sorted(m.memory_type for m in summarizing) == ["note", "summary"]
    for m in summarizing:
        assert len([link for link in m.links if link.type == "summarizes"]) >= 3 - (m.memory_type == "note")
    live = {m.content for m in s.list_memories(page_size=50)[0]}
    assert "The staging database listens on port 5432." not in live  # superseded
    linked = [m for m in s.list_memories(page_size=50)[0] if any(link.type == "associated" for link in m.links)]
    assert linked
    again = s.consolidate("weekly", dry_run=True)  # a cluster a summary covers is left alone
    assert again.report["summaries"] == 0
    s.undo(done.change_id)
    assert dump(s) == before
    assert s.flush_embeddings(timeout=120)  # the memories undo put back wait for their vectors again
    direct = s.consolidate("weekly", dry_run=False)  # a direct run never supersedes: only offered
    assert direct.offered and not any("supersede" in i["action"] for i in direct.items)


def test_a_planted_library_is_cleaned_and_every_row_comes_back(engine):
    """Exact and near duplicates, a contradiction and stale memories planted among others: each
    preview lists exactly them, executing fixes them, nothing else changes, and undoing the
    executions (newest first) brings back every row (and, on Markdown, every byte)."""
    from datetime import UTC, datetime

    from memloci.formats.official import MemoryLine

    s = engine.library(embedder="minilm")
    s.clock = lambda: datetime(2026, 11, 27, 12, 0, tzinfo=UTC)  # every date below is fixed too
    bystanders = ["The office plants are watered on Mondays.", "Sara leads the mobile team.",
                  "Invoices are sent on the first of the month."]
    planted = [(t, ("misc",), "medium", "2026-11-20T09:00:00Z") for t in bystanders] + [
        (t, (), "medium", f"2026-11-2{k}T10:00:00Z") for k, t in enumerate((
            "Backups run at 02:00 UTC.", "backups run at 02:00 utc",
            "The TLS certificate for api.example.com expires on March 3.",
            "On March 3 the TLS certificate for api.example.com will expire.",
            "The staging database listens on port 5432.", "The staging database listens on port 6543."))] + [
        ("Scratch: order pizza for the launch party.", ("scratch",), "low", "2025-01-10T09:00:00Z")]
    store = s.store()
    store.import_memories([MemoryLine(t, tags, "note", importance, {}, at, at) for t, tags, importance, at in planted],
                          origin="test")
    by_text = {m.content: m for m in s.list_memories(page_size=50)[0]}
    exact = [by_text["Backups run at 02:00 UTC."], by_text["backups run at 02:00 utc"]]
    near = [by_text["The TLS certificate for api.example.com expires on March 3."],
            by_text["On March 3 the TLS certificate for api.example.com will expire."]]
    old, new = by_text["The staging database listens on port 5432."], by_text["The staging database listens on port 6543."]
    stale = by_text["Scratch: order pizza for the launch party."]
    assert s.flush_embeddings(timeout=120)
    before, files_before = dump(s), (files(s) if engine.name == "markdown" else None)

    dups = s.cleanup_duplicates(similar=True, dry_run=True)
    assert {i["content_hash"] for i in dups.items} == {m.content_hash for m in exact + near}
    archive = s.archive_memories(dry_run=True)
    assert [i["content_hash"] for i in archive.items] == [stale.content_hash]
    consolidation = s.consolidate("quarterly", dry_run=True)
    superseded = {i["content_hash"] for i in consolidation.items if "supersede" in i["action"]}
    assert superseded == {old.content_hash}
    assert dump(s) == before  # previews change nothing

    changes = [s.lifecycle.execute_preview(p.preview_id).change_id for p in (dups, archive)]
    fresh = s.consolidate("quarterly", dry_run=True)  # the library changed: a new preview
    changes.append(s.lifecycle.execute_preview(fresh.preview_id).change_id)
    live = {m.content_hash for m in s.list_memories(page_size=50)[0]}
    assert exact[1].content_hash not in live and near[1].content_hash not in live
    assert old.content_hash not in live and stale.content_hash not in live
    assert {m.content_hash for m in s.list_memories(page_size=50)[0] if m.content in bystanders} == \
        {m[1] for m in before if m[0] in bystanders}
    touched = {m.content_hash for m in exact + near + [old, new, stale]}
    after = {row[1]: row for row in dump(s)}
    for row in before:  # nothing outside the previews changed (links added by consolidation aside)
        if row[1] not in touched and row[1] in after:
            assert after[row[1]][:7] == row[:7]

    for change_id in reversed(changes):
        s.undo(change_id)
    assert dump(s) == before
    if files_before is not None:
        assert files(s) == files_before


def test_a_preview_is_refused_when_a_memory_it_only_reads_changed(engine):
    s = engine.service
    old, _ = s.store_memory("The release train leaves monthly.")
    new, _ = s.store_memory("The release train leaves every two weeks.")
    preview = s.lifecycle.supersede(old.content_hash, new.content_hash, dry_run=True)
    s.delete_memory(new.content_hash)  # the memory that would supersede is gone
    before = dump(s)
    with pytest.raises(ConflictError, match="deleted since the preview"):
        s.lifecycle.execute_preview(preview.preview_id)
    assert dump(s) == before


def test_a_refused_supersession_on_update_changes_nothing(engine):
    s = engine.service
    m, _ = s.store_memory("Port is 5432.")
    with pytest.raises(NotFoundError, match="supersedes"):
        s.update_memory(m.content_hash, content="Port is 6543.", supersedes="0" * 64)
    assert [x.content for x in s.list_memories()[0]] == ["Port is 5432."]


def test_merging_keeps_every_use_and_repoints_what_named_a_duplicate(engine):
    s = engine.service
    keep, _ = s.store_memory("Releases are cut on Tuesdays.")
    dup, _ = s.store_memory("releases are cut on tuesdays")
    older, _ = s.store_memory("Releases are cut on Mondays.")
    s.update_memory(dup.content_hash, supersedes=older.content_hash)  # the duplicate supersedes `older`
    preview = s.cleanup_duplicates(dry_run=True)
    store = s.store()
    store.touch_memories([keep.id, dup.id, dup.id])  # used after the preview: not lost at the execute
    s.lifecycle.execute_preview(preview.preview_id)
    every = {m.content_hash: m for m in s.list_memories(page_size=50, filters=EVERY_MEMORY)[0]}
    assert dup.content_hash not in every
    assert every[keep.content_hash].access_count == 3
    assert every[older.content_hash].superseded_by == keep.content_hash  # now the keeper supersedes it


def test_one_preview_executes_once_even_when_two_servers_race(engine):
    s = engine.service
    other = engine.open(s.store().name + ":" + str(s.libraries.specs[0].path)) if engine.name != "postgres" \
        else engine.open(f"{s.store().name}:{engine.pg_url}")
    m, _ = s.store_memory("Scratch one.", tags=["tmp"])
    # a plan that leaves its memory as it found it: only the preview's own mark stops a second run
    preview = s.lifecycle.update_metadata(m.content_hash, {"memory_type": "note"}, dry_run=True)
    from memloci.service.lifecycle import Plan

    kept = other.store().load_preview(preview.preview_id)  # the other server read it while it was pending
    s.lifecycle.execute_preview(preview.preview_id)
    plan = Plan.from_data(kept["plan"])  # and goes on to apply it, as execute_preview does
    with pytest.raises(ConflictError, match="executed already"):
        other.store().change_memories(plan.edits, plan.new, origin="test", action=plan.kind, detail={},
                                      expect=plan.expect, preview_id=preview.preview_id)


def test_export_filters_are_checked(engine):
    s = engine.service
    seed(s)
    with pytest.raises(ValidationError, match="filters.include_archived"):
        s.knowledge_export("json", include_archived="false")
    with pytest.raises(ValidationError, match="filters.tags"):
        s.knowledge_export("json", tags={"ops": 1})
    assert "Backups" not in s.knowledge_export("text", tags="db")
