"""What SQLiteStore gives the mixins it is made of (sqlite_memories, sqlite_passages,
sqlite_graph_reads, sqlite_documents, sqlite_undo, sqlite_vault).

Each mixin uses connections, name resolution and the journal of the store it is mixed into.
Declaring them here, for the type checker only, makes those uses checked instead of unknown;
at run time the class is empty and SQLiteStore's own definitions are the ones called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence
    from contextlib import AbstractContextManager

    from ..model import Entity, Relation
    from ..schema import LibrarySchema
    from .sqlite_graph_tx import SQLiteGraphTx


class SQLiteHost:
    if TYPE_CHECKING:
        name: str
        path: str
        kind: str
        schema: LibrarySchema

        def _read(self) -> AbstractContextManager[sqlite3.Connection]: ...
        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...
        @staticmethod
        def _resolve(conn: sqlite3.Connection, names: Iterable[str]) -> dict[str, tuple[int, str]]: ...
        @staticmethod
        def _refresh_fts(conn: sqlite3.Connection, ids: Iterable[int]) -> None: ...
        @staticmethod
        def _relations_where(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[Relation]: ...
        @staticmethod
        def _retag(conn: sqlite3.Connection, ids: Sequence[int]) -> None: ...
        @staticmethod
        def _alias_holders(conn: sqlite3.Connection, names: Sequence[str],
                           also: Sequence[int] = ()) -> dict[str, list[int]]: ...
        def _journal(self, conn: sqlite3.Connection, tool: str, action: str, entities: Sequence[str],
                     detail: dict | None) -> None: ...
        def _load_entities(self, conn: sqlite3.Connection, ids: Sequence[int],
                           observations: bool = True) -> dict[int, Entity]: ...
        def _relations_touching(self, conn: sqlite3.Connection, ids: Sequence[int]) -> list[Relation]: ...
        def _graph_tx(self, conn: sqlite3.Connection, at: str | None = None, *,
                      link_pending: bool = False) -> SQLiteGraphTx: ...
        def _link_pending(self, conn: sqlite3.Connection) -> list[int]: ...
        def _before(self, conn: sqlite3.Connection, entity_ids: Iterable[int] = (),
                    memory_ids: Iterable[int] = ()) -> None: ...
        def _before_meta(self, conn: sqlite3.Connection, key: str) -> None: ...
