"""Where a Markdown library keeps memloci's own files: all of them under `.memloci/` (the
journal, the free memories' day files, the index and its working files), none beside the notes.

Libraries written by memloci before this layout kept `journal.md` and `memories/<day>.md` at
their root. Opening one moves them (`move_to_hidden`) as one change of the library's write
transaction (intent.py: staged, an intent record, renamed, the index commits): a kill at any
point leaves the old layout or the new one whole, and the next opening finishes the move. A
root `journal.md` that is not memloci's journal (a person's note named so) stays where it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
from pathlib import Path

from memloci.core import confine
from memloci.core.errors import MemlociError
from memloci.markdown.memories import day_header, is_day
from memloci.store.markdown.files import JOURNAL, JOURNAL_TITLE, MEMORIES_DIR, OLD_JOURNAL, OLD_MEMORIES, sha256_hex
from memloci.store.markdown.undo import parse_journal
from memloci.store.markdown.writeback import staged_files
from memloci.store.sqlite.tx import WriteTx

log = logging.getLogger(__name__)

# The index and memloci's working files stay out of git; the journal and the free memories are
# the library's history and data, kept beside the notes in a clone.
GITIGNORE = (b"# memloci's own folder: the index (rebuilt from the files) stays out of git;\n"
             b"# the journal and the free memories are kept\n"
             b"*\n!journal.md\n!memories/\n!memories/*.md\n")
OLD_GITIGNORES = (b"# memloci's rebuildable index\n*\n",)
MOVED_KEY = "md_moved_memories"  # library_meta: the old `memories/` folder is to be removed once empty


def _regular(root: Path, rel: str) -> bytes | None:
    """The bytes of a regular file at `rel` (None: none there, or a link, which is never followed)."""
    try:
        if not stat.S_ISREG(confine.lstat(root, rel).st_mode):
            return None
        return confine.read_bytes(root, rel)
    except (OSError, MemlociError):
        return None


def is_journal(data: bytes) -> bool:
    """Whether a root `journal.md` is memloci's journal: titled `# Journal`, with entries, and every
    `## ` heading in it an entry's (a person's journal note is not moved)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    headings = sum(1 for line in text.split("\n") if line.startswith("## "))
    return text.startswith("# Journal\n") and headings > 0 and len(parse_journal(text)) == headings


def old_layout(root: Path, day_paths: set[str]) -> dict[str, tuple[str, bytes]]:
    """memloci's files in the old layout: old path -> (new path, bytes). `day_paths`: the paths the
    index knows as day files (an old index); a day file is also known by its `# Memories of` title."""
    moves: dict[str, tuple[str, bytes]] = {}
    journal = _regular(root, OLD_JOURNAL)
    if journal is not None and is_journal(journal):
        moves[OLD_JOURNAL] = (JOURNAL, journal)
    try:
        with confine.dir_fd(root, [OLD_MEMORIES]) as fd:
            names = sorted(os.listdir(fd))
    except (OSError, MemlociError):  # none, or a link: never followed
        names = []
    for name in names:
        rel = f"{OLD_MEMORIES}/{name}"
        if not (name.endswith(".md") and is_day(name[:-3])):
            continue
        data = _regular(root, rel)
        if data is not None and (rel in day_paths or data.startswith(day_header(name[:-3]).encode("utf-8"))):
            moves[rel] = (f"{MEMORIES_DIR}/{name}", data)
    return moves


def old_day_paths(conn: sqlite3.Connection) -> set[str]:
    """The paths an old index knows as day files of the old `memories/` folder."""
    return {p for (p,) in conn.execute("SELECT path FROM md_files WHERE entity_id IS NULL AND path GLOB ?",
                                       (f"{OLD_MEMORIES}/*.md",))}


def to_move(conn: sqlite3.Connection, root: Path) -> bool:
    """Whether there is anything to move or remove (read only: a person's own `journal.md` or
    `memories/` folder at the root costs the watcher's scans no write)."""
    moved = conn.execute("SELECT 1 FROM library_meta WHERE key = ?", (MOVED_KEY,)).fetchone() is not None
    return moved or bool(old_layout(root, old_day_paths(conn)))


def move_to_hidden(tx: WriteTx, root: Path) -> int:
    """Stage the move of memloci's old-layout files into `.memloci/` in this transaction (its
    FileChange; the index rows move with them). How many files move."""
    conn = tx.conn
    moves = old_layout(root, old_day_paths(conn))
    if not moves:
        return 0
    change = staged_files(tx)
    for old, (new, data) in moves.items():
        present = _regular(root, new)
        # Both there (a git merge of a branch of the older layout): one file holds both, the
        # moved one's entries (or memories) after the ones already in place.
        title = JOURNAL_TITLE if old == OLD_JOURNAL else day_header(Path(old).stem)
        if present is not None and present != data:
            data = present + (data[len(title.encode("utf-8")):] if data.startswith(title.encode("utf-8")) else data)
            log.warning("%s and %s both existed: %s now holds both", old, new, new)
        change.put(new, data, None if present is None else sha256_hex(present))
        change.delete(old, sha256_hex(moves[old][1]))
        conn.execute("DELETE FROM md_files WHERE path = ?", (new,))
        conn.execute("UPDATE md_files SET path = ? WHERE path = ?", (new, old))
        conn.execute("UPDATE md_broken SET path = ? WHERE path = ?", (new, old))
    if any(old != OLD_JOURNAL for old in moves):
        conn.execute("INSERT OR REPLACE INTO library_meta VALUES (?, '1')", (MOVED_KEY,))
    return len(moves)


def drop_old_folder(tx: WriteTx, root: Path) -> None:
    """Remove the old `memories/` folder a move emptied (a kill may have left it: then the next
    opening does). A folder still holding anything stays."""
    if tx.conn.execute("SELECT 1 FROM library_meta WHERE key = ?", (MOVED_KEY,)).fetchone() is None:
        return
    with contextlib.suppress(OSError, MemlociError), confine.dir_fd(root, []) as fd:
        st = os.stat(OLD_MEMORIES, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            os.rmdir(OLD_MEMORIES, dir_fd=fd)  # only an empty folder goes
    tx.conn.execute("DELETE FROM library_meta WHERE key = ?", (MOVED_KEY,))
