"""The library rules (rules/graph.py) with no engine under them: a small in-memory graph implements
the GraphTx protocol (a real implementation, with rollback), so what is tested here is the
rules alone: merge-on-create, unique names and observations, typed and acyclic relations,
missing endpoints, and nothing half-applied when a rule refuses."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from memloci.core.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import Entity, EntityInput, Observation, ObservationBatch, Relation, RelationInput, name_key
from memloci.core.schema import DEFAULT_SCHEMA, STRICT, LibrarySchema
from memloci.rules import graph as rules
from memloci.rules.graph import EntityHead, EntityRef, GraphTx, RelationsCreated


class MemoryGraph:
    """A whole graph in dicts; `transaction()` gives a GraphTx and undoes everything it did
    when the block raises, as an engine's rollback does."""

    def __init__(self) -> None:
        self.entities: dict[int, dict[str, Any]] = {}
        self.relations: dict[tuple[int, str, int], str] = {}  # -> created_at
        self.journal: list[tuple[str, str, list[str], dict | None]] = []
        self.changed: list[int] = []  # what entities_changed was told (an engine's index upkeep)
        self.undo: list[int] = []  # what before_change was told
        self.next_id = 1
        self.clock = 0

    @contextmanager
    def transaction(self):
        saved = copy.deepcopy(self.__dict__)
        self.clock += 1
        try:
            yield MemoryTx(self, f"2026-01-01T00:00:{self.clock:02d}Z")
        except BaseException:
            self.__dict__.update(saved)
            raise

    def snapshot(self) -> tuple:
        return copy.deepcopy((self.entities, self.relations, self.journal))

    def names(self) -> list[str]:
        return sorted(e["name"] for e in self.entities.values())


class MemoryTx:
    def __init__(self, graph: MemoryGraph, at: str) -> None:
        self.g = graph
        self.at = at

    def resolve(self, names: Iterable[str], *, aliases: bool = False) -> dict[str, EntityRef]:
        by_key = {e["key"]: (i, e["name"]) for i, e in self.g.entities.items()}
        found = {}
        for n in names:
            k = name_key(n)
            if k in by_key:
                found[k] = EntityRef(*by_key[k])
            elif aliases:
                holders = [i for i, e in self.g.entities.items() if k in {name_key(a) for a in e["aliases"]}]
                if len(holders) == 1:
                    found[k] = EntityRef(holders[0], self.g.entities[holders[0]]["name"])
        return found

    def head(self, entity_id: int) -> EntityHead:
        e = self.g.entities[entity_id]
        return EntityHead(entity_id, e["name"], e["type"], e["created_at"])

    def insert_entity(self, name: str, key: str, entity_type: str) -> int:
        i = self.g.next_id
        self.g.next_id += 1
        self.g.entities[i] = {"name": name, "key": key, "type": entity_type, "observations": [], "aliases": [],
                              "created_at": self.at, "updated_at": self.at}
        return i

    def insert_observation(self, entity_id: int, content: str) -> bool:
        held = self.g.entities[entity_id]["observations"]
        if any(c.strip() == content.strip() for c, _ in held):  # this engine's content identity
            return False
        held.append((content, self.at))
        return True

    def delete_observation(self, entity_id: int, content: str) -> str | None:
        held = self.g.entities[entity_id]["observations"]
        for item in held:
            if item[0].strip() == content.strip():
                held.remove(item)
                return item[0]
        return None

    def touch(self, entity_ids: Sequence[int]) -> None:
        for i in entity_ids:
            self.g.entities[i]["updated_at"] = self.at

    def reachable(self, start: int, goal: int, types: tuple[str, ...]) -> list[str]:
        ids = rules.walk_path(start, goal, lambda frontier: [
            (f, to) for (f, t, to) in sorted(self.g.relations) if f in frontier and (not types or t in types)])
        return [self.g.entities[i]["name"] for i in ids]

    def insert_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        if (from_id, relation_type, to_id) in self.g.relations:
            return False
        self.g.relations[(from_id, relation_type, to_id)] = self.at
        return True

    def delete_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        return self.g.relations.pop((from_id, relation_type, to_id), None) is not None

    def load_entities(self, ids: Sequence[int]) -> dict[int, Entity]:
        return {i: Entity(e["name"], e["type"], tuple(Observation(c, at) for c, at in e["observations"]),
                          created_at=e["created_at"], updated_at=e["updated_at"])
                for i in ids if (e := self.g.entities.get(i))}

    def relations_touching(self, ids: Sequence[int]) -> list[Relation]:
        name = {i: e["name"] for i, e in self.g.entities.items()}
        return [Relation(name[f], t, name[b], at) for (f, t, b), at in self.g.relations.items()
                if f in ids or b in ids]

    def delete_entities(self, ids: Sequence[int]) -> None:
        for i in ids:
            del self.g.entities[i]
        self.g.relations = {k: v for k, v in self.g.relations.items() if k[0] not in ids and k[2] not in ids}

    def before_change(self, ids: Sequence[int]) -> None:
        self.g.undo.extend(ids)

    def entities_changed(self, ids: Sequence[int]) -> None:
        self.g.changed.extend(ids)

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict | None) -> None:
        self.g.journal.append((tool, action, list(entities), detail))


def run(graph: MemoryGraph, rule, schema: LibrarySchema, *args):
    with graph.transaction() as tx:
        return rule(tx, schema, *args, "test")


def test_the_in_memory_graph_is_a_graph_tx():
    tx: GraphTx = MemoryTx(MemoryGraph(), "now")  # type-checked against the protocol
    assert tx.resolve(["x"]) == {}


def test_create_merges_into_the_stored_name_and_type():
    g = MemoryGraph()
    (first,) = run(g, rules.create_entities, DEFAULT_SCHEMA, [EntityInput("Alice", "person", ("likes tea",))])
    assert (first.status, first.name, first.observations, first.created_at) == ("created", "Alice", ("likes tea",),
                                                                                "2026-01-01T00:00:01Z")
    (merged,) = run(g, rules.create_entities, DEFAULT_SCHEMA,
                    [EntityInput("alice", "Human", ("likes tea ", "runs"))])
    assert merged.status == "merged"
    assert (merged.name, merged.entity_type, merged.ignored_type) == ("Alice", "person", "Human")
    assert merged.observations == ("runs",) and merged.skipped_observations == ("likes tea ",)
    assert merged.created_at == "2026-01-01T00:00:01Z"  # the entity's own date, not this call's
    assert g.entities[1]["updated_at"] == "2026-01-01T00:00:02Z"
    assert g.names() == ["Alice"]
    assert g.journal[-1] == ("test", "create_entities", ["Alice"], {"created": [], "merged": {"Alice": ["runs"]}})
    # a merge that adds nothing changes nothing and journals nothing
    before = g.snapshot()
    (same,) = run(g, rules.create_entities, DEFAULT_SCHEMA, [EntityInput("ALICE", "person", ("runs",))])
    assert same.observations == () and same.ignored_type is None
    assert g.snapshot() == before


def test_the_same_name_twice_in_one_call_merges_into_the_first():
    g = MemoryGraph()
    results = run(g, rules.create_entities, DEFAULT_SCHEMA,
                  [EntityInput("Bob", "person", ("a",)), EntityInput("BOB", "robot", ("b", "a"))])
    assert [(r.name, r.entity_type, r.observations, r.skipped_observations) for r in results] == [
        ("Bob", "person", ("a", "b"), ("a",))]
    assert g.changed == [1]


def test_unique_names_refuse_and_create_nothing():
    g = MemoryGraph()
    run(g, rules.create_entities, STRICT, [EntityInput("user-john", "person")])
    before = g.snapshot()
    with pytest.raises(AlreadyExistsError) as caught:
        run(g, rules.create_entities, STRICT, [EntityInput("acme", "organization", ("x",)),
                                               EntityInput("User-John", "person")])
    assert caught.value.message == ("entities.name: 'user-john' already exists; schema 'strict' keeps names unique "
                                    "(nothing was created)")
    assert caught.value.details == {"existing": ["user-john"]}
    assert g.snapshot() == before  # acme, written before the refusal, is gone with the rollback
    with pytest.raises(AlreadyExistsError, match="'jane' already exists"):
        run(g, rules.create_entities, STRICT, [EntityInput("jane", "person"), EntityInput("JANE", "person")])
    assert g.snapshot() == before


def test_unique_observations_refuse_the_whole_call():
    g = MemoryGraph()
    run(g, rules.create_entities, STRICT, [EntityInput("user-john", "person", ("prefers tea",)),
                                           EntityInput("acme", "organization")])
    before = g.snapshot()
    with pytest.raises(ValidationError) as caught:
        run(g, rules.add_observations, STRICT, [ObservationBatch("acme", ("new fact",)),
                                                ObservationBatch("user-john", ("prefers tea",))])
    assert caught.value.message == ("observations: 'prefers tea' is already an observation of 'user-john'; schema "
                                    "'strict' keeps observations unique per entity (nothing was added)")
    assert g.snapshot() == before  # acme's new fact went with the rollback
    unique_obs = LibrarySchema(name="facts", unique_observations=True)  # merges, but never repeats a fact
    with pytest.raises(ValidationError, match="already an observation of 'user-john'; schema 'facts'"):
        run(g, rules.create_entities, unique_obs, [EntityInput("User-John", "person", ("new", "prefers tea"))])
    assert g.snapshot() == before
    with pytest.raises(ValidationError, match=r"^observations\[0\]\.contents: the same text twice"):
        rules.check_distinct(STRICT, ("x", "x"), "observations[0].contents")
    rules.check_distinct(DEFAULT_SCHEMA, ("x", "x"), "observations[0].contents")  # the default allows it
    # the default schema skips a repeat quietly
    (added,) = run(g, rules.add_observations, DEFAULT_SCHEMA, [ObservationBatch("USER-JOHN", ("prefers tea", "new"))])
    assert (added.entity_name, added.added, added.skipped) == ("user-john", ("new",), ("prefers tea",))


def test_add_observations_to_a_missing_entity_adds_nothing():
    g = MemoryGraph()
    run(g, rules.create_entities, DEFAULT_SCHEMA, [EntityInput("a", "t")])
    before = g.snapshot()
    with pytest.raises(NotFoundError) as caught:
        run(g, rules.add_observations, DEFAULT_SCHEMA,
            [ObservationBatch("a", ("x",)), ObservationBatch("ghost", ("y",)), ObservationBatch("ghost", ("z",))])
    assert caught.value.message == "entities not found: ghost" and caught.value.details == {"missing": ["ghost"]}
    assert g.snapshot() == before


def _graph(schema: LibrarySchema, names: Sequence[str], edges: Sequence[tuple[str, str, str]]) -> MemoryGraph:
    g = MemoryGraph()
    run(g, rules.create_entities, schema, [EntityInput(n, "tool") for n in names])
    run(g, rules.create_relations, schema, [RelationInput(*e) for e in edges])
    return g


def test_relations_need_both_ends_and_report_what_exists():
    g = _graph(DEFAULT_SCHEMA, ["A", "B"], [("A", "uses", "B")])
    done = run(g, rules.create_relations, DEFAULT_SCHEMA,
               [RelationInput("a", "uses", "b"), RelationInput("B", "uses", "A"), RelationInput("B", "uses", "a")])
    assert isinstance(done, RelationsCreated)
    created, existing = done  # still unpacks as the tuple it was
    assert created == [Relation("B", "uses", "A", "2026-01-01T00:00:03Z")]
    assert existing == [Relation("A", "uses", "B")]
    before = g.snapshot()
    with pytest.raises(InvalidRelationError) as caught:
        run(g, rules.create_relations, DEFAULT_SCHEMA,
            [RelationInput("A", "knows", "B"), RelationInput("A", "knows", "Ghost"), RelationInput("Nobody", "x", "B")])
    assert caught.value.message == "relations[1].to: 'Ghost' does not exist; relations[2].from: 'Nobody' does not exist"
    assert caught.value.details["missing"] == ["Ghost", "Nobody"]
    assert g.snapshot() == before  # A -knows-> B, valid on its own, was not made


def test_an_alias_names_a_relation_end():
    g = _graph(DEFAULT_SCHEMA, ["Anna Smith", "Acme"], [])
    g.entities[1]["aliases"] = ["Anna"]
    created, _ = run(g, rules.create_relations, DEFAULT_SCHEMA, [RelationInput("anna", "works_at", "Acme")])
    assert created[0].from_entity == "Anna Smith"
    assert run(g, rules.delete_relations, DEFAULT_SCHEMA, [RelationInput("Anna", "works_at", "acme")]) == [
        Relation("Anna Smith", "works_at", "Acme")]
    assert g.relations == {}


def test_typed_relations_are_the_schemas():
    with pytest.raises(InvalidRelationError, match=r"relations\[0\]\.relationType: 'likes' is not a relation type"):
        STRICT.check_relation(RelationInput("a", "likes", "b"), "relations[0]")
    with pytest.raises(InvalidRelationError, match="cannot relate to itself"):
        STRICT.check_relation(RelationInput("a", "uses", "A"), "relations[0]")


@pytest.mark.parametrize("schema", [STRICT, LibrarySchema(name="deps", acyclic=("depends-on",))])
def test_a_relation_that_closes_a_cycle_is_refused_with_its_path(schema):
    g = _graph(schema, ["app", "web", "http", "tls"],
               [("app", "depends-on", "web"), ("web", "depends-on", "http"), ("http", "depends-on", "tls")])
    before = g.snapshot()
    with pytest.raises(InvalidRelationError) as caught:
        run(g, rules.create_relations, schema, [RelationInput("app", "uses", "tls"),
                                                RelationInput("tls", "depends-on", "app")])
    # strict keeps all types together acyclic: the new `uses` is the shortest way back; deps
    # looks at depends-on relations only
    scope, path = ("relations", "tls -> app -> tls") if schema is STRICT else \
        ("depends-on relations", "tls -> app -> web -> http -> tls")
    assert caught.value.message == (f"relations[1]: tls -depends-on-> app would close a cycle "
                                    f"({path}); schema '{schema.name}' keeps {scope} acyclic (nothing was created)")
    assert caught.value.hint == "Drop or reverse one relation of the cycle."
    assert g.snapshot() == before  # the first relation, fine alone, went with the rollback
    with pytest.raises(InvalidRelationError, match=r"\(tls -> tls\)"):
        run(g, rules.create_relations, schema, [RelationInput("tls", "depends-on", "tls")])


def test_acyclic_by_type_ignores_other_types_and_the_default_allows_cycles():
    deps = LibrarySchema(name="deps", acyclic=("depends-on",))
    g = _graph(deps, ["a", "b"], [("a", "depends-on", "b")])
    created, _ = run(g, rules.create_relations, deps, [RelationInput("b", "knows", "a")])
    assert len(created) == 1
    g = _graph(DEFAULT_SCHEMA, ["a", "b"], [("a", "depends-on", "b")])
    created, _ = run(g, rules.create_relations, DEFAULT_SCHEMA, [RelationInput("b", "depends-on", "a")])
    assert len(created) == 1


def test_deletes_ignore_what_is_not_there_and_journal_what_went():
    g = _graph(DEFAULT_SCHEMA, ["a", "b", "c"], [("a", "r", "b"), ("b", "r", "c")])
    run(g, rules.add_observations, DEFAULT_SCHEMA, [ObservationBatch("b", ("x", "y"))])
    removed = run(g, rules.delete_observations, DEFAULT_SCHEMA,
                  [ObservationBatch("B", ("x", "nope")), ObservationBatch("ghost", ("x",))])
    assert [(r.entity_name, r.removed) for r in removed] == [("b", ("x",))]
    assert run(g, rules.delete_relations, DEFAULT_SCHEMA, [RelationInput("a", "r", "c"), RelationInput("a", "r", "z")]) == []
    assert run(g, rules.delete_entities, DEFAULT_SCHEMA, ["ghost"]) == []
    journal = len(g.journal)
    assert run(g, rules.delete_entities, DEFAULT_SCHEMA, ["B", "ghost"]) == ["b"]
    assert g.names() == ["a", "c"] and g.relations == {}
    tool, action, names, detail = g.journal[journal]
    assert (action, names) == ("delete_entities", ["b"])
    assert detail == {"removed": [{"name": "b", "entityType": "tool", "observations": ["y"]}],
                      "relations": [["a", "r", "b"], ["b", "r", "c"]]}
    assert 2 in g.undo  # the engine was asked to keep b as it was, for undo


def test_find_cycles_over_a_whole_graph():
    rels = [Relation("a", "depends-on", "b"), Relation("b", "depends-on", "a"), Relation("c", "knows", "d"),
            Relation("d", "knows", "c")]
    assert rules.find_cycles(rels, DEFAULT_SCHEMA) == []
    assert rules.find_cycles(rels, LibrarySchema(name="deps", acyclic=("depends-on",))) == [["a", "b", "a"]]
    assert sorted(map(tuple, rules.find_cycles(rels, STRICT))) == [("a", "b", "a"), ("c", "d", "c")]


def _plain(result: Any) -> Any:
    """A rule's answer without its timestamps (two engines write at different moments)."""
    if isinstance(result, RelationsCreated):
        return [_plain(result.created), _plain(result.existing)]
    if isinstance(result, list):
        return [_plain(r) for r in result]
    if hasattr(result, "created_at"):
        return dataclasses.replace(result, created_at="")
    return result


def _store(engine: str, tmp_path, request):
    if engine == "sqlite":
        from memloci.store.sqlite.engine import SQLiteStore
        return SQLiteStore(tmp_path / "rules.db", "rules")
    if engine == "markdown":
        from memloci.store.markdown.engine import MarkdownStore
        return MarkdownStore(tmp_path / "notes", "rules")
    from memloci.store.postgres.engine import PostgresStore
    library = request.getfixturevalue("pg_library")  # the session's real PostgreSQL
    return PostgresStore(library.url, library.name)


@pytest.mark.parametrize("engine", ["sqlite", "markdown", "postgres"])
def test_every_engine_answers_as_the_in_memory_graph(engine, tmp_path, request):
    """The same calls through the rules over two GraphTx, the in-memory one and an engine's,
    answer alike, refusals included (so the protocol says enough for an engine to get it right)."""
    deps = LibrarySchema(name="deps", unique_observations=True, acyclic=("depends-on",))
    store = _store(engine, tmp_path, request)
    store.schema = deps
    store.open()
    g = MemoryGraph()
    calls = [
        ("create_entities", [EntityInput("App", "service", ("serves http",)), EntityInput("web", "lib"),
                             EntityInput("http", "lib"), EntityInput("app", "x", ("runs",))]),
        ("create_relations", [RelationInput("app", "depends-on", "web"), RelationInput("web", "depends-on", "HTTP"),
                              RelationInput("app", "depends-on", "web"), RelationInput("http", "knows", "app")]),
        ("create_relations", [RelationInput("http", "depends-on", "app")]),
        ("create_relations", [RelationInput("http", "depends-on", "ghost"), RelationInput("x", "r", "app")]),
        ("add_observations", [ObservationBatch("web", ("fast",)), ObservationBatch("app", ("runs",))]),
        ("add_observations", [ObservationBatch("web", ("fast",))]),
        ("add_observations", [ObservationBatch("nobody", ("x",))]),
        ("delete_observations", [ObservationBatch("web", ("fast", "slow")), ObservationBatch("ghost", ("x",))]),
        ("delete_relations", [RelationInput("http", "knows", "App"), RelationInput("http", "knows", "ghost")]),
        ("delete_entities", ["web", "ghost"]),
        ("create_relations", [RelationInput("http", "depends-on", "app")]),
    ]
    for name, arg in calls:
        answers = []
        for engine in ("memory", "sqlite"):
            try:
                if engine == "memory":
                    answers.append(_plain(run(g, getattr(rules, name), deps, arg)))
                else:
                    answers.append(_plain(getattr(store, name)(arg, origin="test")))
            except Exception as exc:  # a refusal must be the same refusal
                answers.append((type(exc).__name__, str(exc)))
        assert answers[0] == answers[1], name
    graph = store.export_graph()
    assert sorted((e.name, e.entity_type, tuple(o.content for o in e.observations)) for e in graph.entities) == [
        ("App", "service", ("serves http", "runs")), ("http", "lib", ())]
    assert [(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations] == [("http", "depends-on", "App")]
    store.close()


def test_walk_path_is_breadth_first_and_asks_once_per_step():
    edges = {(1, 2), (2, 3), (3, 4), (1, 5), (5, 4), (4, 6)}
    asked: list[list[int]] = []

    def neighbours(frontier):
        asked.append(list(frontier))
        return sorted(e for e in edges if e[0] in frontier)

    assert rules.walk_path(1, 6, neighbours) == [1, 5, 4, 6]  # the shortest, not the first found
    assert asked == [[1], [2, 5], [3, 4]]  # one call per step, no node asked twice
    assert rules.walk_path(6, 1, neighbours) == []
    assert rules.walk_path(3, 3, neighbours) == [3]
    assert rules.walk_path(1, 1, lambda f: [(1, 2), (2, 1)]) == [1]
