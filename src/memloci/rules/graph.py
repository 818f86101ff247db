"""The library rules, written once for every engine (DESIGN.md §2).

Merge-on-create, unique names, unique observations, typed relations (checked on the input by
`LibrarySchema`), acyclic relations and missing endpoints are decided here, over a small
transactional `GraphTx` that each engine gives the rules for one write transaction. An engine's
graph write is then "open a write transaction, build its GraphTx, call the rule"; whatever a rule
raises rolls that transaction back whole, so nothing is half-applied.

The rules never see SQL, files or connections: how a name is looked up, how an observation's
identity (its content hash) is kept, and what upkeep follows a change (search index, `#tags`,
pending links, a Markdown file) are the engine's business behind the GraphTx.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memloci.core.errors import AlreadyExistsError, InvalidRelationError, MemlociError, NotFoundError, ValidationError
from memloci.core.model import (
    AddedObservations,
    CreatedEntity,
    Entity,
    EntityInput,
    Memory,
    ObservationBatch,
    Relation,
    RelationInput,
    RemovedObservations,
    name_key,
    normalize_content,
)
from memloci.core.schema import LibrarySchema

# The journal origin of the relations extraction makes on its own (service/extraction.py). Its
# create_relations keeps the rows of the relations' sources first, so `memloci undo` of that
# entry takes back exactly those relations; a create_relations a caller asked for keeps nothing.
AUTO_RELATIONS = "auto_relations"


@dataclass(frozen=True, slots=True)
class EntityRef:
    """An entity a name resolved to."""

    id: int
    name: str  # the stored name (the caller may have spelled it differently, or used an alias)


@dataclass(frozen=True, slots=True)
class EntityHead:
    id: int
    name: str
    entity_type: str
    created_at: str


@dataclass(frozen=True, slots=True)
class RelationsCreated:
    """What create_relations returns: the relations made, and those that were there already."""

    created: list[Relation]
    existing: list[Relation]

    def __iter__(self) -> Iterator[list[Relation]]:  # `created, existing = store.create_relations(...)`
        yield self.created
        yield self.existing


class GraphTx(Protocol):
    """One open write transaction of an engine, as the rules use it."""

    at: str  # the transaction's timestamp (ISO): created_at / updated_at of what it writes

    def resolve(self, names: Iterable[str], *, aliases: bool = False) -> dict[str, EntityRef]:
        """name_key(name) -> the entity of that name; with `aliases`, a name no entity has also
        reaches the one entity listing it as an alias. Names that reach nothing are left out."""
        ...

    def head(self, entity_id: int) -> EntityHead: ...

    def insert_entity(self, name: str, key: str, entity_type: str) -> int:
        """A new entity (no observations yet), created_at = updated_at = at; its id."""
        ...

    def insert_observation(self, entity_id: int, content: str) -> bool:
        """False: the entity holds this observation already (same content hash); nothing written."""
        ...

    def delete_observation(self, entity_id: int, content: str) -> str | None:
        """The stored content removed (matched by content hash), or None when there is none."""
        ...

    def touch(self, entity_ids: Sequence[int]) -> None:
        """updated_at = at."""
        ...

    def reachable(self, start: int, goal: int, types: tuple[str, ...]) -> list[str]:
        """Names on a path start..goal along relations of `types` (() = all), [] if none;
        [name of start] when start is goal."""
        ...

    def insert_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        """False: the relation is there already."""
        ...

    def delete_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        """False: there was no such relation. An engine may refuse (raise) when a person's text
        holds the relation in a way it cannot remove (a front-matter value)."""
        ...

    def load_entities(self, ids: Sequence[int]) -> dict[int, Entity]: ...

    def relations_touching(self, ids: Sequence[int]) -> list[Relation]: ...

    def delete_entities(self, ids: Sequence[int]) -> None:
        """With their observations and relations."""
        ...

    def before_change(self, ids: Sequence[int]) -> None:
        """Undo records of these entities as they are now (the engine's business; may do nothing)."""
        ...

    def entities_changed(self, ids: Sequence[int]) -> None:
        """Upkeep after these entities changed: search index, tags from `#tags`, pending links."""
        ...

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any] | None) -> None: ...


# -- the rules ---------------------------------------------------------------------------

def named(names: Sequence[str], reached: dict[str, tuple[str, ...]], fields: Sequence[str]) -> list[str]:
    """Each name as the stored name of the entity it names, for every tool that takes an entity
    name: an entity's own name (any case) wins; else an alias reaches the one entity listing
    it; an alias two or more entities list is refused, naming them all. A name that reaches
    nothing is kept as given (the tool says what that means: not found, ignored, a new entity).
    `reached`: the store's entity_names of `names`; `fields[i]`: the field names[i] came in."""
    out = []
    for name, field in zip(names, fields, strict=True):
        found = reached.get(name_key(name), ())
        if len(found) > 1:
            listed = ", ".join(f"'{n}'" for n in found)
            raise ValidationError(f"{field}: '{name}' is an alias of {len(found)} entities ({listed})",
                                  hint="Name the entity by its own name instead; nothing was changed.",
                                  details={"alias": name, "candidates": list(found)})
        out.append(found[0] if found else name)
    return out


def grouped(entities: Sequence[EntityInput]) -> dict[str, tuple[EntityInput, list[str]]]:
    """Entities by name key; the same name twice in one call merges into its first occurrence
    (whose name and type win)."""
    groups: dict[str, tuple[EntityInput, list[str]]] = {}
    for e in entities:
        key = name_key(e.name)
        if key in groups:
            groups[key][1].extend(e.observations)
        else:
            groups[key] = (e, list(e.observations))
    return groups


def check_unique_names(schema: LibrarySchema, entities: Sequence[EntityInput],
                       groups: dict[str, tuple[EntityInput, list[str]]], existing: dict[str, EntityRef]) -> None:
    """Under `unique_names`, a name that exists (or comes twice in the call) is an error, not a merge."""
    if not schema.unique_names or not (existing or len(groups) < len(entities)):
        return
    taken = [r.name for r in existing.values()] or [
        e.name for e in entities if sum(name_key(x.name) == name_key(e.name) for x in entities) > 1]
    raise AlreadyExistsError(f"entities.name: '{taken[0]}' already exists; schema '{schema.name}' "
                             "keeps names unique (nothing was created)",
                             hint="Add observations to it instead, or pick another name.",
                             details={"existing": taken})


def repeated_observation(schema: LibrarySchema, content: str, entity_name: str,
                         field: str = "observations") -> ValidationError:
    """The error of an observation the entity holds already, under `unique_observations`."""
    return ValidationError(f"{field}: '{content[:60]}' is already an observation of '{entity_name}'; schema "
                           f"'{schema.name}' keeps observations unique per entity (nothing was added)")


def check_distinct(schema: LibrarySchema, contents: Sequence[str], field: str) -> None:
    """Under `unique_observations`, the same text twice in one batch is refused before any write."""
    if schema.unique_observations and len(set(contents)) < len(contents):
        raise ValidationError(f"{field}: the same text twice; schema '{schema.name}' keeps observations "
                              "unique per entity")


def insert_observations(tx: GraphTx, schema: LibrarySchema, entity_id: int, contents: Iterable[str]
                        ) -> tuple[list[str], list[str]]:
    """(added, skipped: already held). Under `unique_observations` a skipped one is an error."""
    added: list[str] = []
    skipped: list[str] = []
    for content in contents:
        (added if tx.insert_observation(entity_id, content) else skipped).append(content)
    if skipped and schema.unique_observations:
        raise repeated_observation(schema, skipped[0], tx.head(entity_id).name)
    return added, skipped


def create_or_merge(tx: GraphTx, schema: LibrarySchema, groups: dict[str, tuple[EntityInput, list[str]]],
                    existing: dict[str, EntityRef]) -> tuple[list[CreatedEntity], list[int]]:
    """Create each entity of `groups`, or add its observations to the one of that name (its
    stored name and type kept); (what create_entities reports, ids of the entities that changed)."""
    results: list[CreatedEntity] = []
    touched: list[int] = []
    for key, (e, observations) in groups.items():
        if key in existing:
            head = tx.head(existing[key].id)
            added, skipped = insert_observations(tx, schema, head.id, observations)
            if added:
                tx.touch([head.id])
                touched.append(head.id)
            ignored = e.entity_type if e.entity_type.casefold() != head.entity_type.casefold() else None
            results.append(CreatedEntity(head.name, head.entity_type, "merged", tuple(added), tuple(skipped),
                                         head.created_at, ignored))
        else:
            entity_id = tx.insert_entity(e.name, key, e.entity_type)
            added, skipped = insert_observations(tx, schema, entity_id, observations)
            results.append(CreatedEntity(e.name, e.entity_type, "created", tuple(added), tuple(skipped), tx.at))
            touched.append(entity_id)
    return results, touched


def journal_created(tx: GraphTx, origin: str, results: Sequence[CreatedEntity]) -> None:
    tx.journal(origin, "create_entities", [r.name for r in results if r.status == "created" or r.observations],
               {"created": [r.name for r in results if r.status == "created"],
                "merged": {r.name: list(r.observations) for r in results if r.status == "merged" and r.observations}})


def journal_related(tx: GraphTx, origin: str, created: Sequence[Relation]) -> None:
    tx.journal(origin, "create_relations", list(dict.fromkeys(n for r in created for n in (r.from_entity, r.to_entity))),
               {"relations": [[r.from_entity, r.relation_type, r.to_entity] for r in created]})


def create_entities(tx: GraphTx, schema: LibrarySchema, entities: Sequence[EntityInput], origin: str
                    ) -> list[CreatedEntity]:
    groups = grouped(entities)
    existing = tx.resolve([e.name for e, _ in groups.values()])
    check_unique_names(schema, entities, groups, existing)
    results, touched = create_or_merge(tx, schema, groups, existing)
    if touched:
        tx.entities_changed(touched)
        journal_created(tx, origin, results)
    return results


def cycle_error(field: str, from_name: str, relation_type: str, to_name: str, path: Sequence[str],
                schema: LibrarySchema, types: tuple[str, ...]) -> InvalidRelationError:
    """A new relation from_name -relation_type-> to_name would close a cycle: `path` runs from
    to_name back to from_name."""
    return InvalidRelationError(
        f"{field}: {from_name} -{relation_type}-> {to_name} would close a cycle "
        f"({' -> '.join([from_name, *path])}); schema '{schema.name}' keeps "
        f"{'relations' if not types else relation_type + ' relations'} acyclic (nothing was created)",
        hint="Drop or reverse one relation of the cycle.")


def walk_path(start: int, goal: int, neighbours: Callable[[Sequence[int]], Iterable[tuple[int, int]]]) -> list[int]:
    """Ids on a shortest path start..goal, breadth first, [] when goal is not reached ([start]
    when start is goal). `neighbours(frontier)` gives the (from, to) edges out of a frontier: one
    engine query per step. Every engine names a cycle's path with this one walk, so they agree."""
    parent, frontier = {start: start}, [start]
    while frontier and goal not in parent:
        out: dict[int, list[int]] = {}
        for a, b in neighbours(frontier):
            out.setdefault(a, []).append(b)
        nxt = []
        for node in frontier:  # the frontier's order, then each node's edges in the engine's order
            for to in out.get(node, ()):
                if to not in parent:
                    parent[to] = node
                    nxt.append(to)
        frontier = nxt
    if goal not in parent:
        return []
    ids, node = [goal], goal
    while node != start:
        node = parent[node]
        ids.append(node)
    return ids[::-1]


def cycle_path(tx: GraphTx, schema: LibrarySchema, from_id: int, relation_type: str, to_id: int) -> list[str]:
    """The names on the path to_id..from_id when a new from_id -relation_type-> to_id would
    close a cycle the schema forbids; [] when it would not (or the schema allows cycles)."""
    types = schema.acyclic_types(relation_type)
    return [] if types is None else tx.reachable(to_id, from_id, types)


def missing_endpoints(relations: Sequence[RelationInput], found: dict[str, EntityRef],
                      most: int = 10) -> InvalidRelationError | None:
    """The error naming each relation end that reaches no entity, by the field it was given in
    (`relations[1].to: 'Ghost' does not exist`); None when every end exists."""
    ends = [(i, end, name) for i, r in enumerate(relations) for end, name in (("from", r.from_entity), ("to", r.to_entity))]
    missing = list(dict.fromkeys(name for _, _, name in ends if name_key(name) not in found))
    if not missing:
        return None
    fields = [f"relations[{i}].{end}: '{name}' does not exist" for i, end, name in ends if name_key(name) not in found]
    more = f"; and {len(fields) - most} more" if len(fields) > most else ""
    return InvalidRelationError("; ".join(fields[:most]) + more, details={"missing": missing})


def create_relations(tx: GraphTx, schema: LibrarySchema, relations: Sequence[RelationInput], origin: str
                     ) -> RelationsCreated:
    ids = tx.resolve([n for r in relations for n in (r.from_entity, r.to_entity)], aliases=True)  # or an alias
    error = missing_endpoints(relations, ids)
    if error:
        raise error
    created: list[Relation] = []
    existing: list[Relation] = []
    triples = dict.fromkeys((ids[name_key(r.from_entity)], r.relation_type, ids[name_key(r.to_entity)])
                            for r in relations)
    if origin == AUTO_RELATIONS:  # keep the rows an undo of exactly these relations puts back
        tx.before_change(list(dict.fromkeys(a.id for a, _, _ in triples)))
    for i, (a, relation_type, b) in enumerate(triples):
        path = cycle_path(tx, schema, a.id, relation_type, b.id)
        if path:
            raise cycle_error(f"relations[{i}]", a.name, relation_type, b.name, path, schema,
                              schema.acyclic_types(relation_type) or ())
        if tx.insert_relation(a.id, relation_type, b.id):
            created.append(Relation(a.name, relation_type, b.name, tx.at))
        else:
            existing.append(Relation(a.name, relation_type, b.name))
    if created:
        journal_related(tx, origin, created)
    return RelationsCreated(created, existing)


def add_observations(tx: GraphTx, schema: LibrarySchema, batches: Sequence[ObservationBatch], origin: str
                     ) -> list[AddedObservations]:
    ids = tx.resolve([b.entity_name for b in batches])
    missing = list(dict.fromkeys(b.entity_name for b in batches if name_key(b.entity_name) not in ids))
    if missing:
        raise NotFoundError(
            f"entities not found: {', '.join(missing)}",
            hint="Create them with create_entities first (or check the spelling with search_nodes); nothing was added.",
            details={"missing": missing},
        )
    results: list[AddedObservations] = []
    touched: list[int] = []
    for b in batches:
        ref = ids[name_key(b.entity_name)]
        added, skipped = insert_observations(tx, schema, ref.id, b.contents)
        if added:
            tx.touch([ref.id])
            touched.append(ref.id)
        results.append(AddedObservations(ref.name, tuple(added), tuple(skipped)))
    if touched:
        tx.entities_changed(touched)
        changed = [r for r in results if r.added]
        tx.journal(origin, "add_observations", [r.entity_name for r in changed],
                   {"added": {r.entity_name: list(r.added) for r in changed}})
    return results


def delete_entities(tx: GraphTx, schema: LibrarySchema, names: Sequence[str], origin: str) -> list[str]:
    """Names that reach nothing are ignored (as the official server does)."""
    ids = tx.resolve(names)
    if not ids:
        return []
    id_list = [r.id for r in ids.values()]
    tx.before_change(id_list)
    removed = list(tx.load_entities(id_list).values())
    relations = tx.relations_touching(id_list)
    tx.delete_entities(id_list)
    tx.journal(origin, "delete_entities", [e.name for e in removed],
               {"removed": [{"name": e.name, "entityType": e.entity_type,
                             "observations": [o.content for o in e.observations]} for e in removed],
                "relations": [[r.from_entity, r.relation_type, r.to_entity] for r in relations]})
    return [e.name for e in removed]


def delete_observations(tx: GraphTx, schema: LibrarySchema, batches: Sequence[ObservationBatch], origin: str
                        ) -> list[RemovedObservations]:
    """Entities and observations that are not there are ignored (as the official server does)."""
    ids = tx.resolve([b.entity_name for b in batches])
    results: list[RemovedObservations] = []
    touched: list[int] = []
    for b in batches:
        ref = ids.get(name_key(b.entity_name))
        if ref is None:
            continue
        tx.before_change([ref.id])
        removed = [c for c in (tx.delete_observation(ref.id, content) for content in b.contents) if c is not None]
        if removed:
            tx.touch([ref.id])
            touched.append(ref.id)
            results.append(RemovedObservations(ref.name, tuple(removed)))
    if touched:
        tx.entities_changed(touched)
        tx.journal(origin, "delete_observations", [r.entity_name for r in results],
                   {"removed": {r.entity_name: list(r.removed) for r in results}})
    return results


def delete_relations(tx: GraphTx, schema: LibrarySchema, relations: Sequence[RelationInput], origin: str
                     ) -> list[Relation]:
    """Relations that are not there are ignored (as the official server does)."""
    ids = tx.resolve([n for r in relations for n in (r.from_entity, r.to_entity)], aliases=True)
    deleted: list[Relation] = []
    for r in relations:
        a, b = ids.get(name_key(r.from_entity)), ids.get(name_key(r.to_entity))
        if a is None or b is None:
            continue
        tx.before_change([a.id, b.id])
        if tx.delete_relation(a.id, r.relation_type, b.id):
            deleted.append(Relation(a.name, r.relation_type, b.name))
    if deleted:
        tx.journal(origin, "delete_relations",
                   list(dict.fromkeys(n for r in deleted for n in (r.from_entity, r.to_entity))),
                   {"removed": [[r.from_entity, r.relation_type, r.to_entity] for r in deleted]})
    return deleted


# -- over a whole graph (the check tool, migrate) ----------------------------------------

def graph_violations(schema: LibrarySchema, entities: Sequence[Entity], relations: Sequence[Relation]
                     ) -> list[dict[str, str]]:
    """Every way a graph as it stands breaks `schema`: what, where, value, rule (the schema's
    own message). For `memloci check`, and for `memloci migrate` to refuse a source its target's
    schema would refuse before writing anything (a copy must not stop half way at a rule)."""
    found: list[dict[str, str]] = []

    def report(what: str, where: str, value: str, exc: Exception) -> None:
        found.append({"what": what, "where": where, "value": value[:80], "rule": getattr(exc, "message", str(exc))})

    for e in entities:
        try:
            schema.check_name(e.name, "name")
        except MemlociError as exc:
            report("name", e.name, e.name, exc)
        try:
            schema.check_type(e.entity_type, "entityType")
        except MemlociError as exc:
            report("type", e.name, e.entity_type, exc)
        seen: set[str] = set()
        for o in e.observations:
            try:
                schema.check_observation(o.content, "observation")
                if schema.unique_observations and normalize_content(o.content) in seen:
                    raise ValidationError("observation: repeated (observations are unique per entity)")
            except MemlociError as exc:
                report("observation", e.name, o.content, exc)
            seen.add(normalize_content(o.content))
    for r in relations:
        try:
            schema.check_relation(RelationInput(r.from_entity, r.relation_type, r.to_entity), "relation")
        except MemlociError as exc:
            report("relation", f"{r.from_entity} -> {r.to_entity}", r.relation_type, exc)
    for cycle in find_cycles(relations, schema):
        found.append({"what": "cycle", "where": " -> ".join(cycle), "value": "",
                      "rule": f"schema '{schema.name}': relations must not form a cycle"})
    return found


def find_cycles(relations: Sequence[Relation], schema: LibrarySchema, most: int = 50) -> list[list[str]]:
    """Cycles the schema's acyclic rule forbids in a graph as it stands (a library written
    before the rule, or edited by hand): one per back edge found, as name paths ending where
    they start. The write rule above keeps new cycles out; this finds the old ones."""
    if not schema.acyclic:
        return []
    groups: dict[str, list[Relation]] = {}
    for r in relations:
        types = schema.acyclic_types(r.relation_type)
        if types is not None:
            groups.setdefault("*" if types == () else r.relation_type, []).append(r)
    cycles: list[list[str]] = []
    for group in groups.values():
        out: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for r in group:
            a, b = name_key(r.from_entity), name_key(r.to_entity)
            names[a], names[b] = r.from_entity, r.to_entity
            out.setdefault(a, []).append(b)
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        for start in sorted(out):
            if state.get(start):
                continue
            stack, path = [(start, iter(out.get(start, ())))], [start]
            state[start] = 1
            while stack:
                node, edges = stack[-1]
                nxt = next(edges, None)
                if nxt is None:
                    state[node] = 2
                    stack.pop()
                    path.pop()
                elif state.get(nxt) == 1:
                    cycle = path[path.index(nxt):] + [nxt]
                    cycles.append([names[k] for k in cycle])
                    if len(cycles) >= most:
                        return cycles
                elif not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, iter(out.get(nxt, ()))))
                    path.append(nxt)
    return cycles


# -- free memories: what both engines' store_memory and update_memory answer ------------

def tags_told_again(held: Sequence[str], told: Sequence[str]) -> list[str]:
    """The tags a memory told again (same owner, same text: one memory) gains: those it does not
    hold yet, compared as names are ("Decision" is not a new tag beside "decision"), each once."""
    have = {name_key(t) for t in held}
    return list(dict.fromkeys(t for t in told if name_key(t) not in have))


def tags_added_detail(memory: Memory, added: Sequence[str]) -> dict[str, Any]:
    """The journal detail of a memory told again with more tags (`memloci history` shows its text)."""
    return {"content_hash": memory.content_hash, "content": memory.content, "tags": list(memory.tags),
            "added_tags": list(added)}


def update_detail(before: Memory, after: Memory) -> dict[str, Any]:
    """The journal detail of update_memory: the memory as it was, and its text now when that changed."""
    detail: dict[str, Any] = {"content_hash": before.content_hash, "before": {
        "content": before.content, "tags": list(before.tags), "metadata": before.metadata,
        "importance": before.importance}}
    if after.content != before.content:
        detail["content"] = after.content
    return detail


MISSING_ENTITY = "missing_entity"  # the detail naming the entity of memory_owner_missing


def memory_owner_missing(name: str, hint: str | None = "Create it with create_entities, or leave entity out."
                         ) -> NotFoundError:
    """A memory's owner (`entity`: given to store it, or as a filter) that is no entity. Its
    details name it (MISSING_ENTITY), so a search across libraries tells a library without that
    entity from any other NOT_FOUND without reading the message; hint None: the default one."""
    return NotFoundError(f"entity: '{name}' does not exist", hint=hint, details={MISSING_ENTITY: name})


def memory_gone() -> NotFoundError:
    return NotFoundError("content_hash: no such memory (deleted meanwhile?)")


def memory_text_taken() -> AlreadyExistsError:
    """update_memory's new text is another memory's of the same owner: refused, nothing changed."""
    return AlreadyExistsError("content: a memory with this text already exists",
                              hint="Delete one of them, or update the other one.")
