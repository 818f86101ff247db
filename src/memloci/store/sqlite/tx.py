"""One write transaction of a SQLite index, and what a library whose truth lies in files
does at its edges (the FileSide a Markdown library passes its index).

A write transaction is a `WriteTx`: its connection (inside `BEGIN IMMEDIATE`), its undo record
(rules.undo.new_record(), sealed into its journal entry before the commit), whether it takes in
files people wrote (a Markdown library's scan: what comes from a file is indexed as it is,
never refused by the schema), what a Markdown library writes verbatim for it, and the file
side's staged change. `Database.write()` makes one per call and hands it to every function
that writes; nothing about a transaction lives on a thread or on the store.

A plain SQLite library has no files: its FileSide is `NO_FILES`, whose steps do nothing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Protocol

from memloci.rules import undo


@dataclass
class WriteTx:
    conn: sqlite3.Connection
    # The file side reads what comes from files, it does not write it back (a scan, an undo of files).
    reading_files: bool = False
    record: dict[str, Any] = field(default_factory=undo.new_record)  # the undo record (rules.undo)
    # What a Markdown library writes verbatim (SQLite keeps none of it): an edit's exact text by
    # name_key, the `modified:` to stamp it with, links to rename in every file written (old, new),
    # and text a merge appends to a body as it is.
    texts: dict[str, str] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    renames: list[tuple[str, str]] = field(default_factory=list)
    tails: dict[str, str] = field(default_factory=dict)
    # Where a new entity's file goes (relative, `people/anna.md`), by name_key: an import keeps
    # the source's folders and file names (store/markdown/importing.py). Else `<name>.md` at the root.
    paths: dict[str, str] = field(default_factory=dict)
    files: Any = None  # the file side's staged change for this transaction (set by FileSide.begin)

    def keep_text(self, key: str, text: str, stamp: str | None = None) -> None:
        """A Markdown library writes this exact text for the entity `key` (an edit keeps the
        person's formatting); `stamp`: its `modified:` (else now)."""
        self.texts[key] = text
        if stamp:
            self.stamps[key] = stamp

    def note_rename(self, old: str, new: str) -> None:
        """Every file this change writes has its links to `old` rewritten in place."""
        self.renames.append((old, new))

    def note_tail(self, key: str, tail: str) -> None:
        """Text a merge appends to a body: appended to the entity's file as it is."""
        self.tails[key] = tail


class FileSide(Protocol):
    """What a library kept in files does at the edges of each index write transaction, in
    this order: `begin` right after BEGIN; the call's own writes; `before_seal` once they are
    done (the files they changed are staged); `sealing` as the undo record goes into its journal
    entry; `before_commit` (the files are put in place); COMMIT, then `after_commit`. When the
    call, a file step or the commit fails: ROLLBACK, then `after_rollback`, still under the
    library's write lock. `document_text` is the text an entity edit starts from."""

    def begin(self, tx: WriteTx) -> None: ...
    def before_seal(self, tx: WriteTx) -> None: ...
    def sealing(self, tx: WriteTx, detail: dict[str, Any]) -> None: ...
    def before_commit(self, tx: WriteTx) -> None: ...
    def after_commit(self, tx: WriteTx) -> None: ...
    def after_rollback(self, tx: WriteTx) -> None: ...
    def document_text(self, tx: WriteTx, entity_id: int) -> str | None:
        """The entity's text as its file holds it (None: it has none: render its document)."""
        ...


class NoFiles:
    """The FileSide of a plain SQLite library: the database is all there is."""

    def begin(self, tx: WriteTx) -> None:
        pass

    def before_seal(self, tx: WriteTx) -> None:
        pass

    def sealing(self, tx: WriteTx, detail: dict[str, Any]) -> None:
        pass

    def before_commit(self, tx: WriteTx) -> None:
        pass

    def after_commit(self, tx: WriteTx) -> None:
        pass

    def after_rollback(self, tx: WriteTx) -> None:
        pass

    def document_text(self, tx: WriteTx, entity_id: int) -> str | None:
        return None


NO_FILES = NoFiles()
