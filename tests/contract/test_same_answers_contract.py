"""The same calls give the same answers on every engine: one script of official-tool calls,
searches, free memories and strict-schema refusals is played on a SQLite, a Markdown and a
PostgreSQL library, and every answer is compared with SQLite's (the reference engine).

Compared: everything a caller reads, except what cannot be the same across libraries made at
different moments (times, ids, hashes of timestamps) and what an engine may render its own
way (a Markdown entity's body holds its observations as text). Search results are compared
in order. Memories' word scores are compared too: one BM25 (core/bm25.py) scores them on every
engine, so they are the same numbers; entities' scores are not compared, only their order."""

from __future__ import annotations

import dataclasses
import re

import pytest

from memloci.core.errors import MemlociError
from memloci.core.model import EntityInput, MemoryFilter, ObservationBatch, RelationInput
from memloci.core.schema import STRICT
from memloci.search.hybrid import word_candidates, word_terms

from .conftest import ENGINES

VARYING = {"created_at", "updated_at", "last_accessed_at", "id", "body", "score", "words", "meaning"}


def plain(value):
    """A result as plain data, without what differs between two libraries made at different times."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in VARYING}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):  # a score inside a hit's "why" ("word, bm25 0.556"): each engine its own
        return re.sub(r"\d+\.\d+(e-?\d+)?", "#", re.sub(r"\b(bm25|rank) ", "score ", value))
    return value


def script(s) -> list:
    answers: list = []

    def call(name, fn):
        try:
            answers.append((name, plain(fn())))
        except MemlociError as exc:
            answers.append((name, exc.code, exc.message, exc.hint, plain(getattr(exc, "details", None))))
        # A search's hits are counted (access_count, which ranking weighs) by a background thread
        # a moment later; count them now, so every engine ranks the next call with the same counts.
        s.vectors.accesses.drain()

    call("create", lambda: s.create_entities([
        EntityInput("Alice", "person", ("Works at Acme", "Likes green tea")),
        EntityInput("Acme", "company", ("Makes anvils",)), EntityInput("Bob", "person"),
        EntityInput("ALICE", "robot", ("Likes green tea", "Plays chess"))]))
    call("relate", lambda: s.create_relations([RelationInput("Alice", "works_at", "Acme"),
                                               RelationInput("Bob", "knows", "alice"),
                                               RelationInput("Bob", "knows", "Ghost")]))
    call("relate", lambda: s.create_relations([RelationInput("Alice", "works_at", "Acme"),
                                               RelationInput("Bob", "knows", "alice")]))
    call("relate again", lambda: s.create_relations([RelationInput("alice", "works_at", "ACME")]))
    call("observe", lambda: s.add_observations([ObservationBatch("Bob", ("Plays chess", "Plays  chess"))]))
    call("observe missing", lambda: s.add_observations([ObservationBatch("Nobody", ("x",))]))
    call("forget", lambda: s.delete_observations([ObservationBatch("Alice", ("Likes green tea",))]))
    call("unrelate", lambda: s.delete_relations([RelationInput("Bob", "knows", "Alice")]))
    for query in ["anvils", "chess", "alice acme", "alcie", "pers", "zeppelin", ""]:
        call(f"search {query!r}", lambda q=query: s.search_nodes(q))
    call("open", lambda: s.open_nodes(["alice", "Nope", "acme"]))
    call("read", lambda: s.read_graph(limit=2, offset=1))
    call("summary", lambda: s.read_graph(summary=True))
    call("delete", lambda: s.delete_entities(["acme", "Ghost"]))
    call("graph", lambda: s.export_graph(order="name"))

    call("store", lambda: s.store_memory("Deploy on Friday after the freeze", tags=["ops", "Risky"],
                                         memory_type="decision", importance="high", metadata={"ticket": 7}))
    call("store", lambda: s.store_memory("Deploy on Monday", tags=["ops"]))
    call("store", lambda: s.store_memory("Lunch with the design team on Friday", tags=["social"]))
    call("store again", lambda: s.store_memory("Deploy  on Monday", tags=["calendar"]))
    call("store observation", lambda: s.store_memory("Speaks Dutch", entity="alice"))
    for args in [dict(query="deploy"), dict(query="friday"), dict(query="deploy", tags=["risky", "ops"], match_all=True),
                 dict(query="deploy", memory_type="DECISION"), dict(query="zeppelin", tags=["ops"]),
                 dict(query="dutch", entity="Alice"), dict(query="latest", n_results=2), dict(query="deploy", time="today")]:
        call(f"retrieve {args}", lambda a=args: [(h.memory.content, h.memory.tags) for h in s.retrieve_memory(**a).hits])
    call("by tag", lambda: s.search_by_tag(["OPS"]))
    call("list", lambda: s.list_memories(page=1, page_size=3, filters=MemoryFilter(tags=("ops", "social"))))
    call("update", lambda: s.update_memory(s.search_by_tag(["social"])[0].content_hash, content="Lunch moved to Thursday"))
    call("retrieve updated", lambda: [h.memory.content for h in s.retrieve_memory("thursday").hits])
    call("delete memory", lambda: s.delete_memory(s.search_by_tag(["calendar"])[0].content_hash))
    call("list all", lambda: s.list_memories(page_size=50))
    call("stats", lambda: {k: v for k, v in dataclasses.asdict(s.stats()).items()
                           if k in ("entities", "observations", "memories", "relations")})
    return answers


def strict_script(s) -> list:
    answers: list = []

    def call(name, fn):
        try:
            answers.append((name, plain(fn())))
        except MemlociError as exc:
            answers.append((name, exc.code, exc.message, exc.hint))

    call("create", lambda: s.create_entities([EntityInput(n, t) for n, t in [
        ("user-john", "person"), ("python-project", "project"), ("fastapi", "tool"), ("starlette", "tool")]]))
    call("dup", lambda: s.create_entities([EntityInput("user-john", "person")]))
    call("bad name", lambda: s.create_entities([EntityInput("User-John", "person")]))
    call("relate", lambda: s.create_relations([RelationInput("python-project", "depends-on", "fastapi"),
                                               RelationInput("fastapi", "depends-on", "starlette")]))
    call("cycle", lambda: s.create_relations([RelationInput("starlette", "uses", "python-project")]))
    call("type", lambda: s.create_relations([RelationInput("user-john", "likes", "fastapi")]))
    call("self", lambda: s.create_relations([RelationInput("fastapi", "uses", "fastapi")]))
    call("observe", lambda: s.add_observations([ObservationBatch("user-john", ("prefers tea",))]))
    call("observe again", lambda: s.add_observations([ObservationBatch("user-john", ("prefers tea",))]))
    call("graph", lambda: s.export_graph(order="name"))
    return answers


def differences(other: str, answers: list, reference: list) -> str:
    differ = [(mine, theirs) for mine, theirs in zip(answers, reference) if mine != theirs]
    return f"{other} answers {len(differ)} call(s) differently:\n" + "\n".join(
        f"{mine[0]}:\n  {other}: {mine[1:]}\n  sqlite: {theirs[1:]}" for mine, theirs in differ) if differ else ""


OTHERS = [e for e in ENGINES if e != "sqlite"]


@pytest.mark.parametrize("other", OTHERS)
def test_every_answer_is_the_same_as_on_sqlite(engines, other):
    reference = script(engines["sqlite"].library())
    answers = script(engines[other].library())
    assert len(answers) == len(reference)
    diff = differences(other, answers, reference)
    assert not diff, diff


@pytest.mark.parametrize("other", OTHERS)
def test_strict_answers_are_the_same_as_on_sqlite(engines, other):
    reference = strict_script(engines["sqlite"].library(STRICT))
    answers = strict_script(engines[other].library(STRICT))
    assert len(answers) == len(reference)
    diff = differences(other, answers, reference)
    assert not diff, diff


# Lengths, repeated words, tags and threads (neighbours' words) all weigh in BM25. (Not here: words
# the engines' stemmers cut apart, "deployment", and queries of stop words only, "the": SQLite's
# porter keeps what PostgreSQL's english stemmer drops.)
SAID = [
    ("Deploy on Friday after the freeze", ["ops", "Risky"], {}),
    ("Deploy on Monday", ["ops"], {}),
    ("deploy deploy deploy: the deploy script deploys again", ["scripts"], {}),
    ("Alice: shall we deploy the new search on Friday?", ["dia:D1:1"], {"session": 1}),
    ("Bob: only after the freeze, and with a rollback plan", ["dia:D1:2"], {"session": 1}),
    ("Alice: the freeze ends on Thursday", ["dia:D1:3"], {"session": 1}),
    ("Lunch with the design team", ["social", "friday"], {}),
    ("München office: the new printers arrive", ["office"], {}),
]
QUERIES = ["deploy", "friday freeze", "deploy rollback plan", "ops", "what did alice say about the freeze",
           "munchen printers", "scripts deploy", "zeppelin"]


@pytest.mark.parametrize("other", OTHERS)
def test_memory_word_scores_are_sqlites(engines, other):
    """The same memories get the same BM25 for the same query words, to the last digits, on every
    engine (a change to how one engine counts lengths, holders or columns shows here)."""
    scores = {}
    for name, engine in engines.items():
        s = engine.library()
        for content, tags, metadata in SAID:
            s.store_memory(content, tags=tags, metadata=metadata)
        store = s.store()
        hashes = {m.id: m.content for m in store.load_memories(range(1, 1000)).values()}
        scores[name] = {q: {hashes[i]: round(v, 9) for i, v in word_candidates(
            store, word_terms(q), [], 100, MemoryFilter()).items()} for q in QUERIES}
    assert scores["sqlite"]["deploy"] and scores["sqlite"]["zeppelin"] == {}
    differ = {q: (scores[other][q], scores["sqlite"][q]) for q in QUERIES if scores[other][q] != scores["sqlite"][q]}
    assert not differ, "\n".join(f"{q!r}:\n  {other}: {mine}\n  sqlite: {theirs}" for q, (mine, theirs) in differ.items())
