"""What MarkdownStore gives the mixins it is made of (markdown_scan, markdown_undo,
markdown_import), on top of what SQLiteStore gives (sqlite_host.py).

Declared for the type checker only; at run time the class is empty and MarkdownStore's own
definitions are the ones called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memloci.store.sqlite.host import SQLiteHost

if TYPE_CHECKING:
    import os
    import sqlite3
    import threading
    from collections.abc import Sequence
    from pathlib import Path

    from memloci.core.model import CreatedEntity, EntityInput
    from memloci.markdown.memories import MemoryBlock
    from memloci.store.markdown.files import FileStat, SyncReport
    from memloci.store.markdown.intent import FileChange


class MarkdownHost(SQLiteHost):
    if TYPE_CHECKING:
        root: Path
        index_moved_to: str | None
        _md_lock: Any  # a threading.RLock
        _syncing: threading.local

        def open(self, *, create: bool = True) -> None: ...
        def sync(self) -> SyncReport: ...
        def create_entities(self, entities: Sequence[EntityInput], *, origin: str) -> list[CreatedEntity]: ...
        @staticmethod
        def _record(conn: sqlite3.Connection, rel: str, entity_id: int | None, key: str,
                    st: os.stat_result | FileStat, sha: str) -> None: ...
        @staticmethod
        def _forget(conn: sqlite3.Connection, entity_id: int) -> None: ...
        def _append_journal(self, conn: sqlite3.Connection) -> None: ...
        def _apply_day(self, conn: sqlite3.Connection, day: str, blocks: list[MemoryBlock]) -> None: ...
        def _put(self, conn: sqlite3.Connection, rel: str, text: str, entity_id: int | None, key: str = "",
                 current: bytes | None = None, absent: bool = False) -> None: ...
        def _staged(self) -> FileChange: ...
        def _unlink(self, rel: str, current: bytes | None = None) -> None: ...
