"""Writing a Markdown library's files back: its index's FileSide (store/sqlite/tx.py).

Every write is one index transaction. Triggers mark what it changed; before the commit, the
changed entities' files are staged (intent.py): a file memloci creates is rendered in the
entity-document format, an existing one is edited in place, only where the change lies
(markdown/patch.py; a person's bytes are kept); new free memories and the journal staged as
appends; then, still before the commit, an intent record lists them all and they are put in
place. A failed call, file write or commit puts every file back (`after_rollback`); a killed
process's change is rolled forward or back by the next writer (`begin`). A file edited outside
memloci since it was indexed (in place, or saved by rename) is never overwritten: it is
compared with the bytes the change was computed from just before it is replaced, and the call
fails with CONFLICT.

Everything a transaction stages travels on its WriteTx (`tx.files`, the FileChange), never on
the store or a thread.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from memloci.core import confine
from memloci.core.errors import ConflictError
from memloci.core.model import links_data, name_key, now_iso
from memloci.core.schema import DEFAULT_SCHEMA, LibrarySchema
from memloci.markdown import frontmatter, patch
from memloci.markdown.document import parse_document, render_document, wikilinks
from memloci.markdown.memories import MemoryBlock, day_header, is_day, preamble, render_block, render_day
from memloci.store.markdown.files import (
    CONTEXT,
    JOURNAL,
    MANUAL,
    MEMORIES_DIR,
    FileStat,
    encode_kept,
    file_stem,
    journal_text,
    sha256_hex,
)
from memloci.store.markdown.importing import rendered_body
from memloci.store.markdown.intent import FileChange, recover
from memloci.store.sqlite.documents import LINKS_TO, document
from memloci.store.sqlite.memory_rows import select_memories
from memloci.store.sqlite.rows import resolve
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.undo_rows import seal_journal
from memloci.store.sqlite.vault import alias_keys


def staged_files(tx: WriteTx) -> FileChange:
    """The file changes this transaction staged so far."""
    change = tx.files
    if not isinstance(change, FileChange):
        raise RuntimeError("a Markdown file write outside a write transaction")
    return change


def _stamped(yaml_text: str, at: str) -> str:
    """`modified:` set to `at` where the front matter has that key; nothing added."""
    return frontmatter.set_scalar(yaml_text, "modified", at, timestamp=True) if frontmatter.has_key(yaml_text, "modified") else yaml_text


class MarkdownFiles:
    """The files of one Markdown library, as its index's write transactions change them.
    `schema`: the library's rules (a typed schema keeps links in observations as text);
    `refused_links`: links the last walk of the folder found (rel path -> why), never followed
    and never shadowed by a file memloci writes."""

    def __init__(self, root: Path, name: str):
        self.root = root
        self.name = name
        self.schema: LibrarySchema = DEFAULT_SCHEMA
        self.refused_links: dict[str, str] = {}

    # -- the steps of a write transaction (FileSide) -------------------------------------

    def begin(self, tx: WriteTx) -> None:
        tx.files = FileChange(self.root, self.name)
        recover(self.root, tx.conn, self.name)  # a killed writer's half-done change, first

    def before_seal(self, tx: WriteTx) -> None:
        conn = tx.conn
        if tx.reading_files:  # what came from the files needs no writing back
            for table in ("md_dirty", "md_dirty_days", "md_new_memories"):
                conn.execute(f"DELETE FROM {table}")
            # Nor into journal.md: reading files must not change the working tree (git keeps
            # that history); `memloci history` still lists the rescans.
            conn.execute("INSERT OR REPLACE INTO library_meta SELECT 'journal_written', ifnull(max(id), 0) "
                         "FROM journal")
        else:
            self.flush(tx)
        self.arm_for_files(tx)

    def arm_for_files(self, tx: WriteTx) -> None:
        """The manual and the context live in files here: a change of them keeps an undo record."""
        kept = tx.record
        if kept["row"] is None and kept.get("last_row") and ({MANUAL, CONTEXT} & set(staged_files(tx).ops)):
            kept.update(armed=True, row=kept["last_row"])

    def sealing(self, tx: WriteTx, detail: dict[str, Any]) -> None:
        """The undo record keeps the rows (store/sqlite/undo_rows.py), plus every file this
        transaction changes: its bytes now (staged changes are not in place yet) and the sha256
        it will have. A file only appended to keeps its length alone (`{"prefix": n}`): undo
        finds it as the change left it (its sha256), so its first n bytes are the old ones, and
        a day of stored memories does not copy its day file into journal.md once per memory."""
        before: dict[str, Any] = {}
        after = {}
        for rel, op in staged_files(tx).ops.items():
            if rel == JOURNAL:
                continue
            try:
                old = confine.read_bytes(self.root, rel)
            except (FileNotFoundError, NotADirectoryError):
                old = None
            before[rel] = {"prefix": len(old)} if op.kind == "append" and old is not None else encode_kept(old)
            after[rel] = (sha256_hex(op.data) if op.kind == "put" else None if op.kind == "delete"
                          else sha256_hex((old or b"") + op.data))
        detail["undo"]["files"] = before
        detail["undo"]["files_after"] = after
        for snap in detail["undo"]["entities"]:  # the files hold the bodies; the rows are kept for their dates
            snap.pop("body", None)

    def before_commit(self, tx: WriteTx) -> None:
        """Put the staged files in place: the last step before the index commits (its journal
        entry is complete by now, so journal.md gets all of it)."""
        if not tx.reading_files:
            self.append_journal(tx)
        for op, st in staged_files(tx).apply(tx.conn):  # appended files: their index rows follow their new size
            if op.record is not None:
                record_file(tx.conn, op.rel, op.record[0], op.record[1], st, op.record[2])

    def after_commit(self, tx: WriteTx) -> None:
        staged_files(tx).done()

    def after_rollback(self, tx: WriteTx) -> None:
        if tx.files is not None:  # (None: BEGIN itself failed)
            staged_files(tx).rollback()

    def document_text(self, tx: WriteTx, entity_id: int) -> str | None:
        row = tx.conn.execute("SELECT path FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone()
        if row is None:
            return None
        # Never edit a text not the file's; edits see it as LF without a BOM (put back on write).
        return patch.decode(self.check_fresh(tx, row[0]) or b"")[0]

    # -- staging files ---------------------------------------------------------------

    def flush(self, tx: WriteTx) -> None:
        """Stage the files of what this transaction changed (the triggers' md_dirty, md_dirty_days,
        md_new_memories)."""
        conn = tx.conn
        for (entity_id,) in conn.execute("SELECT entity_id FROM md_dirty ORDER BY entity_id").fetchall():
            self.write_entity(tx, entity_id)
        conn.execute("DELETE FROM md_dirty")
        full = {d for (d,) in conn.execute("SELECT day FROM md_dirty_days")}
        new = conn.execute("""SELECT m.id, m.created_at FROM md_new_memories n JOIN memories m ON m.id = n.memory_id
                              WHERE m.entity_id IS NULL ORDER BY m.id""").fetchall()
        appends: dict[str, list[int]] = {}
        for memory_id, created_at in new:
            if created_at[:10] not in full:
                appends.setdefault(created_at[:10], []).append(memory_id)
        for day, ids in appends.items():
            self.append_memories(tx, day, ids)
        for day in sorted(full):
            self.rewrite_day(tx, day)
        conn.execute("DELETE FROM md_dirty_days")
        conn.execute("DELETE FROM md_new_memories")

    def check_fresh(self, tx: WriteTx, rel: str) -> bytes | None:
        """Refuse to overwrite a file that changed on disk after it was indexed; its bytes (None:
        no such file yet), so a caller never reads it again."""
        conn = tx.conn
        staged = staged_files(tx).pending(rel)
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
            raise ConflictError(f"{rel} was deleted outside memloci", hint="Retry in a second, after the rescan.") from None
        # mtimes are coarse (a few ms): an equal stat is confirmed by the bytes
        data = confine.read_bytes(self.root, rel) if row is not None and (st.st_mtime_ns, st.st_size) == tuple(row[:2]) else None
        if data is None or sha256_hex(data) != row[2]:
            raise ConflictError(f"{rel} changed on disk since it was indexed; nothing was written",
                                hint="The change is picked up within a second; retry the call then.")
        return data

    def put(self, tx: WriteTx, rel: str, text: str, entity_id: int | None, key: str = "",
            current: bytes | None = None, absent: bool = False) -> None:
        """Stage a file's new bytes in this transaction (`current`: its bytes as just read, if they
        were: the file must still hold them when the change is put in place; `absent`: there was
        no such file when the caller looked)."""
        data = text.encode("utf-8")
        change = staged_files(tx)
        staged = change.pending(rel)
        expected = staged.expected if staged is not None else None if absent else self.current_sha(rel, current)
        st = change.put(rel, data, expected)
        record_file(tx.conn, rel, entity_id, key, st, sha256_hex(data))

    def current_sha(self, rel: str, current: bytes | None) -> str | None:
        if current is not None:
            return sha256_hex(current)
        try:
            return sha256_hex(confine.read_bytes(self.root, rel))
        except FileNotFoundError:
            return None

    def unlink(self, tx: WriteTx, rel: str, current: bytes | None = None) -> None:
        change = staged_files(tx)
        staged = change.pending(rel)
        change.delete(rel, staged.expected if staged is not None else self.current_sha(rel, current))

    def exists(self, tx: WriteTx, rel: str) -> bool:
        """Whether `rel` is there, counting what this transaction staged."""
        staged = staged_files(tx).pending(rel)
        if staged is not None:
            return staged.kind != "delete"
        return confine.exists(self.root, rel)

    def case_twin(self, tx: WriteTx, rel: str, old: str | None) -> bool:
        """Whether another file of `rel`'s folder has its name but for case (`todo.md` beside
        `TODO.md`): one file on macOS and Windows, or after a clone onto them, so never made."""
        folder = Path(rel).parent.as_posix()
        change = staged_files(tx)
        on_disk = change.listed.get(folder)
        if on_disk is None:
            on_disk = change.listed[folder] = {}
            for n in confine.names_in(self.root, folder):
                on_disk.setdefault(n.casefold(), []).append(n)
        mine = (rel, old)
        twins = [f"{folder}/{n}".removeprefix("./") for n in on_disk.get(Path(rel).name.casefold(), ())]
        staged = change.folded.get(rel.casefold())
        return any(t not in mine for t in twins) or (staged is not None and staged not in mine)

    def write_entity(self, tx: WriteTx, entity_id: int) -> None:
        conn = tx.conn
        row = conn.execute("SELECT path, name_key FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone()
        exists = conn.execute("SELECT name FROM entities WHERE id = ?", (entity_id,)).fetchone()
        if exists is None:  # deleted
            if row is not None:
                self.unlink(tx, row[0], self.check_fresh(tx, row[0]))
                conn.execute("DELETE FROM md_files WHERE path = ?", (row[0],))
            return
        name = exists[0]
        key = name_key(name)
        current = source = None
        if row is not None and row[1] == key:
            rel, old = row[0], None
            current = source = self.check_fresh(tx, rel)
        else:  # new, or renamed: a file named after the entity, beside the old one
            wanted = Path(tx.paths[key]) if row is None and key in tx.paths else None  # an import keeps its path
            folder = Path(row[0]).parent if row is not None else wanted.parent if wanted else Path(".")
            old = row[0] if row is not None else None
            if old is not None:
                source = self.check_fresh(tx, old)
            stem = file_stem(name)
            # Names that map to one file name ("x/y", "x:y") get the name's hash as well.
            candidates = ([file_stem(wanted.stem)] if wanted else []) + [stem, f"{stem}-{sha256_hex(name.encode())[:6]}"]
            for candidate in candidates:
                rel = (folder / f"{candidate}.md").as_posix().removeprefix("./")
                self.refuse_broken(conn, rel, name)  # a broken note is never shadowed by a second file
                if rel == old or not (self.exists(tx, rel) or self.case_twin(tx, rel, old)
                                      or rel in (MANUAL, JOURNAL, CONTEXT)
                                      or Path(rel).parent.as_posix() == MEMORIES_DIR and is_day(candidate)):
                    break
            else:
                raise ConflictError(f"name: the files for '{name}' already exist in library '{self.name}'",
                                    hint="Pick another name, or merge into the entity that file holds.")
        ours = source is None or created_here(conn, old or rel)
        rendered = False
        start: bytes | None = None  # the bytes the edits start from, when they are a person's
        text = tx.texts.pop(key, None)  # an edit keeps the person's formatting
        if text is not None:  # the edit's text is the file's, LF and without its BOM: put those back
            style = patch.decode(source)[1] if source is not None else patch.Style()
            if ours:
                at = tx.stamps.pop(key, None) or now_iso()
                text = frontmatter.with_front_matter(text, lambda y: _stamped(y, at))
            text = patch.encode(text, style).decode("utf-8")
        else:
            doc = document(conn, entity_id)
            doc.dates = dict(conn.execute("SELECT content, created_at FROM memories WHERE entity_id = ? "
                                          "ORDER BY id", (entity_id,)).fetchall())
            # Observations are part of the file's body: their [[links]] are links too (as a rescan reads them).
            linked = {name_key(t) for rt, t in doc.relations if rt == LINKS_TO} | {name_key(t) for t in wikilinks(doc.body)}
            extra = [t for o in doc.observations if "[[" in o for t in wikilinks(o)
                     if name_key(t) not in linked and name_key(t) != key]
            if extra and self.schema.relation_types is None:  # a typed schema keeps links as text
                add_links(conn, entity_id, extra)
            if source is None:  # a file memloci creates: its own rendering (DESIGN.md §1)
                text, rendered = render_document(doc), True
            else:  # an existing file: edits to its bytes, nothing rendered again
                relations = conn.execute(
                    """SELECT r.relation_type, e.name FROM relations r JOIN entities e ON e.id = r.to_id WHERE r.from_id = ?
                       UNION ALL SELECT relation_type, target FROM pending_links WHERE from_id = ?""",
                    (entity_id, entity_id)).fetchall()
                # Adding and removing only: the edits start from the person's bytes (what memloci
                # added before is added again), so once all of it is removed the file is theirs again.
                if not ours and old is None and not tx.renames and not tx.tails.get(key):
                    base = person_base(conn, rel, source)
                    start = source if base is None else base
                lf, style = patch.decode(source if start is None else start)
                want = patch.Wanted(doc, relations, list(tx.renames), tx.tails.get(key, ""), now_iso() if ours else None,
                                    resolve=lambda texts: alias_keys(conn, texts))  # `[[alias]]` links
                text = patch.encode(patch.patch_document(lf, want, fallback_name=Path(old or rel).stem, key_of=name_key,
                                                         new_stem=Path(rel).stem),
                                    style).decode("utf-8")
        if source is not None and not ours:
            keep_base(conn, old or rel, rel, start, text.encode("utf-8"))
        if source is not None and text.encode("utf-8") == source and rel == (old or rel):
            return  # nothing to change: the file keeps its bytes and its mtime
        # A file name just found free needs no second look on disk (apply() checks it still is).
        self.put(tx, rel, text, entity_id, key, current=current, absent=rel != (old or rel) or row is None)
        if old is not None and old != rel:
            self.unlink(tx, old, source)
        conn.execute("DELETE FROM md_created WHERE path = ?", (old,)) if old is not None and old != rel else None
        if source is None or (ours and old is not None):
            conn.execute("INSERT OR IGNORE INTO md_created VALUES (?)", (rel,))
        # The index holds the body the file now holds, so the next edit starts from it.
        body = rendered_body(text) if rendered else None
        if body is None:
            body = parse_document(patch.decode(text.encode("utf-8"))[0], fallback_name=Path(rel).stem).body
        conn.execute("UPDATE entities SET body = ? WHERE id = ? AND body != ?", (body, entity_id, body))

    def refuse_broken(self, conn: sqlite3.Connection, rel: str, name: str) -> None:
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

    def append_memories(self, tx: WriteTx, day: str, ids: list[int]) -> None:
        conn = tx.conn
        rel = f"{MEMORIES_DIR}/{day}.md"
        marks = ",".join("?" * len(ids))
        text = "".join(render_block(b) for b in free_blocks(conn, f"m.id IN ({marks})", tuple(ids)))
        if not self.exists(tx, rel):
            self.put(tx, rel, day_header(day) + text, None)
            return
        before = self.check_fresh(tx, rel) or b""
        added = text.encode("utf-8")
        # Appending: storing a memory never rewrites the day. The index row follows the append.
        staged_files(tx).append(rel, added, sha256_hex(before), record=(None, "", sha256_hex(before + added)))

    def rewrite_day(self, tx: WriteTx, day: str) -> None:
        conn = tx.conn
        rel = f"{MEMORIES_DIR}/{day}.md"
        blocks = free_blocks(conn, "substr(m.created_at, 1, 10) = ?", (day,))
        current = self.check_fresh(tx, rel) if self.exists(tx, rel) else None
        if blocks:
            head = preamble(current.decode("utf-8")) if current is not None else None
            self.put(tx, rel, render_day(day, blocks, head), None, current=current)
        else:
            self.unlink(tx, rel)
            conn.execute("DELETE FROM md_files WHERE path = ?", (rel,))

    def append_journal(self, tx: WriteTx) -> None:
        """Stage this transaction's journal entries as an append to journal.md."""
        conn = tx.conn
        self.arm_for_files(tx)
        seal_journal(tx, self)  # the undo record (every file as it was) goes to journal.md too
        done = conn.execute("SELECT value FROM library_meta WHERE key = 'journal_written'").fetchone()
        rows = conn.execute("SELECT id, at, tool, action, entities, detail FROM journal WHERE id > ? ORDER BY id",
                            (int(done[0]) if done else 0,)).fetchall()
        if not rows:
            return
        text = journal_text([row[1:] for row in rows], new_file=not confine.exists(self.root, JOURNAL))
        # Only appended to, by memloci (and merged by git): no freshness check.
        staged_files(tx).append(JOURNAL, text.encode("utf-8"), None, check=False)
        conn.execute("INSERT OR REPLACE INTO library_meta VALUES ('journal_written', ?)", (str(rows[-1][0]),))


def record_file(conn: sqlite3.Connection, rel: str, entity_id: int | None, key: str, st: os.stat_result | FileStat,
            sha: str) -> None:
    if entity_id is not None:
        conn.execute("DELETE FROM md_files WHERE entity_id = ? AND path != ?", (entity_id, rel))
    conn.execute("INSERT OR REPLACE INTO md_files (path, entity_id, name_key, mtime_ns, size, sha256) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (rel, entity_id, key, st.st_mtime_ns, st.st_size, sha))


def person_base(conn: sqlite3.Connection, rel: str, source: bytes) -> bytes | None:
    """The bytes a person's file had before memloci's additions to it, while the file still holds
    exactly what memloci last wrote from them (None: no such additions, or the file changed since)."""
    row = conn.execute("SELECT base, written FROM md_base WHERE path = ?", (rel,)).fetchone()
    return bytes(row[0]) if row is not None and row[1] == sha256_hex(source) else None


def keep_base(conn: sqlite3.Connection, old: str, rel: str, base: bytes | None, written: bytes) -> None:
    """Remember the person's bytes `base` of `rel` beside the bytes memloci writes from them (kept
    when they are the same: an undo may bring memloci's additions back); None (an edit of the
    person's text: a rename, a merge, a document edit) forgets them, as a file moved from `old` does."""
    conn.execute("DELETE FROM md_base WHERE path IN (?, ?)", (old, rel))
    if base is not None:
        conn.execute("INSERT INTO md_base VALUES (?, ?, ?)", (rel, base, sha256_hex(written)))


def restored_base(conn: sqlite3.Connection, rel: str, data: bytes | None) -> None:
    """Undo put `data` back in `rel` (None: removed it). The file was as the undone change left it,
    so `data` are bytes memloci wrote from the person's bytes it remembers, or those bytes: later
    removals still end at the person's bytes."""
    row = conn.execute("SELECT base FROM md_base WHERE path = ?", (rel,)).fetchone()
    if row is None:
        return
    if data is None:
        conn.execute("DELETE FROM md_base WHERE path = ?", (rel,))
    else:
        conn.execute("UPDATE md_base SET written = ? WHERE path = ?", (sha256_hex(data), rel))


def created_here(conn: sqlite3.Connection, rel: str) -> bool:
    """Whether memloci created this file (and may stamp its `modified:`): a person's file
    never gets a date from memloci."""
    return conn.execute("SELECT 1 FROM md_created WHERE path = ?", (rel,)).fetchone() is not None


def free_blocks(conn: sqlite3.Connection, where: str, params: tuple) -> list[MemoryBlock]:
    return [MemoryBlock(m.content, m.created_at, m.memory_type, list(m.tags),
                        None if m.importance == "medium" else m.importance, m.metadata,
                        m.superseded_by, m.archived_at, links_data(m.links))
            for m in select_memories(conn, f"m.entity_id IS NULL AND {where}", params, order="m.created_at, m.id")]


def add_links(conn: sqlite3.Connection, entity_id: int, targets: list[str]) -> None:
    """`links_to` relations from the entity to these names (pending links for names not there yet)."""
    found = resolve(conn, targets)
    at = now_iso()
    for t in targets:
        hit = found.get(name_key(t))
        if hit:
            conn.execute("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                         (entity_id, LINKS_TO, hit[0], at))
        else:
            conn.execute("INSERT OR IGNORE INTO pending_links VALUES (?, ?, ?, ?)", (entity_id, LINKS_TO, name_key(t), t))
