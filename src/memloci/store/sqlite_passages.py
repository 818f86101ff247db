"""Passages of note bodies in the SQLite engine, so a note's own words carry meaning.

An entity's Markdown body is cut into passages (paragraphs, merged or split to at most
PASSAGE_WORDS words, each carrying the heading it sits under) and every passage gets a
vector from the same background worker that embeds memories. Observations are memories and
have vectors already; the body had none.

Keeping passages in step with bodies: a body changes by many paths (tool edits, documents
written whole, a person's editor picked up by the scan, rename and merge rewriting links,
undo, delete). Rather than trusting each path to remember, schema triggers (migration 8)
mark every entity whose body changed in `passages_stale`; the worker re-splits marked
bodies before it embeds. A passage whose text is unchanged keeps its vector, so editing one
paragraph of a long note re-embeds one passage. Writes never wait for any of this.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Sequence

import numpy as np

from ..markdown.document import normalize_heading
from ..model import PassageVectors, PendingPassage, SavedVectors, name_key
from .sqlite_host import SQLiteHost
from .sqlite_memories import claim_model, library_meta, pack, unpack_many

PASSAGE_WORDS = 180  # the default model reads 256 word pieces; ~180 English words fill them
MIN_WORDS = 40  # a passage this short takes in the next section rather than standing alone
# A body of fewer words than this ("Dmitri.") says nothing its note's name does not: it gets no
# passage, since its vector would sit near everything (0.3-0.4 for "music", "alpha" ...).
# Headings are not counted; Chinese/Japanese characters count half a word each.
MEANING_WORDS = 4
SHORT_CHARS = 160  # a passage at least this long has MEANING_WORDS (checked when vectors load)

_HEADING = re.compile(r"^#{1,6}\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"\w+")


def size(text: str) -> int:
    """Words, counting each Chinese/Japanese/Korean character as one (they are written unspaced)."""
    return len(_CJK_CHAR.sub(" ", text).split()) + len(_CJK_CHAR.findall(text))


def says_something(passage: str) -> bool:
    """Whether a passage has words enough to carry meaning beyond its note's name (MEANING_WORDS)."""
    text = _CJK_CHAR.sub(" ", "\n".join(line for line in passage.splitlines() if not _HEADING.match(line)))
    cjk = len(_CJK_CHAR.findall(passage)) - sum(len(_CJK_CHAR.findall(line)) for line in passage.splitlines()
                                                 if _HEADING.match(line))
    return len(_WORD.findall(text)) + cjk / 2 >= MEANING_WORDS


def _blocks(body: str) -> list[tuple[str, str]]:
    """(heading, block) for each paragraph, list or code block, with the heading it sits under.
    The list of the `## Observations` section is left out: each observation is a memory with a
    vector of its own (a Markdown library keeps them in the body too). HTML comments (the
    dates of observations) carry no meaning and are dropped."""
    blocks: list[tuple[str, str]] = []
    heading, lines, fenced = "", list[str](), False
    observations = False

    def close() -> None:
        text = _COMMENT.sub("", "\n".join(lines)).strip()
        if text and not (observations and text[:2] in ("- ", "* ")):
            blocks.append((heading, text))
        lines.clear()

    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(line)
            continue
        if fenced:
            lines.append(line)
        elif _HEADING.match(line):
            close()
            heading = line.strip()
            level, title = len(heading) - len(heading.lstrip("#")), heading.lstrip("#")
            observations = level >= 2 and normalize_heading(title) == "observations"
        elif not line.strip():
            close()
        else:
            lines.append(line)
    close()
    return blocks


def _pieces(text: str, most: int) -> list[str]:
    """A block cut at sentence ends (at words inside a sentence too long) into runs of <= most words."""
    if size(text) <= most:
        return [text]
    units: list[str] = []
    for sentence in (s for s in _SENTENCE_END.split(text) if s.strip()):
        if size(sentence) <= most:
            units.append(sentence)
        elif sentence.split() and len(sentence.split()) > 1:
            words = sentence.split()
            units += [" ".join(words[i:i + most]) for i in range(0, len(words), most)]
        else:  # unspaced CJK text
            units += [sentence[i:i + most] for i in range(0, len(sentence), most)]
    out: list[str] = []
    run: list[str] = []
    for unit in units:
        if run and size(" ".join(run + [unit])) > most:
            out.append(" ".join(run))
            run = []
        run.append(unit)
    if run:
        out.append(" ".join(run))
    return out


def split_passages(body: str, most: int = PASSAGE_WORDS) -> list[str]:
    """A note body as passages of at most `most` words: paragraphs merged while they fit,
    long ones cut at sentences; a passage that starts inside a section repeats its heading,
    so "## Risks" still says what the paragraph under it is about. Headings alone are no passage,
    nor is a body too short to say anything (says_something)."""
    passages: list[str] = []
    current: list[str] = []
    words = 0
    current_heading = ""
    for heading, block in _blocks(body):
        for piece in _pieces(block, most):
            n = size(piece)
            starts_section = heading != current_heading
            if current and (words + n > most or (starts_section and words >= MIN_WORDS)):
                passages.append("\n\n".join(current))
                current, words = [], 0
            if heading and (not current or starts_section):
                current.append(heading)  # leads the passage, or opens its section inside it
            current.append(piece)
            words += n
            current_heading = heading
    if current:
        passages.append("\n\n".join(current))
    return [p for p in passages if says_something(p)]


class SQLitePassages(SQLiteHost):
    """The passage half of SQLiteStore (mixed in; uses its _write, _read)."""

    def refresh_passages(self, limit: int = 64) -> int:
        """Split again the bodies changed since their passages were made (up to `limit` entities,
        one transaction); returns how many entities were done."""
        with self._read() as conn:  # the worker asks often: a write (and its sync to disk) only when needed
            if conn.execute("SELECT 1 FROM passages_stale LIMIT 1").fetchone() is None:
                return 0
        with self._write() as conn:
            stale = [r[0] for r in conn.execute("SELECT entity_id FROM passages_stale ORDER BY entity_id LIMIT ?",
                                                (limit,))]
            for entity_id in stale:
                row = conn.execute("SELECT body FROM entities WHERE id = ?", (entity_id,)).fetchone()
                remake_passages(conn, entity_id, split_passages(row[0]) if row else [])
            conn.executemany("DELETE FROM passages_stale WHERE entity_id = ?", [(i,) for i in stale])
            return len(stale)

    def pending_passages(self, limit: int) -> list[PendingPassage]:
        """Passages waiting for a vector, in id order."""
        with self._read() as conn:
            return [PendingPassage(*row) for row in conn.execute(
                "SELECT id, text, text_hash, entity_id FROM passages WHERE vector IS NULL ORDER BY id LIMIT ?", (limit,))]

    def save_passage_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], model: str) -> SavedVectors:
        """Store vectors of (passage id, text_hash it was computed from, vector); returns the ids
        saved (a passage re-made meanwhile is skipped) and the new passages version."""
        saved = []
        with self._write() as conn:
            claim_model(conn, self.name, model, len(items[0][2]) if items else 0)
            for passage_id, text_hash, vector in items:
                cur = conn.execute("UPDATE passages SET vector = ? WHERE id = ? AND text_hash = ?",
                                   (pack(vector), passage_id, text_hash))
                if cur.rowcount:
                    saved.append(passage_id)
            return SavedVectors(tuple(saved), passages_version(conn))

    def load_passage_vectors(self) -> PassageVectors:
        """Every embedded passage (ids, their entity ids, matrix, passages version, model), in id order."""
        with self._read() as conn:
            model = library_meta(conn, "embedding_model")
            dimension = int(library_meta(conn, "embedding_dimension") or 0)
            rows = conn.execute("SELECT id, entity_id, vector, CASE WHEN length(text) < ? THEN text END FROM passages "
                                "WHERE vector IS NOT NULL ORDER BY id", (SHORT_CHARS,)).fetchall()
            version = passages_version(conn)
        # Vectors stored before short bodies got no passage are left out until the body is split again.
        rows = [r for r in rows if r[3] is None or says_something(r[3])]
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        owners = np.array([r[1] for r in rows], dtype=np.int64)
        return PassageVectors(ids, owners, unpack_many([r[2] for r in rows], dimension or 1), version, model)

    def passages_version(self) -> int:
        with self._read() as conn:
            return passages_version(conn)

    def passage_pending_count(self) -> int:
        """Passages waiting for a vector, plus bodies waiting to be split (each makes at least one)."""
        with self._read() as conn:
            return pending_passage_count(conn)

    def entity_names_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        with self._read() as conn:
            found: dict[int, str] = {}
            ids = list(ids)
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                found.update(conn.execute(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(chunk))})",
                                          chunk).fetchall())
            return found

    def passages_of(self, name: str) -> list[str]:
        """The passages of an entity as they stand (a body changed a moment ago may not be split yet)."""
        with self._read() as conn:
            return [r[0] for r in conn.execute(
                "SELECT p.text FROM passages p JOIN entities e ON e.id = p.entity_id WHERE e.name_key = ? ORDER BY p.id",
                (name_key(name),))]


def remake_passages(conn: sqlite3.Connection, entity_id: int, texts: list[str]) -> None:
    """Make the entity's passages `texts`, keeping the rows (and vectors) of texts it already has."""
    kept: dict[str, list[int]] = {}
    for passage_id, text_hash in conn.execute("SELECT id, text_hash FROM passages WHERE entity_id = ? ORDER BY id",
                                              (entity_id,)):
        kept.setdefault(text_hash, []).append(passage_id)
    for text in texts:
        text_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if kept.get(text_hash):
            kept[text_hash].pop(0)
        else:
            conn.execute("INSERT INTO passages (entity_id, text, text_hash) VALUES (?, ?, ?)", (entity_id, text, text_hash))
    conn.executemany("DELETE FROM passages WHERE id = ?", [(i,) for ids in kept.values() for i in ids])


def passages_version(conn: sqlite3.Connection) -> int:
    return int(library_meta(conn, "passages_version") or 0)


def pending_passage_count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT (SELECT count(*) FROM passages WHERE vector IS NULL) "
                        "+ (SELECT count(*) FROM passages_stale)").fetchone()[0]


def reset_passage_vectors(conn: sqlite3.Connection) -> int:
    """Forget every passage vector (inside reset_vectors' transaction); returns how many wait now."""
    conn.execute("UPDATE passages SET vector = NULL WHERE vector IS NOT NULL")
    return pending_passage_count(conn)
