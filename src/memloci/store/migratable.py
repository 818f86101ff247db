"""store.Migratable: what `memloci migrate` (service/migrate.py) sets that no tool call can, so a copied
library holds the same dates, use counts and journal as the original. What the engines share
is here (the journal's rows); each engine's part is its own (store/sqlite/migratable.py,
store/markdown/migratable.py with markdown.patch.dated_text, store/postgres/migratable.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memloci.core.model import JournalEntry


def journal_rows(entries: Sequence[JournalEntry]) -> list[tuple[int, str, str, str, str, str | None]]:
    """(id, at, tool, action, entities JSON, detail JSON) of each entry."""
    return [(e.id, e.at, e.tool, e.action, json.dumps(list(e.entities), ensure_ascii=False),
             json.dumps(e.detail, ensure_ascii=False) if e.detail is not None else None) for e in entries]
