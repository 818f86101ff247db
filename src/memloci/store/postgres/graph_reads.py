"""Graph reads of the postgres engine (each one read snapshot):
pages, opened entities, exports, the journal, the name log. Results and orderings are the
SQLite engine's (store/sqlite/graph_reads.py), so both answer alike."""

from __future__ import annotations

import json
from collections.abc import Sequence

from memloci.core.model import Entity, Graph, GraphPage, JournalEntry, NameChanges, NamedEntity, Relation, name_key
from memloci.store.postgres.database import Database
from memloci.store.postgres.entities import alias_holders, load_entities, relations_touching, relations_where, resolve


class PostgresGraphReads:
    """Pages, opened entities, exports, the journal and the name log of one library."""

    def __init__(self, db: Database):
        self.db = db

    def read_graph(self, *, limit: int, offset: int, summary: bool) -> GraphPage:
        with self.db.read() as conn:
            total = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
            ids = [r[0] for r in conn.execute("SELECT id FROM entities ORDER BY id LIMIT %s OFFSET %s", (limit, offset))]
            entities = load_entities(conn, ids, observations=not summary)
            relations: list[Relation] = []
            if ids:
                # A page is every entity with an id in [first, last]: "both ends on the page" is a range test.
                lo, hi = ids[0], ids[-1]
                relations = relations_where(conn, "r.from_id BETWEEN %s AND %s AND r.to_id BETWEEN %s AND %s",
                                            (lo, hi, lo, hi))
        return GraphPage(tuple(entities.values()), tuple(relations), total, offset, offset + len(ids) < total)

    def open_entities(self, names: Sequence[str]) -> Graph:
        """The entities named, or else holding the name as an alias; a name wins over an alias,
        and an alias two entities claim opens both."""
        with self.db.read() as conn:
            ids = {k: [v.id] for k, v in resolve(conn, names).items()}
            rest = [n for n in names if name_key(n) not in ids]
            if rest:
                ids.update(alias_holders(conn, rest))
            ordered = list(dict.fromkeys(i for k in (name_key(n) for n in names) if k in ids for i in ids[k]))
            entities = load_entities(conn, ordered)
            relations = relations_touching(conn, ordered)
        return Graph(tuple(entities.values()), tuple(relations))

    def entity_names(self, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        with self.db.read() as conn:
            found: dict[str, tuple[str, ...]] = {k: (v.name,) for k, v in resolve(conn, names).items()}
            rest = [n for n in names if name_key(n) not in found]
            held = alias_holders(conn, rest) if rest else {}
            if held:
                ids = sorted({i for holders in held.values() for i in holders})
                named = dict(conn.execute("SELECT id, name FROM entities WHERE id = ANY(%s)", (ids,)).fetchall())
                found.update({k: tuple(named[i] for i in holders) for k, holders in held.items()})
        return found

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        with self.db.read() as conn:
            return dict(conn.execute("SELECT id, name FROM entities WHERE id = ANY(%s)", (list(ids),)).fetchall())

    def export_graph(self, *, order: str = "id") -> Graph:
        """Every entity (insertion or `name` order) and relation, from one snapshot."""
        column = {"id": "id", "name": "name_key"}[order]
        with self.db.read() as conn:
            # name_key in byte order, as SQLite sorts text, whatever the database's collation
            ids = [r[0] for r in conn.execute(f"SELECT id FROM entities ORDER BY {column}"
                                              + (' COLLATE "C"' if column == "name_key" else ""))]
            entities: list[Entity] = []
            for start in range(0, len(ids), 2000):
                entities.extend(load_entities(conn, ids[start:start + 2000]).values())
            relations = relations_where(conn, "true", ())
        return Graph(tuple(entities), tuple(relations))

    def journal(self, *, limit: int, internal: bool = True) -> list[JournalEntry]:
        """The newest `limit` changes; `internal=False` leaves out rescans and vector resets."""
        hide = "" if internal else ("WHERE NOT ((tool = 'files' AND action = 'sync') "
                                    "OR (tool = 'reindex' AND action = 'reset_vectors'))")
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT id, at, tool, action, entities, detail FROM journal {hide} "
                                "ORDER BY id DESC LIMIT %s", (limit,)).fetchall()
        return [JournalEntry(i, at, tool, action, tuple(ents), detail) for i, at, tool, action, ents, detail in rows]

    def name_changes(self, since: int) -> NameChanges:
        """The entities named, retyped or re-aliased after log position `since` (model.NameChanges):
        every one when `since` is -1 or ahead of the log (another database, or one restored)."""
        with self.db.read() as conn:
            high = conn.execute("SELECT coalesce(max(name_seq), 0) FROM entities").fetchone()[0]
            complete = since < 0 or high < since
            rows = conn.execute("SELECT name, entity_type, aliases FROM entities"
                                + ("" if complete else " WHERE name_seq > %s"), () if complete else (since,)).fetchall()
        return NameChanges(high, tuple(NamedEntity(n, t, json.dumps(a, ensure_ascii=False)) for n, t, a in rows),
                           complete)
