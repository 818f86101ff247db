"""Ranking entities with SQLite FTS5: BM25 over all of a query's words, in a bounded pool.

Each word of the query is one term; stop words are dropped. A term matches whole, with English
stemming ("deploying" finds "deployed"), and, when it is not common, as the start of a word of a
name or alias too ("Ali" finds "Alice Chen"). A term found nowhere is tried as a prefix of any
word ("postgre" finds "postgresql"), then respelled from the words of names and aliases
("alcie" finds "Alice"; search/entities.py decides the respellings). Runs of Chinese, Japanese
or Korean characters are matched as overlapping two-character tokens, so "東京" finds a note
about "東京の旅行計画".

Entities are ranked by BM25 over every term (an entity holding more of the words usually ranks
higher, but one rare word can outweigh two common ones), not required to hold them all. So a
common word costs no more than a rare one, the BM25 is computed for a bounded pool only: every
entity holding a term that at most COMMON entities hold, and, when those are few, entities
holding a common term in a name, alias, tag or type, then the newest others.

A substring of a name, type, alias, tag, note body or observation matches too, below word
matches, as the official server's search would (trigram indexes for three characters or more).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from memloci.core import bm25
from memloci.core import query_text as lexical  # (FTS5 syntax)
from memloci.core.query_text import entity_query_terms
from memloci.store.protocols import NameVocabulary

# entity_fts columns (migration 7): name, aliases, tags, entity_type, text (observations and
# body), name_grams and text_grams (the CJK two-character tokens of the first four, and of text).
_BM25 = bm25.fts5_weights("entity_fts", bm25.ENTITY_WEIGHTS)
_LABELS = "{name aliases tags entity_type name_grams}"
_GRAMS = "{name_grams text_grams}"
COMMON = 500  # a term held by more entities than this is common: its matches are not all scored
POOL = 300  # entities ranked for a page (at least twice the page asked for)



@dataclass(frozen=True, slots=True)
class Score:
    matched: int  # query terms the entity holds
    bm25: float  # FTS5 bm25: lower is better; 0 for substring matches
    why: str


@dataclass(slots=True)
class _Term:
    label: str  # the query's word, as the why string names it
    expr: str  # its FTS5 expression
    how: str = "word"  # word, prefix or respelled
    note: str = ""  # e.g. "alcie→alice"
    df: int = 0  # entities holding it (counted up to COMMON + 1)
    ids: frozenset[int] = frozenset()  # all of them, unless common


def _phrase(text: str, prefix: bool = False) -> str:
    return lexical.fts_term(text, prefix)


def _matching(conn: sqlite3.Connection, expr: str, cap: int) -> list[int]:
    """Ids of the entities matching `expr`, at most `cap` (in rowid order, not ranked: cheap)."""
    return [r[0] for r in conn.execute("SELECT rowid FROM entity_fts WHERE entity_fts MATCH ? LIMIT ?", (expr, cap))]


def _plan(conn: sqlite3.Connection, query: str, stop_words: frozenset[str], names: NameVocabulary | None) -> list[_Term]:
    """The query's terms with their FTS5 expressions and how many entities hold each."""
    plan: list[_Term] = []
    for word, kind in entity_query_terms(query, stop_words):
        if kind == "cjk":
            grams = [word] if len(word) == 1 else [word[i:i + 2] for i in range(len(word) - 1)]
            term = _Term(word, f"{_GRAMS} : {_phrase(' '.join(grams), prefix=len(word) == 1)}")
            ids = _matching(conn, term.expr, COMMON + 1)
        else:
            term = _Term(word, _phrase(word))
            completions = names.complete(word) if names is not None and len(word) >= lexical.PREFIX_MIN else []
            if completions:  # the start of a word of names ("Ali" for "Alice Chen")
                term.expr = "(" + " OR ".join(_phrase(w) for w in [word, *completions]) + ")"
            ids = _matching(conn, term.expr, COMMON + 1)
            if not ids and len(word) >= lexical.PREFIX_MIN:
                term.expr, term.how = _phrase(word, True), "prefix"
                ids = _matching(conn, term.expr, COMMON + 1)
            if not ids and names is not None:
                found = names.respell(word)
                if found:
                    words, note = found
                    term.expr = "(" + " OR ".join(_phrase(w) for w in words) + ")"
                    term.how, term.note = "respelled", note
                    ids = _matching(conn, term.expr, COMMON + 1)
        term.df = len(ids)
        if ids and term.df <= COMMON:
            term.ids = frozenset(ids)
        if ids:
            plan.append(term)
    return plan


def rank_entities(conn: sqlite3.Connection, query: str, want: int, *, stop_words: frozenset[str] = frozenset(),
                  names: NameVocabulary | None = None, count_cap: int = 0) -> tuple[dict[int, Score], int | None]:
    """Up to `want` entity ids with their scores (unordered; sort by (bm25, -matched): word
    matches first, best BM25 first; substring matches after them), and, given `count_cap` and
    more than `want` matches, how many there are up to `count_cap` (counted, not ranked)."""
    plan = _plan(conn, query, stop_words, names)
    scored: dict[int, Score] = {}
    if plan:
        _rank_words(conn, plan, want, scored)
    text = query.strip()
    if len(scored) < want and text:
        for rowid, why in _substrings(conn, text, want + len(scored)):
            if rowid not in scored and len(scored) < want:
                scored[rowid] = Score(0, 0.0, why)
    total = _count_plan(conn, plan, text, count_cap) if count_cap and len(scored) >= want else None
    return scored, total


def count_entities(conn: sqlite3.Connection, query: str, cap: int, *, stop_words: frozenset[str] = frozenset(),
                   names: NameVocabulary | None = None) -> int:
    """How many entities rank_entities finds, up to `cap`, without ranking them."""
    return _count_plan(conn, _plan(conn, query, stop_words, names), query.strip(), cap)


def _count_plan(conn: sqlite3.Connection, plan: list[_Term], text: str, cap: int) -> int:
    found: set[int] = set()
    if plan:
        expr = " OR ".join(t.expr for t in plan)
        found.update(_matching(conn, expr, cap))
    if not found and text:  # substrings only where no word matched (the usual case for a substring query)
        for rowid, _ in _substrings(conn, text, cap):
            found.add(rowid)
    return min(len(found), cap)


def _rank_words(conn: sqlite3.Connection, plan: list[_Term], want: int, scored: dict[int, Score]) -> None:
    """BM25 of the uncommon terms, computed by FTS5 over their (short) lists of entities; each
    common term adds its IDF (times what a match in a name would weigh) to the pooled entities
    holding it, since FTS5's BM25 of a common term would read all of its entities' positions."""
    rare = [t for t in plan if t.ids]
    common = sorted((t for t in plan if not t.ids), key=lambda t: t.df)
    pool_size = max(POOL, 2 * want)
    score: dict[int, float] = {}
    if rare:
        for rowid, value in conn.execute(
                f"SELECT rowid, {_BM25} AS s FROM entity_fts WHERE entity_fts MATCH ? ORDER BY s LIMIT ?",
                (" OR ".join(t.expr for t in rare), pool_size)):
            score[rowid] = -value
    held = {rowid: [t for t in rare if rowid in t.ids] for rowid in score}
    if common:
        for term in common:
            if len(score) >= pool_size:
                break
            # Room left: those holding the common term in a name, alias, tag or type, then the newest.
            for expr, order in ((f"{_LABELS} : ({term.expr})", ""), (term.expr, " ORDER BY rowid DESC")):
                for (rowid,) in conn.execute(f"SELECT rowid FROM entity_fts WHERE entity_fts MATCH ?{order} LIMIT ?",
                                             (expr, pool_size - len(score))):
                    if rowid not in score:
                        score[rowid], held[rowid] = 0.0, []
                if len(score) >= pool_size:
                    break
        pool = json.dumps(list(score))
        # N for the IDF: FTS5's own count would scan; the largest id is as good for a weight.
        total = conn.execute("SELECT max(id) FROM entities").fetchone()[0] or 1
        for term in common:
            # One pass over the term's entities: how many hold it, and which of the pool do.
            # (`+rowid`: a rowid constraint FTS5 would take as one lookup per pooled entity, slowly.)
            df, inside = conn.execute(
                """SELECT count(*), json_group_array(rowid) FILTER (WHERE +rowid IN (SELECT value FROM json_each(?)))
                   FROM entity_fts WHERE entity_fts MATCH ?""", (pool, term.expr)).fetchone()
            idf = bm25.idf(df, total)
            labelled = {r for (r,) in conn.execute(
                "SELECT rowid FROM entity_fts WHERE entity_fts MATCH ? AND +rowid IN (SELECT value FROM json_each(?))",
                (f"{_LABELS} : ({term.expr})", pool))}
            for rowid in json.loads(inside):
                score[rowid] += idf * (bm25.LABEL_GAIN if rowid in labelled else 1.0)
                held[rowid].append(term)
    ranked = sorted(score, key=lambda r: (-score[r], -r))[:want]
    n = len(plan)
    for rowid in ranked:
        terms = held[rowid]
        said = bm25.why([(t.label, t.how, t.note) for t in terms], n, score[rowid])
        scored[rowid] = Score(len(terms), -score[rowid], said)


def _substrings(conn: sqlite3.Connection, text: str, limit: int) -> list[tuple[int, str]]:
    """Entities holding `text` as a substring: of a name, type, alias or tag, of the note's body,
    then of an observation (the official server's guarantee). Trigram indexes answer for three
    characters or more; shorter text is looked for row by row in names, types, aliases and
    observations."""
    found: list[tuple[int, str]] = []
    if len(text) >= 3:
        phrase = _phrase(text)
        rows = conn.execute(
            """SELECT rowid, 'substring of name, type or alias' FROM entity_grams WHERE entity_grams MATCH ?1
               UNION ALL SELECT rowid, 'substring of the note' FROM entity_grams WHERE entity_grams MATCH ?2
               LIMIT ?3""",
            ("{label} : " + phrase, "{body} : " + phrase, limit),
        ).fetchall()
        found += rows
        if len(found) < limit:
            found += conn.execute(
                """SELECT DISTINCT m.entity_id, 'substring of an observation' FROM memory_grams g
                   JOIN memories m ON m.id = g.rowid
                   WHERE memory_grams MATCH ? AND m.entity_id IS NOT NULL LIMIT ?""",
                (phrase, limit),
            ).fetchall()
        return found
    # names compare casefolded (name_key); elsewhere LIKE ignores case for ASCII letters only
    pattern = lexical.like_pattern(text.lower())
    found += [(r[0], "substring of name, type or alias") for r in conn.execute(
        r"""SELECT id FROM entities
            WHERE name_key LIKE ?1 ESCAPE '\' OR entity_type LIKE ?2 ESCAPE '\' OR aliases LIKE ?2 ESCAPE '\'
            LIMIT ?3""",
        (lexical.like_pattern(text.casefold()), pattern, limit))]
    if len(found) < limit:
        found += [(r[0], "substring of an observation") for r in conn.execute(
            r"""SELECT DISTINCT entity_id FROM memories
                WHERE entity_id IS NOT NULL AND content LIKE ?1 ESCAPE '\' LIMIT ?2""",
            (pattern, limit))]
    return found


def name_changes(conn: sqlite3.Connection, since: int) -> tuple[int, list[tuple[str, str, str]], bool]:
    """See SQLiteGraphReads.name_changes: the entity_name_log of migration 7 read after `since`."""
    low, high = conn.execute("SELECT min(seq), max(seq) FROM entity_name_log").fetchone()
    high = high or 0
    if since < 0 or high < since or (low is not None and low > since + 1):  # never read, a new file, or trimmed
        return high, conn.execute("SELECT name, entity_type, aliases FROM entities").fetchall(), True
    rows = conn.execute(
        """SELECT name, entity_type, aliases FROM entities WHERE id IN
           (SELECT entity_id FROM entity_name_log WHERE seq > ?)""", (since,)).fetchall()
    return high, rows, False
