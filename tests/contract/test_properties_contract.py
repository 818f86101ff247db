"""Property tests on every engine (hypothesis): random sequences of graph calls.

- Default schema: each call is also applied to a small model of the official semantics (a
  dict), and after every call the library holds exactly what the model holds: merge-on-create,
  observations unique under trimmed single-spaced text, endpoints matched in any case,
  relation types case-sensitive, deletes that cascade, refused batches that change nothing.
- Strict schema: no sequence of calls leaves a bad name or type, an over-long observation, a
  dangling or self relation, or a cycle (tests/test_schemas.py has the SQLite original).

Examples per engine are kept modest (a Markdown write renames files; a postgres one is a round trip)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memloci.core.errors import InvalidRelationError, MemlociError, NotFoundError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput, name_key
from memloci.core.schema import STRICT

EXAMPLES = {"sqlite": 60, "markdown": 25, "postgres": 25}
STRICT_EXAMPLES = {"sqlite": 60, "markdown": 20, "postgres": 20}

# Few names in several cases, so merges, missing endpoints and cascades are one step away.
NAME = st.sampled_from(["a", "A", "b", "B", "c", "Ünï", "ünï"])
TYPE = st.sampled_from(["t", "u"])
REL = st.sampled_from(["r", "R", "s"])
OBS = st.sampled_from(["fact one", " fact one ", "fact  one", "Fact one", "two", "three", "東京"])


def _norm(text: str) -> str:
    return " ".join(text.split())


class Model:
    """The official semantics, as plain data: key -> [name, type, observations]; relations by keys."""

    def __init__(self):
        self.entities: dict[str, list] = {}
        self.relations: set[tuple[str, str, str]] = set()

    def _add(self, key: str, texts) -> None:
        have = self.entities[key][2]
        for text in texts:
            if _norm(text) not in {_norm(o) for o in have}:
                have.append(text.strip())

    def create(self, items) -> None:
        for name, entity_type, texts in items:
            if name_key(name) not in self.entities:
                self.entities[name_key(name)] = [name, entity_type, []]
            self._add(name_key(name), texts)

    def relate(self, items) -> None:
        missing = [n for f, _, t in items for n in (f, t) if name_key(n) not in self.entities]
        if missing:
            raise InvalidRelationError("missing")
        self.relations |= {(name_key(f), r, name_key(t)) for f, r, t in items}

    def observe(self, items) -> None:
        if any(name_key(n) not in self.entities for n, _ in items):
            raise NotFoundError("missing")
        for name, texts in items:
            self._add(name_key(name), texts)

    def delete(self, names) -> None:
        keys = {name_key(n) for n in names}
        for key in keys:
            self.entities.pop(key, None)
        self.relations = {r for r in self.relations if r[0] not in keys and r[2] not in keys}

    def forget(self, items) -> None:
        for name, texts in items:
            entity = self.entities.get(name_key(name))
            if entity is not None:
                gone = {_norm(t) for t in texts}
                entity[2] = [o for o in entity[2] if _norm(o) not in gone]

    def unrelate(self, items) -> None:
        self.relations -= {(name_key(f), r, name_key(t)) for f, r, t in items}


CALLS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.lists(st.tuples(NAME, TYPE, st.lists(OBS, max_size=3)), min_size=1, max_size=3)),
    st.tuples(st.just("relate"), st.lists(st.tuples(NAME, REL, NAME), min_size=1, max_size=3)),
    st.tuples(st.just("relate"), st.lists(st.tuples(NAME, REL, NAME), min_size=1, max_size=3)),
    st.tuples(st.just("observe"), st.lists(st.tuples(NAME, st.lists(OBS, min_size=1, max_size=3)), min_size=1, max_size=2)),
    st.tuples(st.just("delete"), st.lists(NAME, min_size=1, max_size=2)),
    st.tuples(st.just("forget"), st.lists(st.tuples(NAME, st.lists(OBS, min_size=1, max_size=2)), min_size=1, max_size=2)),
    st.tuples(st.just("unrelate"), st.lists(st.tuples(NAME, REL, NAME), min_size=1, max_size=2)),
), max_size=15)


def _apply(service, kind: str, items) -> None:
    if kind == "create":
        service.create_entities([EntityInput(n, t, tuple(o)) for n, t, o in items])
    elif kind == "relate":
        service.create_relations([RelationInput(f, r, t) for f, r, t in items])
    elif kind == "observe":
        service.add_observations([ObservationBatch(n, tuple(o)) for n, o in items])
    elif kind == "delete":
        service.delete_entities(list(items))
    elif kind == "forget":
        service.delete_observations([ObservationBatch(n, tuple(o)) for n, o in items])
    else:
        service.delete_relations([RelationInput(f, r, t) for f, r, t in items])


def _library_state(service):
    graph = service.export_graph()
    entities = {name_key(e.name): [e.name, e.entity_type, [o.content for o in e.observations]] for e in graph.entities}
    relations = {(name_key(r.from_entity), r.relation_type, name_key(r.to_entity)) for r in graph.relations}
    return entities, relations


def test_random_graph_calls_match_the_model(engine):
    service = engine.service

    @settings(max_examples=EXAMPLES[engine.name], deadline=None, database=None)
    @given(calls=CALLS)
    def run(calls):
        service.delete_entities([e.name for e in service.export_graph().entities] or ["none"])
        model = Model()
        for i, (kind, items) in enumerate(calls):
            expected_error = None
            try:
                getattr(model, kind)(items)
            except MemlociError as exc:
                expected_error = type(exc)
            try:
                _apply(service, kind, items)
                got_error = None
            except MemlociError as exc:
                got_error = type(exc)
            assert got_error == expected_error, f"call {i} {kind} {items}: {got_error} instead of {expected_error}"
            entities, relations = _library_state(service)
            assert entities == model.entities, f"after call {i} {kind} {items}"
            assert relations == model.relations, f"after call {i} {kind} {items}"
            assert service.read_graph(limit=1).total_entity_count == len(model.entities)

    run()


# -- strict: no sequence of calls breaks the invariants ------------------------------------

S_NAMES = st.sampled_from(["Bad", "9x", "a", "b", "c-1"])  # few names: cycles are one or two steps away
S_TYPES = st.sampled_from(["knows", "uses", "depends-on", "likes"])
S_PAIRS = st.sampled_from([("a", "b"), ("b", "a"), ("b", "c-1"), ("c-1", "a"), ("a", "a"), ("a", "Bad"), ("c-1", "b")])
S_RELATE = st.tuples(st.just("relate"), S_PAIRS, S_TYPES).map(lambda t: (t[0], t[1][0], t[2], t[1][1]))
S_STEPS = st.lists(st.one_of(
    S_RELATE, S_RELATE, S_RELATE,  # weighted: relations are where cycles come from
    st.tuples(st.just("create"), S_NAMES, st.sampled_from(["person", "tool", "animal"])),
    st.tuples(st.just("observe"), S_NAMES, st.sampled_from(["", "fine", "x" * 501, "fine"])),
    st.tuples(st.just("delete"), S_NAMES),
    st.tuples(st.just("unrelate"), S_NAMES, S_TYPES, S_NAMES),
), max_size=30)


def has_cycle(edges: list[tuple[str, str]]) -> bool:
    """Independent of memloci's own check: repeatedly drop nodes with no incoming edge (Kahn)."""
    nodes = {n for e in edges for n in e}
    incoming = {n: 0 for n in nodes}
    for _, b in edges:
        incoming[b] += 1
    ready = [n for n in nodes if incoming[n] == 0]
    seen = 0
    while ready:
        n = ready.pop()
        seen += 1
        for a, b in edges:
            if a == n:
                incoming[b] -= 1
                if incoming[b] == 0:
                    ready.append(b)
    return seen < len(nodes)


def test_no_sequence_of_strict_calls_breaks_the_invariants(engine):
    service = engine.library(STRICT)

    @settings(max_examples=STRICT_EXAMPLES[engine.name], deadline=None, database=None)
    @given(steps=S_STEPS)
    def run(steps):
        service.delete_entities([e.name for e in service.export_graph().entities] or ["none"])
        service.create_entities([EntityInput(n, "person") for n in ("a", "b", "c-1")])  # relations have ends to meet
        for step in steps:
            before = service.export_graph()
            try:
                if step[0] == "create":
                    service.create_entities([EntityInput(step[1], step[2])])
                elif step[0] == "relate":
                    service.create_relations([RelationInput(step[1], step[2], step[3])])
                elif step[0] == "observe":
                    service.add_observations([ObservationBatch(step[1], (step[2],))])
                elif step[0] == "delete":
                    service.delete_entities([step[1]])
                else:
                    service.delete_relations([RelationInput(step[1], step[2], step[3])])
            except MemlociError:
                assert service.export_graph() == before, f"{step} was refused but changed the graph"
            graph = service.export_graph()
            names = {e.name for e in graph.entities}
            assert all(re.fullmatch(STRICT.name_pattern, n) for n in names)
            assert all(e.entity_type in STRICT.entity_types for e in graph.entities)
            assert all(0 < len(o.content) <= 500 for e in graph.entities for o in e.observations)
            assert all(r.from_entity in names and r.to_entity in names and r.relation_type in STRICT.relation_types
                       and r.from_entity != r.to_entity for r in graph.relations)
            assert not has_cycle([(r.from_entity, r.to_entity) for r in graph.relations])

    run()
