"""The command line: import/export of the official format, Markdown export, search, stats, history."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
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
    assert "2 entities created, 1 merged" in out and "1 relation" in out
    assert "1 relation skipped" in out and "line 6: endpoint does not exist: Ghost" in out
    assert "1 line of another type ignored (lines 4)" in out

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
    assert "1 entity created" in memloci(home, "import", "jsonl", str(old)).stdout

    # a line that cannot be read is skipped and listed by its number; the rest is imported
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"type": "entity", "name": "Y", "entityType": "t", "observations": []}) + "\n{oops\n"
                   + json.dumps({"type": "entity", "name": " ", "entityType": "t", "observations": []}) + "\n")
    out = memloci(home, "import", "jsonl", str(bad)).stdout
    assert "1 entity created" in out and "2 lines skipped, not readable:" in out
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
    said = memloci(home, "export", "jsonl", str(exported), "--libraries", f"default:{first_db}").stderr
    # every export counts what it wrote the same way, free memories included
    assert f"Wrote 2 entities, 1 relation and 2 memories to {exported}" in said
    markdown = tmp_path / "all.md"
    said = memloci(home, "export", "markdown", str(markdown), "--libraries", f"default:{first_db}").stderr
    assert f"Wrote 2 entities, 1 relation and 2 memories to {markdown}" in said
    assert "the deploy runs on Fridays" in markdown.read_text()
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
    assert "1 memory" in out and "  line 1: unknown key 'colour'" in out


# -- in-process runs of the command (typer's CliRunner): the refusals and warnings a person reads --

def run_cli(monkeypatch, home, *args: str):
    """`memloci --home HOME ARGS` in this process, with no MEMLOCI_ variable of the test's own."""
    from typer.testing import CliRunner

    from memloci.cli.main import app

    for name in [k for k in os.environ if k.startswith("MEMLOCI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMLOCI_EMBEDDER", "none")
    return CliRunner().invoke(app, ["--home", str(home), *args])


def test_a_token_scope_for_a_library_not_mounted_is_kept_with_a_warning(monkeypatch, tmp_path):
    home = tmp_path / "home"
    result = run_cli(monkeypatch, home, "token", "create", "bob", "--scope", "nosuchlib:read", "--scope", "*:read")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("mlc_")
    assert ("warning: no library 'nosuchlib' is mounted here (mounted: default); the token is created"
            in result.stderr)
    assert "'*'" not in result.stderr  # every library: nothing to check
    scoped = run_cli(monkeypatch, home, "token", "create", "carol", "--scope", "tema:write", "--scope", "notes:read",
                     "--libraries", f"team:{tmp_path / 't.db'},notes:{tmp_path / 'notes'}")
    assert scoped.exit_code == 0, scoped.output
    assert "no library 'tema' is mounted here (mounted: team, notes) (did you mean 'team'?)" in scoped.stderr
    assert "'notes' is mounted" not in scoped.stderr and scoped.stderr.count("warning:") == 1
    listed = run_cli(monkeypatch, home, "token", "list").stdout
    assert "bob\tnosuchlib:read *:read" in listed and "carol\ttema:write notes:read" in listed
    quiet = run_cli(monkeypatch, home, "token", "create", "dan", "--scope", "default:write")
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr


@pytest.mark.parametrize("args,flag,allowed,closest", [
    (["serve", "--transport", "htp"], "--transport", "stdio, http", "http"),
    (["install", "cursor", "--transport", "stdi"], "--transport", "stdio, http", "stdio"),
    (["install", "cursor", "--scope", "usr"], "--scope", "user, project", "user"),
    (["bench", "crash", "--kinds", "creat"], "--kinds", "create, rename", "create"),
    (["bench", "crash", "--engines", "sqlit"], "--engines", "markdown, sqlite, postgres", "sqlite"),
    (["bench", "import", "--engine", "markdwn"], "--engine", "sqlite, markdown, both", "markdown"),
])
def test_a_bad_choice_is_a_validation_error_naming_the_option_and_the_closest_value(monkeypatch, tmp_path, args,
                                                                                   flag, allowed, closest):
    result = run_cli(monkeypatch, tmp_path / "home", *args)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"VALIDATION_ERROR: {flag}: '{args[-1]}' is not one of {allowed}")
    assert f"did you mean '{closest}'?" in result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "home").exists()


def test_errors_at_the_terminal_are_worded_for_a_person(monkeypatch, tmp_path):
    from memloci.cli.common import person_hint
    from memloci.core.errors import ConflictError, InternalError, NotFoundError, StorageFullError, ValidationError

    refused = run_cli(monkeypatch, tmp_path / "home", "check", "--schema", "stict")
    assert refused.exit_code == 1 and "unknown schema 'stict'" in refused.stderr
    assert "run the command again" in refused.stderr and "call" not in refused.stderr
    # default hints written for a model, and model words inside a hint of its own
    assert "call" not in person_hint(ValidationError("x")) and "search_nodes" not in person_hint(NotFoundError("x"))
    assert "run the command again" in person_hint(StorageFullError("x"))
    assert "server log" not in person_hint(InternalError("x"))
    assert person_hint(ConflictError("x", hint="Nothing was changed; send the call again in a moment.")) == \
        "Nothing was changed; run the command again in a moment."
    assert person_hint(ConflictError("x", hint="Send the call again in a moment.")) == "Run the command again in a moment."
    assert person_hint(ValidationError("x", hint="Use --tools strict.")) == "Use --tools strict."
    # the MCP errors keep their words
    assert ValidationError("x").to_dict()["error"]["hint"] == ValidationError.default_hint


def _commands(command, prefix=()):
    """(name words, command) of every leaf command under `command` (a group has `commands`)."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*prefix, name))
    else:
        yield " ".join(prefix), command


def test_the_docs_say_which_commands_take_libraries_and_library():
    """The Command line page's sentence (docs/cli.md) on `--libraries` and `-l/--library` names
    exactly the commands that take them (`import ...`: every import command)."""
    import re
    from pathlib import Path

    import typer

    from memloci.cli.main import app

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    sentence = re.search(r"`--libraries SPEC` \(the libraries to mount\) is taken by (.*?); `-l/--library NAME` "
                         r"\(one of the mounted libraries\) by (.*?)\.\n", page, re.S)
    assert sentence, "docs/cli.md's sentence on --libraries and -l is gone"
    commands = dict(_commands(typer.main.get_command(app)))

    def named(text: str) -> set[str]:
        found = set()
        for name in re.findall(r"`([a-z ]+?)(?: \.\.\.)?`", text):
            found |= {c for c in commands if c == name or c.startswith(name + " ")}
        return found

    def taking(*flags: str) -> set[str]:
        return {name for name, cmd in commands.items() if not name.startswith("bench")
                and any(set(flags) <= set(p.opts) for p in cmd.params)}

    assert named(sentence[1]) == taking("--libraries")
    assert named(sentence[2]) == taking("--library", "-l")
    assert {"stats", "import mms", "export markdown", "token create"} <= taking("--libraries")


def test_stats_of_one_library(monkeypatch, tmp_path):
    spec = f"work:{tmp_path / 'work.db'},notes:{tmp_path / 'notes'}"
    both = run_cli(monkeypatch, tmp_path / "home", "stats", "--libraries", spec)
    assert both.exit_code == 0 and "work" in both.stdout and "notes" in both.stdout
    one = run_cli(monkeypatch, tmp_path / "home", "stats", "--libraries", spec, "-l", "Notes")
    assert one.exit_code == 0 and "notes" in one.stdout and "work" not in one.stdout
    missing = run_cli(monkeypatch, tmp_path / "home", "stats", "--libraries", spec, "-l", "team")
    assert missing.exit_code == 1 and "NOT_FOUND: library 'team' is not mounted; mounted: work, notes" in missing.stderr
    assert not (tmp_path / "work.db").exists() and not (tmp_path / "notes").exists()  # read-only: nothing created


def test_a_value_out_of_range_names_the_command_s_own_option(monkeypatch, tmp_path):
    home = tmp_path / "home"
    found = run_cli(monkeypatch, home, "search", "foo", "-n", "0")
    assert found.exit_code == 1 and found.stderr.startswith("VALIDATION_ERROR: -n/--limit: must be between 1 and"), found.stderr
    undone = run_cli(monkeypatch, home, "undo", "0")
    assert undone.exit_code == 1 and undone.stderr.startswith("VALIDATION_ERROR: ID: must be between 1 and"), undone.stderr
