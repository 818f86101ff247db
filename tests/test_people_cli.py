"""The commands for people: `memloci recall` and `memloci memories list` answer as retrieve_memory
and list_memories do (the same memories, order and fields), `memories show|edit|delete` with
undo, `memloci search` across memories, entities and notes; refusals name the option."""

from __future__ import annotations

import json
import sqlite3

from conftest import run_session
from test_cli import run_cli

from memloci.service.documents import NewEntityDocument

MEMORIES = [  # (text, tags, type)
    ("We chose OAuth with PKCE for the mobile app.", ["auth", "decision"], "decision"),
    ("The OAuth refresh token lives for thirty days.", ["auth"], "fact"),
    ("Deploy the staging server every Friday.", ["ops"], "note"),
    ("Rotate the signing keys of OAuth monthly.", ["auth", "ops"], "todo"),
    ("Lunch is at noon.", ["scratch"], "note"),
]


def seed(home) -> dict[str, str]:
    """A library with free memories (one superseded), an entity with observations and a note
    with a body; the hashes by text."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    home.mkdir(parents=True, exist_ok=True)
    service = MemoryService(LibraryRegistry(parse_library_specs(f"default:{home / 'default.db'}")),
                            EmbedderHandle("none"))
    hashes = {}
    for text, tags, kind in MEMORIES:
        hashes[text] = service.store_memory(text, tags=tags, memory_type=kind)[0].content_hash
    newer, _ = service.store_memory("The OAuth refresh token lives for ninety days.", tags=["auth"], memory_type="fact",
                                    supersedes=hashes["The OAuth refresh token lives for thirty days."])
    hashes[newer.content] = newer.content_hash
    service.add_entities([NewEntityDocument("Deploy guide", "guide", (), (),
                                            "# Deploy guide\n\nThe pipeline signs every release with cosign.\n")])
    service.close()
    return hashes


def copy_library(home, other) -> None:
    """`other` gets a copy of `home`'s library: two libraries in the same state, so a retrieval in
    one (which counts its hits' uses) and one in the other answer from the same counts."""
    other.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(home / "default.db"), sqlite3.connect(other / "default.db")
    src.backup(dst)
    src.close()
    dst.close()


def tool(home, name: str, **arguments) -> dict:
    out: dict = {}

    async def body(client):
        out["structured"], _ = await client.ok(name, **arguments)

    run_session(home, body)
    return out["structured"]


def cli_json(monkeypatch, home, *args: str) -> dict:
    result = run_cli(monkeypatch, home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_recall_answers_as_retrieve_memory(monkeypatch, tmp_path):
    home, twin = tmp_path / "home", tmp_path / "twin"
    seed(home)
    for arguments, flags in [
        ({"query": "OAuth"}, []),
        ({"query": "OAuth token", "n_results": 2}, ["-n", "2"]),
        ({"query": "OAuth", "tags": ["ops", "decision"]}, ["--tag", "ops", "--tag", "decision"]),
        ({"query": "OAuth", "tags": ["auth", "ops"], "match_all": True}, ["--tag", "auth", "--tag", "ops", "--all-tags"]),
        ({"query": "OAuth", "memory_type": "fact", "include_superseded": True}, ["--type", "fact", "--include-superseded"]),
        ({"query": "deploy", "after": "2000-01-01", "before": "2999-01-01"},
         ["--after", "2000-01-01", "--before", "2999-01-01"]),
        ({"query": "nothing like this word zyzzyva", "tags": ["scratch"]}, ["--tag", "scratch"]),
        ({"query": "OAuth", "time": "latest", "n_results": 3}, ["--time", "latest", "-n", "3"]),
    ]:
        copy_library(home, twin)  # the same state for both: a retrieval counts its hits' uses
        expected = tool(home, "retrieve_memory", **arguments)
        got = cli_json(monkeypatch, twin, "recall", arguments["query"], *flags)
        assert got == expected, (arguments, got, expected)
        assert got["memories"] or "note" in got
    table = run_cli(monkeypatch, home, "recall", "PKCE", "--tag", "decision")
    assert table.exit_code == 0 and "We chose OAuth with PKCE for the mobile app." in table.stdout
    assert "score" in table.stdout and "decision" in table.stdout and "active" in table.stdout
    # and on one file, one after the other: the same memories in the same order, the uses aside
    expected = tool(home, "retrieve_memory", query="OAuth keys", n_results=3)
    got = cli_json(monkeypatch, home, "recall", "OAuth keys", "-n", "3")
    assert [m["content_hash"] for m in got["memories"]] == [m["content_hash"] for m in expected["memories"]]
    assert all(set(g) == set(e) and g["access_count"] == e["access_count"] + 1
               for g, e in zip(got["memories"], expected["memories"], strict=True))


def test_recall_of_several_libraries_answers_as_retrieve_memory_of_several(monkeypatch, tmp_path):
    home, twin = tmp_path / "home", tmp_path / "twin"
    seed(home)
    (home / "default.db").rename(home / "work.db")
    seed(tmp_path / "other")
    (tmp_path / "other" / "default.db").rename(home / "notes.db")
    twin.mkdir()
    for name in ("work", "notes"):
        src, dst = sqlite3.connect(home / f"{name}.db"), sqlite3.connect(twin / f"{name}.db")
        src.backup(dst)
        src.close()
        dst.close()
    out: dict = {}

    async def body(client):
        out["all"], _ = await client.ok("retrieve_memory", query="OAuth keys", n_results=4, library="*")

    run_session(home, body, "--libraries", f"work:{home / 'work.db'},notes:{home / 'notes.db'}")
    got = cli_json(monkeypatch, twin, "recall", "OAuth keys", "-n", "4", "-l", "*",
                   "--libraries", f"work:{twin / 'work.db'},notes:{twin / 'notes.db'}")
    assert got == out["all"] and got["libraries"] == ["work", "notes"]
    assert {m["library"] for m in got["memories"]} == {"work", "notes"}
    # memloci search -l: the same, for memories, entities and notes; each hit names its library
    mounted = f"work:{twin / 'work.db'},notes:{twin / 'notes.db'}"
    found = cli_json(monkeypatch, twin, "search", "deploy", "-l", "*", "--libraries", mounted)
    assert sorted(m["library"] for m in found["memories"]) == ["notes", "work"]
    assert sorted(n["library"] for n in found["notes"]) == ["notes", "work"]
    one = cli_json(monkeypatch, twin, "search", "deploy", "-l", "notes", "--libraries", mounted)
    assert len(one["memories"]) == 1 and "library" not in one["memories"][0]
    table = run_cli(monkeypatch, twin, "search", "deploy", "-l", "work,notes", "--libraries", mounted)
    assert table.exit_code == 0 and "library" in table.stdout and "notes" in table.stdout
    unknown = run_cli(monkeypatch, twin, "search", "deploy", "-l", "work,nope", "--libraries", mounted)
    assert unknown.exit_code == 1 and "library 'nope' is not mounted" in unknown.stderr and "Traceback" not in unknown.output


def test_memories_list_answers_as_list_memories(monkeypatch, tmp_path):
    home = tmp_path / "home"
    hashes = seed(home)
    for arguments, flags in [
        ({"page_size": 20}, []),
        ({"page": 2, "page_size": 2}, ["--page", "2", "--page-size", "2"]),
        ({"tags": ["ops"], "page_size": 20}, ["--tag", "ops"]),
        ({"memory_type": "fact", "include_superseded": True, "page_size": 20}, ["--type", "fact", "--include-superseded"]),
        ({"after": "2999-01-01", "page_size": 20}, ["--after", "2999-01-01"]),
    ]:
        expected = tool(home, "list_memories", **arguments)
        got = cli_json(monkeypatch, home, "memories", "list", *flags)
        assert got == expected, (arguments, got, expected)
    named = [hashes["Lunch is at noon."], "0" * 64, hashes["Deploy the staging server every Friday."]]
    expected = tool(home, "list_memories", content_hashes=named)
    assert expected["missing"] == ["0" * 64] and len(expected["memories"]) == 2
    assert cli_json(monkeypatch, home, "memories", "list", *[a for h in named for a in ("--hash", h)]) == expected
    listed = cli_json(monkeypatch, home, "memories", "list", "--include-superseded")
    old = next(m for m in listed["memories"] if m["content"].endswith("thirty days."))
    assert old["superseded_by"] == hashes["The OAuth refresh token lives for ninety days."]
    table = run_cli(monkeypatch, home, "memories", "list", "--page-size", "2", "--libraries",
                    f"default:{home / 'default.db'}")
    assert table.exit_code == 0 and "1-2 of 5 memories" in table.stdout and "Next page: --page 2" in table.stdout


def test_show_edit_delete_and_undo(monkeypatch, tmp_path):
    home = tmp_path / "home"
    hashes = seed(home)
    lunch = hashes["Lunch is at noon."]
    shown = cli_json(monkeypatch, home, "memories", "show", lunch)
    assert shown == tool(home, "list_memories", content_hashes=[lunch])["memories"][0]
    table = run_cli(monkeypatch, home, "memories", "show", lunch)
    assert "scratch" in table.stdout and "zone" in table.stdout and "Lunch is at noon." in table.stdout

    edited = run_cli(monkeypatch, home, "memories", "edit", lunch, "--content", "Lunch is at one.", "--tags", "food,team",
                     "--importance", "low", "--metadata", '{"room": "B"}')
    assert edited.exit_code == 0, edited.output
    change = edited.stdout.split("memloci undo ")[1].split()[0]
    now = tool(home, "retrieve_memory", query="lunch")["memories"][0]
    assert (now["content"], now["tags"], now["importance"], now["metadata"]) == ("Lunch is at one.", ["food", "team"],
                                                                                  "low", {"room": "B"})
    assert run_cli(monkeypatch, home, "undo", change).exit_code == 0
    assert cli_json(monkeypatch, home, "memories", "show", lunch)["tags"] == ["scratch"]

    refused = run_cli(monkeypatch, home, "memories", "delete", lunch)  # not at a terminal: --yes says so
    assert refused.exit_code == 1 and "--yes:" in refused.stderr
    assert cli_json(monkeypatch, home, "memories", "show", lunch)["content"] == "Lunch is at noon."
    deleted = run_cli(monkeypatch, home, "memories", "delete", lunch, "--yes")
    assert deleted.exit_code == 0 and "Deleted 1 memory: Lunch is at noon." in deleted.stdout, deleted.output
    gone = run_cli(monkeypatch, home, "memories", "show", lunch)
    assert gone.exit_code == 1 and "NOT_FOUND: HASH: no memory has hash" in gone.stderr
    assert run_cli(monkeypatch, home, "undo", deleted.stdout.split("memloci undo ")[1].split()[0]).exit_code == 0
    assert cli_json(monkeypatch, home, "memories", "show", lunch)["content"] == "Lunch is at noon."

    keys = hashes["Rotate the signing keys of OAuth monthly."]
    superseding = run_cli(monkeypatch, home, "memories", "edit", hashes["We chose OAuth with PKCE for the mobile app."],
                          "--supersedes", keys)
    assert superseding.exit_code == 0, superseding.output
    assert cli_json(monkeypatch, home, "memories", "show", keys)["zone"] == "superseded"
    assert run_cli(monkeypatch, home, "undo", superseding.stdout.split("memloci undo ")[1].split()[0]).exit_code == 0
    assert "superseded_by" not in cli_json(monkeypatch, home, "memories", "show", keys)


def test_search_finds_memories_entities_and_notes(monkeypatch, tmp_path):
    home = tmp_path / "home"
    seed(home)
    found = cli_json(monkeypatch, home, "search", "cosign")
    assert found["memories"] == [] and found["entities"] == []
    assert [(n["name"], n["line"]) for n in found["notes"]] == [("Deploy guide", "The pipeline signs every release with cosign.")]
    assert found["notes"][0]["why"]
    found = cli_json(monkeypatch, home, "search", "deploy")
    assert [m["content"] for m in found["memories"]] == ["Deploy the staging server every Friday."]
    assert found["memories"][0]["why"] and [n["name"] for n in found["notes"]] == ["Deploy guide"]
    assert found["entities"] == []  # a note is listed once, under notes
    only = cli_json(monkeypatch, home, "search", "deploy", "--kind", "entities")
    assert set(only) == {"query", "kind", "entities"} and [e["name"] for e in only["entities"]] == ["Deploy guide"]
    table = run_cli(monkeypatch, home, "search", "deploy")
    assert "memories (1)" in table.stdout and "notes (1)" in table.stdout and "Deploy guide" in table.stdout


def test_refusals_name_the_option(monkeypatch, tmp_path):
    home = tmp_path / "home"
    lunch = seed(home)["Lunch is at noon."]
    for args, said in [
        (["memories", "list", "--page-size", "0"], "VALIDATION_ERROR: --page-size: must be"),
        (["memories", "list", "--page", "0"], "VALIDATION_ERROR: --page: must be"),
        (["recall", "x", "-n", "0"], "VALIDATION_ERROR: -n/--limit: must be"),
        (["recall", "x", "--min-similarity", "2"], "VALIDATION_ERROR: --min-similarity: must be between 0 and 1"),
        (["recall", "x", "--after", "someday"], "VALIDATION_ERROR: --after:"),
        (["memories", "edit", "abc", "--metadata", "[1]"], "VALIDATION_ERROR: --metadata: must be a JSON object"),
        (["memories", "edit", lunch, "--importance", "urgent"], "VALIDATION_ERROR: --importance:"),
        (["memories", "edit", "abc", "--importance", "low"], "NOT_FOUND: HASH: no memory has hash abc"),
        (["memories", "list", "--hash", lunch, "--tag", "ops"], "VALIDATION_ERROR: --tag: not with content_hashes"),
        (["search", "x", "--kind", "note"], "--kind: 'note' is not one of all, memories, entities, notes; did you mean 'notes'?"),
    ]:
        result = run_cli(monkeypatch, home, *args)
        assert result.exit_code == 1 and said in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.output


def test_reads_of_a_library_not_created_create_nothing(monkeypatch, tmp_path):
    home = tmp_path / "home"
    for args in (["recall", "x"], ["recall", "x", "--json"], ["memories", "list"], ["memories", "list", "--json"],
                 ["search", "x"], ["search", "x", "--json"]):
        result = run_cli(monkeypatch, home, *args)
        assert result.exit_code == 0 and "does not exist yet" in result.stderr, (args, result.output)
    assert json.loads(run_cli(monkeypatch, home, "memories", "list", "--json").stdout)["total"] == 0
    shown = run_cli(monkeypatch, home, "memories", "show", "abc")
    assert shown.exit_code == 1 and "does not exist yet" in shown.stderr
    assert not home.exists() or not any(home.rglob("*.db"))
