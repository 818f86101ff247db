"""store.Migratable: what `memloci migrate` (migrate.py) sets that no tool call can, so a copied
library holds the same dates, use counts and journal as the original. What the engines share
is here (the journal's rows, a file's date marks); each engine's part is its own
(store/sqlite/migratable.py, store/markdown/migratable.py, store/postgres/migratable.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from memloci.core.model import JournalEntry
from memloci.markdown import frontmatter as fm
from memloci.markdown.document import _analyze, _items, _observations_region, split_date


def journal_rows(entries: Sequence[JournalEntry]) -> list[tuple[int, str, str, str, str, str | None]]:
    """(id, at, tool, action, entities JSON, detail JSON) of each entry."""
    return [(e.id, e.at, e.tool, e.action, json.dumps(list(e.entities), ensure_ascii=False),
             json.dumps(e.detail, ensure_ascii=False) if e.detail is not None else None) for e in entries]


def dated_text(text: str, created: str, updated: str, dates: dict[str, str]) -> str:
    """`text` with its date marks set: `created:`/`modified:` where its front matter has them
    (no key added), and the `<!-- date -->` mark of each observation line that has one (the
    observation's date from `dates`, by its text). Every other byte stays."""
    doc = _analyze(text)
    lines = list(doc.lines)
    region = _observations_region(doc)
    for _, stop, item in _items(doc, region[0] + 1, region[1]) if region else []:
        content, date = split_date(item)
        want = dates.get(content)
        if date and want and want != date:
            lines[stop - 1] = lines[stop - 1].replace(f"<!-- {date} -->", f"<!-- {want} -->")
    text = "".join(lines)
    parts = fm.split(text)
    for k, value in (("created", created), ("modified", updated)):
        if parts and fm.has_key(parts[1], k):
            text = fm.with_front_matter(text, lambda y, k=k, value=value: fm.set_scalar(y, k, value, timestamp=True))
    return text
