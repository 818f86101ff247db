"""The three-way merge that keeps both of an editor's saves when they race a refused change."""

from memloci.markdown.merge3 import merge3

BASE = b"# a\n- first\n- second\n\n## Hand\nold\n"


def test_edits_to_different_lines_are_both_kept():
    ours = BASE.replace(b"- second\n", b"")  # the refused change taken out again
    theirs = BASE.replace(b"## Hand\n", b"## Hand\nnew line\n")
    assert merge3(BASE, ours, theirs) == b"# a\n- first\n\n## Hand\nnew line\nold\n"


def test_the_same_edit_on_both_sides_is_kept_once():
    edit = BASE.replace(b"old\n", b"older\n")
    assert merge3(BASE, edit, edit) == edit


def test_insertions_at_the_same_point_are_both_kept_ours_first():
    ours = BASE.replace(b"## Hand\n", b"## Hand\none\n")
    theirs = BASE.replace(b"## Hand\n", b"## Hand\ntwo\n")
    assert merge3(BASE, ours, theirs) == BASE.replace(b"## Hand\n", b"## Hand\none\ntwo\n")


def test_different_edits_of_the_same_line_are_a_conflict():
    assert merge3(BASE, BASE.replace(b"old", b"one"), BASE.replace(b"old", b"two")) is None


def test_one_side_unchanged_gives_the_other():
    theirs = BASE + b"tail\n"
    assert merge3(BASE, BASE, theirs) == theirs
    assert merge3(BASE, theirs, BASE) == theirs


def test_bytes_without_a_final_newline_and_empty_files_are_exact():
    assert merge3(b"", b"a", b"") == b"a"
    assert merge3(b"x\ny", b"x\ny", b"w\nx\ny") == b"w\nx\ny"
    assert merge3(b"x\r\ny\r\n", b"x\r\nz\r\ny\r\n", b"x\r\ny\r\n") == b"x\r\nz\r\ny\r\n"
