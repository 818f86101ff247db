"""What a note with a body means, written once for every engine (store/sqlite/documents.py,
store/postgres/documents.py).

An entity document (front matter + Markdown body, markdown/document.py) is one more view of an
entity. Applying one makes the entity's type, aliases, tags, body, observations and outgoing
relations the document's; `[[wikilinks]]` in the body are `links_to` relations and links in
front-matter values (`company: "[[Acme]]"`) are relations typed by their key. A link to a name
that does not exist yet waits (the engine's `pending_links`) and becomes a relation when that
entity appears. Reading a document back shows in its front matter only the relations that
neither the body nor a front-matter value already carries.

The functions here decide; the engines store. None of them sees SQL or a connection: an engine
hands them what it read and writes what they return, inside its own write transaction.
"""

from __future__ import annotations

import fnmatch
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from memloci.core.errors import AlreadyExistsError, ConflictError, InvalidRelationError, NotFoundError, ValidationError
from memloci.core.model import Entity, ListedEntity, RelationInput, name_key
from memloci.core.schema import LibrarySchema
from memloci.markdown.document import EntityDocument, parse_document, wikilinks
from memloci.markdown.obsidian import all_tags, block_links, tag_text
from memloci.rules.graph import GraphTx, check_distinct, cycle_path

LINKS_TO = "links_to"
EXTRA_KEY = "frontmatter_extra"  # entity metadata: front matter keys memloci does not know, verbatim
BODY_TAGS = "body_tags"  # entity metadata: the tags only the body's `#tags` give (not in front matter)


# -- reading ------------------------------------------------------------------------------


def listed(rows: Iterable[tuple[str, str]], pattern: str) -> list[ListedEntity]:
    """The (name, type) rows whose name matches a glob, case-insensitively; rows come by name_key."""
    glob = unicodedata.normalize("NFC", pattern).casefold() or "*"  # `Café` typed or decomposed is one name
    return [ListedEntity(n, t) for n, t in rows if fnmatch.fnmatchcase(unicodedata.normalize("NFC", n).casefold(), glob)]


def document_of(entity: Entity, relations: Sequence[tuple[str, str]],
                alias_keys: Callable[[list[str]], dict[str, str]]) -> EntityDocument:
    """The entity's document. `relations`: its outgoing (type, target name), resolved ones in
    creation order then the waiting ones; `alias_keys(texts)`: name_key of a link text -> name_key
    of the one entity it reaches through an alias, for texts no entity is named."""
    linked = {name_key(t) for t in wikilinks(entity.body)}
    extra = list(entity.metadata.get(EXTRA_KEY, []))
    links = block_links(extra)
    in_values = {(k, name_key(t)) for k, t in links}
    # A link written in the body is not repeated in the front matter.
    # Nor one held by a front-matter value (`company: "[[Acme]]"`): its key's text carries it.
    # A text that reaches its entity through an alias (`[[Anna]]`) counts as that entity's name.
    named = {name_key(to) for _, to in relations}
    texts = [t for t in [*wikilinks(entity.body), *(t for _, t in links)] if name_key(t) not in named]
    alias = alias_keys(texts) if texts else {}
    linked |= {alias[k] for k in linked if k in alias}
    in_values |= {(rt, alias[k]) for rt, k in in_values if k in alias}
    shown = [(t, to) for t, to in relations
             if not (t == LINKS_TO and name_key(to) in linked) and (t, name_key(to)) not in in_values]
    body_only = {t.casefold() for t in entity.metadata.get(BODY_TAGS, [])}
    return EntityDocument(
        name=entity.name, entity_type=entity.entity_type, aliases=list(entity.aliases),
        # (tag_text: an index written before `#` was read off front-matter tags agrees with the file)
        tags=list(dict.fromkeys(tag_text(t) for t in entity.tags if t.casefold() not in body_only)),
        relations=list(shown), observations=[o.content for o in entity.observations], body=entity.body,
        created=entity.created_at, modified=entity.updated_at, extra=extra, links=links,
    )


def relations_filter_missing(field: str, name: str) -> NotFoundError:
    """find_relations named an endpoint that is no entity."""
    return NotFoundError(f"{field}: entity '{name}' does not exist",
                         hint="Check the name with list_entities or search_nodes.")


# -- checking -----------------------------------------------------------------------------


def check_document(schema: LibrarySchema, doc: EntityDocument, field: str) -> None:
    """The library schema's rules, for a document about to be applied."""
    schema.check_name(doc.name, f"{field}.name")
    schema.check_type(doc.entity_type, f"{field}.entity_type")
    for j, o in enumerate(doc.observations):
        schema.check_observation(o, f"{field}.observations[{j}]")
    check_distinct(schema, doc.observations, f"{field}.observations")
    for j, (rt, to) in enumerate(doc.relations):
        schema.check_relation(RelationInput(doc.name, rt, to), f"{field}.relations[{j}]")


def check_create(create: bool | None, docs: Sequence[EntityDocument], existing: Mapping[str, str]) -> None:
    """apply_documents' `create`: True refuses names that exist, False names that do not.
    `existing`: name_key -> stored name of the documents' names that exist."""
    if create is True and existing:
        raise AlreadyExistsError(f"entities.name: {', '.join(existing.values())} already exist(s)",
                                 hint="Edit them with the entity content tools, or pick another name.")
    if create is False:
        missing = [d.name for d in docs if name_key(d.name) not in existing]
        if missing:
            raise NotFoundError(f"entity not found: {', '.join(missing)}", hint="Check the name with list_entities.")


def edit_missing(name: str) -> NotFoundError:
    return NotFoundError(f"entity_name: '{name}' does not exist", hint="Check the name with list_entities.")


def check_edits(action: str, names: Sequence[str], found: Mapping[str, Any], reached: Sequence[str]) -> None:
    """edit_documents' guard, inside its transaction: every entity it edits still exists, and
    no name it was told is absent (a link's target a preview found gone) reaches an entity now.
    CONFLICT naming each, nothing changed."""
    problems = [f"'{n}' was deleted or renamed since the preview" for n in names if name_key(n) not in found]
    problems += [f"an entity '{n}' exists now" for n in reached]
    if problems:
        raise ConflictError(f"{action}: the library changed since the preview: " + "; ".join(problems[:10])
                            + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
                            + "; nothing was changed", hint="Run the preview again and execute the new one.",
                            details={"changed": problems})


def retexted(before: Sequence[str], after: Sequence[str]) -> list[tuple[str, str]]:
    """(old text, new text) of the observations an edit only retexts in place, when the edit
    keeps their number and order (a link turned into its text): each keeps its row, date, uses
    and place in the list. A new text another observation already holds is no retext (the two
    become one copy, as any edit makes them)."""
    if len(before) != len(after) or len(set(after)) != len(after):
        return []
    return [(b, a) for b, a in zip(before, after) if b != a and a not in before]


def edited_document(text: str, new_text: str, stored: str) -> EntityDocument:
    """The document an edit of `text` into `new_text` makes of the entity named `stored`: the
    title may not be dropped (unless the text never had one) nor changed to another name."""
    doc = parse_document(new_text, fallback_name="\x00")
    if doc.name == "\x00" and parse_document(text, fallback_name="\x00").name == "\x00":
        doc.name = stored  # the name was never in the text: it is the file's name
    elif doc.name == "\x00":
        raise ValidationError(f"the edit would remove the title line '# {stored}', which holds the entity's name",
                              hint="Keep the title; rename entities with rename_entity.")
    if name_key(doc.name) != name_key(stored):
        raise ValidationError(f"new_content: the edit would rename '{stored}' to '{doc.name}'",
                              hint="Rename entities with rename_entity, which also repairs every link.")
    doc.name = stored
    return doc


# -- applying -----------------------------------------------------------------------------


def entity_fields(doc: EntityDocument, metadata: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(tags, metadata) of the entity the document makes. Its tags are the front matter's and the
    body's `#tags`; which came from the body alone is kept in metadata, so the document (front
    matter) is rendered with its own tags only; unknown front-matter keys are kept verbatim."""
    tags, body_only = all_tags(doc)
    meta = dict(metadata)
    for meta_key, value in ((EXTRA_KEY, doc.extra), (BODY_TAGS, body_only)):
        if value:
            meta[meta_key] = list(value)
        else:
            meta.pop(meta_key, None)
    return tags, meta


def wanted_links(doc: EntityDocument, schema: LibrarySchema) -> dict[tuple[str, str], str]:
    """(relation type, target name_key) -> target as written: the entity's outgoing relations by
    its document, the front matter's, the body's links and the links in front-matter values
    (typed by their key). A schema that lists its relation types makes links plain text."""
    typed = schema.relation_types is not None
    links = () if typed else [*((LINKS_TO, t) for t in wikilinks(doc.body)), *doc.links]
    key = name_key(doc.name)
    wanted: dict[tuple[str, str], str] = {}
    for relation_type, target in [*doc.relations, *links]:
        if relation_type == LINKS_TO and name_key(target) == key:
            continue  # a note linking to itself is no relation
        wanted.setdefault((relation_type, name_key(target)), target)
    return wanted


def check_targets(schema: LibrarySchema, wanted: Mapping[tuple[str, str], str], found: Iterable[str]) -> None:
    """A schema that lists its relation types relates existing entities only."""
    have = set(found)
    missing = [t for (_, k), t in wanted.items() if k not in have]
    if missing:
        raise InvalidRelationError(f"relations: '{missing[0]}' does not exist; schema '{schema.name}' "
                                   "relates existing entities only (nothing was changed)")


def check_cycles(tx: GraphTx, schema: LibrarySchema, name: str, entity_id: int, new: Iterable[tuple[str, int]]) -> None:
    """The document's new relations (type, target id) may not close a cycle the schema forbids."""
    for rt, to in new:
        path = cycle_path(tx, schema, entity_id, rt, to)
        if path:
            raise InvalidRelationError(f"relations: {name} -{rt}-> {path[0]} would close a cycle "
                                       f"({' -> '.join([name, *path])}); nothing was changed",
                                       hint="Drop or reverse one relation of the cycle.")
