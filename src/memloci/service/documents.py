"""Document operations of the service: entities as Markdown documents, read by TOC and
section, edited by exact context, renamed and merged with every link repaired; the library
manual; the list of mounted libraries. A part MemoryService holds; writes go through
Stores.writing (the post-write hook).

Every edit works on the entity's whole document text (front matter + body): it is changed
by a pure function from markdown/document.py, parsed back, and applied in one transaction.
A refused edit raises before anything is written, so the file stays byte-identical.
"""

from __future__ import annotations

import fnmatch
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memloci.app.projects import ProjectRef
from memloci.core import schema
from memloci.core.errors import MemlociError, NotFoundError, ValidationError
from memloci.core.model import name_key
from memloci.markdown import document as md
from memloci.markdown import frontmatter
from memloci.service.names import entity_name as entity_name_of
from memloci.service.names import entity_names
from memloci.service.stores import Stores
from memloci.store.protocols import FolderLibrary

MANUAL_TITLE = "# Library manual\n"


def prose(body: str) -> str:
    """An entity's body without the `## Observations` list a Markdown library renders into it
    (engines differ on keeping that list in the body), as the entity document holds it
    (`kept_body`: a Markdown file ends in one line break where SQLite and PostgreSQL keep the
    body's end as given). "" for an entity that is observations only: what is a note (prose of
    its own) and what a page shows as its text, the same on every engine."""
    return md.kept_body(md.remove_empty_section(md.set_observations(body, []), "Observations"))


@dataclass(frozen=True, slots=True)
class NewEntityDocument:
    name: str
    entity_type: str | None = None  # None: the content's front matter `type`, else "note"
    aliases: tuple[str, ...] = ()
    relations: tuple[tuple[str, str], ...] = ()  # (relation_type, to)
    content: str = ""


class DocumentOperations:
    """Entities as documents, the library manual, and the list of mounted libraries."""

    def __init__(self, stores: Stores):
        self.stores = stores

    # -- libraries -------------------------------------------------------------------

    def list_libraries(self) -> list[dict[str, Any]]:
        """Every mounted library; one that cannot be opened or read (a PostgreSQL server down,
        a login refused) is listed with its error, so it never hides the others."""
        out = []
        for name in self.stores.registry.names():
            try:
                store = self.stores.store(name)
                s = store.stats()
            except MemlociError as exc:
                out.append(self._library_error(name, exc))
                continue
            row = {"name": s.name, "kind": s.kind, "path": s.path, "entities": s.entities,
                   "observations": s.observations, "memories": s.memories, "relations": s.relations,
                   "schema": store.schema.describe()}
            if isinstance(store, FolderLibrary):
                row["unparsed_files"] = store.problems()
            out.append(row)
        return out

    def _library_error(self, name: str, exc: MemlociError) -> dict[str, Any]:
        """A library's list_libraries entry when it cannot be read: its name, kind and path (a
        URL's password masked: a store's `path` never holds one) and the error, as a tool reports it."""
        store = next(s for s in self.stores.registry.all() if s.name == name)
        return {"name": name, "kind": store.kind, "path": str(store.path), **exc.to_dict()}

    # -- reading -----------------------------------------------------------------------

    def list_entities(self, entity_glob: str = "*", *, library: str | ProjectRef | None = None) -> list[dict[str, Any]]:
        """Entities whose name matches the glob, or (in a Markdown library) whose file's path
        does: `Daily/*` lists the notes in the folder Daily, `Daily/**` those below it too,
        `*.md` every note (a glob without `/` is matched against a file's own name)."""
        glob = schema.validate_query(entity_glob or "*") or "*"
        store = self.stores.store(library)
        if not isinstance(store, FolderLibrary):
            return [{"name": e.name, "entity_type": e.entity_type} for e in store.list_entities(glob)]
        # Names and paths compare in NFC: a file name macOS wrote decomposed (`Cafe\u0301`)
        # matches the glob `Café*` typed composed.
        by_name, by_path = _nfc(_nfc(glob).casefold()), _path_glob(_nfc(glob))
        return [{"name": e.name, "entity_type": e.entity_type, **({"path": e.path} if e.path is not None else {})}
                for e in store.entity_listing()
                if fnmatch.fnmatchcase(_nfc(_nfc(e.name).casefold()), by_name)
                or (e.path is not None and by_path(_nfc(e.path)))]

    def _texts(self, names: Sequence[str], library: str | ProjectRef | None) -> tuple[list[tuple[str, str]], list[str]]:
        """(name, document text) for the names that exist, and the missing names."""
        store = self.stores.store(library)
        clean = entity_names(store, schema.validate_names(names, "entity_names"), "entity_names")
        docs = store.entity_documents(clean)
        found, missing = [], []
        for n in clean:
            doc = docs.get(name_key(n))
            if doc is None:
                missing.append(n)
            else:
                found.append((doc.name, self._text_of(store, doc)))
        if not found:
            raise NotFoundError(f"entity_names: none of {', '.join(clean)} exists",
                                hint="List names with list_entities (a glob such as 'project-*').")
        return found, missing

    @staticmethod
    def _text_of(store, doc: md.EntityDocument) -> str:
        """The document as a person sees it: the file itself in a Markdown library."""
        if isinstance(store, FolderLibrary):
            text = store.entity_file_text(doc.name)
            if text is not None:
                return text
        return md.render_document(doc)

    def read_entities(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        found, missing = self._texts(names, library)
        return {"entities": [{"name": n, "content": t} for n, t in found], "missing": missing}

    def get_entities_toc(self, names: Sequence[str], *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        found, missing = self._texts(names, library)
        return {"entities": [{"name": n, "toc": md.toc(t)} for n, t in found], "missing": missing}

    def read_entities_sections(self, names: Sequence[str], section_globs: Sequence[str], *,
                               library: str | ProjectRef | None = None) -> dict[str, Any]:
        globs = [g for g in (schema.validate_query(g) for g in section_globs) if g]
        if not globs:
            raise ValidationError("section_globs: give at least one heading or glob, e.g. ['frontmatter', 'arch*']")
        found, missing = self._texts(names, library)
        return {"entities": [{"name": n, "sections": md.read_sections(t, globs)} for n, t in found],
                "missing": missing}

    def find_relations(self, *, to_entity: str | None = None, relation_type: str | None = None,
                       from_entity: str | None = None, library: str | ProjectRef | None = None) -> list[Any]:
        store = self.stores.store(library)
        return store.find_relations(to_entity=entity_name_of(store, to_entity, "to_entity") if to_entity else None,
                                    relation_type=relation_type or None,
                                    from_entity=entity_name_of(store, from_entity, "from_entity") if from_entity else None)

    # -- writing -----------------------------------------------------------------------

    def add_entities(self, entities: Sequence[NewEntityDocument], *, library: str | ProjectRef | None = None) -> list[str]:
        if not entities:
            return []
        docs = []
        for i, e in enumerate(entities):
            where = f"entities[{i}]"
            schema.validate_names([e.name], f"{where}.name")
            parsed = md.parse_document(e.content or "", fallback_name=e.name)
            if name_key(parsed.name) != name_key(e.name):  # a title line that names someone else is body text
                named = frontmatter.with_front_matter(e.content, lambda y, name=e.name: frontmatter.set_scalar(y, "name", name))
                titled = md.parse_document(named, fallback_name=e.name)
                # Content with its own H1 keeps it as the file's only title (the name goes in front matter).
                parsed = titled if titled.body.lstrip().startswith("# ") else \
                    md.parse_document(f"# {e.name}\n\n{e.content}", fallback_name=e.name)
            for rt, to in e.relations:
                schema.validate_names([to], f"{where}.relations.to")
                if not rt.strip():
                    raise ValidationError(f"{where}.relations.relation_type: must not be empty")
            parsed.name = e.name
            parsed.entity_type = e.entity_type or parsed.entity_type or "note"
            parsed.aliases = list(dict.fromkeys([*parsed.aliases, *e.aliases]))
            parsed.relations = list(dict.fromkeys([*parsed.relations, *e.relations]))
            docs.append(parsed)
        keys = [name_key(d.name) for d in docs]
        if len(set(keys)) != len(keys):
            raise ValidationError("entities: the same name twice in one call")
        with self.stores.writing(library) as store:
            for i, d in enumerate(docs):
                store.check_document(d, f"entities[{i}]")
            return store.apply_documents(docs, origin="add_entities", action="add_entities", create=True,
                                         detail={"created": [d.name for d in docs]})

    def _edit(self, entity_name: str, library: str | ProjectRef | None, action: str,
              change: Callable[[str], str], detail: dict[str, Any]) -> dict[str, Any]:
        schema.validate_names([entity_name], "entity_name")
        with self.stores.writing(library) as store:
            edited = store.edit_document(entity_name_of(store, entity_name.strip(), "entity_name"), change,
                                         origin=action, detail=detail)
        return {"entity": edited.name, "changed": edited.changed}

    def add_entity_content(self, entity_name: str, in_section: str, new_content: str, *,
                           library: str | ProjectRef | None = None) -> dict[str, Any]:
        if not new_content.strip():
            raise ValidationError("new_content: must not be empty")
        return self._edit(entity_name, library, "add_entity_content",
                          lambda t: md.add_to_section(t, in_section, new_content),
                          {"section": in_section, "added": new_content})

    def delete_entity_content(self, entity_name: str, content_to_delete: str, *,
                              library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self._edit(entity_name, library, "delete_entity_content",
                          lambda t: md.delete_exact(t, content_to_delete), {"removed": content_to_delete})

    def replace_entity_content(self, entity_name: str, old_content: str, new_content: str, *,
                               library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self._edit(entity_name, library, "replace_entity_content",
                          lambda t: md.replace_exact(t, old_content, new_content),
                          {"removed": old_content, "added": new_content})

    def correct_observation(self, entity_name: str, old: str, new: str, *,
                            library: str | ProjectRef | None = None) -> dict[str, Any]:
        """Change the text of the entity's observation `old` to `new`, in place: the list item
        of that one observation is rewritten (its date kept), nothing else in the document.
        `new` passes add_observations' rules and stays one observation (a line break in it is
        a continuation line, never a new item or heading). One journal entry on every engine:
        {"entity", "changed", "change_id"} (`changed` False, no entry: `new` is `old`)."""
        schema.validate_names([entity_name], "entity_name")
        old = schema.clean_text(old, "old")
        new = schema.clean_text(new, "new")
        with self.stores.writing(library) as store:
            store.schema.check_observation(new, "new")
            reached = store.entity_names([entity_name.strip()])
            if not reached:
                raise NotFoundError(f"entity_name: '{entity_name.strip()}' does not exist",
                                    hint="Check the name with search_nodes; nothing was changed.")
            name = entity_name_of(store, entity_name.strip(), "entity_name")
            done = store.edit_documents([(name, lambda text: md.correct_observation(text, old, new, name))],
                                        origin="correct_observation", action="correct_observation",
                                        detail={"entity": name, "removed": old, "added": new})
        return {"entity": name, "changed": done.change_id is not None, "change_id": done.change_id}

    def replace_entity_section(self, entity_name: str, old_heading: str, new_heading: str, new_body_content: str,
                               *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        removed: dict[str, Any] = {"section": old_heading}

        def change(text: str) -> str:
            new = md.replace_section(text, old_heading, new_heading, new_body_content)
            removed["removed"] = md.read_sections(text, [md.normalize_heading(old_heading)])[0]["content"]
            return new

        return self._edit(entity_name, library, "replace_entity_section", change, removed)

    def rename_entity(self, old_name: str, new_name: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        schema.validate_names([old_name], "old_name")
        schema.validate_names([new_name], "new_name")
        if any(c in new_name for c in "[]|#"):
            raise ValidationError("new_name: must not contain [ ] | or # (they would break [[wikilinks]] to it)")
        with self.stores.writing(library) as store:  # observations whose links were rewritten need new vectors
            store.schema.check_name(new_name.strip(), "new_name")
            return store.rename_entity(entity_name_of(store, old_name.strip(), "old_name"), new_name.strip(),
                                       origin="rename_entity")

    def merge_entities(self, source_names: Sequence[str], target_name: str, *,
                       library: str | ProjectRef | None = None) -> dict[str, Any]:
        sources = schema.validate_names(source_names, "source_names")
        if not sources:
            raise ValidationError("source_names: give at least one entity to merge")
        schema.validate_names([target_name], "target_name")
        with self.stores.writing(library) as store:
            return store.merge_entities(entity_names(store, sources, "source_names"),
                                        entity_name_of(store, target_name.strip(), "target_name"), origin="merge_entities")

    # -- the library manual ------------------------------------------------------------

    def read_manual(self, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        text = self.stores.store(library).manual_text()
        return {"content": text or "", "toc": md.toc(text) if text else [], "exists": text is not None}

    def _edit_manual(self, library: str | ProjectRef | None, action: str, change: Callable[[str], str],
                     detail: dict[str, Any]) -> dict[str, Any]:
        with self.stores.writing(library, new_text=False) as store:
            new_text = store.edit_manual(lambda text: change(text or MANUAL_TITLE), origin=action, detail=detail)
        return {"toc": md.toc(new_text)}

    def update_manual_section(self, toc: str, old_content: str, new_content: str, *,
                              library: str | ProjectRef | None = None) -> dict[str, Any]:
        return self._edit_manual(library, "update_manual_section",
                                 lambda t: _within_section(t, toc, lambda s: md.replace_exact(s, old_content, new_content)),
                                 {"section": toc, "removed": old_content, "added": new_content})

    def add_manual_section(self, toc: str, new_content: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        if not new_content.strip():
            raise ValidationError("new_content: must not be empty")
        return self._edit_manual(library, "add_manual_section", lambda t: md.add_to_section(t, toc, new_content),
                                 {"section": toc, "added": new_content})

    def delete_manual_section(self, toc: str, deleting_content: str, *, library: str | ProjectRef | None = None) -> dict[str, Any]:
        def change(text: str) -> str:
            edited = _within_section(text, toc, lambda s: md.delete_exact(s, deleting_content, field="deleting_content"))
            return md.remove_empty_section(edited, toc)

        return self._edit_manual(library, "delete_manual_section", change, {"section": toc, "removed": deleting_content})


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _path_glob(glob: str) -> Callable[[str], bool]:
    """A test of a note's path (`Daily/2026-11-01.md`) against a glob, case-insensitively: `*` and
    `?` stay within a folder, `**` crosses folders, `[abc]` is a class; a glob ending in `/`
    means everything below it. A glob without `/` is matched against the file name, with or
    without `.md`; one with `/`, against the whole path from the library folder."""
    g = glob.casefold().removeprefix("./") + ("**" if glob.endswith("/") else "")
    out, i = [], 0
    while i < len(g):
        if g.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif g[i] == "*":
            out.append("[^/]*")
            i += 1
        elif g[i] == "?":
            out.append("[^/]")
            i += 1
        elif g[i] == "[" and (j := g.find("]", i + 2)) > 0:
            inner = g[i + 1:j]
            out.append("[" + ("^" + re.escape(inner[1:]) if inner[0] == "!" else re.escape(inner)).replace("\\-", "-") + "]")
            i = j + 1
        else:
            out.append(re.escape(g[i]))
            i += 1
    pattern = re.compile("".join(out), re.DOTALL)
    whole = "/" in glob

    def test(path: str) -> bool:
        p = path.casefold()
        candidates = [p] if whole else [p.rsplit("/", 1)[-1]]
        return any(pattern.fullmatch(c) or pattern.fullmatch(c.removesuffix(".md")) for c in candidates)

    return test


def _within_section(text: str, heading: str, change: Callable[[str], str]) -> str:
    """Apply an exact-context edit to one section only (the same text elsewhere is not a match)."""
    try:
        sections = md.read_sections(text, [md.normalize_heading(heading)])
    except NotFoundError as exc:
        raise NotFoundError(f"toc: the manual has no section '{heading}'", hint=exc.hint) from exc
    if len(sections) > 1:
        raise ValidationError(f"toc: {len(sections)} sections are headed '{heading}'",
                              hint="Give a more specific heading.")
    section = sections[0]["content"]
    start = text.index(section)
    return text[:start] + change(section) + text[start + len(section):]
