"""Graph writes of the postgres engine: the library rules (rules/graph.py) over one write
transaction (PostgresGraphTx), exactly as the other engines run them.

Each write opens a transaction under the library's advisory lock (Database.transact, which
runs it once more after a deadlock or serialization failure), builds a PostgresGraphTx over it
and calls the rule; whatever the rule raises rolls the whole transaction back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import (
    AddedObservations,
    CreatedEntity,
    Entity,
    EntityInput,
    ObservationBatch,
    Relation,
    RelationInput,
    RemovedObservations,
    content_hash,
    name_key,
)
from memloci.core.schema import LibrarySchema
from memloci.markdown.obsidian import retagged
from memloci.rules import graph as rules
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import (
    BODY_TAGS,
    alias_holders,
    link_pending,
    load_entities,
    reindex,
    relations_touching,
    resolve,
)
from memloci.store.postgres.transaction import WriteTx
from memloci.store.postgres.vectors import drop_vectors_of

# Characters that can make or unmake a `#tag` (or the code and links around one), and line
# breaks (a paragraph's code spans): an observation without any cannot change its entity's tags.
_TAG_SYNTAX = frozenset("#`~[\n\r")


def _plain(text: str) -> bool:
    return _TAG_SYNTAX.isdisjoint(text)


class PostgresGraphTx:
    """rules.GraphTx over one psycopg connection inside a write transaction."""

    def __init__(self, tx: WriteTx):
        self.tx = tx
        self.conn = tx.conn
        self.at = tx.at
        self._names: dict[int, str] = {}  # entity id -> stored name (observation hashes need it)
        # Entities one of whose added or removed observations could change their `#tags`: only
        # those are retagged (retagging reads every observation, costly on a busy entity).
        self._retag: set[int] = set()
        self._inserted: list[int] = []  # entities created here: links may be waiting for their names

    def resolve(self, names: Iterable[str], *, aliases: bool = False) -> dict[str, rules.EntityRef]:
        names = list(names)
        found = resolve(self.conn, names)
        if aliases:  # a name no entity has reaches the one entity listing it as an alias
            rest = [n for n in names if name_key(n) not in found]
            for key, ids in (alias_holders(self.conn, rest) if rest else {}).items():
                if len(ids) == 1:
                    found[key] = rules.EntityRef(ids[0], self.head(ids[0]).name)
        return found

    def head(self, entity_id: int) -> rules.EntityHead:
        name, entity_type, created_at = self.conn.execute(
            "SELECT name, entity_type, created_at FROM entities WHERE id = %s", (entity_id,)).fetchone()
        self._names[entity_id] = name
        return rules.EntityHead(entity_id, name, entity_type, created_at)

    def _name(self, entity_id: int) -> str:
        return self._names.get(entity_id) or self.head(entity_id).name

    def insert_entity(self, name: str, key: str, entity_type: str) -> int:
        entity_id = self.conn.execute(
            """INSERT INTO entities (name, name_key, entity_type, created_at, updated_at)
               VALUES (%s, %s, %s, %s, %s) RETURNING id""", (name, key, entity_type, self.at, self.at)).fetchone()[0]
        self._names[entity_id] = name
        self._inserted.append(entity_id)
        return entity_id

    def insert_observation(self, entity_id: int, content: str) -> bool:
        row = self.conn.execute(
            """INSERT INTO memories (entity_id, content, content_hash, memory_type, created_at, updated_at)
               VALUES (%s, %s, %s, 'observation', %s, %s)
               ON CONFLICT ((coalesce(entity_id, 0)), content_hash) DO NOTHING RETURNING id""",
            (entity_id, content, content_hash(content, self._name(entity_id)), self.at, self.at)).fetchone()
        if row is not None and not _plain(content):
            self._retag.add(entity_id)
        return row is not None

    def delete_observation(self, entity_id: int, content: str) -> str | None:
        drop_vectors_of(self.conn, "entity_id = %s AND content_hash = %s",
                        (entity_id, content_hash(content, self._name(entity_id))))
        row = self.conn.execute(
            "DELETE FROM memories WHERE entity_id = %s AND content_hash = %s RETURNING content",
            (entity_id, content_hash(content, self._name(entity_id)))).fetchone()
        if row and not _plain(row[0]):
            self._retag.add(entity_id)
        return row[0] if row else None

    def touch(self, entity_ids: Sequence[int]) -> None:
        self.conn.execute("UPDATE entities SET updated_at = %s WHERE id = ANY(%s)", (self.at, list(entity_ids)))

    def reachable(self, start: int, goal: int, types: tuple[str, ...]) -> list[str]:
        if start == goal:
            return [self._name(start)]
        where = "AND r.relation_type = ANY(%(types)s)" if types else ""
        params = {"start": start, "goal": goal, "types": list(types)}
        walk = f"""WITH RECURSIVE walk(id) AS (SELECT %(start)s::bigint UNION
                   SELECT r.to_id FROM relations r JOIN walk ON r.from_id = walk.id {where})"""
        if not self.conn.execute(f"{walk} SELECT EXISTS (SELECT 1 FROM walk WHERE id = %(goal)s)", params).fetchone()[0]:
            return []
        # Rare (the write is refused): walked again, breadth first, for a readable path.
        ids = rules.walk_path(start, goal, lambda frontier: self.conn.execute(
            f"""SELECT r.from_id, r.to_id FROM relations r WHERE r.from_id = ANY(%(frontier)s) {where}
                ORDER BY r.from_id, r.relation_type, r.to_id""", {**params, "frontier": list(frontier)}).fetchall())
        names = dict(self.conn.execute("SELECT id, name FROM entities WHERE id = ANY(%s)", (ids,)).fetchall())
        return [names[i] for i in ids]

    def insert_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        return self.conn.execute(
            """INSERT INTO relations (from_id, relation_type, to_id, created_at) VALUES (%s, %s, %s, %s)
               ON CONFLICT DO NOTHING""", (from_id, relation_type, to_id, self.at)).rowcount > 0

    def delete_relation(self, from_id: int, relation_type: str, to_id: int) -> bool:
        return self.conn.execute("DELETE FROM relations WHERE from_id = %s AND relation_type = %s AND to_id = %s",
                                 (from_id, relation_type, to_id)).rowcount > 0

    def load_entities(self, ids: Sequence[int]) -> dict[int, Entity]:
        return load_entities(self.conn, ids)

    def relations_touching(self, ids: Sequence[int]) -> list[Relation]:
        return relations_touching(self.conn, ids)

    def delete_entities(self, ids: Sequence[int]) -> None:
        # memories and relations go with them (ON DELETE CASCADE)
        drop_vectors_of(self.conn, "entity_id = ANY(%s)", (list(ids),))
        self.conn.execute("DELETE FROM entities WHERE id = ANY(%s)", (list(ids),))

    def before_change(self, ids: Sequence[int]) -> None:
        self.tx.keep(ids)  # the undo record keeps them as they are

    def entities_changed(self, ids: Sequence[int]) -> None:
        ids = list(dict.fromkeys(ids))
        retag(self.conn, [i for i in ids if i in self._retag])
        reindex(self.conn, ids)
        if self._inserted:  # links waiting for the new names become relations (entities.link_pending)
            link_pending(self.conn, self._inserted, self.at)
            self._inserted = []

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any] | None) -> None:
        self.tx.journal(tool, action, entities, detail, self.at)


def retag(conn: Any, ids: Sequence[int]) -> None:
    """An entity's tags after its observations changed: the ones it was given, then the `#tags`
    its observations and body carry, each once (as store/sqlite/vault.py keeps them)."""
    for entity_id in ids:
        row = conn.execute("SELECT tags, metadata, body FROM entities WHERE id = %s", (entity_id,)).fetchone()
        if row is None:
            continue
        tags, meta, body = list(row[0]), dict(row[1]), row[2]
        observations = [c for (c,) in conn.execute(
            "SELECT content FROM memories WHERE entity_id = %s ORDER BY id", (entity_id,))]
        every, inline = retagged(tags, meta.get(BODY_TAGS, []), body, observations)
        if every != tags:
            meta.pop(BODY_TAGS, None)
            meta.update({BODY_TAGS: inline} if inline else {})
            conn.execute("UPDATE entities SET tags = %s, metadata = %s WHERE id = %s",
                         (json.dumps(every, ensure_ascii=False), json.dumps(meta, ensure_ascii=False), entity_id))



class PostgresGraphWrites:
    """The six graph writes, each one transaction over the rules."""

    def __init__(self, db: Database):
        self.db = db

    def create_entities(self, schema: LibrarySchema, entities: Sequence[EntityInput], origin: str) -> list[CreatedEntity]:
        return self.db.transact(lambda tx: rules.create_entities(PostgresGraphTx(tx), schema, entities, origin))

    def create_relations(self, schema: LibrarySchema, relations: Sequence[RelationInput],
                         origin: str) -> rules.RelationsCreated:
        return self.db.transact(lambda tx: rules.create_relations(PostgresGraphTx(tx), schema, relations, origin))

    def add_observations(self, schema: LibrarySchema, batches: Sequence[ObservationBatch],
                         origin: str) -> list[AddedObservations]:
        return self.db.transact(lambda tx: rules.add_observations(PostgresGraphTx(tx), schema, batches, origin))

    def delete_entities(self, schema: LibrarySchema, names: Sequence[str], origin: str) -> list[str]:
        return self.db.transact(lambda tx: rules.delete_entities(PostgresGraphTx(tx), schema, names, origin))

    def delete_observations(self, schema: LibrarySchema, batches: Sequence[ObservationBatch],
                            origin: str) -> list[RemovedObservations]:
        return self.db.transact(lambda tx: rules.delete_observations(PostgresGraphTx(tx), schema, batches, origin))

    def delete_relations(self, schema: LibrarySchema, relations: Sequence[RelationInput], origin: str) -> list[Relation]:
        return self.db.transact(lambda tx: rules.delete_relations(PostgresGraphTx(tx), schema, relations, origin))
