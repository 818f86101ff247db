"""Auto-relations (service/extraction.py) on real libraries in temp dirs: new observations
relate their entity to the existing entities they mention, typed as memorix types them; no
entity is ever created (the names are offered instead); the relations are their own journal
entry, undone exactly; a free memory gets links; and the setting turns it all off."""

from __future__ import annotations

import json

import pytest
from conftest import Client
from conftest import run_session as run

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput, MemoryLink, ObservationBatch, RelationInput
from memloci.core.schema import schema_from_config
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService


@pytest.fixture(params=["sqlite", "markdown"])
def lib(request, tmp_path):
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / ("lib.db" if request.param == "sqlite" else "lib"),
                                            request.param)])
    service = MemoryService(registry)
    service.create_entities([EntityInput("AuthService", "service"), EntityInput("jwt", "module"),
                             EntityInput("orama", "package"), EntityInput("api", "project")])
    yield service
    registry.close()


def relations(service: MemoryService) -> set[tuple[str, str, str]]:
    return {(r.from_entity, r.relation_type, r.to_entity) for r in service.export_graph().relations}


def test_mentions_of_existing_entities_become_relations_and_the_rest_is_offered(lib):
    [result] = lib.add_observations([ObservationBatch("api", (
        "Login goes through authservice and src/auth/jwt.ts; search is @orama/orama; TokenCache is new",))])
    made = {(r.from_entity, r.relation_type, r.to_entity) for r in result.relations_added}
    # any case reaches the entity, under its stored name; a file by its stem, a module by its last part
    assert made == {("api", "references", "jwt"), ("api", "references", "orama")}
    assert made <= relations(lib)
    assert result.entities_suggested == ("TokenCache",)  # offered, not created
    assert {e.name for e in lib.export_graph().entities} == {"AuthService", "jwt", "orama", "api"}


def test_camel_case_any_case_and_the_relation_types_of_memorix(lib):
    [causal] = lib.add_observations([ObservationBatch("api", ("Logins failed because AuthService timed out",))])
    assert [(r.relation_type, r.to_entity) for r in causal.relations_added] == [("causes", "AuthService")]
    memory, _ = lib.store_memory("Fixed the expiry check in src/auth/jwt.ts", memory_type="bugfix")
    assert memory.links == (MemoryLink("fixes", entity="jwt"),)
    assert lib.store_memory("JWTs expire hourly: see ./jwt.json", memory_type="decision")[0].links \
        == (MemoryLink("decides", entity="jwt"),)
    assert lib.store_memory("因为限流导致 src/jwt.ts 超时")[0].links == (MemoryLink("causes", entity="jwt"),)
    assert lib.store_memory("Careful: orama.search.index is rebuilt on start", memory_type="gotcha")[0].links \
        == ()  # `index` is no entity; a module names its last part
    assert lib.store_memory("Careful with @orama before 2.0", memory_type="gotcha")[0].links \
        == (MemoryLink("warns_about", entity="orama"),)


def test_an_alias_reaches_its_entity_and_an_entity_never_relates_to_itself(lib):
    lib.add_entities([NewEntityDocument("认证模块", "module", aliases=("AuthModule",))])
    [result] = lib.add_observations([ObservationBatch("AuthService", (
        "AuthService wraps AuthModule and 「认证模块」; authservice.ts is its own file",))])
    assert [(r.from_entity, r.to_entity) for r in result.relations_added] == [("AuthService", "认证模块")]
    assert not any(f == t for f, _, t in relations(lib))
    assert result.entities_suggested == ()


def test_existing_relations_are_not_made_twice_and_observations_already_there_say_nothing(lib):
    lib.create_relations([RelationInput("api", "references", "jwt")])
    [result] = lib.add_observations([ObservationBatch("api", ("Tokens come from src/auth/jwt.ts",))])
    assert result.relations_added == () and result.added
    assert lib.history(limit=1)[0].tool == "add_observations"  # nothing new: no write, no auto_relations entry
    [again] = lib.add_observations([ObservationBatch("api", ("Tokens come from src/auth/jwt.ts",))])
    assert again.skipped and again.relations_added == () and again.entities_suggested == ()
    assert sum(1 for r in relations(lib) if r == ("api", "references", "jwt")) == 1


def test_an_observation_stored_with_store_memory_relates_its_entity_by_its_type(lib):
    memory, _ = lib.store_memory("Restarting AuthService clears the stale keys", memory_type="problem-solution",
                                 entity="API")
    assert memory.links == ()  # an observation: the relation is its entity's
    assert ("api", "fixes", "AuthService") in relations(lib)


def test_create_entities_relates_the_observations_it_stores(lib):
    [web] = lib.create_entities([EntityInput("web", "project", ("Calls the AuthService for every page",))])
    assert [(r.from_entity, r.relation_type, r.to_entity) for r in web.relations_added] \
        == [("web", "references", "AuthService")]


def test_auto_relations_are_their_own_journal_entry_and_undo_removes_exactly_them(lib):
    lib.create_relations([RelationInput("jwt", "uses", "orama")])
    before = relations(lib)
    lib.add_observations([ObservationBatch("api", ("Depends on AuthService and src/auth/jwt.ts",))])
    entry, added = lib.history(limit=2)
    assert (entry.tool, entry.action, added.action) == ("auto_relations", "create_relations", "add_observations")
    assert entry.detail is not None and "undo" in entry.detail
    assert sorted(entry.detail["relations"]) == [["api", "references", "AuthService"], ["api", "references", "jwt"]]
    observations = {e.name: [o.content for o in e.observations] for e in lib.export_graph().entities}
    lib.undo(entry.id)
    assert relations(lib) == before  # the relations taken back, the others kept
    assert {e.name: [o.content for o in e.observations] for e in lib.export_graph().entities} == observations


def test_a_schema_that_does_not_know_the_type_gets_no_relation_and_a_cycle_is_left_out(tmp_path):
    rules = schema_from_config({"relation_types": ["uses", "causes"], "acyclic": ["*"]}, "schema")
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / "lib.db", "sqlite", rules)])
    service = MemoryService(registry)
    try:
        service.create_entities([EntityInput(n, "thing") for n in ("AuthService", "api", "TokenStore")])
        [result] = service.add_observations([ObservationBatch("api", ("Calls AuthService",))])
        assert result.added and result.relations_added == () and relations(service) == set()
        service.create_relations([RelationInput("AuthService", "uses", "api")])
        [result] = service.add_observations([ObservationBatch("api", (
            "Slow because AuthService and TokenStore lock the same rows",))])  # causes; AuthService would close a cycle
        assert [(r.from_entity, r.relation_type, r.to_entity) for r in result.relations_added] \
            == [("api", "causes", "TokenStore")]
    finally:
        registry.close()


def test_nothing_is_extracted_when_the_setting_is_off(tmp_path):
    registry = LibraryRegistry([LibrarySpec("default", tmp_path / "lib.db")])
    service = MemoryService(registry, extract=False)
    try:
        service.create_entities([EntityInput("AuthService", "service"), EntityInput("api", "project")])
        [result] = service.add_observations([ObservationBatch("api", ("Calls AuthService and TokenCache",))])
        assert (result.relations_added, result.entities_suggested) == ((), ())
        assert relations(service) == set() and service.history(limit=1)[0].action == "add_observations"
        assert service.store_memory("AuthService is slow")[0].links == ()
    finally:
        registry.close()


def test_the_tool_replies_say_what_was_related_and_offered_only_when_there_is_something(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "AuthService", "entityType": "service"},
                                                {"name": "api", "entityType": "project"}])
        structured, text = await c.ok("add_observations", observations=[
            {"entityName": "api", "contents": ["Calls AuthService; TokenCache is next"]}])
        [item] = structured["results"]
        assert item["relations_added"] == [{"from": "api", "to": "AuthService", "relationType": "references"}]
        assert item["entities_suggested"] == ["TokenCache"]
        assert text == structured["results"]  # the official text shape, with more keys
        structured, _ = await c.ok("add_observations", observations=[{"entityName": "api", "contents": ["Plain"]}])
        assert set(structured["results"][0]) == {"entityName", "addedObservations", "skippedObservations"}
        stored, _ = await c.ok("store_memory", content="The AuthService was restarted")
        assert stored["mentions"] == ["AuthService"]
        plain, _ = await c.ok("store_memory", content="Nothing in particular")
        assert "mentions" not in plain
        created, text = await c.ok("create_entities", entities=[
            {"name": "web", "entityType": "project", "observations": ["Signs in through AuthService"]}])
        assert created["entities"][0]["relations_added"] == [
            {"from": "web", "to": "AuthService", "relationType": "references"}]
        assert text == created["entities"]

    run(home, body)


def test_the_config_file_and_the_variable_turn_it_off(home, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[lifecycle]\nextract = false\n")

    async def off(c: Client):
        await c.ok("create_entities", entities=[{"name": "AuthService", "entityType": "service"},
                                                {"name": "api", "entityType": "project"}])
        structured, _ = await c.ok("add_observations", observations=[
            {"entityName": "api", "contents": ["Calls AuthService; TokenCache is next"]}])
        assert "relations_added" not in structured["results"][0]
        assert "entities_suggested" not in structured["results"][0]

    run(home, off, MEMLOCI_CONFIG=str(config))
    run(tmp_path / "other", off, MEMLOCI_EXTRACT="0")
    config.write_text("[lifecycle]\nextract = \"no\"\n")
    with pytest.raises(Exception, match=r"\[lifecycle\] extract: must be true or false"):
        run(tmp_path / "third", off, MEMLOCI_CONFIG=str(config))


def test_history_lists_the_entry_and_undo_takes_it_back_on_the_command_line(home, tmp_path):
    import subprocess
    import sys

    from conftest import server_env

    db = tmp_path / "cli.db"
    service = MemoryService(LibraryRegistry([LibrarySpec("default", db)]))
    service.create_entities([EntityInput("AuthService", "service"), EntityInput("api", "project")])
    service.add_observations([ObservationBatch("api", ("Calls AuthService",))])
    service.close()
    env = server_env(home, MEMLOCI_LIBRARIES=f"default:{db}")

    def memloci(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "memloci", *args], env=env, capture_output=True, text=True,
                              check=True).stdout

    [line] = [json.loads(x) for x in memloci("history", "--details", "-n", "1").splitlines()]
    assert (line["tool"], line["action"]) == ("auto_relations", "create_relations")
    assert "auto_relations" in memloci("history")
    memloci("undo", str(line["id"]))
    service = MemoryService(LibraryRegistry([LibrarySpec("default", db)]))
    try:
        assert relations(service) == set()
    finally:
        service.close()
