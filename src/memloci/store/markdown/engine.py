"""A library kept as a folder of Markdown files: the files are the truth (DESIGN.md §3).

One entity per `.md` file (subfolders allowed) in the entity-document format; free memories
in day files under `memories/`; the library manual in `meta.md`; the journal in
`journal.md`. The index is a SQLite store in `.memloci/index.db` (rebuildable, kept out of
git) with the same tables as a SQLite library, so search, memories and the graph tools work
unchanged.

Writes: a call runs as one index transaction. Triggers mark what it changed; before the
commit, the changed entities' files are staged (markdown_intent.py): a file memloci creates
is rendered in the entity-document format, an existing one is edited in place, only where
the change lies (markdown/patch.py; a person's bytes are kept); new free memories
and the journal staged as appends; then, still before the commit, an intent record lists
them all and they are put in place. SQLite's write lock is the library's lock: tool writes,
the watcher, reindex and import never write the folder at once, in one process or several.
A failed call, file write or commit puts every file back; a killed process's change is
rolled forward or back by the next writer. A file edited outside memloci since it was
indexed (in place, or saved by rename) is never overwritten: it is compared with the bytes
the change was computed from just before it is replaced, and the call fails with CONFLICT.

Reads of outside edits: `sync()` compares every file's mtime and size with the index and
parses what changed (on open, then every second on a watcher thread). A file that cannot be
parsed is reported (`problems()`, the log) and left untouched; its entity keeps its last
indexed state.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memloci.core import confine
from memloci.core.errors import ConflictError, LibraryMissingError, LibraryUnreadableError, MemlociError, storage_error
from memloci.core.model import LibraryStats, ListedEntity, name_key, now_iso
from memloci.markdown import frontmatter, patch
from memloci.markdown.context import parse_context, render_context
from memloci.markdown.document import parse_document, render_document, wikilinks
from memloci.markdown.memories import MemoryBlock, day_header, is_day, preamble, render_block, render_day
from memloci.store.markdown.files import (
    CONTEXT,
    INDEX_DIR,
    JOURNAL,
    MANUAL,
    MEMORIES_DIR,
    WATCH_INTERVAL_S,
    FileStat,
    file_stem,
    sha256_hex,
)
from memloci.store.markdown.importing import MarkdownImport, rendered_body
from memloci.store.markdown.intent import INTENTS_TABLE, FileChange, recover
from memloci.store.markdown.scan import MarkdownScan
from memloci.store.markdown.undo import MarkdownUndo
from memloci.store.migratable import MarkdownMigratable
from memloci.store.sqlite.documents import LINKS_TO
from memloci.store.sqlite.engine import SQLiteStore, _split_sql
from memloci.store.sqlite.memories import select_memories
from memloci.store.sqlite.schema import MARKDOWN_TRIGGERS, SCHEMA_VERSION

log = logging.getLogger(__name__)

# Files memloci created itself: only their `modified:` is stamped on later writes. A clone or
# a lost index forgets this, and then memloci treats them as a person's files (no stamp).
CREATED_FILES = "CREATE TABLE IF NOT EXISTS md_created (path TEXT PRIMARY KEY)"


def _stamped(yaml_text: str, at: str) -> str:
    """`modified:` set to `at` where the front matter has that key; nothing added."""
    return frontmatter.set_scalar(yaml_text, "modified", at, timestamp=True) if frontmatter.has_key(yaml_text, "modified") else yaml_text

def _corrupt(exc: Exception) -> bool:
    """Whether SQLite found the index damaged (not locked, not read-only, not a full disk)."""
    cause = exc.__cause__
    return (isinstance(cause, sqlite3.DatabaseError)
            and not isinstance(cause, (sqlite3.OperationalError, sqlite3.IntegrityError)))


def journal_text(rows: list[tuple[str, str, str, str, str | None]], *, new_file: bool) -> str:
    """journal.md's entries for (at, tool, action, entities JSON, detail JSON) rows, the file's
    title first when it is `new_file` (markdown_undo.parse_journal reads them back)."""
    lines = ["# Journal\n\nEvery change to this library, newest last.\n"] if new_file else []
    for at, tool, action, entities, detail in rows:
        listed = json.loads(entities)
        names = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        lines.append(f"\n## {at} · {action}" + (f" · {names}" if names else "") + "\n"
                     + (f"- by: {tool}\n" if tool != action else ""))
        if detail:
            lines.append("```json\n" + json.dumps(json.loads(detail), ensure_ascii=False, indent=1, sort_keys=True)
                         + "\n```\n")
    return "".join(lines)


class MarkdownStore(MarkdownMigratable, MarkdownImport, MarkdownUndo, MarkdownScan, SQLiteStore):
    kind = "markdown"

    def __init__(self, folder: str | os.PathLike[str], name: str = "default"):
        self.root = Path(folder).expanduser().absolute()
        super().__init__(self.root / INDEX_DIR / "index.db", name)
        self._md_lock = threading.RLock()
        self._md_ready = False
        self._opening = False
        self._syncing = threading.local()  # per thread: a tool call never inherits the watcher's mode
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._verbatim = threading.local()
        self._undo = threading.local()
        self.index_moved_to: str | None = None  # where a corrupt index was moved aside, if it was

    # -- opening ---------------------------------------------------------------------

    def open(self, *, create: bool = True) -> None:
        if self._md_ready:
            return
        with self._md_lock:
            if self._md_ready or self._opening:  # _opening: this thread is already inside open()
                return
            self._opening = True
            try:
                try:
                    self._open(create)
                    self._load_journal()  # a fresh index gets its history back from journal.md
                    self._scan()  # other threads wait here until the folder is indexed
                except LibraryUnreadableError as exc:
                    if not _corrupt(exc):
                        raise
                    self._move_index_aside(exc)  # damage found past the first page: start again from the files
                    self._open(create)
                    self._load_journal()
                    self._scan()
                self._md_ready = True
            finally:
                self._opening = False

    def _open(self, create: bool) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise LibraryUnreadableError(f"library '{self.name}': {self.root} is a file, not a folder")
        if not self.root.exists():
            if not create:
                raise LibraryMissingError(f"library '{self.name}' does not exist yet: {self.root}")
            try:
                self.root.mkdir(parents=True)
            except OSError as exc:
                raise storage_error(exc, f"library '{self.name}': cannot create {self.root}") from exc
        index = self.root / INDEX_DIR
        try:
            # The index is memloci's own: private (0700, files 0600), never reached through a link
            # (a clone's `.memloci -> /elsewhere` must not put an index there).
            confine.private_dir(self.root, INDEX_DIR)
            if not confine.exists(self.root, f"{INDEX_DIR}/.gitignore"):  # rebuilt from the files: not for git
                confine.write_atomic(self.root, f"{INDEX_DIR}/.gitignore", b"# memloci's rebuildable index\n*\n",
                                     mode=confine.PRIVATE_FILE)
            # No .gitattributes: memloci adds nothing to a person's folder beyond .memloci/ and the
            # files the README names (it documents `journal.md merge=union` for git users).
            # SQLite opens its files by name: check them for links just before, and make them private.
            for folder in ("", INDEX_DIR):  # a writer killed between its temp file and the rename
                confine.remove_stray_temps(self.root, folder)
            for suffix in ("", "-wal", "-shm", "-journal"):
                confine.check(self.root, f"{INDEX_DIR}/index.db{suffix}")
                confine.private_file(self.root, f"{INDEX_DIR}/index.db{suffix}", create=not suffix)
        except OSError as exc:
            raise storage_error(exc, f"library '{self.name}': cannot write {index}") from exc
        try:
            super().open(create=True)
            conn = self._connect()  # not _borrow(): that would open() again
        except LibraryUnreadableError as exc:
            if not _corrupt(exc):
                raise
            self._move_index_aside(exc)
            super().open(create=True)
            conn = self._connect()
        try:
            with self._write_lock:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _split_sql(MARKDOWN_TRIGGERS):
                        conn.execute(statement)
                    conn.execute(CREATED_FILES)
                    conn.execute(INTENTS_TABLE)
                    recover(self.root, conn, self.name)  # a change a killed process left half done
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        finally:
            conn.close()

    def recover(self) -> None:
        """Open the index and finish or undo a change a killed process left half done, without
        scanning the folder (`open()` does this too, then scans)."""
        with self._md_lock:
            self._open(create=False)

    def _move_index_aside(self, exc: Exception) -> None:
        """The index is only a cache of the files: a corrupt one is kept aside (for a post-mortem)
        and built again from the files."""
        SQLiteStore.close(self)  # its connections only: a watcher keeps running
        stamp = time.strftime("%Y%m%dT%H%M%S")
        moved = self.root / INDEX_DIR / f"index.db.corrupt-{stamp}"
        for suffix in ("", "-wal", "-shm"):
            src = self.root / INDEX_DIR / f"index.db{suffix}"
            if src.exists() and not src.is_symlink():
                os.replace(src, moved.with_name(moved.name + suffix))
        self.index_moved_to = str(moved)
        log.warning("library %s: the index %s was unreadable (%s); moved it to %s and rebuilding it from the files",
                    self.name, self.path, exc, moved)
        confine.private_file(self.root, f"{INDEX_DIR}/index.db", create=True)

    def start_watching(self, interval: float = WATCH_INTERVAL_S) -> None:
        """Pick up outside edits every `interval` seconds while the process runs."""
        if self._watcher is not None:
            return

        def watch() -> None:
            try:
                self.open()  # the first scan runs here, not on the caller's thread
            except MemlociError as exc:
                log.error("library %s: %s", self.name, exc)
                return
            while not self._stop.wait(interval):
                try:
                    self.sync()
                except Exception as exc:  # keep watching; the next round retries
                    log.warning("library %s: scanning %s failed: %s", self.name, self.root, exc)

        self._watcher = threading.Thread(target=watch, name=f"memloci-watch-{self.name}", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(5)
        self._watcher = None
        super().close()
        self._md_ready = False
        self._stop = threading.Event()

    # -- writing back ------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One index transaction whose file changes land with it, all or nothing (markdown_intent.py):
        files are staged while the call runs, put in place just before the commit, and put back
        if the call, a file operation or the commit fails, or at the next write if the process dies."""
        change = self._undo.change = FileChange(self.root, self.name)
        try:
            with super()._write() as conn:
                recover(self.root, conn, self.name)  # a killed writer's half-done change, first
                yield conn
                if self._reading_files():  # what came from the files needs no writing back
                    for table in ("md_dirty", "md_dirty_days", "md_new_memories"):
                        conn.execute(f"DELETE FROM {table}")
                    # Nor into journal.md: reading files must not change the working tree (git keeps
                    # that history); `memloci history` still lists the rescans.
                    conn.execute("INSERT OR REPLACE INTO library_meta SELECT 'journal_written', ifnull(max(id), 0) "
                                 "FROM journal")
                else:
                    self._flush(conn)
                # then SQLiteStore._write seals the journal entry and calls _before_commit
        except BaseException:
            change.rollback()  # done already in _after_rollback, under the lock, unless the lock was never had
            raise
        else:
            change.done()
        finally:
            self._undo.change = None
            self._verbatim.texts, self._verbatim.renames, self._verbatim.tails, self._verbatim.stamps = {}, [], {}, {}

    def _reading_files(self) -> bool:
        return getattr(self._syncing, "on", False)  # set per thread by the scan and undo; unset: no

    def _after_rollback(self) -> None:
        change = getattr(self._undo, "change", None)
        if change is not None:
            change.rollback()

    def _before_commit(self, conn: sqlite3.Connection) -> None:
        """Put the staged files in place: the last step before the index commits (its journal
        entry is complete by now, so journal.md gets all of it)."""
        if not self._reading_files():
            self._append_journal(conn)
        for op, st in self._staged().apply(conn):  # appended files: their index rows follow their new size
            if op.record is not None:
                self._record(conn, op.rel, op.record[0], op.record[1], st, op.record[2])

    def _staged(self) -> FileChange:
        change = getattr(self._undo, "change", None)
        if change is None:
            raise RuntimeError("a Markdown file write outside a write transaction")
        return change

    def _flush(self, conn: sqlite3.Connection) -> None:
        for (entity_id,) in conn.execute("SELECT entity_id FROM md_dirty ORDER BY entity_id").fetchall():
            self._write_entity(conn, entity_id)
        conn.execute("DELETE FROM md_dirty")
        full = {d for (d,) in conn.execute("SELECT day FROM md_dirty_days")}
        new = conn.execute("""SELECT m.id, m.created_at FROM md_new_memories n JOIN memories m ON m.id = n.memory_id
                              WHERE m.entity_id IS NULL ORDER BY m.id""").fetchall()
        appends: dict[str, list[int]] = {}
        for memory_id, created_at in new:
            if created_at[:10] not in full:
                appends.setdefault(created_at[:10], []).append(memory_id)
        for day, ids in appends.items():
            self._append_memories(conn, day, ids)
        for day in sorted(full):
            self._rewrite_day(conn, day)
        conn.execute("DELETE FROM md_dirty_days")
        conn.execute("DELETE FROM md_new_memories")

    def _check_fresh(self, conn: sqlite3.Connection, rel: str) -> bytes | None:
        """Refuse to overwrite a file that changed on disk after it was indexed; its bytes (None:
        no such file yet), so a caller never reads it again."""
        staged = self._staged().pending(rel)
        if staged is not None:  # already changed by this call: its new bytes are the current ones
            return staged.data if staged.kind == "put" else None
        row = conn.execute("SELECT mtime_ns, size, sha256 FROM md_files WHERE path = ?", (rel,)).fetchone()
        broken = conn.execute("SELECT error FROM md_broken WHERE path = ?", (rel,)).fetchone()
        if broken:
            raise ConflictError(f"{rel} cannot be parsed ({broken[0]}); memloci does not rewrite it",
                                hint=f"Fix {rel} by hand; the next scan picks it up.")
        try:
            st = confine.lstat(self.root, rel)  # a link here is refused, never written through
        except FileNotFoundError:
            if row is None:
                return None
            raise ConflictError(f"{rel} was deleted outside memloci", hint="Retry in a second, after the rescan.")
        # mtimes are coarse (a few ms): an equal stat is confirmed by the bytes
        data = confine.read_bytes(self.root, rel) if row is not None and (st.st_mtime_ns, st.st_size) == tuple(row[:2]) else None
        if data is None or sha256_hex(data) != row[2]:
            raise ConflictError(f"{rel} changed on disk since it was indexed; nothing was written",
                                hint="The change is picked up within a second; retry the call then.")
        return data

    def _put(self, conn: sqlite3.Connection, rel: str, text: str, entity_id: int | None, key: str = "",
             current: bytes | None = None, absent: bool = False) -> None:
        """Stage a file's new bytes in this transaction (`current`: its bytes as just read, if they
        were: the file must still hold them when the change is put in place; `absent`: there was
        no such file when the caller looked)."""
        data = text.encode("utf-8")
        change = self._staged()
        staged = change.pending(rel)
        expected = staged.expected if staged is not None else None if absent else self._current_sha(rel, current)
        st = change.put(rel, data, expected)
        self._record(conn, rel, entity_id, key, st, sha256_hex(data))

    def _current_sha(self, rel: str, current: bytes | None) -> str | None:
        if current is not None:
            return sha256_hex(current)
        try:
            return sha256_hex(confine.read_bytes(self.root, rel))
        except FileNotFoundError:
            return None

    def _unlink(self, rel: str, current: bytes | None = None) -> None:
        change = self._staged()
        staged = change.pending(rel)
        change.delete(rel, staged.expected if staged is not None else self._current_sha(rel, current))

    def _exists(self, rel: str) -> bool:
        """Whether `rel` is there, counting what this transaction staged."""
        staged = self._staged().pending(rel)
        if staged is not None:
            return staged.kind != "delete"
        return confine.exists(self.root, rel)

    @staticmethod
    def _record(conn: sqlite3.Connection, rel: str, entity_id: int | None, key: str, st: os.stat_result | FileStat,
                sha: str) -> None:
        if entity_id is not None:
            conn.execute("DELETE FROM md_files WHERE entity_id = ? AND path != ?", (entity_id, rel))
        conn.execute("INSERT OR REPLACE INTO md_files (path, entity_id, name_key, mtime_ns, size, sha256) "
                     "VALUES (?, ?, ?, ?, ?, ?)", (rel, entity_id, key, st.st_mtime_ns, st.st_size, sha))

    def _write_entity(self, conn: sqlite3.Connection, entity_id: int) -> None:
        row = conn.execute("SELECT path, name_key FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone()
        exists = conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()
        if exists is None:  # deleted
            if row is not None:
                self._unlink(row[0], self._check_fresh(conn, row[0]))
                conn.execute("DELETE FROM md_files WHERE path = ?", (row[0],))
            return
        name = exists[0]
        key = name_key(name)
        current = source = None
        if row is not None and row[1] == key:
            rel, old = row[0], None
            current = source = self._check_fresh(conn, rel)
        else:  # new, or renamed: a file named after the entity, beside the old one
            folder = Path(row[0]).parent if row is not None else Path(".")
            old = row[0] if row is not None else None
            if old is not None:
                source = self._check_fresh(conn, old)
            stem = file_stem(name)
            # Names that map to one file name ("x/y", "x:y") get the name's hash as well.
            for candidate in (stem, f"{stem}-{sha256_hex(name.encode())[:6]}"):
                rel = (folder / f"{candidate}.md").as_posix().removeprefix("./")
                self._refuse_broken(conn, rel, name)  # a broken note is never shadowed by a second file
                if rel == old or not (self._exists(rel) or rel in (MANUAL, JOURNAL, CONTEXT)
                                      or Path(rel).parent.as_posix() == MEMORIES_DIR and is_day(candidate)):
                    break
            else:
                raise ConflictError(f"name: the files for '{name}' already exist in library '{self.name}'",
                                    hint="Pick another name, or merge into the entity that file holds.")
        ours = source is None or self._created_here(conn, old or rel)
        rendered = False
        text = getattr(self._verbatim, "texts", {}).pop(key, None)  # an edit keeps the person's formatting
        if text is not None:  # the edit's text is the file's, LF and without its BOM: put those back
            style = patch.decode(source)[1] if source is not None else patch.Style()
            if ours:
                at = getattr(self._verbatim, "stamps", {}).pop(key, None) or now_iso()
                text = frontmatter.with_front_matter(text, lambda y: _stamped(y, at))
            text = patch.encode(text, style).decode("utf-8")
        else:
            doc = self._document(conn, entity_id)
            doc.dates = dict(conn.execute("SELECT content, created_at FROM memories WHERE entity_id = ? "
                                          "ORDER BY id", (entity_id,)).fetchall())
            # Observations are part of the file's body: their [[links]] are links too (as a rescan reads them).
            linked = {name_key(t) for rt, t in doc.relations if rt == LINKS_TO} | {name_key(t) for t in wikilinks(doc.body)}
            extra = [t for o in doc.observations if "[[" in o for t in wikilinks(o)
                     if name_key(t) not in linked and name_key(t) != key]
            if extra and self.schema.relation_types is None:  # a typed schema keeps links as text
                self._add_links(conn, entity_id, extra)
            if source is None:  # a file memloci creates: its own rendering (DESIGN.md §1)
                text, rendered = render_document(doc), True
            else:  # an existing file: edits to its bytes, nothing rendered again
                relations = conn.execute(
                    """SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id WHERE r.from_id = ?
                       UNION ALL SELECT relation_type, target FROM pending_links WHERE from_id = ?""",
                    (entity_id, entity_id)).fetchall()
                lf, style = patch.decode(source)
                want = patch.Wanted(doc, relations, list(getattr(self._verbatim, "renames", [])),
                                    getattr(self._verbatim, "tails", {}).get(key, ""), now_iso() if ours else None,
                                    resolve=lambda texts: self._alias_keys(conn, texts))  # `[[alias]]` links
                text = patch.encode(patch.patch_document(lf, want, fallback_name=Path(old or rel).stem, key_of=name_key,
                                                         new_stem=Path(rel).stem),
                                    style).decode("utf-8")
        if source is not None and text.encode("utf-8") == source and rel == (old or rel):
            return  # nothing to change: the file keeps its bytes and its mtime
        # A file name just found free needs no second look on disk (apply() checks it still is).
        self._put(conn, rel, text, entity_id, key, current=current, absent=rel != (old or rel) or row is None)
        if old is not None and old != rel:
            self._unlink(old, source)
        conn.execute("DELETE FROM md_created WHERE path = ?", (old,)) if old is not None and old != rel else None
        if source is None or (ours and old is not None):
            conn.execute("INSERT OR IGNORE INTO md_created VALUES (?)", (rel,))
        # The index holds the body the file now holds, so the next edit starts from it.
        body = rendered_body(text) if rendered else None
        if body is None:
            body = parse_document(patch.decode(text.encode("utf-8"))[0], fallback_name=Path(rel).stem).body
        conn.execute("UPDATE entities SET body = ? WHERE id = ? AND body != ?", (body, entity_id, body))

    def _refuse_broken(self, conn: sqlite3.Connection, rel: str, name: str) -> None:
        """A note memloci cannot read (unparsable, or a link it does not follow) may hold `name`:
        never write a second file beside it, under its file name in any case or Unicode form."""
        unreadable = {**dict(conn.execute("SELECT path, error FROM md_broken").fetchall()), **self.refused_links}
        if not unreadable:
            return
        folder, key = Path(rel).parent, name_key(Path(rel).stem)
        for path, why in sorted(unreadable.items()):
            held = Path(path)
            if held.parent == folder and held.suffix == ".md" and name_key(held.stem) == key:
                raise ConflictError(f"{path} cannot be read ({why}); it may hold '{name}', so memloci neither "
                                    "rewrites it nor writes a second file beside it",
                                    hint=f"Fix or replace {path} by hand; the next scan picks it up, then retry.")

    @staticmethod
    def _created_here(conn: sqlite3.Connection, rel: str) -> bool:
        """Whether memloci created this file (and may stamp its `modified:`): a person's file
        never gets a date from memloci."""
        return conn.execute("SELECT 1 FROM md_created WHERE path = ?", (rel,)).fetchone() is not None

    def _free_blocks(self, conn: sqlite3.Connection, where: str, params: tuple) -> list[MemoryBlock]:
        return [MemoryBlock(m.content, m.created_at, m.memory_type, list(m.tags),
                            None if m.importance == "medium" else m.importance, m.metadata)
                for m in select_memories(conn, f"m.entity_id IS NULL AND {where}", params, order="m.created_at, m.id")]

    def _append_memories(self, conn: sqlite3.Connection, day: str, ids: list[int]) -> None:
        rel = f"{MEMORIES_DIR}/{day}.md"
        marks = ",".join("?" * len(ids))
        text = "".join(render_block(b) for b in self._free_blocks(conn, f"m.id IN ({marks})", tuple(ids)))
        if not self._exists(rel):
            self._put(conn, rel, day_header(day) + text, None)
            return
        before = self._check_fresh(conn, rel) or b""
        added = text.encode("utf-8")
        # Appending: storing a memory never rewrites the day. The index row follows the append.
        self._staged().append(rel, added, sha256_hex(before), record=(None, "", sha256_hex(before + added)))

    def _rewrite_day(self, conn: sqlite3.Connection, day: str) -> None:
        rel = f"{MEMORIES_DIR}/{day}.md"
        blocks = self._free_blocks(conn, "substr(m.created_at, 1, 10) = ?", (day,))
        current = self._check_fresh(conn, rel) if self._exists(rel) else None
        if blocks:
            head = preamble(current.decode("utf-8")) if current is not None else None
            self._put(conn, rel, render_day(day, blocks, head), None, current=current)
        else:
            self._unlink(rel)
            conn.execute("DELETE FROM md_files WHERE path = ?", (rel,))

    def _append_journal(self, conn: sqlite3.Connection) -> None:
        self._seal_journal(conn)  # the undo record (every file as it was) goes to journal.md too
        done = conn.execute("SELECT value FROM library_meta WHERE key = 'journal_written'").fetchone()
        rows = conn.execute("SELECT id, at, tool, action, entities, detail FROM journal WHERE id > ? ORDER BY id",
                            (int(done[0]) if done else 0,)).fetchall()
        if not rows:
            return
        text = journal_text([row[1:] for row in rows], new_file=not confine.exists(self.root, JOURNAL))
        # Only appended to, by memloci (and merged by git): no freshness check.
        self._staged().append(JOURNAL, text.encode("utf-8"), None, check=False)
        conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('journal_written', ?)", (str(rows[-1][0]),))

    # -- reporting ---------------------------------------------------------------------

    def problems(self) -> dict[str, str]:
        """Files that could not be indexed, with why."""
        with self._read() as conn:
            broken = dict(conn.execute("SELECT path, error FROM md_broken ORDER BY path").fetchall())
        return dict(sorted({**broken, **self.refused_links}.items()))

    def entity_listing(self) -> list[ListedEntity]:
        """Every entity with its file path (None: no file yet), by name, in one query
        (list_entities matches a glob against both)."""
        with self._read() as conn:
            return [ListedEntity(*row) for row in conn.execute(
                "SELECT e.name, e.entity_type, m.path FROM entities e "
                "LEFT JOIN md_files m ON m.entity_id = e.id ORDER BY e.name_key")]

    def stats(self) -> LibraryStats:
        base = super().stats()
        size = sum(st[1] for st in self._walk().values())
        return LibraryStats(base.name, self.kind, str(self.root), base.entities, base.observations, base.memories,
                            base.relations, base.journal_entries, size, SCHEMA_VERSION)

    def entity_file_text(self, name: str) -> str | None:
        """The entity's file as it is on disk (None if it has none yet)."""
        with self._read() as conn:
            row = conn.execute("SELECT m.path FROM md_files m JOIN entities e ON e.id = m.entity_id "
                               "WHERE e.name_key = ?", (name_key(name),)).fetchone()
        if row is None:
            return None
        try:
            return confine.read_text(self.root, row[0])
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def _document_text(self, conn: sqlite3.Connection, entity_id: int) -> str:
        row = conn.execute("SELECT path FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone()
        if row is not None:
            # Never edit a text not the file's; edits see it as LF without a BOM (put back on write).
            return patch.decode(self._check_fresh(conn, row[0]) or b"")[0]
        return super()._document_text(conn, entity_id)

    def _keep_text(self, key: str, text: str, stamp: str | None = None) -> None:
        self._verbatim.texts = {key: text}  # read by this transaction's flush, on this thread
        self._verbatim.stamps = {key: stamp} if stamp else {}  # its `modified:` (else now)

    def _note_rename(self, old: str, new: str) -> None:
        # Every file this change writes has its links to `old` rewritten in place.
        self._verbatim.renames = [*getattr(self._verbatim, "renames", []), (old, new)]

    def _note_tail(self, key: str, tail: str) -> None:
        # Text a merge appends to a body: appended to the file as it is.
        self._verbatim.tails = {**getattr(self._verbatim, "tails", {}), key: tail}

    def read_context(self) -> dict:
        try:
            return parse_context(confine.read_text(self.root, CONTEXT))
        except FileNotFoundError:
            return {}

    def update_context(self, change, *, origin: str) -> dict:
        with self._write() as conn:  # the library's write lock: read, merge, write as one step
            before = self.read_context()
            ctx = change(before)
            self._put(conn, CONTEXT, render_context(ctx), None)
            conn.execute("DELETE FROM md_files WHERE path = ?", (CONTEXT,))  # not an entity, never scanned
            self._journal(conn, origin, origin, [], {k: {"before": before.get(k), "after": v}
                                                      for k, v in ctx.items() if before.get(k) != v and k != "updated_at"})
        return ctx

    def manual_text(self) -> str | None:
        try:
            return confine.read_text(self.root, MANUAL)
        except FileNotFoundError:
            return None

    def edit_manual(self, change, *, origin: str, detail: dict) -> str:
        with self._write() as conn:  # the library's write lock: read and write as one step
            text = change(self.manual_text())
            self._put(conn, MANUAL, text, None)
            conn.execute("DELETE FROM md_files WHERE path = ?", (MANUAL,))  # not an entity, never scanned
            self._journal(conn, origin, origin, [], detail)
        return text
