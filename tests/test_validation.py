"""Bad input: a clear error naming the field and the rule, and nothing half-applied."""

from __future__ import annotations

import os
import sqlite3

import pytest
from conftest import Client
from conftest import run_session as run

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec, parse_library_specs
from memloci.core import schema
from memloci.core.errors import LibraryUnreadableError, ValidationError
from memloci.core.model import EntityInput


def test_tool_input_errors_name_the_field_and_rule(home):
    async def body(c: Client):
        cases = [
            (dict(entities=[{"name": "", "entityType": "t"}]), "entities[0].name: must not be empty"),
            (dict(entities=[{"name": "ok", "entityType": "t"}, {"name": "x", "entityType": 7}]),
             "entities[1].entityType: Input should be a valid string"),
            (dict(entities=[{"entityType": "t"}]), "entities[0].name: Field required"),
            (dict(entities="not a list"), "entities: Input should be a valid list"),
            (dict(entities=[{"name": "a\nb", "entityType": "t"}]), "entities[0].name: must not contain control characters"),
            (dict(entities=[{"name": "n" * (schema.NAME_MAX + 1), "entityType": "t"}]),
             f"entities[0].name: must be at most {schema.NAME_MAX} characters"),
            (dict(entities=[{"name": "n", "entityType": "t", "observations": ["x" * (schema.OBSERVATION_MAX + 1)]}]),
             f"entities[0].observations[0]: must be at most {schema.OBSERVATION_MAX} characters"),
            (dict(entities=[{"name": f"e{i}", "entityType": "t"} for i in range(schema.BATCH_MAX + 1)]),
             f"entities: at most {schema.BATCH_MAX} items per call"),
        ]
        for arguments, expected in cases:
            err = await c.error("create_entities", **arguments)
            assert err["code"] == "VALIDATION_ERROR"
            assert expected in err["message"], (expected, err["message"])
            assert err["hint"]
        graph, _ = await c.ok("read_graph")
        assert graph["entities"] == [], "a rejected batch writes nothing, not even its valid items"
        # empty arrays are a no-op, as with the official server
        structured, text = await c.ok("create_entities", entities=[])
        assert text == [] and structured["created"] == []
        for tool, arguments in [("create_relations", {"relations": []}), ("add_observations", {"observations": []}),
                                ("delete_entities", {"entityNames": []}), ("delete_relations", {"relations": []}),
                                ("delete_observations", {"deletions": []}), ("open_nodes", {"names": []})]:
            await c.ok(tool, **arguments)
        assert (await c.ok("read_graph"))[0]["entities"] == []

        err = await c.error("read_graph", limit=0)
        assert "limit: must be between 1 and" in err["message"]
        err = await c.error("read_graph", offset=-1)
        assert "offset" in err["message"]
        listed, _ = await c.ok("search_nodes", query="   ")  # as the official server: an empty query lists
        assert listed["entities"] == [] and listed["total_count"] == 0
        err = await c.error("search_nodes", query="x" * (schema.QUERY_MAX + 1))
        assert "query: must be at most" in err["message"]
        err = await c.error("add_observations", observations=[{"entityName": "x", "contents": [""]}])
        assert "observations[0].contents[0]: must not be empty" in err["message"]
        err = await c.error("create_relations", relations=[{"from": "a", "to": "b"}])
        assert "relations[0].relationType: Field required" in err["message"]
        err = await c.error("read_graph", library="a", library_name="b")
        assert "library" in err["message"]

    run(home, body)


def test_unreadable_library_file_is_an_error_never_an_empty_graph(home):
    home.mkdir(parents=True)
    db = home / "default.db"
    db.write_bytes(b"this is not a sqlite database, it is a text file that somebody put here" * 20)
    before = db.read_bytes()

    async def body(c: Client):
        err = await c.error("read_graph")
        assert err["code"] == "INTERNAL_ERROR"
        assert "not a readable SQLite database" in err["message"] and str(db) in err["message"]
        assert "will not overwrite" in err["hint"]
        err = await c.error("create_entities", entities=[{"name": "x", "entityType": "t"}])
        assert "not a readable SQLite database" in err["message"]

    run(home, body)
    assert db.read_bytes() == before, "the unreadable file must be left untouched"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_library_without_read_permission_is_an_error(tmp_path):
    db = tmp_path / "lib.db"
    sqlite3.connect(db).close()
    db.chmod(0)
    registry = LibraryRegistry([LibrarySpec("default", db)])
    with pytest.raises(LibraryUnreadableError, match="permission denied"):
        registry.get()


def test_library_from_a_newer_schema_is_refused(tmp_path):
    db = tmp_path / "lib.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(LibraryUnreadableError, match="schema version 999"):
        LibraryRegistry([LibrarySpec("default", db)]).get()


def test_library_specs_are_checked(tmp_path):
    assert [s.name for s in parse_library_specs(f"a:{tmp_path}/a.db, b:{tmp_path}/b.db")] == ["a", "b"]
    assert [s.kind for s in parse_library_specs(f"a:{tmp_path}/a.db,b:{tmp_path}/notes")] == ["sqlite", "markdown"]
    (tmp_path / "plain.txt").write_text("x")
    for spec, message in [
        ("justaname", "expected NAME:PATH"),
        (f"a:{tmp_path}/a.db,a:{tmp_path}/b.db", "mounted twice"),
        (f"bad name:{tmp_path}/a.db", "name 'bad name'"),
        (f"a:{tmp_path}/plain.txt", "not a folder"),
        (f"a:{tmp_path}/a.db,b:{tmp_path}/a.db", "already mounted"),
    ]:
        with pytest.raises(ValidationError, match=message):
            parse_library_specs(spec)


def test_service_validates_before_writing(service):
    with pytest.raises(ValidationError, match=r"entities\[1\].name"):
        service.create_entities([EntityInput("good", "t"), EntityInput("  ", "t")])
    assert service.read_graph().total_entity_count == 0
    created = service.create_entities([EntityInput("  padded  ", "t", ("  spaced   obs ",))])
    assert created[0].name == "padded" and created[0].observations == ("spaced   obs",)


def test_library_path_that_is_a_folder_is_an_error(home):
    (home / "default.db").mkdir(parents=True)

    async def body(c: Client):
        err = await c.error("read_graph")
        assert "is a folder, not a SQLite file" in err["message"]

    run(home, body)


def test_a_nul_in_a_query_is_refused_naming_the_field():
    """SQLite's full text and PostgreSQL both fail on a NUL: refused before any engine sees it."""
    with pytest.raises(ValidationError, match=r"query: must not contain NUL"):
        schema.validate_query("a\x00b")
    assert schema.validate_query(" a b ") == "a b"
