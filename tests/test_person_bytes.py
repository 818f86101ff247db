"""Whatever memloci adds to a person's note, removing it again (in any order) gives back the
note's exact bytes; so does undoing each step, newest first. Notes are written the way people
write them: with or without front matter, their own `## Observations` list or relations,
CRLF, no final newline, blank lines at the end. (An addition is taken back by a removal, not by
undo; each removal is undone and done again.)"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import ObservationBatch, RelationInput
from memloci.service.facade import MemoryService

FRONT_MATTERS = ["", "---\ntype: person\n---\n", "---\naliases: [Noa]  # a comment\ntags:\n- x\n---\n",
                 "---\nrelations: []\n---\n", "---\nrelations:\n  - {type: likes, to: Target}\n---\n",
                 "---\nrelations:\n---\n", "---\n---\n"]
BODY_LINES = ["# Note\n", "Some text.\n", "\n", "## Notes\n", "- a list item\n", "## Observations\n",
              "- written by hand\n", "  continued\n", "## Relations\n", "See [[Target]].\n"]
OBSERVATIONS = ["alpha", "beta two", "gamma, with a comma"]
RELATION_TYPES = ["knows", "uses", "likes"]


@st.composite
def notes(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(FRONT_MATTERS)) + "".join(draw(st.lists(st.sampled_from(BODY_LINES), max_size=6)))
    text += "\n" * draw(st.integers(0, 2))
    if draw(st.booleans()):
        text = text.rstrip("\n")
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text.encode("utf-8")


steps = st.lists(st.tuples(st.sampled_from(["observation", "relation"]), st.booleans(), st.integers(0, 2)),
                 min_size=1, max_size=6)


def _apply(service: MemoryService, kind: str, add: bool, pick: int) -> None:
    if kind == "observation":
        batch = [ObservationBatch("Note", (OBSERVATIONS[pick],))]
        service.add_observations(batch) if add else service.delete_observations(batch)
    else:
        relation = [RelationInput("Note", RELATION_TYPES[pick], "Target")]
        service.create_relations(relation) if add else service.delete_relations(relation)


def _remove(service: MemoryService, path: Path, kind: str, pick: int) -> None:
    """Remove one thing; undo the removal (the bytes before come back); remove it again (the
    same bytes as the first time)."""
    had = path.read_bytes()
    _apply(service, kind, False, pick)
    after = path.read_bytes()
    if after == had:
        return
    service.undo(service.history(limit=1)[0].id)
    assert path.read_bytes() == had
    _apply(service, kind, False, pick)
    assert path.read_bytes() == after


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(note=notes(), added=steps, removal_order=st.randoms(use_true_random=False))
def test_removing_what_memloci_added_gives_back_the_notes_bytes(note, added, removal_order):
    folder = Path(tempfile.mkdtemp())
    try:
        (folder / "Note.md").write_bytes(note)
        (folder / "Target.md").write_bytes(b"# Target\n")
        service = MemoryService(LibraryRegistry([LibrarySpec("v", folder, "markdown")]))
        try:
            start = {o.content for o in service.open_nodes(["Note"]).entities[0].observations}
            start_relations = {r.relation_type for r in service.find_relations(from_entity="Note")}
            ours = {"observation": set[int](), "relation": set[int]()}
            for kind, add, pick in added:
                if kind == "observation" and OBSERVATIONS[pick] in start or \
                        kind == "relation" and RELATION_TYPES[pick] in start_relations:
                    continue  # the person's own: not memloci's to remove
                if add:
                    _apply(service, kind, True, pick)
                    ours[kind].add(pick)
                else:
                    _remove(service, folder / "Note.md", kind, pick)
                    ours[kind].discard(pick)
            # Remove every addition still there, in a random order.
            left = [(kind, pick) for kind in ours for pick in ours[kind]]
            removal_order.shuffle(left)
            for kind, pick in left:
                _remove(service, folder / "Note.md", kind, pick)
            assert (folder / "Note.md").read_bytes() == note
        finally:
            service.close()
    finally:
        shutil.rmtree(folder)


def test_a_heading_memloci_added_goes_with_its_last_observation(tmp_path):
    """The reported case: add_observations then delete_observations on a person's note."""
    note = b"# Anna\n\nMet at the conference.\n"
    (tmp_path / "Anna.md").write_bytes(note)
    service = MemoryService(LibraryRegistry([LibrarySpec("v", tmp_path, "markdown")]))
    try:
        service.add_observations([ObservationBatch("Anna", ("likes tea", "lives in Lyon"))])
        assert b"## Observations\n- likes tea" in (tmp_path / "Anna.md").read_bytes()
        service.delete_observations([ObservationBatch("Anna", ("likes tea",))])
        service.create_relations([RelationInput("Anna", "knows", "Anna")])
        service.delete_observations([ObservationBatch("Anna", ("lives in Lyon",))])
        assert b"## Observations" not in (tmp_path / "Anna.md").read_bytes()
        service.delete_relations([RelationInput("Anna", "knows", "Anna")])
        assert (tmp_path / "Anna.md").read_bytes() == note
    finally:
        service.close()


def test_a_heading_the_person_wrote_stays(tmp_path):
    note = b"# Anna\n\n## Observations\n"
    (tmp_path / "Anna.md").write_bytes(note)
    service = MemoryService(LibraryRegistry([LibrarySpec("v", tmp_path, "markdown")]))
    try:
        service.add_observations([ObservationBatch("Anna", ("likes tea",))])
        service.delete_observations([ObservationBatch("Anna", ("likes tea",))])
        assert (tmp_path / "Anna.md").read_bytes() == note
        # Once the person edits the note, what memloci added to it is theirs too: it stays.
        (tmp_path / "Anna.md").write_bytes(b"# Anna\n\nMet in Lyon.\n")
        service.store("v").sync()
        service.add_observations([ObservationBatch("Anna", ("likes tea",))])
        (tmp_path / "Anna.md").write_bytes((tmp_path / "Anna.md").read_bytes().replace(b"Met", b"Seen"))
        service.store("v").sync()
        service.delete_observations([ObservationBatch("Anna", ("likes tea",))])
        assert (tmp_path / "Anna.md").read_bytes() == b"# Anna\n\nSeen in Lyon.\n\n## Observations\n"
    finally:
        service.close()
