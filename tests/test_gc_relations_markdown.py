"""garbage_collect_relations in a Markdown library whose notes a person wrote: the preview names
each link to a note that no longer exists with its place and line; executing it changes exactly
those bytes (a `relations:` entry's lines go, a link becomes its plain text, in the body and in
front-matter values), leaves every other file alone, and undo gives back every byte."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ConflictError
from memloci.service.facade import MemoryService

ANNA = (
    "---\r\n"
    "aliases: [Annie]  # since school\r\n"
    "relations:\r\n"
    "  - {type: knows, to: Bob}\r\n"
    "  # old friends\r\n"
    "  - type: knows\r\n"
    "    to: Gone\r\n"
    "  - {type: likes, to: \"Acme\"}\r\n"
    "company: \"[[Gone|Gone Corp]]\"\r\n"
    "people: ['[[Bob]]', '[[gone]]']\r\n"
    "---\r\n"
    "# Anna\r\n"
    "\r\n"
    "Lunch with [[Gone]] and [[Bob|Bobby]]; see ![[Gone#Plans]].\r\n"
    "```\r\n"
    "[[Gone]] in code stays\r\n"
    "```\r\n"
    "A `[[Gone]]` span stays too. [[Acme]]\r\n"
)
ANNA_AFTER = (
    "---\r\n"
    "aliases: [Annie]  # since school\r\n"
    "relations:\r\n"
    "  - {type: knows, to: Bob}\r\n"
    "  # old friends\r\n"
    "  - {type: likes, to: \"Acme\"}\r\n"
    "company: \"Gone Corp\"\r\n"
    "people: ['[[Bob]]', 'gone']\r\n"
    "---\r\n"
    "# Anna\r\n"
    "\r\n"
    "Lunch with Gone and [[Bob|Bobby]]; see Gone#Plans.\r\n"
    "```\r\n"
    "[[Gone]] in code stays\r\n"
    "```\r\n"
    "A `[[Gone]]` span stays too. [[Acme]]\r\n"
)
BOB = "---\nrelations: [{type: knows, to: Anna}, {type: owes, to: 'Gone'}]\n---\n# Bob\n\nNo final newline [[Gone]]"
BOB_AFTER = "---\nrelations: [{type: knows, to: Anna}]\n---\n# Bob\n\nNo final newline Gone"
ACME = "# Acme\n\nStaff: [[Anna]], [[Bob]].\n"
ODD = "---\nrelations:\n  knows: [Gone]\n---\n# Odd\n\nA mapping of relations memloci does not edit. [[Gone]]\n"


def library(tmp_path):
    for name, text in (("Anna", ANNA), ("Bob", BOB), ("Acme", ACME), ("Odd", ODD)):
        (tmp_path / f"{name}.md").write_bytes(text.encode("utf-8"))
    return MemoryService(LibraryRegistry([LibrarySpec("v", tmp_path, "markdown")]))


def notes(tmp_path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(tmp_path.glob("*.md"))}


def test_a_persons_notes_lose_exactly_their_dangling_links(tmp_path):
    s = library(tmp_path)
    try:
        before = notes(tmp_path)
        preview = s.lifecycle.garbage_collect_relations()
        assert [(i["entity"], i["action"], i["where"], i["line"], i["text"].strip(), i.get("becomes"))
                for i in preview.items] == [
            ("Anna", "remove", "front matter relations", 6, "- type: knows", None),
            ("Anna", "unlink", "front matter company", 9, "[[Gone|Gone Corp]]", "Gone Corp"),
            ("Anna", "unlink", "front matter people", 10, "[[gone]]", "gone"),
            ("Anna", "unlink", "body", 14, "[[Gone]]", "Gone"),
            ("Anna", "unlink", "body", 14, "![[Gone#Plans]]", "Gone#Plans"),
            ("Bob", "remove", "front matter relations", 2, "relations: [{type: knows, to: Anna}, {type: owes, to: 'Gone'}]",
             None),
            ("Bob", "unlink", "body", 6, "[[Gone]]", "Gone"),
        ]
        # the note memloci cannot edit without touching other bytes is left, saying why
        assert [(o["entity"], "relations:" in o["why"]) for o in preview.offered] == [("Odd", True)]
        assert notes(tmp_path) == before

        done = s.lifecycle.execute_preview(preview.preview_id)
        after = notes(tmp_path)
        assert after["Anna.md"] == ANNA_AFTER.encode("utf-8")
        assert after["Bob.md"] == BOB_AFTER.encode("utf-8")
        assert after["Acme.md"] == before["Acme.md"] and after["Odd.md"] == before["Odd.md"]
        assert {(r.from_entity, r.relation_type, r.to_entity) for r in s.find_relations(from_entity="Anna")} == {
            ("Anna", "knows", "Bob"), ("Anna", "likes", "Acme"), ("Anna", "people", "Bob"),
            ("Anna", "links_to", "Bob"), ("Anna", "links_to", "Acme")}

        s.undo(done.change_id)
        assert notes(tmp_path) == before
        assert [(i["entity"], i["line"]) for i in s.lifecycle.garbage_collect_relations().items][:1] == [("Anna", 6)]
    finally:
        s.close()


def test_a_note_edited_on_disk_since_the_preview_refuses_it(tmp_path):
    s = library(tmp_path)
    try:
        preview = s.lifecycle.garbage_collect_relations()
        (tmp_path / "Bob.md").write_bytes(BOB.encode("utf-8") + b"\nMore.\n")
        s.store("v").sync()
        before = notes(tmp_path)
        with pytest.raises(ConflictError, match="'Bob' was changed since the preview; nothing was changed"):
            s.lifecycle.execute_preview(preview.preview_id)
        assert notes(tmp_path) == before
    finally:
        s.close()
