"""Reading a Markdown library's folder into its index: the scan (on open, by the watcher,
and by `rebuild_index`).

A file changed since the last look is parsed outside the write lock, then applied inside it
only if it is still the same file (another memloci process may have rewritten it meanwhile:
its index rows are current already). Files that cannot be parsed are reported, not indexed,
and never rewritten; their entities keep their last indexed state.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from memloci.core import confine, schema
from memloci.core.errors import MemlociError
from memloci.core.model import content_hash, name_key, now_iso, tag_keys
from memloci.markdown.document import EntityDocument, parse_document
from memloci.markdown.memories import MemoryBlock, is_day, parse_day
from memloci.store.markdown.files import CONTEXT, MANUAL, MEMORIES_DIR, FileStat, SyncReport, sha256_hex
from memloci.store.markdown.writeback import MarkdownFiles, record_file
from memloci.store.sqlite.database import Database
from memloci.store.sqlite.documents import apply_document
from memloci.store.sqlite.memory_rows import insert_memory
from memloci.store.sqlite.rows import journal, refresh_fts
from memloci.store.sqlite.tx import WriteTx
from memloci.store.sqlite.vault import link_pending

log = logging.getLogger(__name__)


def _iso(mtime_ns: int) -> str:
    """A file's mtime as memloci writes times: what dates the lines a person wrote."""
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Scanner:
    """The scans of one Markdown library into its index (`db`); the files' side of its writes
    (`files`) learns the links each walk refused. The caller holds the library's lock
    (MarkdownStore) and has opened the index."""

    def __init__(self, root: Path, name: str, db: Database, files: MarkdownFiles):
        self.root = root
        self.name = name
        self.db = db
        self.files = files
        self.last_sync: SyncReport | None = None  # the last scan that found something

    def walk(self) -> dict[str, tuple[int, int]]:
        """Every Markdown file under the root (rel path -> (mtime_ns, size)). Folders are listed
        through file descriptors reached without following links (core/confine.py); a link, to a
        file or a folder, is reported in `refused_links` and never read."""
        found: dict[str, tuple[int, int]] = {}
        links: dict[str, str] = {}
        stack: list[list[str]] = [[]]
        while stack:
            folder = stack.pop()
            try:
                with confine.dir_fd(self.root, folder) as fd:  # entries stat through fd: keep it open
                    self._list(fd, folder, stack, found, links)
            except (OSError, MemlociError):
                continue
        self._list_days(found, links)
        for rel in sorted(set(links) - set(self.files.refused_links)):
            log.warning("library %s: %s is a symbolic link; not followed", self.name, rel)
        self.files.refused_links = links
        return found

    def _list_days(self, found: dict[str, tuple[int, int]], links: dict[str, str]) -> None:
        """The day files of free memories, in `.memloci/memories/`: the one part of memloci's hidden
        folder that is read as the library's data (a link there, at any level, is not followed)."""
        try:
            with confine.dir_fd(self.root, MEMORIES_DIR.split("/")) as fd:
                for entry in list(os.scandir(fd)):
                    rel = f"{MEMORIES_DIR}/{entry.name}"
                    if entry.is_symlink():
                        links[rel] = "a symbolic link; memloci does not follow links inside a library"
                    elif entry.name.endswith(".md") and is_day(entry.name[:-3]) and entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        found[rel] = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return
        except confine.LinkRefusedError as exc:
            links[MEMORIES_DIR] = exc.message
        except (OSError, MemlociError):
            return

    @staticmethod
    def _list(fd: int, folder: list[str], stack: list[list[str]], found: dict[str, tuple[int, int]],
              links: dict[str, str]) -> None:
        for entry in list(os.scandir(fd)):
            rel = "/".join([*folder, entry.name])
            if entry.is_symlink() and (not entry.name.startswith(".") or rel in (".memloci", ".gitattributes")):
                links[rel] = "a symbolic link; memloci does not follow links inside a library"
                continue
            if entry.name.startswith("."):
                if confine.is_stray_temp(entry.name) and entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):  # left by a killed writer (an export, say)
                        os.unlink(entry.name, dir_fd=fd)
                continue  # .memloci, .git, .obsidian, editor temp files
            if entry.is_dir(follow_symlinks=False):
                stack.append([*folder, entry.name])
            elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                if rel in (MANUAL, CONTEXT):
                    continue
                st = entry.stat(follow_symlinks=False)
                found[rel] = (st.st_mtime_ns, st.st_size)

    def scan(self) -> SyncReport:
        """Bring the index up to the files: parse what changed since the last look."""
        files = self.walk()
        with self.db.read() as conn:
            known = {p: (e, m, s, h) for p, e, m, s, h in
                     conn.execute("SELECT path, entity_id, mtime_ns, size, sha256 FROM md_files")}
            broken = {p: (m, s) for p, m, s in conn.execute("SELECT path, mtime_ns, size FROM md_broken")}
        changed = [p for p, st in files.items()
                   if (p not in known or known[p][1:3] != st) and broken.get(p) != st]
        gone = [p for p in known if p not in files]
        gone_broken = [p for p in broken if p not in files]
        report = SyncReport()
        if not changed and not gone and not gone_broken:
            return report
        docs, days, touched = self._parse(sorted(changed), files, known, report)
        self._apply_files(docs, days, touched, gone, gone_broken, known, files, report)
        for rel, error in report.problems.items():
            log.warning("library %s: %s is not indexed: %s", self.name, rel, error)
        self.last_sync = report
        return report

    def _parse(self, paths: list[str], files: dict[str, tuple[int, int]], known: dict, report: SyncReport):
        """Read and parse `paths`: entity documents, day files, and files touched but not changed.
        A file is held to the limits of a tool call; what breaks them is a problem, not indexed."""
        docs: list[tuple[str, EntityDocument, tuple[int, int], str]] = []
        days: list[tuple[str, list[MemoryBlock], tuple[int, int], str]] = []
        touched: list[tuple[str, tuple[int, int], str]] = []
        for rel in paths:
            try:
                data = confine.read_bytes(self.root, rel)
            except OSError as exc:
                report.problems[rel] = f"cannot read: {exc.strerror}"
                continue
            except MemlociError as exc:  # a link swapped in since the walk
                report.problems[rel] = exc.message
                continue
            sha = sha256_hex(data)
            if rel in known and known[rel][3] == sha:
                touched.append((rel, files[rel], sha))  # touched, not changed
                continue
            try:
                if b"\x00" in data:
                    raise ValueError("contains a NUL byte")
                text = data.decode("utf-8")
                stem = Path(rel).stem
                if Path(rel).parent.as_posix() == MEMORIES_DIR and is_day(stem):
                    blocks = parse_day(text, stem)
                    for i, b in enumerate(blocks):
                        if b.content.strip():  # an empty item is the person's business; size and control characters are not
                            schema.clean_text(b.content, f"memory {i + 1}", schema.MEMORY_MAX)
                    days.append((rel, blocks, files[rel], sha))
                else:
                    doc = parse_document(text, fallback_name=stem)
                    schema.clean_name(doc.name, "name")
                    for i, o in enumerate(doc.observations):
                        if o.strip():
                            schema.clean_text(o, f"observation {i + 1}")
                    docs.append((rel, doc, files[rel], sha))
            except (UnicodeDecodeError, MemlociError, ValueError) as exc:
                report.problems[rel] = str(exc) if not isinstance(exc, UnicodeDecodeError) else "not UTF-8 text"
        return docs, days, touched

    def _apply_files(self, docs, days, touched, gone, gone_broken, known, files, report: SyncReport) -> None:
        with self.db.write(reading_files=True) as tx:  # the files are the truth: nothing is written back
            self._apply_in(tx, docs, days, touched, gone, gone_broken, known, files, report)

    def _apply_in(self, tx: WriteTx, docs, days, touched, gone, gone_broken, known, files, report: SyncReport) -> None:
        conn = tx.conn
        at = now_iso()
        # Under the write lock now: a file another memloci process wrote after our scan
        # looked at it is left for the next round (its index rows are already current).
        read = len(docs) + len(days)
        docs = [d for d in docs if self._still(conn, d[0], d[2], d[3])]
        days = [d for d in days if self._still(conn, d[0], d[2], d[3])]
        report.skipped += read - len(docs) - len(days)
        gone = [rel for rel in gone if not confine.exists(self.root, rel)
                and conn.execute("SELECT 1 FROM md_files WHERE path = ?", (rel,)).fetchone()]
        for rel, st, sha in touched:  # same bytes, new mtime: only the stat changes
            if self._unchanged_since_scan(rel, st):
                conn.execute("UPDATE md_files SET mtime_ns = ?, size = ? WHERE path = ? AND sha256 = ?",
                             (*st, rel, sha))
                conn.execute("DELETE FROM md_broken WHERE path = ?", (rel,))  # fixed back to what was indexed
        ids: list[int] = []
        clashes: set[str] = set()
        for rel, doc, st, sha in docs:
            key = name_key(doc.name)
            owner = conn.execute("SELECT m.path FROM md_files m JOIN entities e ON e.id = m.entity_id "
                                 "WHERE e.name_key = ?", (key,)).fetchone()
            if owner and owner[0] != rel and owner[0] in files and owner[0] not in gone:
                report.problems[rel] = f"entity '{doc.name}' is already defined by {owner[0]}"
                clashes.add(rel)
                continue
            entity_id = apply_document(tx, self.db.schema, doc, at, stamp=doc.modified, file_time=_iso(st[0]))
            conn.execute("DELETE FROM md_files WHERE path = ? AND entity_id IS NOT ?", (rel, entity_id))
            record_file(conn, rel, entity_id, key, FileStat(*st), sha)
            conn.execute("DELETE FROM md_broken WHERE path = ?", (rel,))
            ids.append(entity_id)
            previous = known.get(rel, (None,))[0]
            if previous not in (None, entity_id) and not conn.execute(
                    "SELECT 1 FROM md_files WHERE entity_id = ?", (previous,)).fetchone():
                forget(conn, previous)  # the file now names another entity: the old one is gone
                report.removed += 1
        for rel, blocks, st, sha in days:
            apply_day(conn, Path(rel).stem, blocks)
            record_file(conn, rel, None, "", FileStat(*st), sha)
            conn.execute("DELETE FROM md_broken WHERE path = ?", (rel,))
        for rel in gone:
            entity_id = known[rel][0]
            conn.execute("DELETE FROM md_files WHERE path = ?", (rel,))
            if entity_id is None:
                stem = Path(rel).stem
                conn.execute("DELETE FROM memories WHERE entity_id IS NULL AND substr(created_at, 1, 10) = ?",
                             (stem,))
            elif conn.execute("SELECT 1 FROM md_files WHERE entity_id = ?", (entity_id,)).fetchone() is None:
                forget(conn, entity_id)  # the file is gone (not moved): so is its entity
                report.removed += 1
        for rel in gone_broken:
            conn.execute("DELETE FROM md_broken WHERE path = ?", (rel,))
        for rel, error in report.problems.items():
            if rel in files:  # a name clash is looked at again every scan: the other file may go
                stat = (-1, -1) if rel in clashes else files[rel]
                conn.execute("INSERT OR REPLACE INTO md_broken VALUES (?, ?, ?, ?)", (rel, error, *stat))
        link_pending(conn)
        refresh_fts(conn, ids)
        report.indexed = len(ids) + len(days)
        if ids or days or gone:
            journal(tx, "files", "sync", [], {"indexed": [d[0] for d in docs if d[0] not in report.problems]
                                                                + [d[0] for d in days], "removed": gone})

    def _unchanged_since_scan(self, rel: str, st: tuple[int, int]) -> bool:
        try:
            now = confine.lstat(self.root, rel)
        except (OSError, MemlociError):  # gone, or a link now: not the file the scan read
            return False
        return (now.st_mtime_ns, now.st_size) == st

    def _still(self, conn: sqlite3.Connection, rel: str, st: tuple[int, int], sha: str) -> bool:
        """The file is as the scan read it, and the index does not already hold that version."""
        if not self._unchanged_since_scan(rel, st):
            return False
        row = conn.execute("SELECT sha256 FROM md_files WHERE path = ?", (rel,)).fetchone()
        if row is None:
            return True
        if row[0] == sha:
            return False
        # A file memloci knows: mtimes are coarse (a few ms), so two writes can share one stat;
        # only the bytes tell whether another process rewrote it after our scan.
        try:
            return sha256_hex(confine.read_bytes(self.root, rel)) == sha
        except (OSError, MemlociError):
            return False

    def rebuild_index(self) -> SyncReport:
        """Index every file again, as if for the first time; what no file holds leaves the index.

        One write transaction, under the library's write lock from the first file read to the
        commit: servers writing meanwhile wait for it (they never see a half-built index, so
        they never write a second file for an entity they cannot find), and a rebuild killed
        midway leaves the index as it was. Unchanged observations and memories keep their rows
        (and vectors): a rebuild repairs the index, it does not start it over. An entity whose
        file cannot be parsed keeps its last indexed state, as it does in a scan.
        """
        with self.db.write(reading_files=True) as tx:
            conn = tx.conn
            report = SyncReport()
            files = self.walk()
            docs, days, _ = self._parse(sorted(files), files, {}, report)
            before = conn.execute("SELECT path, entity_id, name_key, mtime_ns, size, sha256 FROM md_files").fetchall()
            known = {r[0]: (r[1], r[3], r[4], r[5]) for r in before}
            conn.execute("DELETE FROM md_files")
            conn.execute("DELETE FROM md_broken")
            self._apply_in(tx, docs, days, [], [], [], known, files, report)
            broken = {p for (p,) in conn.execute("SELECT path FROM md_broken")}
            for row in before:
                if row[0] in broken:
                    conn.execute("INSERT OR IGNORE INTO md_files VALUES (?, ?, ?, ?, ?, ?)", row)
            orphans = [i for (i,) in conn.execute(
                "SELECT id FROM entities WHERE id NOT IN (SELECT entity_id FROM md_files WHERE entity_id IS NOT NULL)")]
            for entity_id in orphans:
                forget(conn, entity_id)
            conn.execute(f"""DELETE FROM memories WHERE entity_id IS NULL AND
                             '{MEMORIES_DIR}/' || substr(created_at, 1, 10) || '.md' NOT IN (SELECT path FROM md_files)""")
            report.removed += len(orphans)
        for rel, error in report.problems.items():
            log.warning("library %s: %s is not indexed: %s", self.name, rel, error)
        self.last_sync = report
        return report


def forget(conn: sqlite3.Connection, entity_id: int) -> None:
    """Drop an entity whose file is gone; links to it wait (pending) for a file that names it."""
    conn.execute("""INSERT OR IGNORE INTO pending_links
                    SELECT r.from_id, r.relation_type, e.name_key, e.name
                    FROM relations r JOIN entities e ON e.id = r.to_id WHERE r.to_id = ? AND r.from_id != ?""",
                 (entity_id, entity_id))
    conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
    conn.execute("DELETE FROM entity_fts WHERE rowid = ?", (entity_id,))


def apply_day(conn: sqlite3.Connection, day: str, blocks: list[MemoryBlock]) -> None:
    """The free memories of `day` become those of its file (unchanged ones keep their ids)."""
    have = {h: i for i, h in conn.execute(
        "SELECT id, content_hash FROM memories WHERE entity_id IS NULL AND substr(created_at, 1, 10) = ?", (day,))}
    wanted: dict[str, MemoryBlock] = {}
    for b in blocks:
        wanted.setdefault(content_hash(b.content, None), b)
    gone = [i for h, i in have.items() if h not in wanted]
    if gone:
        conn.execute(f"DELETE FROM memories WHERE id IN ({','.join('?' * len(gone))})", gone)
    for h, b in wanted.items():
        if h in have:
            conn.execute("UPDATE memories SET tags = ?, memory_type = ?, importance = ?, metadata = ?, superseded_by = ?, "
                         "archived_at = ?, links = ? WHERE id = ?",
                         (json.dumps(b.tags, ensure_ascii=False), b.memory_type, b.importance,
                          json.dumps(b.metadata, ensure_ascii=False), b.superseded_by, b.archived_at,
                          json.dumps(b.links, ensure_ascii=False), have[h]))
            conn.execute("DELETE FROM memory_tags WHERE memory_id = ?", (have[h],))
            conn.executemany("INSERT OR IGNORE INTO memory_tags VALUES (?, ?)", [(t, have[h]) for t in tag_keys(b.tags)])
        else:
            clash = conn.execute("SELECT id FROM memories WHERE entity_id IS NULL AND content_hash = ?", (h,)).fetchone()
            if clash:  # the same text on another day: it moved here
                conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", (b.created_at, clash[0]))
                continue
            new_id = insert_memory(conn, None, b.content, b.memory_type, b.tags, b.importance, b.metadata, b.created_at)
            if new_id is not None and (b.superseded_by or b.archived_at or b.links):
                conn.execute("UPDATE memories SET superseded_by = ?, archived_at = ?, links = ? WHERE id = ?",
                             (b.superseded_by, b.archived_at, json.dumps(b.links, ensure_ascii=False), new_id))
