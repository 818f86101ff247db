"""The command line: import/export of the official format, Markdown export, search, stats, history."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import server_env

OFFICIAL_JSONL = "\n".join(json.dumps(x) for x in [
    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Works at Acme", "Likes tea"]},
    {"type": "entity", "name": "Acme", "entityType": "company", "observations": []},
    {"type": "entity", "name": "alice", "entityType": "person", "observations": ["Plays chess"]},
    {"type": "note", "text": "a line of another type is ignored"},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
    {"type": "relation", "from": "Alice", "to": "Ghost", "relationType": "haunts"},
])


def memloci(home, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home, COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def test_import_then_export_round_trips_the_official_format(home, tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(OFFICIAL_JSONL)
    out = memloci(home, "import", "jsonl", str(src)).stdout
    assert "2 entities created, 1 merged" in out and "1 relations" in out
    assert "1 relations skipped" in out and "line 6: endpoint does not exist: Ghost" in out
    assert "1 lines of another type ignored (lines 4)" in out

    exported = tmp_path / "out.jsonl"
    memloci(home, "export", "jsonl", "--official", str(exported))
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert lines == [
        {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Works at Acme", "Likes tea", "Plays chess"]},
        {"type": "entity", "name": "Acme", "entityType": "company", "observations": []},
        {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
    ]
    # importing again changes nothing: everything merges
    out = memloci(home, "import", "jsonl", str(src)).stdout
    assert "0 entities created, 3 merged, 0 observations" in out
    assert "1 already there" in out


def test_import_of_older_memory_json_object_and_bad_lines(home, tmp_path):
    old = tmp_path / "memory.json"
    old.write_text(json.dumps({"entities": [{"name": "X", "entityType": "t", "observations": ["x1"]}],
                               "relations": []}))
    assert "1 entities created" in memloci(home, "import", "jsonl", str(old)).stdout

    # a line that cannot be read is skipped and listed by its number; the rest is imported
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"type": "entity", "name": "Y", "entityType": "t", "observations": []}) + "\n{oops\n"
                   + json.dumps({"type": "entity", "name": " ", "entityType": "t", "observations": []}) + "\n")
    out = memloci(home, "import", "jsonl", str(bad)).stdout
    assert "1 entities created" in out and "2 lines skipped, not readable:" in out
    assert "  line 2: not valid JSON" in out and "  line 3.name: must not be empty" in out
    exported = memloci(home, "export", "jsonl").stdout
    assert [json.loads(line)["name"] for line in exported.splitlines()] == ["X", "Y"]


def test_export_jsonl_is_loaded_by_the_official_server_format_rules(home, tmp_path):
    """Every line is one object with `type` first, entities before relations (what the official loader reads)."""
    src = tmp_path / "memory.jsonl"
    src.write_text(OFFICIAL_JSONL)
    memloci(home, "import", "jsonl", str(src))
    lines = memloci(home, "export", "jsonl").stdout.splitlines()
    assert all(line.startswith('{"type": ') for line in lines)
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds == sorted(kinds, key=lambda k: k != "entity")


def test_markdown_export_is_stable_and_sorted(home, tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(OFFICIAL_JSONL)
    memloci(home, "import", "jsonl", str(src))
    first = memloci(home, "export", "markdown").stdout
    second = memloci(home, "export", "markdown").stdout
    assert first == second
    assert first.index("## Acme") < first.index("## Alice")
    assert "- type: person" in first and "- Plays chess" in first and "- works_at → Acme" in first
    target = tmp_path / "docs" / "graph.md"
    memloci(home, "export", "markdown", str(target))
    assert target.read_text() == first


def test_read_only_commands_never_create_a_library(home, tmp_path):
    for args in (["search", "x"], ["export", "jsonl"], ["history"], ["check"]):
        proc = memloci(home, *args)  # shown empty, and said so
        assert "does not exist yet" in proc.stderr, args
    assert "not created yet" in memloci(home, "stats").stdout
    assert not (home / "default.db").exists()
    proc = memloci(home, "export", "jsonl", "/proc/no/such/dir/x.jsonl", check=False)
    assert proc.returncode == 1


def test_import_accepts_a_byte_order_mark(home, tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(OFFICIAL_JSONL, encoding="utf-8-sig")
    assert "2 entities created" in memloci(home, "import", "jsonl", str(src)).stdout


def test_search_stats_and_history(home, tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(OFFICIAL_JSONL)
    memloci(home, "import", "jsonl", str(src))
    out = memloci(home, "search", "acme tea").stdout
    assert "Alice" in out and "all 2 words" in out
    assert "No match." in memloci(home, "search", "zebra").stdout
    stats = memloci(home, "stats").stdout
    assert "default" in stats and "sqlite" in stats
    history = memloci(home, "history").stdout
    assert "import" in history and "create_relations" in history
    details = [json.loads(line) for line in memloci(home, "history", "--details").stdout.splitlines()]
    assert details[0]["action"] == "create_relations" and details[0]["detail"]["relations"] == [["Alice", "works_at", "Acme"]]
    proc = memloci(home, "search", "x", "--library", "nope", check=False)
    assert proc.returncode == 1 and "NOT_FOUND" in proc.stderr


def test_export_import_export_of_everything_is_identical_timestamps_included(home, tmp_path):
    """Entities, observations, relations and free memories (tags, metadata, importance) with every
    time they carry: exported, imported into an empty library, exported again: the same bytes."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.core.model import EntityInput, RelationInput
    from memloci.service.facade import MemoryService

    first_db = tmp_path / "first.db"
    registry = LibraryRegistry([LibrarySpec("default", first_db)])
    service = MemoryService(registry)
    service.create_entities([EntityInput("Alice", "person", ("Works at Acme", "Likes tea")),
                             EntityInput("Acme", "company", ())])
    service.create_relations([RelationInput("Alice", "works_at", "Acme")])
    service.store_memory("the deploy runs on Fridays", tags=["ops", "deploy"], memory_type="fact",
                         metadata={"source": "chat", "n": 3}, importance="high")
    service.store_memory("remember the milk", tags=[], memory_type="note")
    store = service.store()
    with store._write() as conn:  # times from another day, so a copy made "now" would show
        conn.execute("UPDATE entities SET created_at = '2024-01-02T03:04:05Z', updated_at = '2024-02-03T04:05:06Z'")
        conn.execute("UPDATE memories SET created_at = '2024-01-0' || id || 'T00:00:00Z', updated_at = '2024-03-01T00:00:00Z'")
        conn.execute("UPDATE relations SET created_at = '2024-01-05T00:00:00Z'")
    registry.close()

    exported = tmp_path / "all.jsonl"
    memloci(home, "export", "jsonl", str(exported), "--libraries", f"default:{first_db}")
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["entity", "entity", "relation", "memory", "memory"]
    assert lines[0]["observationDates"] == ["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"]
    memory = lines[3]
    assert memory == {"type": "memory", "content": "the deploy runs on Fridays", "tags": ["ops", "deploy"],
                      "memory_type": "fact", "importance": "high", "metadata": {"source": "chat", "n": 3},
                      "created_at": "2024-01-03T00:00:00Z", "updated_at": "2024-03-01T00:00:00Z"}
    for kind, target in (("sqlite", tmp_path / "second.db"), ("markdown", tmp_path / "second")):
        out = memloci(home, "import", "jsonl", str(exported), "--libraries", f"default:{target}").stdout
        assert "2 memories" in out, out
        again = tmp_path / f"again-{kind}.jsonl"
        memloci(home, "export", "jsonl", str(again), "--libraries", f"default:{target}")
        assert again.read_text() == exported.read_text(), kind
    # a memory line with a key memloci does not know is skipped, naming it; the other line is imported
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**memory, "colour": "red"}) + "\n" + json.dumps({**memory, "content": "kept"}) + "\n")
    out = memloci(home, "import", "jsonl", str(bad), "--libraries", f"default:{tmp_path / 'third.db'}").stdout
    assert "1 memories" in out and "  line 1: unknown key 'colour'" in out
