"""garbage_collect_relations: links to entities that no longer exist, listed and cleaned, as
the multi-library Markdown server's tool does, on every engine.

A link waits for its target while no entity has that name or alias (the engines'
`pending_links`); a target that was deleted, or never came, leaves the link dangling. The
plan reads every entity's document as a person sees it (the file itself in a Markdown
library, the rendered document elsewhere) and lists, entity by entity, each link to a name
that reaches no entity: a front-matter `relations:` entry, a link in a front-matter value, a
link in the body, with its line. What executing it does to the text is markdown/dangling.py's
rule: an entry goes, a link turns into its plain text, every other byte stays.

An execute edits every entity of the plan in one write transaction with one journal entry
(undoable with `memloci undo`, which puts every byte back), and is refused, with nothing
changed, if any entity's document changed since the plan read it (its text's fingerprint),
if an entity was deleted, or if a gone name now reaches an entity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memloci.core.errors import ConflictError, ValidationError
from memloci.core.model import name_key
from memloci.markdown import patch
from memloci.markdown.dangling import places, unlinked
from memloci.markdown.document import EntityDocument, render_document, wikilinks
from memloci.rules import documents as documents_rules
from memloci.store.protocols import FolderLibrary, Store

KIND = "garbage_collect_relations"
BATCH = 200  # entity documents read per call
_WHERE = {"relations": "front matter relations", "body": "body"}


def text_fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class DanglingPlan:
    """What a collection would change: `documents` (name, fingerprint of its text, the gone
    targets) as an execute takes them, `items` one per link as a person reads them, `left`
    entities whose links memloci cannot clean without touching other bytes (why)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    left: list[dict[str, Any]] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        return {"kind": KIND, "args": {}, "items": self.items, "offered": self.left, "documents": self.documents}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> DanglingPlan:
        return cls(list(data.get("items", [])), list(data.get("documents", [])), list(data.get("offered", [])))

    @property
    def counts(self) -> dict[str, int]:
        return {"changed": len(self.documents), "deleted": 0, "created": 0, "links_removed": len(self.items)}


def document_text(store: Store, doc: EntityDocument) -> str:
    """The entity's document as a person sees it: the file itself in a Markdown library (its
    lines as an edit reads them: LF, no BOM, ending in a newline; written back in its own style)."""
    if isinstance(store, FolderLibrary):
        text = store.entity_file_text(doc.name)
        if text is not None:
            return patch.decode(text.encode("utf-8"))[0]  # as an edit reads it: LF, no BOM, a final newline
    return render_document(doc)


def _documents(store: Store) -> list[EntityDocument]:
    names = [e.name for e in store.list_entities("*")]
    out = []
    for start in range(0, len(names), BATCH):
        docs = store.entity_documents(names[start:start + BATCH])
        out += [d for d in (docs.get(name_key(n)) for n in names[start:start + BATCH]) if d is not None]
    return out


def _targets(doc: EntityDocument) -> list[str]:
    """Every name the document links to (a superset of what its text holds as links: the
    relations the index keeps for it too)."""
    return [*(t for _, t in doc.relations), *(t for _, t in doc.links), *wikilinks(doc.body),
            *(t for o in doc.observations if "[[" in o for t in wikilinks(o))]


def plan(store: Store) -> DanglingPlan:
    """Every link of the library to a name no entity has (nor as an alias), entity by entity.
    Only the documents linking to such a name are read as text."""
    body_links = store.schema.relation_types is None  # a typed schema keeps links in text as text
    docs = _documents(store)
    targets: dict[str, str] = {}
    for doc in docs:
        for t in _targets(doc):
            targets.setdefault(name_key(t), t)
    written = list(targets.values())
    reached: set[str] = set()
    for start in range(0, len(written), BATCH):
        reached |= set(store.entity_names(written[start:start + BATCH]))
    gone_keys = {k for k in targets if k not in reached and k}

    def gone(target: str) -> bool:
        return name_key(target) in gone_keys

    out = DanglingPlan()
    for doc in docs:
        if not any(name_key(t) in gone_keys for t in _targets(doc)):
            continue
        name, text = doc.name, document_text(store, doc)
        found = places(text, gone, body_links=body_links)
        if not found:
            continue
        items = [_item(name, p) for p in found]
        try:
            documents_rules.edited_document(text, unlinked(text, gone, name_key, body_links=body_links), name)
        except ValidationError as exc:
            out.left.append({"entity": name, "why": exc.message, "links": [i["text"] for i in items]})
            continue
        out.items += items
        out.documents.append({"name": name, "expect": text_fingerprint(text), "body_links": body_links,
                              "targets": sorted({p.target for p in found}, key=name_key)})
    return out


def _item(name: str, p: Any) -> dict[str, Any]:
    where = _WHERE.get(p.where) or "front matter " + p.where.split(":", 1)[1]
    item = {"action": "remove" if p.becomes is None else "unlink", "entity": name, "target": p.target,
            "relation_type": p.relation_type, "where": where, "line": p.line, "text": p.text,
            "content": f"{name}, {where} line {p.line}: {p.text.strip()}"
                       + (f" -> {p.becomes}" if p.becomes is not None else "")}
    if p.becomes is not None:
        item["becomes"] = p.becomes
    return item


def change_of(entry: dict[str, Any]) -> Callable[[str], str]:
    """The edit an execute makes of one entity's text: refused unless the text is the one the
    plan read; then its links to the plan's gone targets cleaned."""
    keys = {name_key(t) for t in entry["targets"]}

    def change(text: str) -> str:
        if text_fingerprint(text) != entry["expect"]:
            raise ConflictError(f"{KIND}: the library changed since the preview: '{entry['name']}' was changed "
                                "since the preview; nothing was changed",
                                hint="Run the preview again and execute the new one.",
                                details={"changed": [f"'{entry['name']}' was changed since the preview"]})
        return unlinked(text, lambda t: name_key(t) in keys, name_key, body_links=bool(entry.get("body_links", True)))

    return change


def execute(store: Store, dangling: DanglingPlan, *, origin: str, detail: dict[str, Any]) -> int | None:
    """Apply the plan in one transaction with one journal entry; its id (None: nothing to change)."""
    if not dangling.documents:
        return None
    changes = [(d["name"], change_of(d)) for d in dangling.documents]
    absent = sorted({t for d in dangling.documents for t in d["targets"]}, key=name_key)
    return store.edit_documents(changes, origin=origin, action=KIND, detail=detail, absent=absent).change_id
