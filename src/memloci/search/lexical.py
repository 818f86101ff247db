"""Turning a user's query into full-text search expressions.

User text never reaches FTS syntax directly: every term is quoted, so `"`, `*`, `AND`,
`NEAR(` and friends are searched as words, never parsed as operators.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 16
# In a prefix search, terms of this length or more match as prefixes ("postgre" finds
# "postgresql"); shorter ones stay whole words, since a one-letter prefix matches nearly every row.
PREFIX_MIN = 3


def query_terms(query: str) -> list[str]:
    """Distinct lowercase words of a query, in order, at most MAX_TERMS."""
    seen: dict[str, None] = {}
    # lower(), not casefold(): the index lowercases ("ß" stays "ß"; casefold would make it "ss")
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if word and word not in seen:
            seen[word] = None
    return list(seen)[:MAX_TERMS]


def fts_term(term: str, prefix: bool = False) -> str:
    quoted = '"' + term.replace('"', '""') + '"'
    return quoted + "*" if prefix and len(term) >= PREFIX_MIN else quoted


def match_all(terms: list[str], prefix: bool = False) -> str:
    return " AND ".join(fts_term(t, prefix) for t in terms)


def match_any(terms: list[str], prefix: bool = False) -> str:
    return " OR ".join(fts_term(t, prefix) for t in terms)


def like_pattern(text: str) -> str:
    """A LIKE pattern finding `text` as a substring (with `\\` as the escape character)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def normalize_content(text: str) -> str:
    """The form under which two texts count as the same: trimmed and single-spaced.

    Case is kept: "Uses Postgres" corrects "uses postgres" rather than duplicating it, and
    deleting one must never remove the other."""
    return " ".join(text.split())


def owner_key(entity_name: str) -> str:
    """The form of an entity's name an observation's hash covers: NFC, case-folded (so the
    same name typed in another case or Unicode form gives the same hash)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", entity_name).casefold())


def content_hash(text: str, entity_name: str | None = None) -> str:
    """sha256 of the normalized text (as the MCP Memory Service does); an observation's hash also
    covers its entity's name, so every memory has its own hash, even when two entities share a
    fact. Never a row id: the hash of a memory is the same in a fresh clone, after a reindex and
    on another engine (the handle update_memory and delete_memory take)."""
    if entity_name is not None and not isinstance(entity_name, str):
        raise TypeError("content_hash: the owner is the entity's name, not its row id")
    owner = f"entity-name:{owner_key(entity_name)}\n" if entity_name is not None else ""
    return hashlib.sha256((owner + normalize_content(text)).encode("utf-8")).hexdigest()
