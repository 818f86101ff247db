"""Read replies fitted to a token budget (`max_tokens`), and compact replies (`compact`).

A reply's text content is its structured content as JSON (replies.as_json), so fitting one fits
the other. The estimate is core/tokens.py's. Items are ranked (the best first); when a reply is
over its budget:
1. lower-ranked items lose their trailing sentences, the last item first, down to one sentence;
2. items are dropped from the end, the first kept;
3. the items left get back what fits of their sentences, the best first;
4. the first item loses its trailing sentences, then characters;
and "…" ends every text that was cut. A cut text keeps its field (a memory's `content`, an
entity's `observations`, their dates in step), so the reply still matches the tool's output
schema. The reply then says `truncated_to_tokens` (the budget) and `omitted` (items left out),
and how to get the rest (the tool's paging fields, or `more`). The envelope (counts, query,
hints) is never cut: a budget smaller than it leaves no items.

Compact replies carry, per item, its id (a memory's content_hash, an entity's name) and its first
line (`first_line`, at most 120 characters), and `details`: the call that gives the whole items.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from memloci.core.tokens import ELLIPSIS, TextSize, clipped, estimate_tokens, first_line, sentences, size_of
from memloci.mcp.replies import as_json

SLACK = TextSize(0, 16)  # numbers in the envelope (next_offset, omitted) growing a digit or two
COMPACT_LINE = 120


def _layout(value: Any, depth: int) -> int:
    """The white space indent=2 adds to `value`'s one-line JSON at `depth`: a line break and
    indentation before each entry of a non-empty object or array, and before its closing."""
    if isinstance(value, dict | list) and value:
        inner = value.values() if isinstance(value, dict) else value
        return len(value) * (1 + 2 * (depth + 1)) + 1 + 2 * depth + sum(_layout(v, depth + 1) for v in inner)
    return 0


def json_size(value: Any, depth: int = 0) -> TextSize:
    """The size of `value` as replies.as_json writes it (at `depth`), without rendering it
    indented: Python renders indented JSON in Python, one-line JSON in C."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ": "))
    return size_of(text) + TextSize(0, _layout(value, depth))


def _json_size(value: Any) -> TextSize:
    """What `value` costs as an element of a list two levels deep in a reply (or an entry of an
    object there): itself, its line break and indentation, its comma."""
    return json_size(value, 2) + TextSize(0, 1 + 2 * 2 + 1)


@dataclass(frozen=True)
class ItemKind:
    """How one kind of item holds the text that may be cut: its parts (a memory's content; an
    entity's observations) read and written back."""

    parts: Callable[[dict[str, Any]], list[str]]
    with_parts: Callable[[dict[str, Any], list[str]], dict[str, Any]]


def _entity_with(entity: dict[str, Any], parts: list[str]) -> dict[str, Any]:
    out = {**entity, "observations": parts}
    if isinstance(entity.get("observationDates"), list):  # dates stay in step with what is left
        out["observationDates"] = entity["observationDates"][:len(parts)]
    return out


MEMORIES = ItemKind(lambda m: [m["content"]], lambda m, parts: {**m, "content": parts[0] if parts else ELLIPSIS})
ENTITIES = ItemKind(lambda e: list(e.get("observations") or []), _entity_with)


@dataclass
class _Item:
    data: dict[str, Any]
    kind: ItemKind
    attached: TextSize  # what leaves the reply with it (its relations, its `why`)
    units: list[list[str]] = field(init=False)  # each part in sentences
    total: int = field(init=False)
    keep: int = field(init=False)  # sentences kept, in order over the parts
    chars: int | None = None  # the last kept sentence cut to this many characters
    size: TextSize = field(init=False)

    def __post_init__(self) -> None:
        self.units = [sentences(p) or [p] for p in self.kind.parts(self.data)]
        self.total = sum(len(u) for u in self.units)
        self.keep = self.total
        self.size = self.measure()

    @property
    def cut(self) -> bool:
        return self.keep < self.total or self.chars is not None

    def rendered(self) -> dict[str, Any]:
        if not self.cut:
            return self.data
        taken = [(at, s) for at, unit in enumerate(self.units) for s in unit][:self.keep]
        if taken and self.chars is not None:
            taken[-1] = (taken[-1][0], clipped(taken[-1][1], self.chars))
        parts = ["".join(s for at, s in taken if at == part) for part in range(taken[-1][0] + 1)] if taken else []
        if parts and not parts[-1].endswith(ELLIPSIS):
            parts[-1] = parts[-1].rstrip() + ELLIPSIS
        return self.kind.with_parts(self.data, parts)

    def measure(self, keep: int | None = None) -> TextSize:
        """What the item costs as it stands, or with `keep` sentences (left as it stands)."""
        if keep is None:
            return _json_size(self.rendered()) + self.attached
        was, self.keep, chars, self.chars = self.keep, keep, self.chars, None
        try:
            return self.measure()
        finally:
            self.keep, self.chars = was, chars


class _Plan:
    def __init__(self, items: list[_Item], base: TextSize, budget: int):
        self.items, self.budget = items, budget
        self.kept = len(items)
        self.sum = base + sum((i.size for i in items), TextSize())

    def over(self) -> bool:
        return self.sum.tokens > self.budget

    def set(self, item: _Item, keep: int, chars: int | None = None) -> None:
        item.keep, item.chars = keep, chars
        size = item.measure()
        self.sum, item.size = self.sum - item.size + size, size

    def fit_sentences(self, item: _Item, low: int) -> None:
        """Keep the most sentences of `item` (at least `low`) that fit, or `low`."""
        if item.total <= low:
            return
        top = item.total
        while low < top:
            mid = (low + top + 1) // 2
            self.set(item, mid)
            if self.over():
                top = mid - 1
            else:
                low = mid
        self.set(item, low)

    def fit_characters(self, item: _Item) -> None:
        """Cut the last sentence `item` keeps to the most characters that fit."""
        kept = [s for unit in item.units for s in unit][:item.keep]
        if not kept:
            return
        low, top = 0, len(kept[-1])
        while low < top:
            mid = (low + top + 1) // 2
            self.set(item, item.keep, mid)
            if self.over():
                top = mid - 1
            else:
                low = mid
        self.set(item, item.keep, low)

    def drop_last(self) -> None:
        self.kept -= 1
        self.sum = self.sum - self.items[self.kept].size

    def run(self) -> None:
        if not self.over():
            return
        # Items that would not fit even at one sentence each (the first whole) go at once, so a
        # long page costs a render per item it keeps, not per item it had.
        least, fits = self.sum - sum((i.size for i in self.items[1:]), TextSize()), 1
        for item in self.items[1:]:
            least = least + item.measure(min(item.total, 1))
            if least.tokens > self.budget:
                break
            fits += 1
        while self.kept > fits:
            self.drop_last()
        for item in reversed(self.items[1:self.kept]):
            self.fit_sentences(item, 1)
            if not self.over():
                return
        while self.over() and self.kept > 1:
            self.drop_last()
        for item in self.items[1:self.kept]:  # room left by the dropped ones goes back, best first
            self.fit_sentences(item, item.keep)
        if self.kept and self.over():
            self.fit_sentences(self.items[0], 1)
        if self.kept and self.over():
            self.fit_characters(self.items[0])
        if self.kept and self.over():
            self.drop_last()


# finish(kept items as rendered, how many were left out) -> the whole reply
Finish = Callable[[list[dict[str, Any]], int], dict[str, Any]]


def fit(items: list[dict[str, Any]], kind: ItemKind, max_tokens: int | None, finish: Finish,
        attached: list[TextSize] | None = None) -> dict[str, Any]:
    """The reply `finish` builds, fitted to `max_tokens` (None: as is). `attached[i]` is what
    leaves the reply with item i (relations, keys that name it); `finish` drops those itself."""
    if max_tokens is None:
        return finish(items, 0)
    whole = finish(items, 0)
    if json_size(whole).tokens <= max_tokens:
        return whole
    marks = {"truncated_to_tokens": max_tokens, "omitted": len(items)}
    base = json_size({**finish([], len(items)), **marks}) + SLACK
    plan = _Plan([_Item(d, kind, a) for d, a in zip(items, attached or [TextSize()] * len(items), strict=True)],
                 base, max_tokens)
    plan.run()
    while True:
        kept = plan.items[:plan.kept]
        out = {**finish([i.rendered() for i in kept], len(items) - plan.kept),
               "truncated_to_tokens": max_tokens, "omitted": len(items) - plan.kept}
        if plan.kept == 0 or estimate_tokens(as_json(out)) <= max_tokens:
            return out
        plan.drop_last()


def relations_size(entities: list[dict[str, Any]], relations: list[dict[str, Any]],
                   needs: Literal["both", "either"], why: dict[str, str] | None = None) -> list[TextSize]:
    """What each entity takes along when it leaves a reply: the relations that need it (`both`
    ends on the page: a relation goes with the later of its ends; `either`: with the earlier)
    and its `why` entry."""
    rank = {e["name"]: i for i, e in enumerate(entities)}
    sizes = [TextSize()] * len(entities)
    for r in relations:
        ends = [rank[n] for n in (r.get("from"), r.get("to")) if n in rank]
        if ends:
            at = max(ends) if needs == "both" else min(ends)
            sizes[at] = sizes[at] + _json_size(r)
    if why:
        for name, text in why.items():
            if name in rank:
                entry = json.dumps(name, ensure_ascii=False) + ": " + json.dumps(text, ensure_ascii=False)
                sizes[rank[name]] = sizes[rank[name]] + size_of(entry) + TextSize(0, 1 + 2 * 2 + 1)
    return sizes


def kept_relations(relations: list[dict[str, Any]], names: set[str], needs: Literal["both", "either"]) -> list[dict[str, Any]]:
    test = all if needs == "both" else any
    return [r for r in relations if test(n in names for n in (r.get("from"), r.get("to")))]


# -- compact -----------------------------------------------------------------------------


def compact_memory(memory: dict[str, Any]) -> dict[str, Any]:
    out = {"content_hash": memory["content_hash"], "content": first_line(memory["content"], COMPACT_LINE)}
    if "library" in memory:  # (a search of several libraries: where to fetch it)
        out["library"] = memory["library"]
    return out


def compact_entity(entity: dict[str, Any]) -> dict[str, Any]:
    observations = entity.get("observations") or []
    out = {"name": entity["name"], "entityType": entity["entityType"],
           "observations": [first_line(observations[0], COMPACT_LINE)] if observations else []}
    if "library" in entity:
        out["library"] = entity["library"]
    return out


def compact_relation(relation: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in relation.items() if k != "createdAt"}


MEMORY_DETAILS = "Each memory's first line; list_memories with content_hashes gives them whole."
ENTITY_DETAILS = "Each entity's first observation's first line; open_nodes with names gives them whole."
