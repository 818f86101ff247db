"""History, undo, free memories in exports, backup and restore: the service operations that
keep a library's data recoverable. Mixed into MemoryService (uses `store`, `_written`).
"""

from __future__ import annotations

from typing import Any

from . import schema
from .errors import ValidationError
from .model import JournalEntry
from .store import Undoable


class HistoryService:
    """Journal reading and undo."""

    def history(self, *, limit: int = 50, internal: bool = False, library: str | None = None) -> list[JournalEntry]:
        """The newest changes; rescans of the files and vector resets only with `internal`."""
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        return self.store(library).journal(limit=limit, internal=internal)

    def undo(self, change_id: int, *, library: str | None = None) -> dict[str, Any]:
        """Revert one change of the journal (see store/sqlite_undo.py); the undo is journaled too."""
        change_id = schema.check_int(change_id, "id", 1, 2**62)
        store = self.store(library)
        if not isinstance(store, Undoable):
            raise ValidationError(f"library '{store.name}': a {store.kind} library cannot undo changes yet")
        result = store.undo_change(change_id, origin="undo")
        self._written(store)  # observations put back wait for their vectors again
        return result
