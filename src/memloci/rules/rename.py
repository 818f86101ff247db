"""Renaming and merging entities, written once for every engine (DESIGN.md §2).

What a rename or a merge means is decided here: which names may be taken, which texts
change and how (`[[wikilinks]]` in bodies, observations and front-matter values pointed at
the new name with their `#heading` and `|label` kept; a front-matter value that cannot hold
the new name is refused), which observations and relations fold into a merge's target (one
copy each, no self-loops, no new cycle where the schema forbids them), what the merged body
and the journal entry look like, and the errors. Each engine gives the rules one write
transaction as a `RenameTx` of small primitives (SQL reads and writes, its index upkeep,
the files of a Markdown library); whatever a rule raises rolls that transaction back whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from memloci.core.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import content_hash, name_key
from memloci.markdown.document import EntityDocument, normalize_heading, rewrite_wikilinks
from memloci.markdown.frontmatter import check_renamed_links
from memloci.markdown.obsidian import all_tags, block_links, block_links_or_none
from memloci.markdown.value_links import rename_value_links
from memloci.rules.graph import EntityRef, GraphTx, cycle_path

if TYPE_CHECKING:
    from memloci.core.schema import LibrarySchema


class RenameTx(Protocol):
    """One open write transaction of an engine, as the rename and merge rules use it."""

    def resolve(self, names: Iterable[str]) -> dict[str, EntityRef]:
        """name_key(name) -> the entity of that name (no aliases), for the names that exist."""
        ...

    def graph(self) -> GraphTx:
        """The engine's GraphTx over the same transaction (cycle paths)."""
        ...

    def before_change(self, ids: Sequence[int]) -> None:
        """Undo records of these entities as they are now (the engine's business; may do nothing)."""
        ...

    def set_name(self, entity_id: int, name: str) -> None:
        """Name (and name key) the entity `name`, updated_at now; its observations' content
        hashes, which cover their entity's name, follow."""
        ...

    def note_rename(self, old: str, new: str) -> None:
        """Links to `old` are about to point at `new` (a Markdown library rewrites its files' links)."""
        ...

    def extra_holders(self, old: str) -> list[tuple[int, str, list[str]]]:
        """(id, name, front-matter blocks memloci does not know) of the entities whose blocks may
        hold a link to `old` (a superset: the rule reads each)."""
        ...

    def set_extra(self, entity_id: int, blocks: list[str]) -> None: ...

    def body_holders(self, old: str, target_id: int) -> list[tuple[int, str, str]]:
        """(id, name, body) of the entities whose body may link to `old` (or have a links_to
        relation to `target_id`), a superset."""
        ...

    def set_body(self, entity_id: int, body: str) -> None:
        """The body, updated_at now."""
        ...

    def observation_holders(self, old: str, target_id: int) -> list[tuple[int, int, str, str]]:
        """(memory id, entity id, entity name, content) of the observations that may link to `old`."""
        ...

    def holds_observation(self, entity_id: int, content_hash: str) -> bool: ...

    def delete_observation(self, memory_id: int) -> None: ...

    def set_observation(self, memory_id: int, entity_id: int, content: str, content_hash: str) -> None:
        """New text for an observation: it waits for a new vector; the search index follows."""
        ...

    def pointing_at(self, ids: Sequence[int]) -> list[str]:
        """Names of the other entities with a relation to one of `ids`, by name."""
        ...

    def link_pending(self, ids: Sequence[int]) -> None:
        """Links waiting for the names (or aliases) of these entities become relations."""
        ...

    def document(self, entity_id: int) -> EntityDocument: ...

    def observations(self, entity_id: int) -> list[tuple[int, str]]:
        """(memory id, content) of the entity's observations, oldest first."""
        ...

    def move_observation(self, memory_id: int, entity_id: int, content_hash: str) -> None: ...

    def relations_of(self, entity_id: int) -> list[tuple[int, str, int, str]]:
        """(from id, type, to id, created_at) of every relation from or to the entity."""
        ...

    def add_relation(self, from_id: int, relation_type: str, to_id: int, created_at: str) -> None:
        """Insert unless it is there already."""
        ...

    def pending_of(self, entity_id: int) -> list[tuple[str, str, str]]:
        """(relation type, target key, target as written) of the entity's waiting links."""
        ...

    def add_pending(self, entity_id: int, relation_type: str, target_key: str, target: str) -> None:
        """Insert unless it is there already."""
        ...

    def note_tail(self, key: str, tail: str) -> None:
        """A merge appends `tail` to the body of the entity of name key `key` (a Markdown library
        appends it to the file as it is)."""
        ...

    def set_folded(self, entity_id: int, aliases: list[str], tags: list[str], body_tags: list[str], body: str) -> None:
        """A merge target's aliases, tags (and which of them only the body's `#tags` give), body; updated_at now."""
        ...

    def delete_entities(self, ids: Sequence[int]) -> None:
        """With their observations, relations and waiting links."""
        ...

    def entities_changed(self, ids: Sequence[int]) -> None:
        """Search-index upkeep after these entities changed."""
        ...

    def journal(self, tool: str, action: str, entities: Sequence[str], detail: dict[str, Any]) -> None: ...


# -- rename -------------------------------------------------------------------------------


def rename_entity(tx: RenameTx, old: str, new: str, origin: str) -> dict[str, Any]:
    """Rename `old` to `new` and point every link to it at the new name:
    {old_name, new_name, links_rewritten_in}."""
    found = tx.resolve([old, new])
    if name_key(old) not in found:
        raise NotFoundError(f"old_name: entity '{old}' does not exist", hint="Check the name with list_entities.")
    entity_id, stored = found[name_key(old)].id, found[name_key(old)].name
    clash = found.get(name_key(new))
    if clash and clash.id != entity_id:
        raise AlreadyExistsError(f"new_name: '{clash.name}' is taken",
                                 hint="Pick another name, or merge the two with merge_entities.")
    tx.before_change([entity_id])
    # Relations follow the entity by id, but the documents of their sources name it in their
    # front matter (`to:`): those are rewritten too, and the reply lists every one.
    naming = naming_in_relations(tx, [entity_id], {name_key(stored)})
    tx.set_name(entity_id, new)
    rewritten = rewrite_links(tx, stored, new, entity_id)
    rewritten = list(dict.fromkeys(rewritten + naming))
    tx.link_pending([entity_id])  # links waiting for the new name resolve
    tx.entities_changed([entity_id])
    result = {"old_name": stored, "new_name": new, "links_rewritten_in": rewritten}
    tx.journal(origin, "rename_entity", [stored, new], dict(result))
    return result


def naming_in_relations(tx: RenameTx, ids: Sequence[int], keys: set[str]) -> list[str]:
    """The other entities whose documents name one of `keys` (the entities `ids`) in their
    front matter's `relations:`, whose bytes a rename of it changes. A relation carried by a
    link in the body or a value is not among them (its text is rewritten, or it reaches the
    entity through an alias, `[[Ally]]`, and no byte changes): the reply lists only files
    whose bytes changed."""
    names = tx.pointing_at(ids)
    found = tx.resolve(names)
    return [n for n in names if (ref := found.get(name_key(n))) is not None
            and any(name_key(to) in keys for _, to in tx.document(ref.id).relations)]


def rewrite_links(tx: RenameTx, old: str, new: str, target_id: int) -> list[str]:
    """Point every `[[old]]` at `new` (front-matter values, bodies, observations); the names
    of the entities whose text changed, each once, in that order."""
    changed = []
    tx.note_rename(old, new)
    # Front matter keys memloci does not know (`company: "[[Acme]]"`) hold links as text too.
    for entity_id, name, blocks in tx.extra_holders(old):
        new_blocks = [rename_value_links(b, old, new, name) for b in blocks]  # each in its quoting
        if new_blocks != blocks:  # read back: the same links, old -> new, or refused
            check_renamed_links(block_links(blocks), block_links_or_none(new_blocks), old, new, name_key)
            tx.before_change([entity_id])
            tx.set_extra(entity_id, new_blocks)
            changed.append(name)
    for entity_id, name, body in tx.body_holders(old, target_id):
        rewritten = rewrite_wikilinks(body, old, new)
        if rewritten != body:
            tx.before_change([entity_id])
            tx.set_body(entity_id, rewritten)
            changed.append(name)
    # Observations are list items of the body too: their links move with it.
    for memory_id, entity_id, name, content in tx.observation_holders(old, target_id):
        rewritten = rewrite_wikilinks(content, old, new)
        if rewritten != content:
            tx.before_change([entity_id])
            h = content_hash(rewritten, name)
            if tx.holds_observation(entity_id, h):
                tx.delete_observation(memory_id)  # now the same as another: one copy
            else:
                tx.set_observation(memory_id, entity_id, rewritten, h)
            changed.append(name)
    return list(dict.fromkeys(changed))


# -- merge --------------------------------------------------------------------------------


def merge_entities(tx: RenameTx, schema: LibrarySchema, sources: Sequence[str], target: str,
                   origin: str) -> dict[str, Any]:
    """Fold `sources` into `target` and delete them: {target, merged, aliases, links_rewritten_in}.

    The target takes each source's name and aliases as aliases, its tags, its body (less its
    Observations section, headings one level down, under `## Merged from <name>`), its
    observations (one copy of a text the target holds already) and its relations and waiting
    links (none from the target to itself); every link to a source then points at the target."""
    check_merge_names(sources, target)
    found = tx.resolve([*sources, target])
    missing = [f"source_names: '{n}'" for n in sources if name_key(n) not in found]
    missing += [f"target_name: '{target}'"] if name_key(target) not in found else []
    if missing:
        raise NotFoundError(f"not found: {', '.join(missing)}",
                            hint="Every source and the target must exist; nothing was merged.")
    target_id, target_name = found[name_key(target)].id, found[name_key(target)].name
    source_ids = list(dict.fromkeys(found[name_key(s)].id for s in sources))
    docs = {i: tx.document(i) for i in [target_id, *source_ids]}
    # their front matter will name the target instead
    pointing = naming_in_relations(tx, source_ids, {name_key(docs[i].name) for i in source_ids})
    # Every entity whose relations move is kept as it was before any moves (an undo puts back
    # the first state kept; one kept after its relation moved would keep the moved one too).
    neighbours = [i for sid in source_ids for f, _, t, _ in tx.relations_of(sid) for i in (f, t)]
    tx.before_change(list(dict.fromkeys([target_id, *source_ids, *neighbours])))
    into = docs[target_id]
    aliases, tags, body = folded_document(into, [docs[i] for i in source_ids])
    for sid in source_ids:
        held = {content_hash(c, target_name) for _, c in tx.observations(target_id)}
        for memory_id, content in tx.observations(sid):
            h = content_hash(content, target_name)
            if h in held:
                tx.delete_observation(memory_id)
            else:
                tx.move_observation(memory_id, target_id, h)
                held.add(h)
        # Relations to and from the source now touch the target (no self-loops).
        relations = tx.relations_of(sid)
        for from_id, relation_type, to_id, created_at in relations:
            if from_id == sid and to_id not in (target_id, sid):
                tx.add_relation(target_id, relation_type, to_id, created_at)
        for from_id, relation_type, to_id, created_at in relations:
            if to_id == sid and from_id not in (target_id, sid):
                tx.add_relation(from_id, relation_type, target_id, created_at)
        for relation_type, key, written in tx.pending_of(sid):
            tx.add_pending(target_id, relation_type, key, written)
    tx.note_tail(name_key(target_name), body[len(into.body.rstrip("\n")):])
    every_tag, body_only = all_tags(EntityDocument(target_name, tags=tags, body=body))
    tx.set_folded(target_id, aliases, every_tag, body_only, body)
    source_names = {docs[i].name for i in source_ids}
    if schema.acyclic:  # relations moved onto the target may close a cycle through it
        graph = tx.graph()
        for from_id, relation_type, to_id, _ in tx.relations_of(target_id):
            if from_id != target_id or to_id in source_ids:
                continue
            path = cycle_path(graph, schema, target_id, relation_type, to_id)
            if path and not set(path) & source_names:
                raise InvalidRelationError(
                    f"source_names: merging into '{target_name}' would close a cycle "
                    f"({' -> '.join([target_name, *path])}); schema '{schema.name}' keeps relations "
                    "acyclic (nothing was merged)", hint="Delete one relation of the cycle first.")
    rewritten: list[str] = [n for n in pointing if n != target_name]
    for sid in source_ids:  # while the sources' links_to relations still name them
        rewritten += rewrite_links(tx, docs[sid].name, target_name, sid)
    tx.delete_entities(source_ids)
    tx.entities_changed([target_id])
    merged = [docs[i].name for i in source_ids]
    tx.journal(origin, "merge_entities", [target_name, *merged], {
        "target": target_name,
        "sources": [{"name": d.name, "entityType": d.entity_type, "aliases": d.aliases, "tags": d.tags,
                     "relations": d.relations, "observations": d.observations, "body": d.body}
                    for d in (docs[i] for i in source_ids)],
        "links_rewritten_in": sorted(set(rewritten)),
    })
    return {"target": target_name, "merged": merged, "aliases": aliases,
            "links_rewritten_in": sorted(set(rewritten) - set(merged))}


def check_merge_names(sources: Sequence[str], target: str) -> None:
    if name_key(target) in {name_key(s) for s in sources}:
        raise ValidationError("source_names: the target cannot also be a source")


def folded_document(into: EntityDocument, sources: Sequence[EntityDocument]) -> tuple[list[str], list[str], str]:
    """The merge target's aliases, tags and body once `sources` are folded into it."""
    aliases = list(into.aliases)
    tags = list(into.tags)
    body = into.body.rstrip("\n")
    for src in sources:
        for a in [src.name, *src.aliases]:
            if name_key(a) != name_key(into.name) and name_key(a) not in {name_key(x) for x in aliases}:
                aliases.append(a)
        tags += [t for t in src.tags if t not in tags]
        rest = demote(without_observations(src.body)).strip("\n")
        body = body.rstrip("\n") + f"\n\n---\n\n## Merged from {src.name}\n" + (f"\n{rest}\n" if rest.strip() else "")
    return aliases, tags, body


def demote(body: str) -> str:
    """Headings one level down (a merged source's sections sit under `## Merged from ...`)."""
    out, fence = [], ""
    for line in body.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = "" if fence == mark else (fence or mark)
        elif not fence and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if 0 < level < 6 and line[level:level + 1] == " ":
                line = "#" + line
        out.append(line)
    return "\n".join(out)


def without_observations(body: str) -> str:
    """The body without its Observations section (the observations themselves move separately)."""
    lines = body.split("\n")
    out, skip_level = [], 0
    for line in lines:
        stripped = line.lstrip()
        level = len(stripped) - len(stripped.lstrip("#")) if stripped.startswith("#") else 0
        is_heading = 0 < level <= 6 and stripped[level:level + 1] in (" ", "")
        if skip_level and is_heading and level <= skip_level:
            skip_level = 0
        if not skip_level and is_heading and normalize_heading(stripped) == "observations":
            skip_level = level
            continue
        if not skip_level:
            out.append(line)
    return "\n".join(out)
