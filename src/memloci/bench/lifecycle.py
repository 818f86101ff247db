"""`memloci bench lifecycle`: how well duplicates, contradictions and clusters are found, and how
long clustering takes (the algorithms are search/similar.py and search/clusters.py).

1. The labelled set (`data/near_duplicates.json`), by language: precision and recall of near
   duplicates per cosine threshold, by meaning alone and with the changed-words test; the
   contradictions proposed at SAME_SUBJECT_MIN.
2. A generated library with planted duplicates: each English fact stored, then an exact copy
   (other case, spaces and punctuation), a paraphrase (a near duplicate) and a variant (a
   contradiction), the other facts around them; found, missed and wrong for each kind.
3. Clusters of the set's English statements: sizes and purity (one fact per cluster).
4. Clustering time on random-but-clustered vectors (384 dimensions; topics of 2 to 40
   memories) at each --sizes: the pairs (chunked products), the clusters, their sizes, peak memory.
5. engines (lifecycle_library.py): consolidate("yearly") previewed and executed on a library of each
   --sizes on SQLite, PostgreSQL and Markdown, built with stored vectors and no embedder run.
6. under-load (lifecycle_load.py): retrieve_memory latency over HTTP before, during and after a
   consolidate tool call on a real server.
7. extraction (lifecycle_extraction.py): store_memory and add_observations with extraction on and off.
`--parts` chooses; by default all but engines and under-load, which take minutes.
"""

from __future__ import annotations

import hashlib
import json
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from memloci.bench.common import save_report
from memloci.bench.lifecycle_library import clustered_topics
from memloci.core.model import Memory
from memloci.search.changes import changes
from memloci.search.clusters import ASSOCIATION_MIN, clusters
from memloci.search.embedder import create_embedder
from memloci.search.similar import (
    NEAR_DUPLICATE_MIN,
    SAME_SUBJECT_MIN,
    contradictions,
    exact_duplicates,
    near_duplicates,
    similar_pairs,
    swapped_words,
)

SET = Path(__file__).parent / "data" / "near_duplicates.json"
THRESHOLDS = (0.70, 0.72, 0.76, 0.80, 0.84, 0.88, 0.92)


def _memory(k: int, text: str, minute: int) -> Memory:
    return Memory(id=k, content=text, content_hash=hashlib.sha256(text.encode()).hexdigest()[:16], tags=(),
                  memory_type="note", importance="medium", metadata={},
                  created_at=f"2026-01-{1 + minute // 1440:02d}T{minute // 60 % 24:02d}:{minute % 60:02d}:00Z",
                  updated_at="", access_count=0, last_accessed_at=None, entity=None)


def _labelled(facts: list[dict[str, Any]], vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lang in ("en", "zh", "ja"):
        pos, neg = [], []
        for f in (f for f in facts if f["lang"] == lang):
            base = vectors[f["text"]]
            for p in f["paraphrases"]:
                pos.append((float(base @ vectors[p]), not changes(f["text"], p) and not swapped_words(f["text"], p),
                            bool(changes(f["text"], p))))
            for v in f["variants"]:
                neg.append((float(base @ vectors[v["text"]]),
                            not changes(f["text"], v["text"]) and not swapped_words(f["text"], v["text"]),
                            bool(changes(f["text"], v["text"])), v["kind"]))
        rows = []
        for t in THRESHOLDS:
            for test in ("meaning", "meaning+words"):
                tp = sum(1 for s, ok, _ in pos if s >= t and (ok or test == "meaning"))
                fp = sum(1 for s, ok, _, _ in neg if s >= t and (ok or test == "meaning"))
                rows.append({"threshold": t, "test": test, "precision": round(tp / max(1, tp + fp), 3),
                             "recall": round(tp / max(1, len(pos)), 3), "true": tp, "false": fp})
        proposed = Counter(k for s, _, c, k in neg if s >= SAME_SUBJECT_MIN and c)
        wrong = sum(1 for s, _, c in pos if s >= SAME_SUBJECT_MIN and c)
        right = sum(proposed.values())
        out[lang] = {"paraphrase_pairs": len(pos), "variants": len(neg), "near_duplicates": rows,
                     "contradictions": {"proposed": right, "of": len(neg), "by_kind": dict(proposed),
                                        "paraphrases_proposed": wrong,
                                        "precision": round(right / max(1, right + wrong), 3)}}
    return out


def _planted(facts: list[dict[str, Any]], embed: Any) -> dict[str, Any]:
    """An English library: per fact, the fact, an exact copy, a paraphrase, a variant (newest)."""
    memories: list[Memory] = []
    role: dict[int, tuple[str, str]] = {}  # id -> (fact id, fact | copy | paraphrase | variant)
    english = [f for f in facts if f["lang"] == "en"]
    for n, f in enumerate(english):
        copy = "  " + f["text"].upper().rstrip(".") + " !"
        for r, text in enumerate((f["text"], copy, f["paraphrases"][n % 3], f["variants"][n % 6]["text"])):
            k = len(memories)
            memories.append(_memory(k, text, minute=n + 60 * r))
            role[k] = (f["id"], ("fact", "copy", "paraphrase", "variant")[r])
    vectors = embed([m.content for m in memories])
    exact = exact_duplicates(memories)
    exact_right = sum(1 for g in exact for d in g.duplicates
                      if role[g.keeper.id][0] == role[d.id][0] and role[d.id][1] == "copy")
    same = {"fact", "copy", "paraphrase"}
    near = near_duplicates(memories, vectors)
    near_right = sum(1 for d in near if role[d.keeper.id][0] == role[d.duplicate.id][0]
                     and {role[d.keeper.id][1], role[d.duplicate.id][1]} <= same)
    planted_near = {role[k][0] for k in role if role[k][1] == "paraphrase"}
    near_found = {role[d.keeper.id][0] for d in near if role[d.duplicate.id][1] == "paraphrase"
                  and role[d.keeper.id][0] == role[d.duplicate.id][0]}
    found = contradictions(memories, vectors)
    con_right = [c for c in found if role[c.older.id][0] == role[c.newer.id][0] and role[c.newer.id][1] == "variant"]
    return {
        "memories": len(memories),
        "exact": {"planted": len(english), "found": exact_right, "missed": len(english) - exact_right,
                  "wrong": sum(len(g.duplicates) for g in exact) - exact_right},
        "near": {"planted": len(planted_near), "found": len(near_found), "missed": len(planted_near - near_found),
                 "offers": len(near), "wrong": len(near) - near_right},
        "contradictions": {"planted": len(english), "found": len({role[c.newer.id][0] for c in con_right}),
                           "missed": len(english) - len({role[c.newer.id][0] for c in con_right}),
                           "proposals": len(found), "wrong": len(found) - len(con_right),
                           "examples": [f"{c.older.content} => {c.newer.content} ({c.reason})" for c in con_right[:3]]},
    }


def _set_clusters(facts: list[dict[str, Any]], vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    english = [f for f in facts if f["lang"] == "en"]
    texts = [(f["id"], t) for f in english for t in [f["text"], *f["paraphrases"], *(v["text"] for v in f["variants"])]]
    memories = [_memory(k, t, k) for k, (_, t) in enumerate(texts)]
    report = clusters(memories, np.stack([vectors[t] for _, t in texts]))
    owner = {k: fid for k, (fid, _) in enumerate(texts)}
    inside = sum(len(c.members) for c in report.clusters)
    pure = sum(Counter(owner[m.id] for m in c.members).most_common(1)[0][1] for c in report.clusters)
    return {"facts": len(english), "memories": len(memories), "clusters": len(report.clusters),
            "refused": len(report.refused), "clustered": inside, "purity": round(pure / max(1, inside), 3),
            "sizes": report.sizes(), "max_size": report.max_size,
            "mean_cohesion": round(float(np.mean([c.cohesion for c in report.clusters])), 3),
            "mean_separation": round(float(np.mean([c.separation for c in report.clusters])), 3)}


def clustered_vectors(n: int, seed: int = 7, dim: int = 384) -> np.ndarray:
    """Random-but-clustered unit vectors: topics of 2 to 40 rows, each row a noisy copy of its
    topic's direction (cosine to it about 0.8, to another topic about 0)."""
    return clustered_topics(n, seed, dim)[0]


def _timed(n: int) -> dict[str, Any]:
    vectors = clustered_vectors(n)
    memories = [_memory(k, "", k % 40_000) for k in range(n)]
    start = time.perf_counter()
    pairs = similar_pairs(vectors, ASSOCIATION_MIN)
    pairs_s = time.perf_counter() - start
    start = time.perf_counter()
    report = clusters(memories, vectors, pairs=pairs)
    clusters_s = time.perf_counter() - start
    sizes = [len(c.members) for c in report.clusters]
    return {"memories": n, "pairs": len(pairs), "pairs_s": round(pairs_s, 2), "clusters_s": round(clusters_s, 2),
            "clusters": len(report.clusters), "refused": len(report.refused), "max_size": report.max_size,
            "largest": max(sizes, default=0), "median_size": float(np.median(sizes)) if sizes else 0.0,
            "sizes": report.sizes(), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


PARTS = ("labelled", "planted", "clusters", "timing", "engines", "under-load", "extraction")
DEFAULT_PARTS = ("labelled", "planted", "clusters", "timing", "extraction")  # engines and under-load take minutes


def run(*, sizes: list[int], embedder: str, out: Path, console: Any, parts: tuple[str, ...] = DEFAULT_PARTS,
        engines: tuple[str, ...] = ("sqlite", "postgres", "markdown"), url: str | None = None,
        settings: Any = None, load_size: int = 10_000, rounds: int = 3, clients: int = 3,
        baseline_s: float = 20.0, entities: int = 1_000, calls: int = 200) -> dict[str, Any]:
    """The parts asked for (PARTS), each a table; one JSON report of them all."""
    report: dict[str, Any] = {"parts": list(parts), "near_duplicate_min": NEAR_DUPLICATE_MIN,
                              "same_subject_min": SAME_SUBJECT_MIN, "association_min": ASSOCIATION_MIN}
    if {"labelled", "planted", "clusters"} & set(parts):
        _labelled_parts(report, parts, embedder, console)
    if "timing" in parts:
        _timing_part(report, sizes, console)
    if "engines" in parts:
        from memloci.bench.lifecycle_library import run_engines

        report["engines"] = run_engines(list(engines), sizes, url, settings, console.print)
        _print_engines(report["engines"], console)
    if "under-load" in parts:
        from memloci.bench.lifecycle_load import run_under_load

        report["under_load"] = run_under_load(load_size, rounds, clients, baseline_s, settings, console.print)
        _print_under_load(report["under_load"], console)
    if "extraction" in parts:
        from memloci.bench.lifecycle_extraction import run_extraction

        report["extraction"] = run_extraction(entities, calls, settings)
        _print_extraction(report["extraction"], console)
    save_report(report, out, console)
    return report


def _labelled_parts(report: dict[str, Any], parts: tuple[str, ...], embedder: str, console: Any) -> None:
    from rich.table import Table

    facts = json.loads(SET.read_text(encoding="utf-8"))["facts"]
    model = create_embedder(embedder)
    if model is None:
        raise ValueError("--embedder: the bench needs a model, got 'none'")
    texts = sorted({t for f in facts for t in [f["text"], *f["paraphrases"], *(v["text"] for v in f["variants"])]})
    vectors = dict(zip(texts, model.embed(texts), strict=True))
    report["embedder"] = model.model_id
    if "labelled" in parts:
        report["labelled"] = _labelled(facts, vectors)
        table = Table(title=f"Near duplicates on the labelled set ({model.model_id}): precision / recall")
        table.add_column("cosine >=", justify="right")
        for lang in ("en", "zh", "ja"):
            for test in ("meaning", "meaning+words"):
                table.add_column(f"{lang} {test}", justify="right")
        for t in THRESHOLDS:
            cells = []
            for lang in ("en", "zh", "ja"):
                for test in ("meaning", "meaning+words"):
                    row = next(r for r in report["labelled"][lang]["near_duplicates"]
                               if r["threshold"] == t and r["test"] == test)
                    cells.append(f"{row['precision']:.2f} / {row['recall']:.2f}")
            table.add_row(f"{t:.2f}", *cells)
        console.print(table)
        for lang in ("en", "zh", "ja"):
            c = report["labelled"][lang]["contradictions"]
            console.print(f"contradictions ({lang}, cosine >= {SAME_SUBJECT_MIN}): {c['proposed']} of {c['of']} "
                          f"variants proposed {c['by_kind']}, {c['paraphrases_proposed']} paraphrases wrongly; "
                          f"precision {c['precision']}")
    if "planted" in parts:
        report["planted"] = _planted(facts, model.embed)
        planted = Table(title=f"Planted in a library of {report['planted']['memories']} memories")
        for column in ("kind", "planted", "found", "missed", "wrong"):
            planted.add_column(column, justify="left" if column == "kind" else "right")
        for kind in ("exact", "near", "contradictions"):
            p = report["planted"][kind]
            planted.add_row(kind, str(p["planted"]), str(p["found"]), str(p["missed"]), str(p["wrong"]))
        console.print(planted)
    if "clusters" in parts:
        report["set_clusters"] = s = _set_clusters(facts, vectors)
        console.print(f"clusters of the set's {s['memories']} English statements ({s['facts']} facts): "
                      f"{s['clusters']} clusters, {s['refused']} refused, {s['clustered']} statements clustered, "
                      f"purity {s['purity']}, sizes {s['sizes']}")


def _timing_part(report: dict[str, Any], sizes: list[int], console: Any) -> None:
    from rich.table import Table

    report["timing"] = []
    timing = Table(title="Clustering random-but-clustered vectors (384 dims)")
    for column in ("memories", "pairs", "pairs s", "clusters s", "clusters", "refused", "largest", "limit", "peak MB"):
        timing.add_column(column, justify="right")
    for n in sizes:
        row = _timed(n)
        report["timing"].append(row)
        timing.add_row(*(str(row[k]) for k in ("memories", "pairs", "pairs_s", "clusters_s", "clusters", "refused",
                                               "largest", "max_size", "peak_rss_mb")))
    console.print(timing)


def _print_engines(rows: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

    table = Table(title='consolidate("yearly") on each engine: the preview, then its execute (seconds)')
    columns = ("engine", "memories", "build_s", "preview_s", "execute_s", "associations", "clusters", "summaries",
               "refused_clusters", "archived", "changed")
    for column in columns:
        table.add_column(column.replace("_", " "), justify="left" if column == "engine" else "right")
    for r in rows:
        table.add_row(*(str(r[c]) for c in columns))
    console.print(table)
    for r in rows:
        console.print(f"{r['engine']} {r['memories']}: summarized clusters by size {r['cluster_sizes']}, "
                      f"cluster limit {r['max_cluster']}, refused sizes {r['refused_sizes']}")


def _print_under_load(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"retrieve_memory ({result['clients']} clients, HTTP) before, during and after a consolidate "
                        f"tool call on {result['memories']} memories (ms)")
    for column in ("round", "before p50", "before p95", "during p50", "during p95", "p95 ratio", "after p95",
                   "after longest", "consolidate s", "child cpu s", "load"):
        table.add_column(column, justify="right")
    for k, r in enumerate(result["rounds"], 1):
        table.add_row(str(k), *(str(r[w].get(p, "-")) for w, p in (("baseline", "p50_ms"), ("baseline", "p95_ms"),
                                                                    ("during", "p50_ms"), ("during", "p95_ms"))),
                      str(r["p95_ratio"]), str(r["after"].get("p95_ms", "-")), str(r["longest_ms"]["after"]),
                      str(r["consolidate_s"]), str(r["child_cpu_s"]), str(r["load_average"][0]))
    m = result["median"]
    table.add_row("median", str(m["baseline_p50_ms"]), str(m["baseline_p95_ms"]), str(m["during_p50_ms"]),
                  str(m["during_p95_ms"]), str(m["p95_ratio"]), str(m["after_p95_ms"]), "", str(m["consolidate_s"]),
                  "", "")
    console.print(table)


def _print_extraction(result: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"Extraction on vs off: median ms per call through the service "
                        f"({result['entities']} entities, {result['calls']} calls per kind)")
    for column in ("call", "text mentions", "on", "off", "added"):
        table.add_column(column, justify="left" if column in ("call", "text mentions") else "right")
    for r in result["rows"]:
        table.add_row(r["call"], r["text"], f"{r['on_ms']:.2f}", f"{r['off_ms']:.2f}", f"{r['added_ms']:+.2f}")
    console.print(table)
