"""Consolidation, and the meaning-based half of deduplication: the lifecycle operations that
read the memories' vectors (search/similar.py and search/clusters.py find; lifecycle.py plans,
previews and applies).

`consolidate(time_horizon)` takes the free memories created within the horizon and plans, as
one change:
- associations: each memory linked to those close in meaning (`associated`, with the cosine);
- clusters (a size limit and a measured quality; refused ones are reported with the reason),
  each compressed into one `summary` memory of its most central sentences that links its
  sources (`summarizes`), with no language model; a cluster a summary already covers is left;
- supersessions a newer memory that contradicts an older one proposes (a changed number, name,
  negation or time, with the reason): applied only from a preview, never by a direct run;
- forgetting: the horizon's archive candidates (rules/retention.py) into the archive.

A memory's meaning counts only where the library's model reads its language: with the default
English-only model, Chinese and Japanese memories get exact duplicates only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.lazy import on_first_use
from memloci.core.model import Memory, MemoryFilter, MemoryInput, MemoryLink, NewMemory
from memloci.rules.retention import zone
from memloci.search.clusters import ASSOCIATION_MIN, clusters, default_max_size, summarize, within_horizon
from memloci.search.embedder import CJK_SHARE, MINILM_ID, cjk_share
from memloci.search.similar import NEAR_DUPLICATE_MIN, contradictions, near_duplicates, normalized_text, similar_pairs
from memloci.service.lifecycle import LifecycleOperations, Outcome, Plan, first_line
from memloci.service.stores import Stores
from memloci.store.protocols import Store

if TYPE_CHECKING:
    import numpy as np
else:  # imported on first use: the server's start does not need it (core/lazy.py)
    np = on_first_use("numpy", globals(), "np")

SUMMARY_TYPE = "summary"
SUMMARY_TAG = "consolidated"
LINKS_KEPT = 10  # associations a memory keeps, its best


def with_meaning(store: Store, memories: Sequence[Memory]) -> tuple[list[Memory], np.ndarray]:
    """The memories whose meaning the library's vectors carry, and their unit vectors (one row
    each). A memory still waiting for its vector, or in a language the model does not read, is
    left out."""
    stored = store.load_vectors()
    if stored.model is None or not len(stored.ids):
        return [], np.zeros((0, 1), dtype=np.float32)
    english_only = stored.model.startswith(MINILM_ID)
    row = {int(i): k for k, i in enumerate(stored.ids)}
    kept = [m for m in memories if m.id in row and not (english_only and cjk_share(m.content) > CJK_SHARE)]
    if not kept:
        return [], np.zeros((0, stored.matrix.shape[1] if stored.matrix.ndim == 2 else 1), dtype=np.float32)
    matrix = np.asarray(stored.matrix[[row[m.id] for m in kept]], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return kept, matrix / np.where(norms == 0, 1, norms)


def near_pairs(store: Store, memories: list[Memory],
               min_score: float = NEAR_DUPLICATE_MIN) -> list[tuple[Memory, Memory, float]]:
    """Near duplicates among `memories` (search/similar.py): (older, newer, cosine), best first."""
    kept, matrix = with_meaning(store, memories)
    if len(kept) < 2:
        return []
    return [(d.keeper, d.duplicate, d.score) for d in near_duplicates(kept, matrix, min_score)]


class ConsolidationOperations:
    """Consolidation over the lifecycle's plans."""

    def __init__(self, stores: Stores, lifecycle: LifecycleOperations, clock: Callable[[], datetime]):
        self.stores = stores
        self.lifecycle = lifecycle
        self.clock = clock

    def consolidate(self, time_horizon: str, *, dry_run: bool = True, max_cluster: int | None = None,
                    library: str | ProjectRef | None = None, origin: str = "consolidate") -> Outcome:
        if max_cluster is not None:
            max_cluster = schema.check_int(max_cluster, "max_cluster", 2, schema.PAGE_MAX)
        now = self.clock()
        store = self.stores.store(library)
        live = list(self.lifecycle.free_memories(store, MemoryFilter()))
        considered = within_horizon(live, time_horizon, now)
        plan = Plan("consolidate", {"time_horizon": time_horizon, "max_cluster": max_cluster})
        kept, matrix = with_meaning(store, considered)
        fields: dict[int, dict[str, Any]] = {}  # memory id -> what the plan sets on it
        actions: dict[int, list[str]] = {}
        by_id = {m.id: m for m in considered}

        def change(m: Memory, action: str, why: str, **values: Any) -> None:
            held = fields.setdefault(m.id, {})
            if "links" in values and "links" in held:  # links added twice in one run: both kept, once
                values["links"] = tuple(dict.fromkeys([*held["links"], *values["links"]]))
            held.update(values)
            actions.setdefault(m.id, []).append(f"{action}: {why}")

        report: dict[str, Any] = {"considered": len(considered), "with_meaning": len(kept), "associations": 0,
                                  "clusters": 0, "refused_clusters": [], "summaries": 0, "contradictions": 0,
                                  "archived": 0}
        if len(kept) >= 2:
            pairs = similar_pairs(matrix, ASSOCIATION_MIN)
            self._associate(kept, pairs, change, report)
            replaced: set[int] = set()  # the older of each contradiction: not summarized with its newer
            for found_c in contradictions(kept, matrix):  # best first: a memory is superseded once
                if found_c.older.id in replaced:
                    continue
                replaced.add(found_c.older.id)
                report["contradictions"] += 1
                proposal = {"supersede": found_c.older.content_hash, "by": found_c.newer.content_hash,
                            "similarity": found_c.score, "reason": found_c.reason,
                            "contents": [first_line(found_c.older.content), first_line(found_c.newer.content)]}
                if dry_run and not found_c.older.superseded_by:
                    change(found_c.older, "supersede", f"{found_c.reason} in {found_c.newer.content_hash[:12]}",
                           superseded_by=found_c.newer.content_hash)
                    plan.depend(found_c.newer)
                else:  # a direct run never supersedes: the proposal goes through a preview
                    plan.offered.append(proposal)
            rows = [k for k, m in enumerate(kept) if m.id not in replaced]
            limit = max_cluster or default_max_size(len(rows))
            index = {k: n for n, k in enumerate(rows)}
            found = clusters([kept[k] for k in rows], matrix[rows], max_size=limit,
                             pairs=[(index[i], index[j], c) for i, j, c in pairs if i in index and j in index])
            report["clusters"] = len(found.clusters)
            report["max_cluster"] = limit
            report["refused_clusters"] = [{"size": len(r.cluster.members), "cohesion": round(r.cluster.cohesion, 3),
                                           "separation": r.cluster.separation, "reason": r.reason,
                                           "sample": [first_line(m.content, 80) for m in r.cluster.members[:3]]}
                                          for r in found.refused]
            covered = _summarized(live)
            texts = {normalized_text(m.content) for m in live}
            for c in found.clusters:
                sources = frozenset(m.content_hash for m in c.members)
                if sources in covered:
                    continue
                summary = summarize(c.members)
                for m in c.members:  # the summary says what they say: an execute needs them unchanged
                    plan.depend(m)
                central = next((m for m in c.members if normalized_text(m.content) == normalized_text(summary.text)), None)
                if central is not None:  # one member says it all: it stands for the others, no new memory
                    others = [m.content_hash for m in c.members if m.id != central.id]
                    change(central, "summarize", f"stands for {len(others)} like it",
                           links=(*central.links, *(MemoryLink("summarizes", memory=h) for h in others)))
                    report["summaries"] += 1
                    continue
                if normalized_text(summary.text) in texts:  # another memory says just this already
                    continue
                texts.add(normalized_text(summary.text))
                tags = tuple(dict.fromkeys([SUMMARY_TAG, *[t for m in c.members for t in m.tags]]))[:10]
                plan.new.append(NewMemory(
                    MemoryInput(summary.text, tags, SUMMARY_TYPE,
                                {"sources": len(summary.sources), "cohesion": round(c.cohesion, 3)}),
                    tuple(MemoryLink("summarizes", memory=h) for h in summary.sources)))
                plan.items.append({"action": "summarize", "content_hash": "", "content": first_line(summary.text),
                                   "why": f"{len(c.members)} memories, cohesion {c.cohesion:.2f}"})
                report["summaries"] += 1
        at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        for m in considered:
            if zone(m, now) == "archive-candidate" and "superseded_by" not in fields.get(m.id, {}):
                change(m, "archive", "past its retention", archived_at=at)
                report["archived"] += 1
        for memory_id, values in fields.items():
            m = by_id[memory_id]
            plan.edit(m, "; ".join(a.split(":")[0] for a in actions[memory_id]),
                      why="; ".join(a.split(": ", 1)[1] for a in actions[memory_id]), **values)
        plan.report = report
        edited = {e.memory_id for e in plan.edits}
        plan.expect = [e for e in plan.expect if e.memory_id not in edited]  # an edit checks its memory already
        return self.lifecycle.run(plan, store, dry_run=dry_run, origin=origin)

    @staticmethod
    def _associate(kept: list[Memory], pairs: Sequence[tuple[int, int, float]],
                   change: Callable[..., None], report: dict[str, Any]) -> None:
        """Each newer memory of an associated pair links the older (its best LINKS_KEPT)."""
        best: dict[int, list[tuple[float, Memory]]] = {}
        for i, j, score in pairs:
            a, b = kept[i], kept[j]
            older, newer = (a, b) if (a.created_at, a.id) <= (b.created_at, b.id) else (b, a)
            best.setdefault(newer.id, []).append((score, older))
        members = {m.id: m for m in kept}
        for memory_id, found in best.items():
            m = members[memory_id]
            have = {(link.type, link.memory) for link in m.links}
            new = [MemoryLink("associated", memory=o.content_hash, score=round(s, 3))
                   for s, o in sorted(found, key=lambda x: (-x[0], x[1].content_hash))[:LINKS_KEPT]
                   if ("associated", o.content_hash) not in have]
            if new:
                report["associations"] += len(new)
                change(m, "link", f"{len(new)} associated", links=(*m.links, *new))


def _summarized(memories: Sequence[Memory]) -> set[frozenset[str]]:
    """The clusters (as sets of content hashes) the library's summaries cover already: a summary's
    sources, or a memory standing for those it links, with itself."""
    covered = set()
    for m in memories:
        sources = frozenset(link.memory for link in m.links if link.type == "summarizes" and link.memory)
        if sources:
            covered.add(sources if m.memory_type == SUMMARY_TYPE else sources | {m.content_hash})
    return covered
