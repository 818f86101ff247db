"""Extraction and auto-relations: what new text mentions, related to the entities that exist.

A part MemoryService holds. After add_observations (and create_entities with observations,
store_memory with an entity) each entity's new observations are read by memorix's patterns (rules/extract.py); a name they
mention that reaches an existing entity other than the entity itself (its name or one alias,
any case: the store's `entity_names`, as every tool resolves names) becomes a relation
entity -[type]-> that entity, made through create_relations in one transaction of its own,
journaled as `auto_relations` and undone exactly by `memloci undo` (rules/graph.py keeps the
sources' rows). A relation already there is left as is. No entity is ever created: names that
reach none are returned as suggestions. A free memory gets the same lookup (`memory_links`):
links to the entities it mentions.

Cheap by design: regular expressions only, one lookup of every name a call's texts mention,
and a write only when a relation is new (the relations of each source are read first).
Off with `[lifecycle] extract = false` in the config file, or MEMLOCI_EXTRACT=0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memloci.app.projects import ProjectRef
from memloci.core.errors import MemlociError
from memloci.core.model import AddedObservations, CreatedEntity, MemoryLink, Relation, RelationInput, name_key
from memloci.rules.extract import candidates, extract, relation_type
from memloci.rules.graph import AUTO_RELATIONS, RelationsCreated
from memloci.service.stores import Stores
from memloci.store.protocols import Store

CreateRelations = Callable[..., RelationsCreated]


@dataclass(frozen=True, slots=True)
class ExtractionOutcome:
    """What one text mentions: `links` to the entities that exist (typed by rules/extract.py
    `relation_type`), and `suggested`, the names it mentions that no entity has."""

    links: tuple[MemoryLink, ...] = ()
    suggested: tuple[str, ...] = ()

    @property
    def mentions(self) -> list[str]:
        """The entities linked, each once, in order."""
        return list(dict.fromkeys(link.entity for link in self.links if link.entity))


@dataclass(frozen=True, slots=True)
class Related:
    """What extraction did for one entity: the relations it made, the names it offers as new entities."""

    relations: tuple[Relation, ...] = ()
    suggested: tuple[str, ...] = ()


class Extraction:
    """Auto-relations after graph writes, and the links of a free memory."""

    def __init__(self, stores: Stores, create_relations: CreateRelations, *, enabled: bool = True):
        """`create_relations(relations, library=..., origin=...)`: the service's own (validation,
        the schema, the post-write hook), so a relation made here is made as any other."""
        self.stores = stores
        self.create_relations = create_relations
        self.enabled = enabled

    def after_observations(self, results: list[AddedObservations], *,
                           library: str | ProjectRef | None) -> list[AddedObservations]:
        """add_observations' results with what extraction related and suggested for each entity."""
        related = self.relate([(r.entity_name, r.added) for r in results], library=library)
        return [replace(r, relations_added=found.relations, entities_suggested=found.suggested)
                if (found := related.get(name_key(r.entity_name))) else r for r in results]

    def after_entities(self, results: list[CreatedEntity], *, library: str | ProjectRef | None) -> list[CreatedEntity]:
        """create_entities' results, likewise for the observations each entity got."""
        related = self.relate([(r.name, r.observations) for r in results], library=library)
        return [replace(r, relations_added=found.relations, entities_suggested=found.suggested)
                if (found := related.get(name_key(r.name))) else r for r in results]

    def relate(self, texts: Sequence[tuple[str, Sequence[str]]], *, memory_type: str | None = None,
               library: str | ProjectRef | None) -> dict[str, Related]:
        """For each (stored entity name, its new texts): relations to the existing entities the
        texts mention, made now; name_key(entity) -> Related (entities with nothing left out)."""
        if not self.enabled:
            return {}
        mentioned = [(entity, relation_type(memory_type, found.causal), candidates(found))
                     for entity, contents in texts for found in map(extract, contents)]
        mentioned = [m for m in mentioned if m[2]]
        if not mentioned:
            return {}
        store = self.stores.store(library)
        reached = _reached(store, [name for _, _, names in mentioned for name in names])
        wanted: dict[tuple[str, str, str], RelationInput] = {}
        suggested: dict[str, dict[str, str]] = {}
        for entity, rtype, names in mentioned:
            for name in names:
                found = reached.get(name_key(name), ())
                if not found:
                    suggested.setdefault(name_key(entity), {}).setdefault(name_key(name), name)
                elif len(found) == 1 and name_key(found[0]) != name_key(entity):  # an alias of two: no doubt allowed
                    relation = RelationInput(entity, rtype, found[0])
                    wanted.setdefault((name_key(entity), rtype, name_key(found[0])), relation)
        for source in {r.from_entity for r in wanted.values()}:  # none there yet: no write, no undo record
            for r in store.find_relations(from_entity=source, to_entity=None, relation_type=None):
                wanted.pop((name_key(r.from_entity), r.relation_type, name_key(r.to_entity)), None)
        created = self._create(store, list(wanted.values()), library) if wanted else []
        out: dict[str, Related] = {}
        for key in dict.fromkeys([*(name_key(r.from_entity) for r in created), *suggested]):
            out[key] = Related(tuple(r for r in created if name_key(r.from_entity) == key),
                               tuple(suggested.get(key, {}).values()))
        return out

    def _create(self, store: Store, relations: list[RelationInput], library: str | ProjectRef | None) -> list[Relation]:
        """The relations made: those the library's schema allows (a typed schema may not know
        `references`), in one transaction; should the schema refuse one as a whole (a cycle it
        forbids), each on its own, the refused ones left out."""
        allowed = []
        for i, r in enumerate(relations):
            try:
                store.schema.check_relation(r, f"relations[{i}]")
            except MemlociError:
                continue
            allowed.append(r)
        if not allowed:
            return []
        try:
            return self.create_relations(allowed, library=library, origin=AUTO_RELATIONS).created
        except MemlociError:
            if len(allowed) == 1:
                return []
        made: list[Relation] = []
        for r in allowed:
            try:
                made += self.create_relations([r], library=library, origin=AUTO_RELATIONS).created
            except MemlociError:
                continue
        return made

    def memory_links(self, content: str, memory_type: str | None, *,
                     library: str | ProjectRef | None) -> ExtractionOutcome:
        """The links of a free memory of this text and type to the existing entities it mentions."""
        if not self.enabled:
            return ExtractionOutcome()
        found = extract(content)
        names = candidates(found)
        if not names:
            return ExtractionOutcome()
        reached = _reached(self.stores.store(library), names)
        rtype = relation_type(memory_type, found.causal)
        links = dict.fromkeys(MemoryLink(rtype, entity=hits[0]) for name in names
                              if len(hits := reached.get(name_key(name), ())) == 1)
        return ExtractionOutcome(tuple(links), tuple(name for name in names if name_key(name) not in reached))


def _reached(store: Store, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """name_key -> the stored names a mentioned name reaches (its entity, or those listing it as
    an alias), for every name at once: one store call."""
    return store.entity_names(list(dict.fromkeys(names)))
