"""What a change removed, kept whole in its journal entry, and putting it back (mixed into SQLiteStore).

A destructive write calls `_before(conn, entity_ids, memory_ids)` before it changes
anything: the rows of those entities (with their observations, dates, relations touching
them and pending links) and of those free memories are copied. The journal entry the write
makes carries them under `detail["undo"]`, together with fingerprints of the same entities
and memories *after* the change, taken just before the commit (`_seal_journal`).

Undoing entry N compares today's fingerprints with the sealed ones: if anything named there
changed since (a later edit, a deletion, a new entity that took the name), the undo is
refused and says what stands in the way. Otherwise the current rows are replaced by the kept
ones in one transaction, which is itself journaled (and so can be undone).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConflictError, NotFoundError, ValidationError
from ..model import ImportedMemories, name_key
from .sqlite_host import SQLiteHost
from .sqlite_memories import insert_memory, select_memories

UNDOABLE = {"delete_entities", "delete_observations", "delete_relations", "rename_entity", "merge_entities",
            "update_memory", "delete_memory", "undo", "update_manual_section", "delete_manual_section",
            "add_manual_section", "update_context"}

_MEMORY_COLUMNS = ("content, content_hash, memory_type, tags, importance, metadata, created_at, updated_at, "
                   "access_count, last_accessed_at")


def _memory_row(row: tuple) -> dict[str, Any]:
    content, chash, mtype, tags, importance, metadata, created, updated, count, accessed = row
    return {"content": content, "content_hash": chash, "memory_type": mtype, "tags": json.loads(tags),
            "importance": importance, "metadata": json.loads(metadata), "created_at": created,
            "updated_at": updated, "access_count": count, "last_accessed_at": accessed}


def entity_snapshot(conn: sqlite3.Connection, entity_id: int) -> dict[str, Any] | None:
    """Everything the library holds about one entity, as JSON-able data (None: no such entity)."""
    row = conn.execute("SELECT id, name, entity_type, aliases, tags, metadata, body, created_at, updated_at "
                       "FROM entities WHERE id = ?", (entity_id,)).fetchone()
    if row is None:
        return None
    observations = [_memory_row(r) for r in conn.execute(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE entity_id = ? ORDER BY id", (entity_id,))]
    relations = [list(r) for r in conn.execute(
        """SELECT f.name, r.relation_type, t.name, r.created_at FROM relations r
           JOIN entities f ON f.id = r.from_id JOIN entities t ON t.id = r.to_id
           WHERE r.from_id = ? OR r.to_id = ? ORDER BY f.name_key, r.relation_type, t.name_key""",
        (entity_id, entity_id))]
    pending = [list(r) for r in conn.execute(
        "SELECT relation_type, target FROM pending_links WHERE from_id = ? ORDER BY relation_type, target_key",
        (entity_id,))]
    return {"id": row[0], "name": row[1], "entity_type": row[2], "aliases": json.loads(row[3]),
            "tags": json.loads(row[4]), "metadata": json.loads(row[5]), "body": row[6], "created_at": row[7],
            "updated_at": row[8], "observations": observations, "relations": relations, "pending_links": pending}


def memory_snapshot(conn: sqlite3.Connection, memory_id: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ? AND entity_id IS NULL",
                       (memory_id,)).fetchone()
    return _memory_row(row) if row else None


def _meta_digest(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM library_meta WHERE key = ?", (key,)).fetchone()
    return hashlib.sha256(row[0].encode()).hexdigest()[:16] if row else None


def _digest(state: dict[str, Any] | None) -> str | None:
    if state is None:
        return None
    state = {k: v for k, v in state.items() if k not in ("id", "access_count", "last_accessed_at")}
    for o in state.get("observations", ()):
        o.pop("access_count", None)
        o.pop("last_accessed_at", None)
    return hashlib.sha256(json.dumps(state, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def entity_fingerprint(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT id FROM entities WHERE name_key = ?", (key,)).fetchone()
    return _digest(entity_snapshot(conn, row[0])) if row else None


def memory_fingerprint(conn: sqlite3.Connection, content_hash: str) -> str | None:
    row = conn.execute("SELECT id FROM memories WHERE entity_id IS NULL AND content_hash = ?", (content_hash,)).fetchone()
    return _digest(memory_snapshot(conn, row[0])) if row else None


class SQLiteUndo(SQLiteHost):
    """Undo records of SQLiteStore (uses its _write, _read, _resolve, _refresh_fts, _journal)."""

    def _kept_now(self) -> dict[str, Any]:
        """This thread's undo record for the transaction under way."""
        local = self.__dict__.setdefault("_kept", threading.local())
        kept = getattr(local, "tx", None)
        if kept is None:
            kept = local.tx = {"entities": {}, "memories": {}, "new_ids": set(), "row": None}
        return kept

    def _forget_kept(self) -> None:
        self.__dict__.setdefault("_kept", threading.local()).tx = None

    def _before(self, conn: sqlite3.Connection, entity_ids: Iterable[int] = (), memory_ids: Iterable[int] = ()) -> None:
        """Keep the state of these entities and memories before this transaction changes them."""
        entity_ids, memory_ids = list(entity_ids), list(memory_ids)
        kept = self._kept_now()
        if entity_ids or memory_ids:
            kept["armed"] = True
        for entity_id in entity_ids:
            if entity_id not in kept["entities"] and entity_id not in kept["new_ids"]:
                snap = entity_snapshot(conn, entity_id)
                if snap is not None:
                    kept["entities"][entity_id] = snap
        for memory_id in memory_ids:
            owner = conn.execute("SELECT entity_id FROM memories WHERE id = ?", (memory_id,)).fetchone()
            if owner is None:
                continue
            if owner[0] is not None:  # an observation: its entity is what changes
                self._before(conn, [owner[0]])
            elif memory_id not in kept["memories"]:
                kept["memories"][memory_id] = memory_snapshot(conn, memory_id)

    def _before_meta(self, conn: sqlite3.Connection, key: str) -> None:
        """Keep a library-wide value (the manual, the context) before this transaction changes it."""
        kept = self._kept_now()
        kept["armed"] = True
        if key not in kept.setdefault("meta", {}):
            row = conn.execute("SELECT value FROM library_meta WHERE key = ?", (key,)).fetchone()
            kept["meta"][key] = row[0] if row else None

    def _note_journal_row(self, row_id: int) -> None:
        kept = self._kept_now()
        kept["last_row"] = row_id
        if kept.get("armed"):
            kept["row"] = row_id

    def _seal_journal(self, conn: sqlite3.Connection) -> dict[str, Any] | None:
        """Write the kept rows and the after-fingerprints into this transaction's journal entry."""
        kept = self._kept_now()
        if kept["row"] is None:
            return None
        entities = list(kept["entities"].values())
        memories = list(kept["memories"].values())
        keys = {name_key(s["name"]) for s in entities} | kept.get("keys", set())
        for entity_id in kept["entities"]:  # a renamed entity is found under its new name
            row = conn.execute("SELECT name_key FROM entities WHERE id = ?", (entity_id,)).fetchone()
            if row:
                keys.add(row[0])
        hashes = {m["content_hash"] for m in memories} | kept.get("hashes", set())
        for memory_id in kept["memories"]:
            row = conn.execute("SELECT content_hash FROM memories WHERE id = ?", (memory_id,)).fetchone()
            if row:
                hashes.add(row[0])
        record: dict[str, Any] = {"entities": entities, "memories": memories,
                  "after": {"entities": {k: entity_fingerprint(conn, k) for k in sorted(keys)},
                            "memories": {h: memory_fingerprint(conn, h) for h in sorted(hashes)}}}
        if kept.get("meta"):
            record["meta"] = dict(kept["meta"])
            record["after"]["meta"] = {k: _meta_digest(conn, k) for k in kept["meta"]}
        detail = conn.execute("SELECT detail FROM journal WHERE id = ?", (kept["row"],)).fetchone()[0]
        detail = json.loads(detail) if detail else {}
        detail["undo"] = record
        conn.execute("UPDATE journal SET detail = ? WHERE id = ?", (json.dumps(detail, ensure_ascii=False), kept["row"]))
        kept["row"] = None
        return detail

    # -- undo ------------------------------------------------------------------------

    @staticmethod
    def _journal_entry(conn: sqlite3.Connection, change_id: int) -> tuple[str, list[str], dict[str, Any]]:
        row = conn.execute("SELECT action, entities, detail FROM journal WHERE id = ?", (change_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"id: the journal has no change #{change_id}", hint="List changes with `memloci history`.")
        detail = json.loads(row[2]) if row[2] else {}
        if "undo" not in detail:
            why = ("was recorded before memloci kept undo records" if row[0] in UNDOABLE
                   else "removed nothing, so there is nothing to undo")
            raise ValidationError(f"id: change #{change_id} ({row[0]}) {why}",
                                  hint="Undo works on deletes, edits, renames, merges, memory updates and undos; "
                                       "take back an addition with a delete.")
        return row[0], json.loads(row[1]), detail

    @staticmethod
    def _later(conn: sqlite3.Connection, change_id: int, name: str) -> str:
        """'by change #M' for the latest later change naming the entity, if any."""
        for later_id, action, entities in conn.execute(
                "SELECT id, action, entities FROM journal WHERE id > ? ORDER BY id DESC", (change_id,)):
            if name_key(name) in {name_key(n) for n in json.loads(entities)}:
                return f" by change #{later_id} ({action})"
        return ""

    def _row_blockers(self, conn: sqlite3.Connection, change_id: int, record: dict[str, Any]) -> list[str]:
        blockers = []
        after = record.get("after", {})
        names = {name_key(s["name"]): s["name"] for s in record["entities"]}
        for key, expected in after.get("entities", {}).items():
            now = entity_fingerprint(conn, key)
            if now == expected:
                continue
            row = conn.execute("SELECT name FROM entities WHERE name_key = ?", (key,)).fetchone()
            name = row[0] if row else names.get(key, key)
            if expected is None:
                blockers.append(f"a new entity took the name '{name}'{self._later(conn, change_id, name)}")
            elif now is None:
                blockers.append(f"'{name}' was deleted since{self._later(conn, change_id, name)}")
            else:
                blockers.append(f"'{name}' was changed since{self._later(conn, change_id, name)}")
        for key, expected in after.get("meta", {}).items():
            if _meta_digest(conn, key) != expected:
                blockers.append(f"the library's {key} was changed since")
        for chash, expected in after.get("memories", {}).items():
            if memory_fingerprint(conn, chash) != expected:
                blockers.append(f"the memory {chash[:12]} was " + (
                    "stored again since" if expected is None else "changed or deleted since"))
        restored = set(names)
        for snap in record["entities"]:  # relations to entities outside the change need those entities
            for f, _, t, _ in snap["relations"]:
                for other in (f, t):
                    if name_key(other) not in restored and not self._resolve(conn, [other]):
                        blockers.append(f"'{other}', related to '{snap['name']}', no longer exists")
        return list(dict.fromkeys(blockers))

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Revert journal entry `change_id`; refused (CONFLICT, nothing changed) if a later change stands in the way."""
        with self._write() as conn:
            action, _, detail = self._journal_entry(conn, change_id)
            record = detail["undo"]
            blockers = self._row_blockers(conn, change_id, record)
            if blockers:
                raise ConflictError(f"change #{change_id} ({action}) cannot be undone: " + "; ".join(blockers)
                                    + "; nothing was changed",
                                    hint="Undo the later changes first (newest first), or make the change by hand.",
                                    details={"blocked_by": blockers})
            names = self._put_back(conn, record)
            self._journal(conn, origin, "undo", names, {"undid": change_id, "action": action})
        return {"undid": change_id, "action": action, "entities": names}

    def _put_back(self, conn: sqlite3.Connection, record: dict[str, Any]) -> list[str]:
        """Replace the current rows of what `record` names with the kept ones (this undo is undoable too)."""
        keys = set(record.get("after", {}).get("entities", {})) | {name_key(s["name"]) for s in record["entities"]}
        current = self._resolve(conn, [k for k in keys])
        ids_now = [i for i, _ in current.values()]
        hashes = set(record.get("after", {}).get("memories", {})) | {m["content_hash"] for m in record["memories"]}
        mem_now = [i for (i,) in conn.execute(
            f"SELECT id FROM memories WHERE entity_id IS NULL AND content_hash IN ({','.join('?' * len(hashes))})",
            sorted(hashes))] if hashes else []
        self._before(conn, ids_now, mem_now)
        kept = self._kept_now()  # what comes back is what an undo of this undo removes again
        kept.update(armed=True, keys=set(keys), hashes=set(hashes))
        for entity_id in ids_now:
            conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
            conn.execute("DELETE FROM entity_fts WHERE rowid = ?", (entity_id,))
        for memory_id in mem_now:
            conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        restored: list[int] = []
        for snap in record["entities"]:
            restored.append(self._insert_snapshot(conn, snap))
        for snap in record["entities"]:
            for f, rt, t, at in snap["relations"]:
                ends = self._resolve(conn, [f, t])
                if name_key(f) in ends and name_key(t) in ends:
                    conn.execute("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) "
                                 "VALUES (?, ?, ?, ?)", (ends[name_key(f)][0], rt, ends[name_key(t)][0], at))
        for m in record["memories"]:
            _insert_kept_memory(conn, None, m)
        for key, value in record.get("meta", {}).items():
            self._before_meta(conn, key)
            if value is None:
                conn.execute("DELETE FROM library_meta WHERE key = ?", (key,))
            else:
                conn.execute("INSERT OR REPLACE INTO library_meta VALUES (?, ?)", (key, value))
        self._kept_now()["new_ids"].update(restored)
        self._link_pending(conn)
        self._refresh_fts(conn, restored)
        return list(dict.fromkeys([n for _, n in current.values()] + [s["name"] for s in record["entities"]]))

    # -- backups ---------------------------------------------------------------------------

    def note_backup(self, at: str, path: str) -> None:
        """Remember the last successful backup (health reports it)."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('last_backup', ?)",
                         (json.dumps({"at": at, "path": path}, ensure_ascii=False),))

    def last_backup(self) -> dict[str, str] | None:
        with self._read() as conn:
            row = conn.execute("SELECT value FROM library_meta WHERE key = 'last_backup'").fetchone()
        return json.loads(row[0]) if row else None

    def note_event(self, action: str, detail: dict[str, Any], *, vectors_floor: int = 0) -> None:
        """A journal entry for a change made outside the tools (a restore). `vectors_floor`: the
        vectors' version before it; the new one is higher, so running servers reload their vectors."""
        with self._write() as conn:
            self._journal(conn, action, action, [], detail)
            conn.execute("UPDATE library_meta SET value = max(CAST(value AS INTEGER), ?) + 1 WHERE key = 'vectors_version'",
                         (vectors_floor,))

    def holds_data(self) -> int:
        """How many entities, memories and relations the library holds."""
        with self._read() as conn:
            return conn.execute("SELECT (SELECT count(*) FROM entities) + (SELECT count(*) FROM memories) "
                                "+ (SELECT count(*) FROM relations)").fetchone()[0]

    # -- exports and imports of everything -------------------------------------------------

    def free_memories(self) -> list[Any]:
        """Every free memory (no entity), oldest first by id: what an export writes."""
        with self._read() as conn:
            return select_memories(conn, "m.entity_id IS NULL", (), order="m.id")

    def import_memories(self, items: Sequence[Any], *, origin: str) -> ImportedMemories:
        """Free memories with their own timestamps (MemoryLine-like items): how many added, how many there already."""
        added = 0
        with self._write() as conn:
            for m in items:
                memory_id = insert_memory(conn, None, m.content, m.memory_type, m.tags,
                                          None if m.importance == "medium" else m.importance, m.metadata, m.created_at)
                if memory_id is not None:
                    conn.execute("UPDATE memories SET updated_at = ? WHERE id = ?", (m.updated_at, memory_id))
                    added += 1
            if added:
                self._journal(conn, origin, "import_memories", [], {"added": added})
        return ImportedMemories(added, len(items) - added)

    def restore_dates(self, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                      relations: Mapping[tuple[str, str, str], str], *, origin: str) -> None:
        """Give entities (name_key -> created, updated, observations, their dates) and relations
        ((from key, type, to key) -> created) the times a file says they have."""
        with self._write() as conn:
            self._restore_dates_in(conn, entities, relations, origin)

    def _restore_dates_in(self, conn: sqlite3.Connection, entities: Mapping[str, tuple[str, str, Sequence[str], Sequence[str]]],
                          relations: Mapping[tuple[str, str, str], str], origin: str) -> None:
        """restore_dates inside an open write transaction (a Markdown library renders its files in the same one)."""
        for key, (created, updated, contents, dates) in entities.items():
            row = conn.execute("SELECT id FROM entities WHERE name_key = ?", (key,)).fetchone()
            if row is None:
                continue
            for content, at in zip(contents, dates):
                conn.execute("UPDATE memories SET created_at = ?, updated_at = ? WHERE entity_id = ? AND content = ?",
                             (at, at, row[0], content))
            conn.execute("UPDATE entities SET created_at = ?, updated_at = ? WHERE id = ?", (created, updated, row[0]))
        for (f, rt, t), at in relations.items():
            conn.execute("""UPDATE relations SET created_at = ? WHERE relation_type = ?
                            AND from_id = (SELECT id FROM entities WHERE name_key = ?)
                            AND to_id = (SELECT id FROM entities WHERE name_key = ?)""", (at, rt, f, t))
        if entities or relations:
            self._journal(conn, origin, "restore_dates", [], {"entities": len(entities), "relations": len(relations)})

    @staticmethod
    def _insert_snapshot(conn: sqlite3.Connection, snap: dict[str, Any]) -> int:
        """One kept entity back, under its old id when that id is free."""
        free = conn.execute("SELECT 1 FROM entities WHERE id = ?", (snap["id"],)).fetchone() is None
        values = (snap["name"], name_key(snap["name"]), snap["entity_type"], json.dumps(snap["aliases"], ensure_ascii=False),
                  json.dumps(snap["tags"], ensure_ascii=False), json.dumps(snap["metadata"], ensure_ascii=False),
                  snap["body"], snap["created_at"], snap["updated_at"])
        if free:
            conn.execute("""INSERT INTO entities (id, name, name_key, entity_type, aliases, tags, metadata, body,
                            created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", (snap["id"], *values))
            entity_id = snap["id"]
        else:
            entity_id = conn.execute("""INSERT INTO entities (name, name_key, entity_type, aliases, tags, metadata, body,
                                        created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""", values).lastrowid
        for o in snap["observations"]:
            _insert_kept_memory(conn, entity_id, o)
        conn.executemany("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)",
                         [(entity_id, rt, name_key(t), t) for rt, t in snap["pending_links"]])
        return entity_id


def _insert_kept_memory(conn: sqlite3.Connection, entity_id: int | None, kept: dict[str, Any]) -> None:
    """A memory (an observation when `entity_id` is given) back as the undo record kept it:
    its dates and use count too."""
    memory_id = insert_memory(conn, entity_id, kept["content"], kept["memory_type"], kept["tags"], kept["importance"],
                              kept["metadata"], kept["created_at"])
    if memory_id is not None:
        conn.execute("UPDATE memories SET updated_at = ?, access_count = ?, last_accessed_at = ? WHERE id = ?",
                     (kept["updated_at"], kept["access_count"], kept["last_accessed_at"], memory_id))
