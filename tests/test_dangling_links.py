"""markdown/dangling.py: where a document's links to gone names are, and the document without
them: a relations entry's bytes go, a link becomes its plain text, every other byte stays, and
an edit that cannot keep them is refused naming the key."""

from __future__ import annotations

import pytest

from memloci.core.errors import ValidationError
from memloci.core.model import name_key
from memloci.markdown.dangling import places, unlinked


def gone(target: str) -> bool:
    return name_key(target) in {"gone", "lost"}


@pytest.mark.parametrize(("before", "after"), [
    ("# A\n\n[[Gone]] [[gone|label]] [[Gone|]] [[dir/Gone.md#Part]] ![[Lost]] [[Kept]]\n",
     "# A\n\nGone label Gone dir/Gone.md#Part Lost [[Kept]]\n"),
    ("# A\n\n| who | note |\n|---|---|\n| [[Gone\\|G]] | `[[Gone]]` |\n", "# A\n\n| who | note |\n|---|---|\n| G | `[[Gone]]` |\n"),
    ("# A\n\n~~~\n[[Gone]]\n~~~\n", "# A\n\n~~~\n[[Gone]]\n~~~\n"),
    ("---\nrelations:\n- {type: a, to: Gone}\n- {type: b, to: Kept}  # keep\n---\n# A\n",
     "---\nrelations:\n- {type: b, to: Kept}  # keep\n---\n# A\n"),
    ("---\nrelations: [ {type: a, to: 'Lost'} ]\ntags: [x]\n---\n# A\n", "---\nrelations: []\ntags: [x]\n---\n# A\n"),
    ("---\nsee: \"notes on [[Gone]] and [[Kept]]\"  # why\n---\n# A\n",
     "---\nsee: \"notes on Gone and [[Kept]]\"  # why\n---\n# A\n"),
    ("---\nowner: >\n  [[Lost|Sam]]\n---\n# A\n", "---\nowner: >\n  Sam\n---\n# A\n"),
])
def test_only_the_links_bytes_change(before, after):
    assert unlinked(before, gone, name_key) == after
    assert places(after, gone) == []  # nothing dangles any more (links in code are no links)


def test_places_name_the_line_and_what_is_left():
    text = "---\nrelations:\n  - {type: a, to: Gone}\nsee: '[[Lost]]'\n---\n# A\n\nx\n[[Gone|G]]\n"
    assert [(p.where, p.relation_type, p.target, p.line, p.becomes) for p in places(text, gone)] == [
        ("relations", "a", "Gone", 3, None), ("property:see", "see", "Lost", 4, "Lost"),
        ("body", "links_to", "Gone", 9, "G")]
    assert [p.where for p in places(text, gone, body_links=False)] == ["relations"]


def test_a_form_memloci_does_not_edit_is_refused():
    with pytest.raises(ValidationError, match="relations: written in a form"):
        unlinked("---\nrelations:\n  knows: [Gone]\n---\n# A\n", gone, name_key)
