"""Ranking entities on PostgreSQL (search_nodes) by the BM25 SQLite's FTS5 computes.

store/sqlite/search.py ranks entities inside FTS5; this module ranks them the same way from
what PostgreSQL keeps, scoring with core/bm25.py, so both engines put the same entities in
the same order:
- Each query word is a term. A term is one or more phrases, as FTS5 sees them: the word (with
  the words of names it begins: "ali" -> ali, alice), else the word as a prefix, else its
  respellings from the words of names. Each phrase has its own holders and IDF, as in FTS5.
- A term at most COMMON entities hold is rare: every holder is scored by BM25 over the rare
  terms' phrases, from each phrase's count in each of the seven columns (read from the
  entity's weighted tsvector: A name, B aliases and tags, told apart by the aliases' own
  tsvector, C type, D text; CJK pieces from `grams`), the entity's length (`search_length`,
  migration 7) and the library's totals (`entity_totals`); the best POOL are kept. A word
  that is two lexemes to PostgreSQL ("user_id") is both, as FTS5 reads the phrase "user id".
- A common term fills the pool, if room is left, with its holders in a name, alias, tag or
  type (oldest first, from `labels_search`, migration 7), then its newest holders, and adds
  its IDF (N: the largest id) to every pooled entity holding it, times bm25.LABEL_GAIN where
  a label holds it. Its holders are counted up to COUNTED, then taken from the statistics.
- Entities holding the query as a substring (pg_trgm indexes) come after the word matches.

Where the engines still part: PostgreSQL stems text with Snowball (`english`), SQLite with
Porter, and leaves aliases and tags unstemmed; `english` drops its stop words ("after",
"over", "only") from names, types and text when it indexes them, so such a word is found as
a substring there, not as a word; a Chinese or Japanese term must hold all of its run's pairs,
as on SQLite, but counts once in the labels and once in the text where they hold it, not
per occurrence; a tsvector keeps at most 256 positions of a lexeme and none past 16,383; a word
found nowhere, not even respelled, is also tried against names by pg_trgm similarity (SQLite
has no such step).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memloci.core import bm25
from memloci.core import query_text as lexical
from memloci.core.query_text import entity_query_terms as query_terms
from memloci.store.postgres.tsquery import LEXEME, estimated_holders
from memloci.store.protocols import NameVocabulary

COMMON = 500  # a term more entities hold is common (as store/sqlite/search.py)
COUNTED = 10_000  # a common term's holders are counted up to this, then estimated
POOL = 300  # entities ranked for a page at least (as store/sqlite/search.py)
FUZZY_MIN = 0.5  # word_similarity of a misspelled word to a name, at least
_COLUMN = {"A": 0, "C": 3}  # tsvector weight -> BM25 column (B: aliases 1 or tags 2; D, no letter: text 4)
_ALIASES, _TAGS, _TEXT = 1, 2, 4  # BM25 columns (bm25.ENTITY_WEIGHTS' order)


@dataclass(frozen=True, slots=True)
class _Phrase:
    """One FTS5 phrase, as the index's lexemes (escaped as tsquery text writes them): any of its
    alternatives (the word stemmed, or as written), each all of its lexemes ("user_id" is
    'user' & 'id', as FTS5 reads the phrase "user id"); or, with `prefix`, any lexeme that
    begins with the one given."""

    alternatives: tuple[tuple[str, ...], ...]
    prefix: bool = False

    def tsquery(self) -> str:
        mark = ":*" if self.prefix else ""
        return " | ".join("(" + " & ".join(f"'{lexeme}'{mark}" for lexeme in alt) + ")" for alt in self.alternatives)

    def count(self, columns_of: dict[str, list[int]]) -> list[int]:
        """How often the phrase occurs in each column, given each lexeme's counts per column
        (an alternative of several lexemes: as often as its rarest one)."""
        total = [0] * 7
        if self.prefix:
            start = self.alternatives[0][0]
            for lexeme, columns in columns_of.items():
                if lexeme.startswith(start):
                    total = [a + b for a, b in zip(total, columns)]
            return total
        for alt in self.alternatives:
            if all(lexeme in columns_of for lexeme in alt):
                total = [t + min(columns_of[lexeme][c] for lexeme in alt) for c, t in enumerate(total)]
        return total


@dataclass(slots=True, eq=False)  # one term is itself only: held and counted by identity
class _Term:
    label: str  # the query's word, as the why string names it
    kind: str  # word, cjk or fuzzy (a name within a few typos, by pg_trgm)
    how: str = "word"  # word, prefix or respelled
    note: str = ""  # e.g. "alcie→alice"
    phrases: list[_Phrase] = field(default_factory=list)
    query: str = ""  # cjk: the pieces' tsquery; fuzzy: the word
    held: int = 0  # entities holding it, counted up to COMMON + 1

    def condition(self, labels: bool = False) -> tuple[str, list[Any]]:
        """SQL on `e` true for the entities holding the term (with `labels`: in a name, alias,
        tag or type; `labels_search`, migration 7, has its own index, so this needs no weights
        and no per-row check)."""
        if self.kind == "fuzzy":
            return "%s <%% e.name_key AND word_similarity(%s, e.name_key) >= %s", [self.query, self.query, FUZZY_MIN]
        column = "e.labels_search" if labels else "e.grams" if self.kind == "cjk" else "e.search"
        query = self.query if self.kind == "cjk" else " | ".join(f"({p.tsquery()})" for p in self.phrases)
        return f"{column} @@ %s::tsquery", [query]


def _phrases(conn: Any, words: Sequence[str]) -> list[_Phrase | None]:
    """Each word as the index holds it: stemmed (`english`: names, types and text) or as written
    (`simple`: aliases and tags); None for a stop word that is not a tag either."""
    if not words:
        return []
    row = conn.execute("SELECT " + ", ".join(
        "plainto_tsquery('english', memloci_fold(%s))::text, plainto_tsquery('simple', memloci_fold(%s))::text"
        for _ in words), [w for word in words for w in (word, word)]).fetchone()
    out: list[_Phrase | None] = []
    for i in range(len(words)):
        alternatives = tuple(dict.fromkeys(alt for alt in (tuple(LEXEME.findall(text)) for text in row[2 * i:2 * i + 2])
                                           if alt))
        out.append(_Phrase(alternatives) if alternatives else None)
    return out


def _prefix(word: str) -> _Phrase:
    """The word as a prefix, folded as the index folds words (lower case, no accents)."""
    folded = unicodedata.normalize("NFD", word.lower())
    folded = unicodedata.normalize("NFC", "".join(c for c in folded if not 0x300 <= ord(c) <= 0x36F))
    return _Phrase(((folded.replace("\\", "\\\\").replace("'", "''"),),), prefix=True)


def _cjk_query(run: str) -> str:
    """A CJK run as the pieces index holds it: all of its consecutive pairs, as FTS5 matches the
    phrase of its two-character tokens ("東京大学" is 東京 & 京大 & 大学); a lone character as the
    start of a piece."""
    if len(run) == 1:
        return f"'{run}':*"
    return " & ".join("'" + run[i:i + 2] + "'" for i in range(len(run) - 1))


def _holders(conn: Any, term: _Term, cap: int) -> int:
    cond, params = term.condition()
    return conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM entities e WHERE {cond} LIMIT {int(cap)}) x",
                        params).fetchone()[0]


def plan(conn: Any, query: str, stop_words: frozenset[str], names: NameVocabulary | None) -> list[_Term]:
    """The query's terms that some entity holds, each with its phrases and holders (up to COMMON + 1):
    whole (with the words of names it begins), else as a prefix, else respelled, else (four
    letters or more) a name within a few typos."""
    found: list[_Term] = []
    terms = query_terms(query, stop_words)
    words = [w for w, kind in terms if kind == "word"]
    completions = {w: names.complete(w) if names is not None and len(w) >= lexical.PREFIX_MIN else [] for w in words}
    alternatives = list(dict.fromkeys(a for w in words for a in [w, *completions[w]]))
    phrases = dict(zip(alternatives, _phrases(conn, alternatives)))
    for word, kind in terms:
        if kind == "cjk":
            term = _Term(word, "cjk", query=_cjk_query(word))
        else:
            term = _Term(word, "word", phrases=[p for a in dict.fromkeys([word, *completions[word]])
                                                if (p := phrases[a]) is not None])
            if not term.phrases:  # a stop word: neither configuration keeps it
                continue
        term.held = _holders(conn, term, COMMON + 1)
        if not term.held and kind == "word" and len(word) >= lexical.PREFIX_MIN:
            term.phrases, term.how = [_prefix(word)], "prefix"
            term.held = _holders(conn, term, COMMON + 1)
        if not term.held and kind == "word":
            respelled = names.respell(word) if names is not None else None
            if respelled:
                term.phrases = [p for p in _phrases(conn, respelled[0]) if p is not None]
                term.how, term.note = "respelled", respelled[1]
            elif len(word) >= 4:  # a phrase of its own: the failed prefix's phrases are no part of it
                term.kind, term.query, term.how, term.note, term.phrases = "fuzzy", word, "respelled", word, []
            if term.phrases or term.kind == "fuzzy":
                term.held = _holders(conn, term, COMMON + 1)
        if term.held:
            found.append(term)
    return found


def rank(conn: Any, terms: list[_Term], query: str, want: int) -> dict[int, tuple[float, int, str]]:
    """Up to `want` entity ids -> (BM25, query words held, why), best first, for the query's
    planned `terms`; entities holding the query as a substring after them, with 0."""
    ranked: dict[int, tuple[float, int, str]] = {}
    if terms:
        ranked = _rank_words(conn, terms, want)
    text = query.strip()
    if len(ranked) < want and text:
        for entity_id, why in substrings(conn, text, want + len(ranked)):
            if entity_id not in ranked and len(ranked) < want:
                ranked[entity_id] = (0.0, 0, why)
    return ranked


def _rank_words(conn: Any, terms: list[_Term], want: int) -> dict[int, tuple[float, int, str]]:
    rare = [t for t in terms if t.held <= COMMON]
    common = sorted((t for t in terms if t.held > COMMON), key=lambda t: t.held)
    pool_size = max(POOL, 2 * want)
    score: dict[int, float] = {}
    held: dict[int, list[_Term]] = {}
    if rare:
        conditions = [t.condition() for t in rare]
        ids = [int(r[0]) for r in conn.execute(
            "SELECT e.id FROM entities e WHERE " + " OR ".join(f"({c})" for c, _ in conditions),
            [p for _, params in conditions for p in params])]
        scored = _bm25(conn, rare, ids)
        for entity_id in sorted(scored, key=lambda i: (-scored[i][0], i))[:pool_size]:
            score[entity_id], held[entity_id] = scored[entity_id]
    if common:
        for term in common:
            if len(score) >= pool_size:
                break
            # Room left: those holding the common term in a name, alias, tag or type (oldest
            # first, found on the labels' own index: OFFSET 0 keeps the planner from walking
            # every entity by id when none holds it there), then its newest holders.
            labels, label_params = term.condition(labels=True)
            cond, params = term.condition()
            for sql, args in ((f"SELECT id FROM (SELECT e.id FROM entities e WHERE {labels} OFFSET 0) x ORDER BY id",
                               label_params), (f"SELECT e.id FROM entities e WHERE {cond} ORDER BY e.id DESC", params)):
                for (entity_id,) in conn.execute(sql + " LIMIT %s", (*args, pool_size - len(score))):
                    if entity_id not in score:
                        score[entity_id], held[entity_id] = 0.0, []
                if len(score) >= pool_size:
                    break
        pool = list(score)
        # N for the IDF as SQLite takes it for a common term: the largest id
        total = conn.execute("SELECT coalesce(max(id), 1) FROM entities").fetchone()[0]
        for term in common:
            cond, params = term.condition()
            labels, label_params = term.condition(labels=True)
            inside, labelled = conn.execute(
                f"""SELECT (SELECT coalesce(array_agg(e.id), '{{}}') FROM entities e WHERE e.id = ANY(%s) AND {cond}),
                           (SELECT coalesce(array_agg(e.id), '{{}}') FROM entities e WHERE e.id = ANY(%s) AND {labels})""",
                (pool, *params, pool, *label_params)).fetchone()
            idf = bm25.idf(_common_holders(conn, term), int(total))
            on_labels = set(labelled)
            for entity_id in inside:
                score[entity_id] += idf * (bm25.LABEL_GAIN if entity_id in on_labels else 1.0)
                held[entity_id].append(term)
    best = sorted(score, key=lambda i: (-score[i], -i))[:want]
    return {i: (score[i], len(held[i]), bm25.why([(t.label, t.how, t.note) for t in held[i]], len(terms), score[i]))
            for i in best}


def _common_holders(conn: Any, term: _Term) -> int:
    """How many entities hold a common term: counted up to COUNTED, and past that taken from
    PostgreSQL's statistics of the word index (its most common elements, kept by ANALYZE), as
    for memories; SQLite counts them all, which FTS5 does from its index alone, where PostgreSQL
    would read every holder's row."""
    cond, params = term.condition()
    (n,) = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM entities e WHERE {cond} LIMIT {COUNTED + 1}) x",
                        params).fetchone()
    if n <= COUNTED or term.kind != "word":
        return int(n)
    estimated = estimated_holders(conn, "entities", "search", [params[0]], COUNTED)
    return int(estimated.get(params[0], n))


def _bm25(conn: Any, rare: list[_Term], ids: list[int]) -> dict[int, tuple[float, list[_Term]]]:
    """BM25 of these entities over the rare terms' phrases, and the terms each holds."""
    if not ids:
        return {}
    documents, tokens = conn.execute("SELECT documents, tokens FROM entity_totals").fetchone()
    corpus = bm25.Corpus(int(documents), int(tokens))
    # the phrases, as FTS5 sees them (a CJK or typo term: one phrase of its own, None)
    phrases: list[tuple[_Term, _Phrase | None]] = [(t, p) for t in rare for p in ([*t.phrases] if t.phrases else [None])]
    # each phrase's holders (each is part of a rare term, so at most COMMON: an index count)
    counted = []
    for term, phrase in phrases:
        cond, params = term.condition() if phrase is None else ("e.search @@ %s::tsquery", [phrase.tsquery()])
        counted.append((f"(SELECT count(*) FROM entities e WHERE {cond})", params))
    holders = [int(n) for n in conn.execute("SELECT " + ", ".join(sql for sql, _ in counted),
                                            [p for _, params in counted for p in params]).fetchone()]
    # the CJK terms' hits in the labels and in the text (the text's pieces made again, as the
    # index makes them: `grams` holds both), the typo terms' in the name, per entity
    extra_sql, extra_params = [], []
    for term, _ in phrases:
        if term.kind != "word":
            labels, label_params = term.condition(labels=True)
            cond, params = term.condition()
            if term.kind == "cjk":
                cond = ("memloci_cjk_grams(left(memloci_entity_text(e.id) || E'\\n' || e.body, 30000)) "
                        "@@ %s::tsquery")
            extra_sql.append(f"({labels})::int, ({cond})::int")
            extra_params += [*label_params, *params]
    rows = conn.execute(
        f"""SELECT e.id, e.search_length, e.search::text, to_tsvector('simple', memloci_fold(e.aliases::text))::text
                   {''.join(', ' + s for s in extra_sql)}
            FROM entities e WHERE e.id = ANY(%s)""", (*extra_params, ids)).fetchall()
    exact = {lexeme for _, p in phrases if p is not None and not p.prefix for alt in p.alternatives for lexeme in alt}
    starts = {p.alternatives[0][0] for _, p in phrases if p is not None and p.prefix}
    wanted = "|".join([*map(re.escape, exact), *(re.escape(start) + "(?:[^']|'')*" for start in starts)])
    found = re.compile("(?:^| )'(" + wanted + r")':([0-9A-D,]+)") if wanted else None
    out: dict[int, tuple[float, list[_Term]]] = {}
    for row in rows:
        entity_id, length, search, aliases = int(row[0]), int(row[1]), row[2], row[3]
        columns_of: dict[str, list[int]] = {}  # each wanted lexeme's count per column
        if found is not None:
            in_aliases = {lexeme: len(positions.split(",")) for lexeme, positions in found.findall(aliases)}
            for lexeme, positions in found.findall(search):
                columns = [0] * 7
                for position in positions.split(","):
                    weight = position[-1]
                    columns[_TAGS if weight == "B" else _COLUMN.get(weight, _TEXT)] += 1
                moved = min(in_aliases.get(lexeme, 0), columns[_TAGS])  # B holds aliases, then tags
                columns[_ALIASES], columns[_TAGS] = moved, columns[_TAGS] - moved
                columns_of[lexeme] = columns
        counts: dict[int, list[int]] = {}
        k = 4
        for i, (term, phrase) in enumerate(phrases):
            if phrase is not None:
                counts[i] = phrase.count(columns_of)
                continue
            on_labels, found_there = int(row[k]), int(row[k + 1])
            k += 2
            if term.kind == "cjk":  # once in the labels' pieces, once in the text's, where found
                counts[i] = [0, 0, 0, 0, 0, on_labels, found_there]
            else:  # a name within a few typos: once, in the name
                counts[i] = [found_there, 0, 0, 0, 0, 0, 0]
        counts = {i: c for i, c in counts.items() if any(c)}
        if counts:
            value = bm25.score({i: tuple(c) for i, c in counts.items()}, length, holders, corpus, bm25.ENTITY_WEIGHTS)
            out[entity_id] = (value, list(dict.fromkeys(phrases[i][0] for i in counts)))
    return out


def count(conn: Any, terms: list[_Term], query: str, cap: int) -> int:
    """How many entities rank() finds for the same `terms` by words, else by substrings, up to `cap`."""
    if terms:
        conditions = [t.condition() for t in terms]
        (n,) = conn.execute("SELECT count(*) FROM (SELECT 1 FROM entities e WHERE "
                            + " OR ".join(f"({c})" for c, _ in conditions) + " LIMIT %s) x",
                            (*[p for _, params in conditions for p in params], cap)).fetchone()
        if n:
            return min(int(n), cap)
    text = query.strip()
    return min(len({i for i, _ in substrings(conn, text, cap)}), cap) if text else 0


def substrings(conn: Any, text: str, limit: int) -> list[tuple[int, str]]:
    """Entities holding `text` as a substring (case-insensitive): of a name, type, alias or tag,
    of the note's body, then of an observation (the official server's guarantee; pg_trgm
    indexes answer for three characters or more)."""
    pattern = lexical.like_pattern(text.lower())
    found = [(int(r[0]), "substring of name, type or alias") for r in conn.execute(
        r"SELECT id FROM entities WHERE labels LIKE %s ESCAPE '\' LIMIT %s", (pattern, limit))]
    if len(found) < limit:
        found += [(int(r[0]), "substring of the note") for r in conn.execute(
            r"SELECT id FROM entities WHERE body ILIKE %s ESCAPE '\' LIMIT %s", (pattern, limit))]
    if len(found) < limit:
        found += [(int(r[0]), "substring of an observation") for r in conn.execute(
            r"""SELECT DISTINCT entity_id FROM memories WHERE entity_id IS NOT NULL AND content ILIKE %s ESCAPE '\'
                LIMIT %s""", (pattern, limit))]
    seen: dict[int, str] = {}
    for entity_id, why in found:
        seen.setdefault(entity_id, why)
    return list(seen.items())[:limit]
