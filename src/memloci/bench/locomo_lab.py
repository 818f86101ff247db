"""LoCoMo in-process: the same protocol as `memloci bench locomo`, without MCP, for experiments.

Each conversation's library is built once (store_memory per turn, every turn embedded by
the real model) in a cache folder the caller gives (`memloci bench locomo --folds` gives the
per-user one, Settings.cache_for("locomo-lab"): $MEMLOCI_CACHE/locomo-lab, else $XDG_CACHE_HOME
or ~/.cache, then memloci/locomo-lab), and reused; question vectors are cached
there too. Retrieval runs `MemoryService.retrieve_memory` on the real store and vector index,
so a configuration is measured in seconds rather than minutes.

The figures are close to the MCP bench's but not equal. Every retrieval counts as an access
and access counts feed decay, so what earlier questions returned shapes later rankings: the
MCP bench asks each question for its largest --k (25 by default) and reads R@10 from those,
the lab asks for k; on the dev split the shipped weights score R@10 80.6 asked for 10 and
80.1 asked for 25, in-process, where `memloci bench locomo` measured 79.8. Here accesses are
recorded before the next question (_CountedAtOnce), so a run is repeatable; latency is
measured only in the MCP bench.

    python -m memloci.bench.locomo_lab --data ../shared/data/locomo/locomo_dev.json --cache ~/.cache/memloci/locomo-lab
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from memloci.bench.locomo_protocol import CATEGORIES, evidence_ids, recall, turns_of
from memloci.core.settings import Settings

# Search modules that only rank at query time: nothing a library stores or embeds comes from
# them, so changing them reuses the built libraries (and the question vectors).
QUERY_TIME = frozenset({"search/hybrid.py", "search/cues.py", "search/timephrases.py", "search/decay.py",
                        "search/entities.py", "search/feedback.py", "search/context.py"})


def code_digest() -> str:
    """A digest of what decides a built library's contents: memloci's schema version and the
    source of the code that stores, indexes and embeds (core/, rules/, app/, store/, service/,
    and search/ but for its QUERY_TIME modules). Changed code never reuses a library built by
    older code; computed anew on each call, as the files are cheap to read."""
    from memloci.store.sqlite.schema import SCHEMA_VERSION

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha1(f"schema {SCHEMA_VERSION}\n".encode())
    files = sorted(f for part in ("core", "rules", "app", "search", "store", "service") for f in (root / part).rglob("*.py")
                   if f.relative_to(root).as_posix() not in QUERY_TIME)
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


class CachedEmbedder:
    """The real embedder, with query vectors kept on disk (the model is the slow part)."""

    def __init__(self, inner, path: Path):
        self.inner, self.path = inner, path
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path, allow_pickle=False) as data:
                self.cache = {k: data[k] for k in data.files}
        self.dirty = False

    def __getattr__(self, name: str):  # model_id, dimension: the real embedder's
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = [t for t, k in zip(texts, keys) if k not in self.cache]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing)):
                self.cache[hashlib.sha1(t.encode()).hexdigest()] = v
            self.dirty = True
        return np.stack([self.cache[k] for k in keys])

    def save(self) -> None:
        if self.dirty:
            arrays: dict[str, Any] = self.cache  # names, never savez's own keywords
            np.savez(self.path, **arrays)
            self.dirty = False


def cached_handle(cache: Path, settings: Settings):
    """An embedder handle (the one `settings` configure) whose model caches query vectors in `cache`."""
    from memloci.search.embedder import EmbedderHandle

    handle = EmbedderHandle(None, settings)
    # keyed by the code too: the embedder's own source (search/embedder.py) decides the vectors
    cached = handle.wrap(lambda inner: CachedEmbedder(
        inner, cache / f"queries-{inner.model_id.replace('/', '_')}-{code_digest()}.npz"))
    if cached is None:
        raise RuntimeError(f"the embedder did not load: {handle.status().error}")
    return handle


def build(sample: dict[str, Any], cache: Path, handle) -> Path:
    """The conversation's library, every turn stored and embedded (built once, then reused)."""
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.service.facade import MemoryService

    turns = turns_of(sample)
    # keyed by the turns, the model and the code (schema version, indexing source): an edited
    # data file or changed indexing code never reuses a stale library
    key = json.dumps({"turns": turns, "model": handle.get().model_id, "code": code_digest()}, sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    db = cache / f"{sample['sample_id']}-{handle.get().model_id.replace('/', '_')}-{digest}.db"
    done = db.with_suffix(".done")
    if done.exists() and db.exists():
        return db
    for leftover in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    service = MemoryService(LibraryRegistry([LibrarySpec("bench", db)]), handle)
    try:
        for t in turns:
            service.store_memory(t["content"], tags=[f"dia:{t['dia_id']}"], memory_type="dialogue",
                                 metadata={"dia_id": t["dia_id"], "session": t["session"], "date": t["date"]})
        pair = service.vectors.of(service.store())
        assert pair is not None  # the lab's embedder is loaded
        pair[1].flush(timeout=600)
    finally:
        service.close()
    done.write_text("ok")
    return db


def evaluate(samples: list[dict[str, Any]], cache: Path, settings: Settings, k: int = 10,
             weights: dict[str, float] | None = None, handle=None) -> list[dict[str, Any]]:
    """Rows {conversation, category, evidence, ranked, question} for every question with
    evidence, asked through MemoryService.retrieve_memory (the tool's own path) on a fresh copy
    of each built library (retrievals count as accesses, which every later question sees)."""
    import shutil
    import tempfile

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.service.facade import MemoryService

    cache.mkdir(parents=True, exist_ok=True)
    handle = handle or cached_handle(cache, settings)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memloci-locomo-lab-") as tmp, patched(weights or {}):
        for sample in samples:
            db = Path(tmp) / f"{sample['sample_id']}.db"
            shutil.copyfile(build(sample, cache, handle), db)
            service = MemoryService(LibraryRegistry([LibrarySpec("bench", db)]), handle)
            service.vectors.accesses = _CountedAtOnce()  # type: ignore[assignment]  # the recorder's two methods
            try:
                for q in sample["qa"]:
                    evidence = evidence_ids(q.get("evidence", []))
                    if not evidence:
                        continue
                    hits = service.retrieve_memory(q["question"], n_results=k).hits
                    ranked = [next((t[4:] for t in h.memory.tags if t.startswith("dia:")), None) for h in hits]
                    rows.append({"conversation": sample["sample_id"], "category": q["category"],
                                 "evidence": evidence, "ranked": ranked, "question": q["question"]})
            finally:
                service.close()
    handle.get().save()
    return rows


class _CountedAtOnce:
    """Accesses recorded before the next question, not by the service's background thread:
    which earlier hits a question sees counted (access counts feed decay) would otherwise
    depend on thread timing, and runs of one setting differed by up to half a point."""

    def record(self, store, ids: list[int]) -> None:
        if ids:
            store.touch_memories(ids)

    def drain(self) -> None:
        pass


def tuned_modules() -> list[Any]:
    """The modules whose module-level weights the lab sets: the fusion and cues (search/hybrid.py),
    the second pass (search/feedback.py), session context (search/context.py), the neighbours'
    share of a similarity (search/vectors.py, read at each search)."""
    from memloci.search import context, feedback, hybrid, vectors

    return [hybrid, feedback, context, vectors]


def owner_of(name: str) -> Any | None:
    """The tuned module that holds the weight `name`, or None."""
    return next((m for m in tuned_modules() if hasattr(m, name)), None)


class patched:
    """Set the tuned modules' weights for a block, then put them back."""

    def __init__(self, weights: dict[str, float]):
        self.weights = weights

    def __enter__(self):
        self.saved = {}
        for name, value in self.weights.items():
            module = owner_of(name)
            if module is None:
                raise ValueError(f"weights: no tuned module has a weight named {name}")
            self.saved[name] = (module, getattr(module, name))
            setattr(module, name, value)

    def __exit__(self, *exc):
        for name, (module, value) in self.saved.items():
            setattr(module, name, value)


def per_category(rows: list[dict[str, Any]], k: int = 10) -> dict[str, float]:
    by_cat: dict[Any, list] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    out = {f"{c} {CATEGORIES.get(c, '')}".strip(): round(100 * recall(by_cat[c], k), 1) for c in sorted(by_cat)}
    out["overall"] = round(100 * recall(rows, k), 1)
    return out


# The weights leave-one-out chooses among: session context (search/context.py: how much the best
# match close by in the same conversation lends; its reach of 2 was chosen against the whole
# session the same way) and the second pass (search/feedback.py: how much the best hits' own
# words, and nearness to their mean vector, add). The cue boosts of search/hybrid.py were chosen
# the same way before (CUE_GRID, 36 settings) and are kept. 16 runs of every question.
GRID: dict[str, tuple[float, ...]] = {"SESSION_WEIGHT": (0.0, 0.25, 0.5, 0.75), "FEEDBACK_WEIGHT": (0.0, 0.1),
                                      "EXPANSION_WEIGHT": (0.0, 0.2)}
CUE_GRID: dict[str, tuple[float, ...]] = {"WHEN_BOOST": (0.0, 0.5, 1.0), "DATE_BOOST": (0.0, 1.0, 2.0, 3.0),
                                          "SPEAKER_BOOST": (0.0, 0.2, 0.4)}


def folds(samples: list[dict[str, Any]], cache: Path, settings: Settings, k: int = 10,
          grid: dict[str, tuple[float, ...]] | None = None, on_step=None) -> dict[str, Any]:
    """Leave one conversation out: for each conversation, the weights that score best on the
    other ones (overall recall@k), measured on it. Returns the plain figures (the shipped
    weights on all), the leave-one-out figures, each fold's choice and every setting's figures."""
    import itertools

    grid = grid or GRID
    cache.mkdir(parents=True, exist_ok=True)
    handle = cached_handle(cache, settings)
    names = [n for n in grid if owner_of(n) is not None]
    weight_sets = [dict(zip(names, values)) for values in itertools.product(*(grid[n] for n in names))]
    shipped = {n: getattr(owner_of(n), n) for n in names}
    if shipped not in weight_sets:
        weight_sets.insert(0, shipped)
    results = []
    for weights in weight_sets:
        results.append(evaluate(samples, cache, settings, k, weights, handle))
        if on_step:
            on_step()
    plain = results[weight_sets.index(shipped)]
    held_rows, chosen = [], {}
    for sample in samples:
        held = sample["sample_id"]
        best = max(range(len(weight_sets)),
                   key=lambda i: recall([r for r in results[i] if r["conversation"] != held], k))
        chosen[held] = weight_sets[best]
        held_rows += [r for r in results[best] if r["conversation"] == held]
    return {"plain": per_category(plain, k), "leave_one_out": per_category(held_rows, k), "chosen": chosen,
            "shipped": shipped,
            "settings": [{"weights": w, "recall": per_category(r, k)["overall"]} for w, r in zip(weight_sets, results)]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True, help="where built libraries are kept and reused")
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args(argv)
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    started = time.perf_counter()
    rows = evaluate(samples, args.cache, Settings.defaults(), args.k)
    print(json.dumps(per_category(rows, args.k)), f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
