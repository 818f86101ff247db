"""Undo in a Markdown library, and its journal read back from `journal.md`.

In a Markdown library the files are the truth, so a change's undo record keeps files: the
exact bytes every file had before the change (None: the change created it) and the sha256
each has after it. Undo checks that every one of those files is still as the change left it
(else a later change, or a person, stands in the way), writes the old bytes back and indexes
them as a rescan would: a deleted note comes back byte for byte, front matter, CRLF, BOM
and all. The index rows kept beside the files give observations and entities their dates
back (dates the files may not hold).

The index is rebuildable, the journal in it is not: a fresh index (a clone, a rebuilt or
replaced index) first reads `journal.md` back, so `memloci history` and undo keep working.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memloci.core import confine
from memloci.core.errors import ConflictError, MemlociError, ValidationError
from memloci.core.model import name_key, now_iso
from memloci.markdown.document import parse_document
from memloci.markdown.memories import day_header, is_day, parse_day
from memloci.rules.undo import undo_detail
from memloci.store.markdown.files import CONTEXT, JOURNAL, MANUAL, MEMORIES_DIR, OLD_MEMORIES, decode_kept, sha256_hex
from memloci.store.markdown.scan import apply_day, forget
from memloci.store.markdown.writeback import MarkdownFiles, restored_base, staged_files
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.documents import apply_document
from memloci.store.sqlite.memory_rows import set_tags
from memloci.store.sqlite.rows import journal, refresh_fts
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import journal_entry, keep_before, later
from memloci.store.sqlite.vault import link_pending

log = logging.getLogger(__name__)

_HEADING = re.compile(r"^## (\S+) · ([^·\n]+?)(?: · (.*))?$")


def _appended(kept: Any) -> bool:
    """Whether an undo record keeps this file as a length (the change only appended to it)."""
    return isinstance(kept, dict) and "prefix" in kept


def parse_journal(text: str) -> list[tuple[str, str, str, list[str], dict | None]]:
    """(at, tool, action, entities, detail) of each entry of a journal.md, oldest first."""
    entries = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _HEADING.match(lines[i])
        i += 1
        if not m:
            continue
        at, action, names = m.group(1), m.group(2).strip(), m.group(3) or ""
        names = re.sub(r" and \d+ more$", "", names)
        tool, detail = action, None
        if i < len(lines) and lines[i].startswith("- by: "):
            tool = lines[i][6:].strip()
            i += 1
        if i < len(lines) and lines[i].strip() == "```json":
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            try:
                detail = json.loads("\n".join(lines[i + 1:end]))
            except json.JSONDecodeError:
                detail = None
            i = end + 1
        entries.append((at, tool, action, [n for n in names.split(", ") if n], detail))
    return entries


class MarkdownUndo:
    """Undo of one Markdown library's changes from the files their records keep, and the
    writes that hold its lock over the folder (backups and restores)."""

    def __init__(self, root: Path, db: Database, files: MarkdownFiles):
        self.root = root
        self.db = db
        self.files = files

    # -- undoing -----------------------------------------------------------------------

    def undo_change(self, change_id: int, *, origin: str = "undo") -> dict[str, Any]:
        """Put back the files change `change_id` changed (the caller holds the library's lock and
        scanned first: what people changed by hand is known before deciding)."""
        # The files written here are the truth: the index follows them as in a scan.
        with self.db.write(reading_files=True) as tx:
            conn = tx.conn
            action, _, detail = journal_entry(conn, change_id)
            record = detail["undo"]
            if "files" not in record:
                raise ValidationError(f"id: change #{change_id} ({action}) kept no files, so it cannot be "
                                      "undone in a Markdown library")
            record = moved_days(record)
            blockers = self._file_blockers(conn, change_id, record)
            if blockers:
                raise ConflictError(f"change #{change_id} ({action}) cannot be undone: " + "; ".join(blockers)
                                    + "; nothing was changed",
                                    hint="Undo the later changes first (newest first), or edit the files by hand.",
                                    details={"blocked_by": blockers})
            names = self._put_back_files(tx, record)
            journal(tx, origin, "undo", names, undo_detail(change_id, action, detail))
            self.files.append_journal(tx)  # a rescan's journal stays out of journal.md; an undo does not
        return {"undid": change_id, "action": action, "entities": names}

    def _file_blockers(self, conn: sqlite3.Connection, change_id: int, record: dict[str, Any]) -> list[str]:
        blockers = []
        for rel, expected in record["files_after"].items():
            now = _disk_sha(self.root, rel)
            if now == expected:
                continue
            owner = conn.execute("SELECT e.name FROM md_files m JOIN entities e ON e.id = m.entity_id "
                                 "WHERE m.path = ?", (rel,)).fetchone()
            after = later(conn, change_id, owner[0]) if owner else ""
            if expected is None:
                blockers.append(f"{rel} exists again" + (f" (entity '{owner[0]}'{after})" if owner else ""))
            elif now is None:
                blockers.append(f"{rel} was deleted since{after}")
            else:
                blockers.append(f"{rel} was changed since{after or ' (outside memloci?)'}")
        files = record["files"]
        for rel, value in files.items():
            if _appended(value):  # a day file, appended to: no note in it
                continue
            data = decode_kept(value)
            if data is None or _kind(rel) != "entity":
                continue
            try:
                doc = parse_document(data.decode("utf-8"), fallback_name=Path(rel).stem)
            except (UnicodeDecodeError, MemlociError, ValueError):
                continue
            held = conn.execute("SELECT m.path FROM md_files m JOIN entities e ON e.id = m.entity_id "
                                "WHERE e.name_key = ?", (name_key(doc.name),)).fetchone()
            if held and held[0] not in files:
                blockers.append(f"a new entity took the name '{doc.name}' ({held[0]}"
                                f"{later(conn, change_id, doc.name)})")
        return list(dict.fromkeys(blockers))

    def _put_back_files(self, tx: WriteTx, record: dict[str, Any]) -> list[str]:
        conn = tx.conn
        at = now_iso()
        # (an appended file is as the change left it, the blockers checked: its old bytes begin it)
        files = {rel: confine.read_bytes(self.root, rel)[:int(v["prefix"])] if _appended(v) else decode_kept(v)
                 for rel, v in record["files"].items()}
        rows = {name_key(s["name"]): s for s in record.get("entities", [])}
        held = [r[0] for r in conn.execute(
            f"SELECT DISTINCT entity_id FROM md_files WHERE entity_id IS NOT NULL AND path IN ({','.join('?' * len(files))})",
            list(files))] if files else []
        days = [Path(rel).stem for rel in files if _kind(rel) == "day"]
        # the free memories of the day files it rewrites too: their use counts live in the index only
        dated = [r[0] for r in conn.execute(
            f"SELECT id FROM memories WHERE entity_id IS NULL AND substr(created_at, 1, 10) IN ({','.join('?' * len(days))})",
            days)] if days else []
        # observations' tags live in the index alone: entities the change kept but whose files it
        # left as they were get them back from the kept rows (below), so this undo keeps them too
        unfiled = [r[0] for r in conn.execute(
            f"SELECT id FROM entities WHERE name_key IN ({','.join('?' * len(rows))})", list(rows))
            if r[0] not in held] if rows else []
        keep_before(tx, [*held, *unfiled], dated)  # this undo keeps its own undo record
        tx.record["armed"] = True
        owners = dict(conn.execute(f"SELECT path, entity_id FROM md_files WHERE path IN ({','.join('?' * len(files))})",
                                   list(files)).fetchall()) if files else {}
        applied: list[int] = []
        names: list[str] = []
        for rel, data in files.items():  # files the change created go first (a renamed note frees its name)
            if data is not None:
                continue
            self.files.unlink(tx, rel)
            conn.execute("DELETE FROM md_files WHERE path = ?", (rel,))
            restored_base(conn, rel, None)
            if _kind(rel) == "day":
                conn.execute("DELETE FROM memories WHERE entity_id IS NULL AND substr(created_at, 1, 10) = ?",
                             (Path(rel).stem,))
            gone = _drop_if_fileless(conn, owners.get(rel))
            if gone:
                names.append(gone)
        for rel, data in files.items():
            if data is None:
                continue
            text = data.decode("utf-8")
            kind = _kind(rel)
            if kind == "other":  # meta.md, context.md: files only
                self.files.put(tx, rel, text, None)
                conn.execute("DELETE FROM md_files WHERE path = ?", (rel,))
                continue
            if kind == "day":
                self.files.put(tx, rel, text, None)
                apply_day(conn, Path(rel).stem, parse_day(text, Path(rel).stem))
                continue
            doc = parse_document(text, fallback_name=Path(rel).stem)
            # observations come back in the file's order (ids give the order), not after the kept ones
            conn.execute("DELETE FROM memories WHERE entity_id = (SELECT id FROM entities WHERE name_key = ?)",
                         (name_key(doc.name),))
            entity_id = apply_document(tx, self.db.schema, doc, at, stamp=doc.modified)
            conn.execute("DELETE FROM md_files WHERE path = ? AND entity_id IS NOT ?", (rel, entity_id))
            self.files.put(tx, rel, text, entity_id, name_key(doc.name))
            restored_base(conn, rel, data)
            if owners.get(rel) not in (None, entity_id):
                _drop_if_fileless(conn, owners[rel])
            applied.append(entity_id)
            names.append(doc.name)
        for m in record.get("memories", []):  # free memories: the day files hold no access counts
            conn.execute("UPDATE memories SET updated_at = ?, access_count = ?, last_accessed_at = ? "
                         "WHERE entity_id IS NULL AND content = ?",
                         (m["updated_at"], m["access_count"], m["last_accessed_at"], m["content"]))
        for entity_id in unfiled:
            _restore_tags(conn, entity_id, rows)
        tx.record["new_ids"].update(applied)
        link_pending(conn)
        for entity_id, name in zip(applied, names[len(names) - len(applied):]):
            _restore_dates(conn, entity_id, rows.get(name_key(name)))
        refresh_fts(conn, applied)
        return names

    # -- backups -----------------------------------------------------------------------

    @contextmanager
    def frozen(self) -> Iterator[WriteTx]:
        """Hold the library's write lock (the caller holds its in-process lock): no tool, scan or
        other process changes the folder or the index meanwhile (they wait, as for any write)."""
        with self.db.write(reading_files=True) as tx:
            yield tx

    def replace_files(self, put: dict[str, bytes], remove: list[str]) -> None:
        """Write and remove files as one change under the write lock: all of it or none, also
        under SIGKILL (intent.py). The index catches up with the next `sync()`."""
        def current(rel: str) -> str | None:
            try:
                return sha256_hex(confine.read_bytes(self.root, rel))
            except FileNotFoundError:
                return None

        with self.frozen() as tx:
            change = staged_files(tx)
            for rel in remove:
                change.delete(rel, current(rel))
            for rel, data in put.items():
                change.put(rel, data, current(rel))

    def reload_journal(self) -> int:
        """The journal table becomes journal.md's entries again (after a restore put the file back)."""
        with self.db.write() as tx:
            tx.conn.execute("DELETE FROM journal")
        return self.load_journal()

    # -- the journal, read back ----------------------------------------------------------

    def load_journal(self) -> int:
        """Fill an empty journal table from journal.md (a fresh index); how many entries."""
        try:
            text = confine.read_text(self.root, JOURNAL)
        except (FileNotFoundError, UnicodeDecodeError, MemlociError, OSError):
            return 0
        entries = parse_journal(text)
        if not entries:
            return 0
        # Read from a file: nothing to write back (the rescan's mode also marks these as written to journal.md).
        with self.db.write(reading_files=True) as tx:
            conn = tx.conn
            if conn.execute("SELECT 1 FROM journal LIMIT 1").fetchone():
                return 0
            conn.executemany("INSERT INTO journal (at, tool, action, entities, detail) VALUES (?, ?, ?, ?, ?)",
                             [(at, tool, action, json.dumps(names, ensure_ascii=False),
                               json.dumps(detail, ensure_ascii=False) if detail is not None else None)
                              for at, tool, action, names, detail in entries])
        return len(entries)


def moved_days(record: dict[str, Any]) -> dict[str, Any]:
    """An undo record made before layout.py moved `memories/<day>.md` into `.memloci/memories/`
    names the day files where they now are (a day file is known by its `# Memories of` title)."""
    def where(rel: str) -> str:
        kept = record["files"].get(rel)
        if _appended(kept):  # kept as a length: written after the move, so already where it is
            return rel
        name = rel.removeprefix(f"{OLD_MEMORIES}/")
        data = decode_kept(kept)
        if name != rel and "/" not in name and is_day(name.removesuffix(".md")) and data is not None \
                and data.startswith(day_header(name.removesuffix(".md")).encode("utf-8")):
            return f"{MEMORIES_DIR}/{name}"
        return rel

    moved = {rel: where(rel) for rel in record["files"]}
    if all(rel == new for rel, new in moved.items()):
        return record
    return {**record, "files": {moved[rel]: v for rel, v in record["files"].items()},
            "files_after": {moved.get(rel, rel): v for rel, v in record["files_after"].items()}}


def _kind(rel: str) -> str:
    if rel in (MANUAL, CONTEXT, JOURNAL):
        return "other"
    if Path(rel).parent.as_posix() == MEMORIES_DIR and is_day(Path(rel).stem):
        return "day"
    return "entity"


def _disk_sha(root: Path, rel: str) -> str | None:
    try:
        return sha256_hex(confine.read_bytes(root, rel))
    except (FileNotFoundError, NotADirectoryError):
        return None


def _drop_if_fileless(conn: sqlite3.Connection, entity_id: int | None) -> str | None:
    """Forget an entity left with no file; its name, if it was."""
    if entity_id is None or conn.execute("SELECT 1 FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone():
        return None
    row = conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()
    forget(conn, entity_id)
    return row[0] if row else None


def _restore_tags(conn: sqlite3.Connection, entity_id: int, rows: dict[str, dict[str, Any]]) -> None:
    """The kept tags of an entity's observations (the file holds none: they live in the index)."""
    key = conn.execute("SELECT name_key FROM entities WHERE id = ?", (entity_id,)).fetchone()[0]
    for o in rows[key]["observations"]:
        found = conn.execute("SELECT id, tags FROM memories WHERE entity_id = ? AND content = ?",
                             (entity_id, o["content"])).fetchone()
        if found is not None and json.loads(found[1]) != list(o["tags"]):
            set_tags(conn, found[0], o["tags"])


def _restore_dates(conn: sqlite3.Connection, entity_id: int, snap: dict[str, Any] | None) -> None:
    """Dates the file may not hold come back from the kept index rows."""
    if snap is None:
        return
    conn.execute("UPDATE entities SET created_at = ?, updated_at = ? WHERE id = ?",
                 (snap["created_at"], snap["updated_at"], entity_id))
    for f, rt, t, at in snap["relations"]:
        # links from notes the change left alone (their [[link]] text stayed) come back too
        conn.execute("""INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at)
                        SELECT f.id, ?, t.id, ? FROM entities f, entities t
                        WHERE f.name_key = ? AND t.name_key = ?""", (rt, at, name_key(f), name_key(t)))
        conn.execute("""UPDATE relations SET created_at = ? WHERE relation_type = ?
                        AND from_id = (SELECT id FROM entities WHERE name_key = ?)
                        AND to_id = (SELECT id FROM entities WHERE name_key = ?)""", (at, rt, name_key(f), name_key(t)))
    for o in snap["observations"]:
        conn.execute("UPDATE memories SET created_at = ?, updated_at = ?, access_count = ?, last_accessed_at = ? "
                     "WHERE entity_id = ? AND content = ?",
                     (o["created_at"], o["updated_at"], o["access_count"], o["last_accessed_at"], entity_id,
                      o["content"]))
