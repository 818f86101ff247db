"""The memory lifecycle: maintenance (deletion by tag or time, metadata updates, duplicates),
supersession, the archive. Every operation has one shape: a plan (what would change, memory by
memory, with each memory's fingerprint as the plan saw it), shown as a preview and kept in the
library until executed, or executed at once. An execute applies exactly the plan, in one write
transaction with one journal entry (undoable with `memloci undo`), and is refused, with nothing
changed, if any memory it names changed since (rules/lifecycle.py). Nothing is deleted without
a way back: a deletion is undone from the journal, forgetting moves memories to the archive.

Lifecycle changes take free memories (those of no entity): an observation belongs to its
entity, and the graph tools change it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import ConflictError, NotFoundError, ValidationError
from memloci.core.model import (
    EVERY_MEMORY,
    IMPORTANCE,
    Memory,
    MemoryEdit,
    MemoryFilter,
    MemoryInput,
    MemoryLink,
    NewMemory,
    content_hash,
    links_data,
    links_from,
    tag_keys,
)
from memloci.rules import lifecycle as rules
from memloci.search.similar import normalized_text
from memloci.service import dangling
from memloci.service.stores import Stores
from memloci.store.protocols import Store

PAGE = 1_000  # memories read per call while a plan is made
# Near duplicates among memories: (older, newer, similarity) pairs above the measured threshold.
NearPairs = Callable[[Store, list[Memory]], list[tuple[Memory, Memory, float]]]
_AGE = re.compile(r"^\s*(\d+)\s*(day|week|month|year)s?\s*$", re.IGNORECASE)
_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
MAX_AGE_DAYS = 100 * 365
PREVIEW_ITEMS_SHOWN = 200  # items a reply lists in full (the preview keeps them all)
KINDS = rules.ACTIONS


def older_than_cutoff(text: str, now: datetime) -> str:
    """The moment `older_than` ("6 months", "1 year", "30 days") names, before `now`."""
    m = _AGE.match(text or "")
    if not m:
        raise ValidationError(f"older_than: {text!r} is not an age", hint='Say e.g. "30 days", "6 months", "1 year".')
    days = int(m.group(1)) * _DAYS[m.group(2).lower()] if len(m.group(1)) <= 6 else None
    if days is None or days > MAX_AGE_DAYS:
        raise ValidationError(f"older_than: {text!r} reaches back more than {MAX_AGE_DAYS // 365} years")
    return (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def first_line(text: str, limit: int = 120) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class Plan:
    """What an operation would change: `edits` and `new` as change_memories takes them,
    `items` as a person reads them (one per memory changed), `offered` what it only proposes."""

    kind: str
    args: dict[str, Any]
    edits: list[MemoryEdit] = field(default_factory=list)
    hashes: dict[int, str] = field(default_factory=dict)  # memory id -> content_hash, for messages
    new: list[NewMemory] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    offered: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)  # what the operation found beyond its changes
    expect: list[MemoryEdit] = field(default_factory=list)  # memories it reads and leaves: unchanged at execute
    replaced: dict[str, str | None] = field(default_factory=dict)  # a deleted memory's hash -> its keeper's, if any

    def depend(self, m: Memory) -> None:
        """The plan reads `m` (a summary's source, the memory that supersedes): an execute is
        refused if it changed since, as for the memories the plan changes."""
        if m.id not in self.hashes and all(e.memory_id != m.id for e in self.expect):
            self.expect.append(MemoryEdit(m.id, rules.fingerprint(m)))
            self.hashes[m.id] = m.content_hash

    def edit(self, m: Memory, action: str, *, delete: bool = False, why: str | None = None,
             **fields: Any) -> None:
        self.edits.append(MemoryEdit(m.id, rules.fingerprint(m), fields, delete))
        self.hashes[m.id] = m.content_hash
        item: dict[str, Any] = {"action": action, "content_hash": m.content_hash, "content": first_line(m.content)}
        if why:
            item["why"] = why
        changes = {k: (links_data(v) if k == "links" else list(v) if k == "tags" else v) for k, v in fields.items()
                   if k not in ("access_count", "absorb")}
        if changes:
            item["set"] = changes
        self.items.append(item)

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, "args": self.args, "items": self.items, "offered": self.offered, "report": self.report,
                "edits": [{"id": e.memory_id, "hash": self.hashes[e.memory_id], "expect": e.expect,
                           "fields": {k: (links_data(v) if k == "links" else list(v) if k in ("tags", "absorb") else v)
                                      for k, v in e.fields.items()},
                           "delete": e.delete} for e in self.edits],
                "expect": [{"id": e.memory_id, "hash": self.hashes.get(e.memory_id, ""), "expect": e.expect}
                           for e in self.expect],
                "new": [{"content": n.memory.content, "tags": list(n.memory.tags), "memory_type": n.memory.memory_type,
                         "importance": n.memory.importance, "metadata": n.memory.metadata,
                         "links": links_data(n.links)} for n in self.new]}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Plan:
        plan = cls(data["kind"], data.get("args", {}), items=list(data.get("items", [])),
                   offered=list(data.get("offered", [])), report=dict(data.get("report") or {}))
        for e in data.get("edits", []):
            fields = {k: (links_from(v) if k == "links" else tuple(v) if k in ("tags", "absorb") else v)
                      for k, v in e.get("fields", {}).items()}
            plan.edits.append(MemoryEdit(int(e["id"]), e["expect"], fields, bool(e.get("delete"))))
            plan.hashes[int(e["id"])] = e.get("hash", "")
        for e in data.get("expect", []):
            plan.expect.append(MemoryEdit(int(e["id"]), e["expect"]))
            plan.hashes[int(e["id"])] = e.get("hash", "")
        for n in data.get("new", []):
            plan.new.append(NewMemory(MemoryInput(n["content"], tuple(n.get("tags", ())), n.get("memory_type", "note"),
                                                  dict(n.get("metadata") or {}), n.get("importance", "medium")),
                                      links_from(n.get("links"))))
        return plan

    @property
    def counts(self) -> dict[str, int]:
        return {"changed": sum(1 for e in self.edits if not e.delete), "deleted": sum(1 for e in self.edits if e.delete),
                "created": len(self.new)}


@dataclass(frozen=True)
class Outcome:
    """A preview (`executed` False: `preview_id` executes it) or an execution (`change_id`: its
    journal entry, which `memloci undo` takes)."""

    kind: str
    library: str
    executed: bool
    items: list[dict[str, Any]]
    offered: list[dict[str, Any]]
    counts: dict[str, int]
    preview_id: int | None = None
    change_id: int | None = None
    report: dict[str, Any] = field(default_factory=dict)

    def to_data(self) -> dict[str, Any]:
        """As JSON data: what `memloci consolidate --json` prints and a server reads back."""
        return {"message": self.summary, "kind": self.kind, "library": self.library, "dry_run": not self.executed,
                "preview_id": self.preview_id, "change_id": self.change_id, **self.counts, "items": self.items,
                "offered": self.offered, "report": self.report}

    @property
    def summary(self) -> str:
        """What was done, or what a preview would do (the caller says how to execute it)."""
        c = self.counts
        what = ", ".join(f"{n} {k}" for k, n in (("deleted", c["deleted"]), ("changed", c["changed"]),
                                                 ("created", c["created"]),
                                                 ("links removed", c.get("links_removed", 0))) if n) or "nothing to change"
        if self.executed:
            return f"{self.kind}: {what}" + (f" (change #{self.change_id}, undoable)" if self.change_id else "")
        offered = f"; {len(self.offered)} offered, not included" if self.offered else ""
        return f"{self.kind} preview #{self.preview_id}: would be {what}{offered}. Nothing was changed."


class LifecycleOperations:
    """Lifecycle operations over the stores: plans, previews, executions."""

    def __init__(self, stores: Stores, clock: Callable[[], datetime]):
        self.stores = stores
        self.clock = clock

    # -- the shape every operation shares -----------------------------------------------

    def run(self, plan: Plan, store: Store, *, dry_run: bool, origin: str) -> Outcome:
        """Keep `plan` as a preview (`dry_run`), or apply it now."""
        if dry_run:
            preview_id = store.save_preview(plan.kind, plan.to_data())
            return Outcome(plan.kind, store.name, False, plan.items, plan.offered, plan.counts, preview_id=preview_id,
                           report=plan.report)
        return self._apply(plan, store, origin)

    def _apply(self, plan: Plan, store: Store, origin: str, preview_id: int | None = None) -> Outcome:
        if not plan.edits and not plan.new:
            return Outcome(plan.kind, store.name, True, plan.items, plan.offered, plan.counts, report=plan.report)
        detail = {"args": plan.args, "items": plan.items[:PREVIEW_ITEMS_SHOWN],
                  **({"preview": preview_id} if preview_id is not None else {})}
        done = store.change_memories(plan.edits, plan.new, origin=origin, action=plan.kind, detail=detail,
                                     expect=plan.expect, preview_id=preview_id)  # marked executed in that transaction
        if plan.new:  # a summary waits for its vector: the post-write hook
            self.stores.written(store)
        return Outcome(plan.kind, store.name, True, plan.items, plan.offered, plan.counts, change_id=done.change_id,
                       report=plan.report)

    def execute_preview(self, preview_id: int, *, library: str | ProjectRef | None = None,
                        origin: str = "execute_preview") -> Outcome:
        preview_id = schema.check_int(preview_id, "preview_id", 1, 2**62)
        store = self.stores.store(library)
        kept = store.load_preview(preview_id)
        if kept is None:
            raise NotFoundError(f"preview_id: library '{store.name}' has no preview #{preview_id}",
                                hint="Run the operation with dry_run=true to make a preview; list them with list_previews.")
        if kept["executed_at"]:
            raise ConflictError(f"preview_id: preview #{preview_id} was executed at {kept['executed_at']} "
                                f"(change #{kept['change_id']})", hint="Make a new preview to change more.")
        if kept["kind"] == dangling.KIND:
            return self._collect(dangling.DanglingPlan.from_data(kept["plan"]), store, origin, preview_id)
        return self._apply(Plan.from_data(kept["plan"]), store, origin, preview_id)

    def previews(self, *, pending: bool = True, limit: int = 20,
                 library: str | ProjectRef | None = None) -> list[dict[str, Any]]:
        limit = schema.check_int(limit, "limit", 1, schema.PAGE_MAX)
        out = []
        for p in self.stores.store(library).list_previews(pending=pending, limit=limit):
            plan = p["plan"]
            out.append({"preview_id": p["id"], "kind": p["kind"], "created_at": p["created_at"],
                        "executed_at": p["executed_at"], "change_id": p["change_id"], "args": plan.get("args", {}),
                        "items": len(plan.get("items", [])), "offered": len(plan.get("offered", []))})
        return out

    # -- reading the free memories ---------------------------------------------------------

    @staticmethod
    def free_memories(store: Store, filters: MemoryFilter = EVERY_MEMORY) -> Iterator[Memory]:
        """Every free memory within `filters`, newest first, a page at a time."""
        offset = 0
        while True:
            page = store.list_memories(offset=offset, limit=PAGE, filters=filters, count=False).memories
            yield from (m for m in page if m.entity is None)
            if len(page) < PAGE:
                return
            offset += PAGE

    def _one(self, store: Store, content_hash: str, field_name: str = "content_hash") -> Memory:
        content_hash = schema.clean_label(content_hash, field_name, 64)
        found = [m for m in store.memories_by_hash(content_hash) if m.entity is None]
        if not found:
            raise NotFoundError(f"{field_name}: no free memory has hash {content_hash}",
                                hint="Find it with retrieve_memory or list_memories (include_archived=true for the archive).")
        return found[0]

    def _repoint(self, plan: Plan, store: Store) -> None:
        """Memories that name one the plan deletes (superseded by it, linked to it) name its keeper
        instead, or, with no keeper, no longer name it: no memory is left hidden behind, or linked
        to, a memory that is gone."""
        gone = {plan.hashes[e.memory_id] for e in plan.edits if e.delete}
        if not gone:
            return
        edited = {e.memory_id for e in plan.edits}
        for m in self.free_memories(store):
            if m.id in edited:
                continue
            fields: dict[str, Any] = {}
            if m.superseded_by in gone:
                keeper = plan.replaced.get(m.superseded_by)
                fields["superseded_by"] = keeper if keeper != m.content_hash else None
            if any(link.memory in gone for link in m.links):
                links = [replace(link, memory=plan.replaced.get(link.memory)) if link.memory in gone else link
                         for link in m.links]
                fields["links"] = tuple(dict.fromkeys(link for link in links
                                                      if link.memory is not None or link.entity is not None))
            if fields:
                plan.edit(m, "repoint", why="named a memory this deletes", **fields)

    # -- maintenance ---------------------------------------------------------------------

    def delete_by_tag(self, tags: Sequence[str] | str, *, match_all: bool = False, dry_run: bool = False,
                      library: str | ProjectRef | None = None) -> Outcome:
        """Delete the free memories carrying any (`match_all`: every one) of the tags."""
        clean = schema.validate_tags(_tag_list(tags), "tags", allow_empty=False)
        store = self.stores.store(library)
        plan = Plan("delete_by_tag", {"tags": clean, "match_all": match_all})
        for m in self.free_memories(store, MemoryFilter(tuple(clean), match_all, include_superseded=True,
                                                        include_archived=True)):
            plan.edit(m, "delete", delete=True, why="tags " + ", ".join(t for t in m.tags if t.casefold()
                                                                         in {c.casefold() for c in clean}))
        self._repoint(plan, store)
        return self.run(plan, store, dry_run=dry_run, origin="delete_by_tag")

    def delete_by_time(self, *, start: str | None, end: str | None, tag: str | None = None, dry_run: bool = False,
                       library: str | ProjectRef | None = None, kind_args: dict[str, Any] | None = None,
                       names: tuple[str, str] = ("start_date", "end_date")) -> Outcome:
        """Delete the free memories created in [start, end) (either end open), with `tag` if given
        (`names`: the arguments the caller gave them as, for errors)."""
        after, before = schema.validate_time(start, names[0]), schema.validate_time(end, names[1])
        if after is None and before is None:
            raise ValidationError(f"{names[0]}/{names[1]}: give at least one", hint="Dates as YYYY-MM-DD or ISO 8601 UTC.")
        if after and before and after >= before:
            raise ValidationError(f"{names[0]}/{names[1]}: start ({after}) must be earlier than end ({before})")
        tags = tuple(schema.validate_tags([tag], "tag")) if tag else ()
        store = self.stores.store(library)
        plan = Plan("delete_by_time", kind_args or {"start_date": start, "end_date": end, "tag": tag})
        for m in self.free_memories(store, MemoryFilter(tags, after=after, before=before, include_superseded=True,
                                                        include_archived=True)):
            plan.edit(m, "delete", delete=True, why=f"created {m.created_at}")
        self._repoint(plan, store)
        return self.run(plan, store, dry_run=dry_run, origin="delete_by_time")

    def update_metadata(self, content_hash: str, updates: dict[str, Any], *, preserve_timestamps: bool = True,
                        dry_run: bool = False, library: str | ProjectRef | None = None) -> Outcome:
        """The MCP Memory Service's update_memory_metadata: tags, memory_type, metadata (merged),
        importance; the text and its vector stay."""
        if not isinstance(updates, dict) or not updates:
            raise ValidationError("updates: must be an object with at least one of tags, memory_type, metadata, importance")
        unknown = set(updates) - {"tags", "memory_type", "metadata", "importance"}
        if unknown:
            raise ValidationError(f"updates: unknown key(s) {', '.join(sorted(unknown))} "
                                  "(allowed: tags, memory_type, metadata, importance)")
        store = self.stores.store(library)
        m = self._one(store, content_hash)
        fields: dict[str, Any] = {}
        if "tags" in updates:
            fields["tags"] = tuple(schema.validate_tags(_tag_list(updates["tags"], "updates.tags"), "updates.tags"))
        if "memory_type" in updates:
            fields["memory_type"] = schema.clean_label(updates["memory_type"], "updates.memory_type", schema.TAG_MAX)
        if "metadata" in updates:
            fields["metadata"] = {**m.metadata, **schema.validate_metadata(updates["metadata"], "updates.metadata")}
        if "importance" in updates:
            fields["importance"] = schema.validate_importance(updates["importance"], "updates.importance")
        plan = Plan("update_memory_metadata", {"content_hash": m.content_hash, "updates": updates})
        plan.edit(m, "update", **fields)
        return self.run(plan, store, dry_run=dry_run, origin="update_memory_metadata")

    def cleanup_duplicates(self, *, similar: bool = False, dry_run: bool = False,
                           library: str | ProjectRef | None = None, near: NearPairs | None = None) -> Outcome:
        """Merge exact duplicates (same text but for case, spaces and trailing punctuation) into
        the oldest: it keeps every tag, the uses of all, the highest importance. Near duplicates
        by meaning (`near`: pairs above the measured threshold) are offered; with `similar` they
        are merged too."""
        store = self.stores.store(library)
        plan = Plan("cleanup_duplicates", {"similar": similar})
        self._duplicates(plan, store, list(self.free_memories(store, MemoryFilter())), similar, near)
        self._repoint(plan, store)
        return self.run(plan, store, dry_run=dry_run, origin="cleanup_duplicates")

    def _duplicates(self, plan: Plan, store: Store, live: list[Memory], similar: bool, near: NearPairs | None) -> set[int]:
        groups: dict[str, list[Memory]] = {}
        for m in live:
            groups.setdefault(normalized_text(m.content), []).append(m)
        merged: set[int] = set()
        for group in groups.values():
            if len(group) > 1:
                _merge(plan, group, "same text")
                merged.update(m.id for m in group)
        if near is not None:
            rest = [m for m in live if m.id not in merged]
            for a, b, score in near(store, rest):
                if similar and a.id not in merged and b.id not in merged:
                    _merge(plan, [a, b], f"similar meaning {score:.2f}")
                    merged.update((a.id, b.id))
                else:
                    plan.offered.append({"merge": [a.content_hash, b.content_hash], "similarity": round(score, 3),
                                         "contents": [first_line(a.content), first_line(b.content)]})
        return merged

    def memory_cleanup(self, *, cutoff: str | None, near: NearPairs | None, immune: Callable[[Memory], bool],
                       library: str | ProjectRef | None = None) -> Outcome:
        """The MCP Memory Service's memory_cleanup, always a preview: duplicates to merge (near
        ones offered), and memories created before `cutoff` to archive (immune ones kept)."""
        store = self.stores.store(library)
        plan = Plan("memory_cleanup", {"older_than_cutoff": cutoff})
        live = list(self.free_memories(store, MemoryFilter()))
        merged = self._duplicates(plan, store, live, False, near)
        if cutoff is not None:
            at = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
            for m in live:
                if m.id not in merged and m.created_at < cutoff and not immune(m):
                    plan.edit(m, "archive", why=f"created {m.created_at[:10]}, before {cutoff[:10]}", archived_at=at)
        self._repoint(plan, store)
        return self.run(plan, store, dry_run=True, origin="memory_cleanup")

    # -- links to entities that no longer exist ---------------------------------------------

    def garbage_collect_relations(self, *, dry_run: bool = True,
                                  library: str | ProjectRef | None = None) -> Outcome:
        """The multi-library Markdown server's garbage_collect_relations: every link to an entity
        that no longer exists, listed (a preview, the default) or cleaned (service/dangling.py)."""
        store = self.stores.store(library)
        found = dangling.plan(store)
        if dry_run:
            preview_id = store.save_preview(dangling.KIND, found.to_data())
            return Outcome(dangling.KIND, store.name, False, found.items, found.left, found.counts,
                           preview_id=preview_id)
        return self._collect(found, store, "garbage_collect_relations")

    def _collect(self, found: dangling.DanglingPlan, store: Store, origin: str,
                 preview_id: int | None = None) -> Outcome:
        detail = {"items": found.items[:PREVIEW_ITEMS_SHOWN], **({"preview": preview_id} if preview_id is not None else {})}
        change_id = dangling.execute(store, found, origin=origin, detail=detail)
        if change_id is not None:
            self.stores.written(store)  # observations whose links turned into text wait for new vectors
            if preview_id is not None:
                store.mark_executed(preview_id, change_id)
        return Outcome(dangling.KIND, store.name, True, found.items, found.left, found.counts, change_id=change_id)

    # -- supersession and the archive ------------------------------------------------------

    def check_supersedes(self, old_hash: str, new_hash: str, *,
                         library: str | ProjectRef | None = None) -> tuple[Memory, Memory]:
        """The two free memories of a supersession, if it may be made: both exist, they differ,
        and it closes no cycle; VALIDATION_ERROR / NOT_FOUND naming `supersedes` otherwise."""
        store = self.stores.store(library)
        old = self._one(store, old_hash, "supersedes")
        new = self._one(store, new_hash)
        if old.id == new.id:
            raise ValidationError("supersedes: a memory cannot supersede itself")
        if _chain_reaches(store, new, old.content_hash):
            raise ValidationError(f"supersedes: {new.content_hash[:12]} is already superseded, through a chain, by "
                                  f"{old.content_hash[:12]}; a cycle of supersession is refused")
        return old, new

    def supersede(self, old_hash: str, new_hash: str, *, dry_run: bool = False,
                  library: str | ProjectRef | None = None) -> Outcome:
        """Mark memory `old_hash` superseded by `new_hash`: it stays (history shows the chain),
        and search leaves it out unless asked."""
        store = self.stores.store(library)
        old, new = self.check_supersedes(old_hash, new_hash, library=library)
        plan = Plan("supersede", {"supersedes": old.content_hash, "by": new.content_hash})
        plan.edit(old, "supersede", why=f"superseded by {new.content_hash[:12]}: {first_line(new.content, 60)}",
                  superseded_by=new.content_hash)
        plan.depend(new)
        return self.run(plan, store, dry_run=dry_run, origin="supersede")

    def store_superseding(self, m: MemoryInput, supersedes: str, *, links: Sequence[MemoryLink] = (),
                          library: str | ProjectRef | None = None) -> tuple[Memory, bool]:
        """Store a free memory that supersedes another, both in one transaction (one journal
        entry, `supersede`); a text already stored is marked as the newer one instead."""
        if m.entity:
            raise ValidationError("supersedes: only a free memory supersedes another; an observation belongs to its entity",
                                  hint="Leave out entity, or change the observation with the graph tools.")
        store = self.stores.store(library)
        old = self._one(store, supersedes, "supersedes")
        new_hash = content_hash(m.content)
        if new_hash == old.content_hash:
            raise ValidationError("supersedes: a memory cannot supersede itself (the texts are the same)")
        existing = [x for x in store.memories_by_hash(new_hash) if x.entity is None]
        if existing:
            self.supersede(old.content_hash, new_hash, library=library)
            return existing[0], False
        plan = Plan("supersede", {"supersedes": old.content_hash, "by": new_hash})
        plan.edit(old, "supersede", why=f"superseded by {new_hash[:12]}: {first_line(m.content, 60)}",
                  superseded_by=new_hash)
        plan.new.append(NewMemory(m, tuple(links)))
        done = store.change_memories(plan.edits, plan.new, origin="store_memory", action="supersede",
                                     detail={"args": plan.args, "items": plan.items})
        self.stores.written(store)
        return done.created[0], True

    def archive(self, memories: Sequence[Memory], store: Store, *, dry_run: bool, why: Callable[[Memory], str],
                args: dict[str, Any]) -> Outcome:
        plan = Plan("archive", args)
        at = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        for m in memories:
            if m.entity is None and not m.archived_at:
                plan.edit(m, "archive", why=why(m), archived_at=at)
        return self.run(plan, store, dry_run=dry_run, origin="archive")

    def unarchive(self, content_hashes: Sequence[str], *, dry_run: bool = False,
                  library: str | ProjectRef | None = None) -> Outcome:
        store = self.stores.store(library)
        if not content_hashes:
            raise ValidationError("content_hashes: name at least one archived memory")
        plan = Plan("unarchive", {"content_hashes": list(content_hashes)})
        for i, h in enumerate(dict.fromkeys(content_hashes)):  # a hash named twice is one memory
            m = self._one(store, h, f"content_hashes[{i}]")
            if m.archived_at:
                plan.edit(m, "unarchive", archived_at=None)
        return self.run(plan, store, dry_run=dry_run, origin="unarchive")

    # -- reading -----------------------------------------------------------------------------

    def tags(self, *, library: str | ProjectRef | None = None) -> list[tuple[str, int]]:
        """Every tag of the free memories (live ones) with how many carry it, most used first."""
        counts: dict[str, tuple[str, int]] = {}
        for m in self.free_memories(self.stores.store(library), MemoryFilter()):
            for tag, key in zip(m.tags, tag_keys(m.tags)):
                name, n = counts.get(key, (tag, 0))
                counts[key] = (name, n + 1)
        return sorted(counts.values(), key=lambda t: (-t[1], t[0].casefold()))

    def analysis(self, *, tags: Sequence[str] = (), after: str | None = None, before: str | None = None,
                 library: str | ProjectRef | None = None) -> dict[str, Any]:
        """The MCP Memory Service's knowledge_analysis: what the memories are about and when."""
        store = self.stores.store(library)
        clean = tuple(schema.validate_tags(list(tags), "tags"))
        filters = MemoryFilter(clean, after=schema.validate_time(after, "after"),
                               before=schema.validate_time(before, "before"), include_superseded=True,
                               include_archived=True)
        tag_counts: dict[str, int] = {}
        types: dict[str, int] = {}
        months: dict[str, int] = {}
        importance = dict.fromkeys(IMPORTANCE, 0)
        states = {"live": 0, "superseded": 0, "archived": 0}
        duplicates: dict[str, int] = {}
        total = 0
        for m in self.free_memories(store, filters):
            total += 1
            for t in m.tags:
                tag_counts[t] = tag_counts.get(t, 0) + 1
            types[m.memory_type] = types.get(m.memory_type, 0) + 1
            months[m.created_at[:7]] = months.get(m.created_at[:7], 0) + 1
            importance[m.importance] = importance.get(m.importance, 0) + 1
            states["archived" if m.archived_at else "superseded" if m.superseded_by else "live"] += 1
            if not (m.archived_at or m.superseded_by):
                key = normalized_text(m.content)
                duplicates[key] = duplicates.get(key, 0) + 1
        return {"total_memories": total, "states": states,
                "top_tags": [{"tag": t, "count": n} for t, n in sorted(tag_counts.items(), key=lambda x: (-x[1], x[0]))[:20]],
                "memory_types": dict(sorted(types.items(), key=lambda x: (-x[1], x[0]))),
                "importance": importance, "by_month": dict(sorted(months.items())),
                "exact_duplicates": sum(n - 1 for n in duplicates.values() if n > 1)}

    def export(self, fmt: str, *, tags: Sequence[str] = (), query: str | None = None,
               include_archived: bool = False, library: str | ProjectRef | None = None,
               search: Callable[[str, Store], list[Memory]] | None = None) -> str:
        """The MCP Memory Service's knowledge_export: the free memories as json, markdown or text,
        optionally only those with `tags` or matching `query` (`search` ranks them)."""
        if fmt not in ("json", "markdown", "text"):
            raise ValidationError(f"format: must be json, markdown or text, not {fmt!r}")
        if not isinstance(include_archived, bool):
            raise ValidationError(f"filters.include_archived: must be true or false, got {include_archived!r}")
        store = self.stores.store(library)
        clean = tuple(schema.validate_tags(_tag_list(tags, "filters.tags"), "filters.tags"))
        if query is not None and search is not None:
            memories = [m for m in search(query, store) if m.entity is None]
        else:
            memories = list(self.free_memories(store, MemoryFilter(clean, include_archived=include_archived)))
        if fmt == "json":
            return json.dumps([{"content": m.content, "content_hash": m.content_hash, "tags": list(m.tags),
                                "memory_type": m.memory_type, "importance": m.importance, "metadata": m.metadata,
                                "created_at": m.created_at, "updated_at": m.updated_at,
                                **({"superseded_by": m.superseded_by} if m.superseded_by else {}),
                                **({"archived_at": m.archived_at} if m.archived_at else {})} for m in memories],
                              ensure_ascii=False, indent=2)
        if fmt == "markdown":
            return "".join(f"## {m.created_at}\n{m.content}\n" + (f"*Tags: {', '.join(m.tags)}*\n" if m.tags else "")
                           + "\n" for m in memories)
        return "".join(f"[{m.created_at}] {m.content}\n" for m in memories)


def _tag_list(tags: Any, field_name: str = "tags") -> list[str]:
    """Tags as a list; a comma-separated string too, as the MCP Memory Service takes them."""
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    if not isinstance(tags, list | tuple):
        raise ValidationError(f"{field_name}: must be a list of tags or comma-separated text, "
                              f"got {type(tags).__name__}")
    return list(tags)


def _merge(plan: Plan, group: list[Memory], why: str) -> None:
    """Fold a group of duplicates into its oldest: every tag (first casing seen), the uses of
    all, the highest importance, metadata keys the keeper lacks."""
    group = sorted(group, key=lambda m: (m.created_at, m.id))
    keeper, others = group[0], group[1:]
    tags: list[str] = list(keeper.tags)
    have = set(tag_keys(tags))
    metadata = dict(keeper.metadata)
    for m in others:
        for tag, key in zip(m.tags, tag_keys(m.tags)):
            if key not in have:
                have.add(key)
                tags.append(tag)
        for k, v in m.metadata.items():
            metadata.setdefault(k, v)
    rank = {level: i for i, level in enumerate(IMPORTANCE)}
    importance = min((m.importance for m in group), key=lambda level: rank.get(level, len(rank)))
    fields: dict[str, Any] = {"absorb": tuple(m.id for m in others)}  # their uses as they are at the execute
    if tags != list(keeper.tags):
        fields["tags"] = tuple(tags)
    if importance != keeper.importance:
        fields["importance"] = importance
    if metadata != keeper.metadata:
        fields["metadata"] = metadata
    plan.edit(keeper, "keep", why=f"{why}: keeps {len(others)} duplicate(s)", **fields)
    for m in others:
        plan.edit(m, "delete", delete=True, why=f"{why} as {keeper.content_hash[:12]}")
        plan.replaced[m.content_hash] = keeper.content_hash


def _chain_reaches(store: Store, start: Memory, target_hash: str) -> bool:
    """Whether following superseded_by from `start` reaches `target_hash`."""
    seen = set()
    current: Memory | None = start
    while current is not None and current.superseded_by and current.superseded_by not in seen:
        if current.superseded_by == target_hash:
            return True
        seen.add(current.superseded_by)
        found = [m for m in store.memories_by_hash(current.superseded_by) if m.entity is None]
        current = found[0] if found else None
    return False
