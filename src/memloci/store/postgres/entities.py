"""Rows of entities, relations and waiting links in the postgres engine, read and written
inside a caller's transaction: loading and resolving names (aliases too), an entity's search
index again, links waiting for a name that now exists.
Results and orderings are the SQLite engine's, so both answer alike."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memloci.core.model import Entity, Observation, Relation, name_key
from memloci.rules import graph as rules

BODY_TAGS = "body_tags"  # entity metadata: the tags only the body's `#tags` give (as store/sqlite/vault.py)

_ENTITY_COLUMNS = "id, name, entity_type, aliases, tags, metadata, body, created_at, updated_at"


def entity_from_row(row: tuple, observations: Sequence[Observation]) -> Entity:
    _, name, entity_type, aliases, tags, metadata, body, created_at, updated_at = row
    return Entity(name=name, entity_type=entity_type, observations=tuple(observations), aliases=tuple(aliases),
                  tags=tuple(tags), metadata=metadata, body=body, created_at=created_at, updated_at=updated_at)


def load_entities(conn: Any, ids: Sequence[int], observations: bool = True) -> dict[int, Entity]:
    """Entities by id, in the order of `ids` (ids with no entity are left out)."""
    ids = list(ids)
    if not ids:
        return {}
    rows = {r[0]: r for r in conn.execute(f"SELECT {_ENTITY_COLUMNS} FROM entities WHERE id = ANY(%s)", (ids,))}
    obs: dict[int, list[Observation]] = {i: [] for i in rows}
    if observations and rows:
        for entity_id, content, created_at in conn.execute(
                "SELECT entity_id, content, created_at FROM memories WHERE entity_id = ANY(%s) ORDER BY id",
                (list(rows),)):
            obs[entity_id].append(Observation(content, created_at))
    return {i: entity_from_row(rows[i], obs[i]) for i in ids if i in rows}


# The order SQLite returns relations in (store/sqlite/graph_reads.py), so both engines answer alike.
RELATION_ORDER = "ORDER BY r.created_at, a.name_key, r.relation_type, b.name_key"


def relations_where(conn: Any, where: str, params: Sequence[Any]) -> list[Relation]:
    return [Relation(f, t, to, c) for f, t, to, c in conn.execute(
        f"""SELECT a.name, r.relation_type, b.name, r.created_at
            FROM relations r JOIN entities a ON a.id = r.from_id JOIN entities b ON b.id = r.to_id
            WHERE {where} {RELATION_ORDER}""", params)]


def relations_touching(conn: Any, ids: Sequence[int]) -> list[Relation]:
    ids = list(ids)
    return relations_where(conn, "r.from_id = ANY(%s) OR r.to_id = ANY(%s)", (ids, ids)) if ids else []


def resolve(conn: Any, names: Iterable[str]) -> dict[str, rules.EntityRef]:
    """name_key -> the entity of that name, for the names that exist."""
    keys = list(dict.fromkeys(name_key(n) for n in names))
    if not keys:
        return {}
    return {key: rules.EntityRef(id_, name) for id_, name, key in
            conn.execute("SELECT id, name, name_key FROM entities WHERE name_key = ANY(%s)", (keys,))}


def alias_holders(conn: Any, names: Sequence[str]) -> dict[str, list[int]]:
    """name_key -> ids of the entities listing that name among their aliases (compared as
    model.name_key compares: case-insensitive, NFC), oldest first. PostgreSQL's lower() is not
    Python's casefold(), so candidates are every entity with aliases, checked here exactly."""
    keys = {name_key(n) for n in names}
    if not keys:
        return {}
    found: dict[str, list[int]] = {}
    for entity_id, aliases in conn.execute("SELECT id, aliases FROM entities WHERE aliases <> '[]'::jsonb ORDER BY id"):
        for alias in aliases:
            key = name_key(str(alias))
            if key in keys and entity_id not in found.get(key, []):
                found.setdefault(key, []).append(entity_id)
    return found


def reindex(conn: Any, ids: Sequence[int]) -> None:
    """Index these entities again (their observations changed): rewriting `name` runs the
    trigger that builds their tsvectors (search_schema.py), once per write transaction."""
    if ids:
        conn.execute("UPDATE entities SET name = name WHERE id = ANY(%s)", (list(dict.fromkeys(ids)),))


def link_pending(conn: Any, ids: Sequence[int], at: str) -> list[int]:
    """Links waiting for one of the entities `ids` (written in this transaction) become
    relations: by its name, or by an alias no entity is named and only one entity holds;
    and links these entities left waiting that now reach an entity by its name (an undo
    brings back an entity whose target appeared meanwhile) or through such an alias. The
    ids of the links' sources."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return []
    rows = [(int(f), rt, int(to), k) for f, rt, to, k in conn.execute(
        """SELECT p.from_id, p.relation_type, e.id, p.target_key FROM pending_links p
           JOIN entities e ON e.name_key = p.target_key WHERE e.id = ANY(%s) OR p.from_id = ANY(%s)""",
        (ids, ids))]
    # Names that may newly meet through an alias: these entities' aliases, and the targets they wait for.
    names = [str(a) for (aliases,) in conn.execute(
        "SELECT aliases FROM entities WHERE id = ANY(%s) AND aliases <> '[]'::jsonb", (ids,)) for a in aliases]
    names += [t for (t,) in conn.execute("SELECT target FROM pending_links WHERE from_id = ANY(%s)", (ids,))]
    if names:
        named = set(resolve(conn, names))
        sole = {key: held[0] for key, held in alias_holders(conn, [n for n in names if name_key(n) not in named]).items()
                if len(held) == 1}
        if sole:
            rows += [(int(f), rt, sole[k], k) for f, rt, k in conn.execute(
                "SELECT from_id, relation_type, target_key FROM pending_links WHERE target_key = ANY(%s)",
                (list(sole),))]
    if not rows:
        return []
    conn.execute("""INSERT INTO relations (from_id, relation_type, to_id, created_at)
                    SELECT f, rt, t, %s FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) AS n(f, rt, t)
                    ON CONFLICT DO NOTHING""",
                 (at, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))
    conn.execute("""DELETE FROM pending_links p USING unnest(%s::bigint[], %s::text[], %s::text[]) AS d(f, rt, k)
                    WHERE p.from_id = d.f AND p.relation_type = d.rt AND p.target_key = d.k""",
                 ([r[0] for r in rows], [r[1] for r in rows], [r[3] for r in rows]))
    return list(dict.fromkeys(r[0] for r in rows))
