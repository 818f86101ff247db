"""Obsidian's conventions over the SQLite tables: names reached through aliases, links waiting
for a name or an alias, tags that follow a note's `#tags`, and front-matter values that hold
relations."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memloci.core.errors import ValidationError
from memloci.core.model import name_key, now_iso
from memloci.markdown.frontmatter import drop_link
from memloci.markdown.obsidian import block_links, retagged
from memloci.rules.documents import BODY_TAGS, EXTRA_KEY
from memloci.store.sqlite.rows import alias_holders, resolve
from memloci.store.sqlite.sql import chunks, marks


def retag(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Tags after observations were added or removed without a document (add_observations):
    the front matter's, then the `#tags` of the body as its document now reads, each once."""
    for entity_id in ids:
        row = conn.execute("SELECT tags, metadata, body FROM entities WHERE id = ?", (entity_id,)).fetchone()
        if row is None:
            continue
        tags, meta, body = json.loads(row[0]), json.loads(row[1]), row[2]
        observations = [c for (c,) in conn.execute("SELECT content FROM memories WHERE entity_id = ? ORDER BY id",
                                                   (entity_id,))]
        every, inline = retagged(tags, meta.get(BODY_TAGS, []), body, observations)
        if every != tags:
            meta.pop(BODY_TAGS, None)
            meta.update({BODY_TAGS: inline} if inline else {})
            conn.execute("UPDATE entities SET tags = ?, metadata = ? WHERE id = ?",
                         (json.dumps(every, ensure_ascii=False), json.dumps(meta, ensure_ascii=False), entity_id))


def resolve_names(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, tuple[int, str]]:
    """`resolve`, and a name no entity has reaches the one entity listing it as an alias."""
    found = resolve(conn, names)
    rest = [n for n in names if name_key(n) not in found]
    for key, ids in (alias_holders(conn, rest) if rest else {}).items():
        if len(ids) == 1:
            found[key] = (ids[0], conn.execute("SELECT name FROM entities WHERE id = ?", (ids[0],)).fetchone()[0])
    return found


def alias_work(conn: sqlite3.Connection, entity_id: int | None, targets: Sequence[str] = ()) -> None:
    """Note, for this transaction's link_pending, an entity written with aliases (None: not)
    and the link targets it left waiting: only those can newly meet through an alias."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS memloci_alias_work (entity_id INTEGER, target TEXT)")
    conn.executemany("INSERT INTO temp.memloci_alias_work VALUES (?, ?)",
                     [(entity_id, None)] * (entity_id is not None) + [(None, t) for t in targets])


def link_aliases(conn: sqlite3.Connection) -> list[tuple[int, str, int, str]]:
    """Waiting links that reach an entity through an alias (`[[Anna]]`, `aliases: [Anna]`),
    as (from_id, relation_type, to_id, target_key). Only the links and aliases this
    transaction wrote are looked at; an alias two entities claim resolves nothing."""
    try:
        work = conn.execute("SELECT entity_id, target FROM temp.memloci_alias_work").fetchall()
    except sqlite3.OperationalError:  # nothing written with aliases or waiting links on this connection
        return []
    conn.execute("DELETE FROM temp.memloci_alias_work")
    written = sorted({i for i, _ in work if i is not None})
    names = [t for _, t in work if t is not None]
    for chunk in chunks(written):
        names += [str(a) for (aliases,) in conn.execute(
            f"SELECT aliases FROM entities WHERE id IN ({marks(len(chunk))})", chunk) for a in json.loads(aliases)]
    if not names:
        return []
    named = set(resolve(conn, names))
    rows = []
    for key, ids in alias_holders(conn, [n for n in names if name_key(n) not in named], written).items():
        if len(ids) == 1:
            rows += [(f, rt, ids[0], key) for f, rt in conn.execute(
                "SELECT from_id, relation_type FROM pending_links WHERE target_key = ?", (key,))]
    return rows


def alias_keys(conn: sqlite3.Connection, texts: Sequence[str]) -> dict[str, str]:
    """name_key of a link's text -> name_key of the entity it reaches through an alias, for
    the texts no entity is named (so a note's `[[Anna]]` is seen as its relation to Anna Smith)."""
    keys = {name_key(t) for t in texts if t.strip()}
    if not keys:
        return {}
    named = {k for k, _ in resolve(conn, list(keys)).items()}
    holders = alias_holders(conn, list(keys - named)) if keys - named else {}
    out = {}
    for key, ids in holders.items():
        if len(ids) == 1:
            out[key] = name_key(conn.execute("SELECT name FROM entities WHERE id = ?", (ids[0],)).fetchone()[0])
    return out


def drop_property_link(conn: sqlite3.Connection, entity_id: int, relation_type: str, target: str) -> None:
    """A deleted relation that a front-matter value held (`company: "[[Acme]]"`) leaves that
    value: the link's list item goes, or the key when it held only that link (the file
    follows in a Markdown library). Refused, naming the key, when the link sits inside
    other text; the caller's transaction then changes nothing."""
    row = conn.execute("SELECT metadata FROM entities WHERE id = ?", (entity_id,)).fetchone()
    meta = json.loads(row[0]) if row else {}
    blocks = meta.get(EXTRA_KEY, [])
    if not blocks or "[[" not in "".join(blocks):
        return
    alias = alias_keys(conn, [t for k, t in block_links(blocks) if k == relation_type])

    def reach(text: str) -> str:  # `[[Anna]]` reaches Anna Smith through her alias
        return alias.get(name_key(text), name_key(text))

    new = [drop_link(b, relation_type, target, reach) for b in blocks]
    # Read back: the relation is reported deleted only when no value holds its link any more.
    if any(k == relation_type and reach(t) == reach(target) for k, t in block_links(new)):
        raise ValidationError(f"{relation_type}: the link [[{target}]] could not be removed from this "
                              "front-matter value (nothing was changed)",
                              hint=f"Edit the '{relation_type}:' value of the note with replace_entity_content.")
    if new != blocks:
        meta[EXTRA_KEY] = [b for b in new if b.strip()]
        if not meta[EXTRA_KEY]:
            del meta[EXTRA_KEY]
        conn.execute("UPDATE entities SET metadata = ? WHERE id = ?", (json.dumps(meta, ensure_ascii=False), entity_id))


def link_pending(conn: sqlite3.Connection) -> list[int]:
    """Links whose target now exists become relations; the ids of their sources."""
    rows = conn.execute("""SELECT p.from_id, p.relation_type, e.id, p.target_key FROM pending_links p
                           JOIN entities e ON e.name_key = p.target_key""").fetchall()
    rows += link_aliases(conn)
    if not rows:
        return []
    at = now_iso()
    conn.executemany("INSERT OR IGNORE INTO relations (from_id, relation_type, to_id, created_at) VALUES (?, ?, ?, ?)",
                     [(f, rt, to, at) for f, rt, to, _ in rows])
    conn.executemany("DELETE FROM pending_links WHERE from_id = ? AND relation_type = ? AND target_key = ?",
                     [(f, rt, k) for f, rt, _, k in rows])
    return list({f for f, *_ in rows})
