"""The entity document: parse/render round trips, links, TOC, sections and context-matched edits."""

from __future__ import annotations

import pytest

from memloci.core.errors import NotFoundError, ValidationError
from memloci.markdown.document import (
    KNOWN_KEYS,
    EntityDocument,
    add_to_section,
    delete_exact,
    normalize_heading,
    parse_document,
    read_sections,
    remove_empty_section,
    render_document,
    replace_exact,
    replace_section,
    rewrite_wikilinks,
    set_observations,
    toc,
    wikilinks,
)

EXAMPLE = """\
---
type: project
aliases: [pyproj]
tags: [python]
relations:
  - {type: uses, to: fastapi}
created: 2026-11-21T04:50:00Z
modified: 2026-11-21T04:50:00Z
---
# python-project

## Observations
- Started development on 2024-01-29
- Uses FastAPI for the HTTP layer #backend

## Notes
Free Markdown sections, read by TOC and edited by section.
"""


def fields(doc: EntityDocument) -> tuple:
    return (doc.name, doc.entity_type, doc.aliases, doc.tags, doc.relations, doc.observations,
            doc.created, doc.modified, doc.extra)


# ---------------------------------------------------------------- parse


def test_parse_design_example():
    doc = parse_document(EXAMPLE, fallback_name="file-name")
    assert doc.name == "python-project"
    assert doc.entity_type == "project"
    assert doc.aliases == ["pyproj"]
    assert doc.tags == ["python"]
    assert doc.relations == [("uses", "fastapi")]
    assert doc.observations == ["Started development on 2024-01-29", "Uses FastAPI for the HTTP layer #backend"]
    assert doc.created == "2026-11-21T04:50:00Z"
    assert doc.modified == "2026-11-21T04:50:00Z"
    assert doc.extra == []
    assert doc.body.startswith("## Observations\n- Started")
    assert doc.body.endswith("## Notes\nFree Markdown sections, read by TOC and edited by section.\n")


def test_design_example_renders_byte_identical():
    assert render_document(parse_document(EXAMPLE, fallback_name="x")) == EXAMPLE


def test_known_keys():
    assert KNOWN_KEYS == ("name", "type", "aliases", "tags", "relations", "created", "modified")


def test_crlf_and_bom_are_normalized():
    doc = parse_document("\ufeff" + EXAMPLE.replace("\n", "\r\n"), fallback_name="x")
    assert doc.name == "python-project"
    assert doc.entity_type == "project"
    assert "\r" not in doc.body
    assert len(doc.observations) == 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ("---\nname: From Meta\n---\n# Title\nbody\n", "From Meta"),
        ("---\ntype: x\n---\n\n\n# Title Here #\nbody\n", "Title Here"),
        ("# Only Title\n", "Only Title"),
        ("## Not an H1\ntext\n", "fallback"),
        ("Plain text first\n# Later H1\n", "fallback"),
        ("", "fallback"),
        ("---\nname: ''\n---\n# T\n", "T"),
        ("```\n# in code\n```\n", "fallback"),
    ],
)
def test_name_fallbacks(text, expected):
    assert parse_document(text, fallback_name="fallback").name == expected


def test_title_line_is_not_body_but_other_text_is():
    doc = parse_document("---\ntype: a\n---\n\n# T\n\n\nfirst line\n", fallback_name="x")
    assert doc.body == "first line\n"
    doc = parse_document("\n\nintro\n# H1 later\n", fallback_name="x")
    assert doc.body == "intro\n# H1 later\n"


def test_defaults_without_front_matter():
    doc = parse_document("# N\ntext\n", fallback_name="x")
    assert (doc.entity_type, doc.aliases, doc.tags, doc.relations, doc.created, doc.extra) == ("note", [], [], [], None, [])


def test_unclosed_front_matter_is_body():
    doc = parse_document("---\ntype: x\n# T\n", fallback_name="fb")
    assert doc.entity_type == "note"
    assert doc.body.startswith("---\n")


def test_aliases_and_tags_accept_a_single_string():
    doc = parse_document("---\naliases: one\ntags: [a, 2, yes]\n---\n", fallback_name="x")
    assert doc.aliases == ["one"]
    assert doc.tags == ["a", "2", "true"]


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("relations:\n  - {type: uses, to: fastapi}\n  - {relation_type: part_of, to: web}\n",
         [("uses", "fastapi"), ("part_of", "web")]),
        ("relations:\n  - relationType: knows\n    to: Bob\n", [("knows", "Bob")]),
        ("relations:\n  uses: [a, b]\n  owns: c\n", [("uses", "a"), ("uses", "b"), ("owns", "c")]),
        ("relations: []\n", []),
        ("relations:\n", []),
    ],
)
def test_relation_forms(yaml_text, expected):
    assert parse_document(f"---\n{yaml_text}---\n", fallback_name="x").relations == expected


@pytest.mark.parametrize(
    "yaml_text, where",
    [
        ("relations: fastapi\n", "relations:"),
        ("relations:\n  - fastapi\n", "relations[0]"),
        ("relations:\n  - {type: uses}\n", "relations[0]"),
        ("relations:\n  - {type: uses, to: {a: 1}}\n", "relations[0].to"),
        ("tags: {a: 1}\n", "tags"),
        ("type: [a, b]\n", "type"),
    ],
)
def test_bad_known_values_name_the_field(yaml_text, where):
    with pytest.raises(ValidationError) as err:
        parse_document(f"---\n{yaml_text}---\n", fallback_name="x")
    assert where in err.value.message


def test_bad_yaml_reports_the_line():
    text = "---\ntype: project\nowner: me\ntags: [a, b\nother: 1\n---\n# T\n"
    with pytest.raises(ValidationError) as err:
        parse_document(text, fallback_name="x")
    # The parser notices the unclosed list at the closing `---`, and says where the list began.
    assert err.value.message.startswith("front matter: invalid YAML at line 5 (while parsing a flow sequence")
    assert "starts at line 4)" in err.value.message
    with pytest.raises(ValidationError, match="at line 3"):
        parse_document("---\ntype: a\nkey: : : [\n---\n", fallback_name="x")


def test_front_matter_must_be_a_mapping():
    with pytest.raises(ValidationError, match="front matter: must be a mapping"):
        parse_document("---\n- a\n- b\n---\n", fallback_name="x")


def test_timestamps_become_iso_strings():
    doc = parse_document(
        "---\ncreated: 2026-11-21 04:50:00+02:00\nmodified: 2026-11-21\n---\n", fallback_name="x"
    )
    assert doc.created == "2026-11-21T04:50:00+02:00"
    assert doc.modified == "2026-11-21"
    doc = parse_document("---\ncreated: '2026-11-21T04:50:00Z'\nmodified: 2026-11-21T04:50:00.5Z\n---\n", fallback_name="x")
    assert doc.created == "2026-11-21T04:50:00Z"
    assert doc.modified == "2026-11-21T04:50:00.500000Z"


UNKNOWN = """\
---
type: project
# describes custom
custom:
  nested:
    deep: 1
  # a comment inside the block
  list:
    - x
    - y
tags: [a]
status: draft   # trailing comment
weird-list:
- one
- two
---
# T
"""


def test_unknown_keys_are_kept_verbatim():
    doc = parse_document(UNKNOWN, fallback_name="x")
    assert doc.tags == ["a"]
    assert doc.extra == [
        "# describes custom\ncustom:\n  nested:\n    deep: 1\n  # a comment inside the block\n  list:\n    - x\n    - y\n",
        "status: draft   # trailing comment\n",
        "weird-list:\n- one\n- two\n",
    ]
    out = render_document(doc)
    for block in doc.extra:
        assert block in out
    again = parse_document(out, fallback_name="x")
    assert fields(again) == fields(doc)
    assert render_document(again) == out


def test_unknown_keys_in_a_layout_the_scanner_cannot_follow_keep_their_values():
    doc = parse_document("---\n{type: a, color: red}\n---\n", fallback_name="x")
    assert doc.entity_type == "a"
    assert doc.extra == ["color: red\n"]


# ---------------------------------------------------------------- observations


def test_observations_with_continuation_lines():
    body = (
        "## Observations\n"
        "- first\n"
        "  second line\n"
        "    indented more\n"
        "* star item\n"
        "Some prose that is not an item.\n"
        "\n"
        "```\n- not an item (code)\n```\n"
        "- last\n"
        "### Sub\n"
        "- belongs to Sub\n"
    )
    doc = parse_document("# N\n" + body, fallback_name="x")
    assert doc.observations == ["first\nsecond line\n  indented more", "star item", "last"]


def test_observations_heading_is_matched_normalized_at_levels_2_to_6():
    assert parse_document("### OBSERVATIONS ##\n- a\n", fallback_name="x").observations == ["a"]
    assert parse_document("# T\n# Observations\n- a\n", fallback_name="x").observations == []
    assert parse_document("## Notes\n- a\n", fallback_name="x").observations == []


def test_a_fence_inside_an_observation_ends_with_the_item():
    text = "# T\n## Observations\n- a\n  ```\n  code\n- b\n\n## Notes\n- not an observation\n"
    doc = parse_document(text, fallback_name="x")
    assert doc.observations == ["a\n```\ncode", "b"]
    assert toc(text)[-1] == {"heading": "Notes", "level": 2}


def test_thematic_break_is_not_an_observation():
    assert parse_document("## Observations\n- a\n* * *\n- - -\n", fallback_name="x").observations == ["a"]


def test_set_observations_replaces_items_and_keeps_prose():
    body = "Intro.\n\n## Observations\nWhat I know:\n- old one\n- old two\n  continued\n\nTrailing prose.\n\n## Notes\nkeep\n"
    out = set_observations(body, ["new", "multi\nline"])
    assert out == "Intro.\n\n## Observations\nWhat I know:\n- new\n- multi\n  line\n\nTrailing prose.\n\n## Notes\nkeep\n"


def test_set_observations_empty_list_keeps_heading_and_prose():
    body = "## Observations\nProse.\n- a\n- b\n\n## Notes\n"
    assert set_observations(body, []) == "## Observations\nProse.\n\n## Notes\n"
    assert set_observations("## Notes\nx\n", []) == "## Notes\nx\n"


@pytest.mark.parametrize(
    "body, expected",
    [
        ("", "## Observations\n- a\n"),
        ("Intro paragraph.\n", "Intro paragraph.\n\n## Observations\n- a\n"),
        ("Intro paragraph.", "Intro paragraph.\n\n## Observations\n- a\n"),
        ("Intro.\n## Notes\nn\n", "Intro.\n\n## Observations\n- a\n\n## Notes\nn\n"),
        ("Intro.\n\n## Notes\nn\n", "Intro.\n\n## Observations\n- a\n\n## Notes\nn\n"),
        ("## Notes\nn\n", "## Observations\n- a\n\n## Notes\nn\n"),
        ("# H1 in body\ntext\n", "# H1 in body\ntext\n\n## Observations\n- a\n"),
        ("## Observations\n## Notes\n", "## Observations\n- a\n\n## Notes\n"),
        ("## Observations\n\n## Notes\n", "## Observations\n- a\n\n## Notes\n"),
        ("## Observations", "## Observations\n- a\n"),
        ("```\n## Fake\n```\n", "```\n## Fake\n```\n\n## Observations\n- a\n"),
    ],
)
def test_set_observations_inserts_a_section(body, expected):
    assert set_observations(body, ["a"]) == expected


# ---------------------------------------------------------------- render


def test_render_minimal_and_key_order():
    doc = EntityDocument(
        name="n", entity_type="t", aliases=["al"], tags=["t1", "t2"], relations=[("uses", "x")],
        observations=["o"], created="2026-01-01T00:00:00Z", modified="2026-01-02T00:00:00Z", extra=["zzz: 1\n"],
    )
    assert render_document(doc) == (
        "---\ntype: t\naliases: [al]\ntags: [t1, t2]\nrelations:\n  - {type: uses, to: x}\n"
        "created: 2026-01-01T00:00:00Z\nmodified: 2026-01-02T00:00:00Z\nzzz: 1\n---\n# n\n\n## Observations\n- o\n"
    )
    assert render_document(EntityDocument(name="bare")) == "---\ntype: note\n---\n# bare\n"


def test_render_without_observations_adds_no_section():
    out = render_document(EntityDocument(name="n", body="Just prose.\n\n\n"))
    assert out == "---\ntype: note\n---\n# n\n\nJust prose.\n"
    assert "Observations" not in out


def test_render_keeps_multi_line_scalars_on_one_line():
    out = render_document(EntityDocument(name="multi\nline", entity_type="a\nb"))
    assert out == '---\nname: "multi\\nline"\ntype: "a\\nb"\n---\n# multi line\n'


def test_render_rejects_a_name_that_cannot_be_a_title():
    with pytest.raises(ValidationError, match="name"):
        render_document(EntityDocument(name="  "))


ROUND_TRIP = [
    EntityDocument(name="plain"),
    EntityDocument(name="a: b", entity_type="#x", aliases=["yes", "123", "it's", 'say "hi"'], tags=["a, b", "[x]"]),
    EntityDocument(name="x", relations=[("uses", "a: b"), ("part of", "{y}"), ("123", "no")]),
    EntityDocument(name="Ünïcode 名前", entity_type="人", tags=["日本語"]),
    EntityDocument(name="C #", observations=["trailing hashes"]),
    EntityDocument(name=" spaced ", observations=["o"]),
    EntityDocument(name="multi\nline name"),
    EntityDocument(name="n", observations=["one", "two\nthree", "  leading", "", "- nested", "with ```\n```"],
                   body="Intro.\n\n## Notes\ntext\n"),
    EntityDocument(name="n", created="2026-11-21T04:50:00Z", modified="yesterday"),
    EntityDocument(name="n", created="2026-11-21", modified="2026-11-21T04:50:00+02:00"),
    EntityDocument(name="n", created="2026-11-21T04:50:00", modified="'quoted'"),
    EntityDocument(name="n", extra=["custom:\n  a: 1\n  # comment\n", "other: [1, 2]\n", "# trailing comment\n"]),
    EntityDocument(name="n", body="## Observations\nProse stays.\n- a\n\n```\n# not a heading\n```\n", observations=["a"]),
    EntityDocument(name="n", body="\n\n## Observations\n- a\n- b\n", observations=["b", "c"]),
]


@pytest.mark.parametrize("doc", ROUND_TRIP, ids=lambda d: repr(d.name))
def test_round_trip(doc):
    out = render_document(doc)
    assert out.endswith("\n") and not out.endswith("\n\n")
    back = parse_document(out, fallback_name="fallback")
    assert fields(back) == fields(doc)
    assert out.count("\n---\n") == 1  # nothing spilled out of the front matter
    assert render_document(back) == out


IDEMPOTENT = [
    EXAMPLE,
    UNKNOWN,
    "no front matter\n* star\n- dash\n",
    "---\ntype: a\n---\n# T\n\n## Observations\nprose\n- a\nmore prose\n- b\n## Next\n",
    "---\ntags: one\naliases: [x]\ncreated: 2026-11-21 04:50:00\nrelations:\n  uses: [a, b]\n---\n# T\n",
    "# T\r\n\r\n## Observations\r\n- a\r\n",
    "---\ntype: a\n---\n# T\n\n## Notes\n\n\n",
]


@pytest.mark.parametrize("text", IDEMPOTENT)
def test_rendering_a_parsed_rendered_document_is_byte_identical(text):
    once = render_document(parse_document(text, fallback_name="fb"))
    twice = render_document(parse_document(once, fallback_name="other"))
    assert twice == once


# ---------------------------------------------------------------- wikilinks


def test_wikilinks_forms_order_and_dedup():
    text = "See [[Alpha]], [[ beta |label]], [[gamma#Heading]], [[delta#h|l]], ![[embed.png]], [[alpha]], [[]], [[#local]]."
    assert wikilinks(text) == ["Alpha", "beta", "gamma", "delta", "embed.png"]


def test_wikilinks_skip_code():
    text = (
        "[[real]] `[[inline]]` ``a ` [[double]]``\n"
        "```\n[[fenced]]\n```\n"
        "~~~python\n[[tilde]]\n~~~\n"
        "unmatched ` tick [[after-tick]]\n"
        "\n[[next]]\n"
        "| table | [[cell\\|label]] |\n"
    )
    assert wikilinks(text) == ["real", "after-tick", "next", "cell"]


def test_rewrite_wikilinks_keeps_headings_labels_and_code():
    text = "[[Old]] [[ old |Label]] [[OLD#Sec|l]] ![[old]] [[older]] `[[old]]`\n```\n[[old]]\n```\n"
    assert rewrite_wikilinks(text, "old", "New Name") == (
        "[[New Name]] [[ New Name |Label]] [[New Name#Sec|l]] ![[New Name]] [[older]] `[[old]]`\n```\n[[old]]\n```\n"
    )
    assert rewrite_wikilinks("nothing here", "old", "new") == "nothing here"


@pytest.mark.parametrize("new", ["", "a|b", "a]]", "a#b"])
def test_rewrite_wikilinks_rejects_bad_names(new):
    with pytest.raises(ValidationError, match="new"):
        rewrite_wikilinks("[[old]]", "old", new)


# ---------------------------------------------------------------- TOC and sections


def test_normalize_heading():
    assert normalize_heading("## My  Title ") == "my title"
    assert normalize_heading("TITLE") == "title"
    assert normalize_heading("### Closed ###") == "closed"
    assert normalize_heading("#tag") == "#tag"


DOC = """\
---
type: project
# yaml comment, not a heading
---
# Title

Intro.

## Architecture
Arch text.

### Storage
SQLite.

#### Deep
deep text

### Search
BM25.

## Architecture Decisions
ADR.

```
## Not a heading
```

## Notes ##
Last.
"""


def test_toc():
    assert toc(DOC) == [
        {"heading": "frontmatter", "level": 0},
        {"heading": "Title", "level": 1},
        {"heading": "Architecture", "level": 2},
        {"heading": "Storage", "level": 3},
        {"heading": "Deep", "level": 4},
        {"heading": "Search", "level": 3},
        {"heading": "Architecture Decisions", "level": 2},
        {"heading": "Notes", "level": 2},
    ]
    assert toc("text\n#nospace\n  # indented\n####### seven\n") == []


def test_fences_need_a_matching_close():
    text = "````\n```python\n# not a heading\n```\n````\n## Real\n~~~\n## tilde code\n```\n~~~~\n## Also real\n"
    assert [h["heading"] for h in toc(text)] == ["Real", "Also real"]
    # three backticks with a backtick later on the line are inline code, not a fence
    assert [h["heading"] for h in toc("``` inline ``` text\n## After\n")] == ["After"]


def test_read_sections_nested_levels():
    (arch,) = read_sections(DOC, ["architecture"])
    assert arch["level"] == 2
    assert arch["content"].startswith("## Architecture\nArch text.")
    assert arch["content"].endswith("### Search\nBM25.\n\n")
    (storage,) = read_sections(DOC, ["## STORAGE"])
    assert storage["content"] == "### Storage\nSQLite.\n\n#### Deep\ndeep text\n\n"


def test_read_sections_globs_frontmatter_order_and_no_duplicates():
    out = read_sections(DOC, ["notes", "arch*", "frontmatter", "architecture"])
    assert [s["heading"] for s in out] == ["frontmatter", "Architecture", "Architecture Decisions", "Notes"]
    assert out[0] == {"heading": "frontmatter", "level": 0, "content": "type: project\n# yaml comment, not a heading\n"}
    assert out[2]["content"] == "## Architecture Decisions\nADR.\n\n```\n## Not a heading\n```\n\n"
    assert out[3]["content"] == "## Notes ##\nLast.\n"


def test_read_sections_missing_glob():
    with pytest.raises(NotFoundError) as err:
        read_sections(DOC, ["arch*", "nope*"])
    assert err.value.message == "section_globs: no heading matches 'nope*'"
    assert "## Architecture" in err.value.hint
    with pytest.raises(NotFoundError):
        read_sections("# T\n", ["frontmatter"])


# ---------------------------------------------------------------- exact edits


def test_replace_exact_one_match():
    assert replace_exact(DOC, "BM25.", "BM25 and vectors.").count("BM25 and vectors.") == 1
    assert replace_exact("a\nb\n", "a\nb", "c") == "c\n"


def test_replace_exact_zero_matches():
    with pytest.raises(NotFoundError) as err:
        replace_exact(DOC, "no such text", "x")
    assert err.value.message == "old_content: not found in the document"
    assert "old_content" in err.value.hint


def test_replace_exact_zero_matches_shows_whitespace_candidate():
    with pytest.raises(NotFoundError) as err:
        replace_exact("line one\nArch   text.\n", "arch text.", "x")
    assert "old_content" in err.value.message
    assert "line 2" in err.value.message and "Arch   text." in err.value.message
    assert err.value.details["candidates"] == [{"line": 2, "excerpt": "Arch   text."}]


def test_replace_exact_many_matches_lists_candidates():
    text = "alpha\nthe item\nbeta\nthe item again\n"
    with pytest.raises(ValidationError) as err:
        replace_exact(text, "the item", "x", field="old_text")
    msg = err.value.message
    assert msg.startswith("old_text: matches 2 places; give more surrounding text")
    assert "line 2: 'the item'" in msg and "line 4: 'the item again'" in msg
    assert [c["line"] for c in err.value.details["candidates"]] == [2, 4]


def test_replace_exact_counts_overlapping_matches_and_caps_the_list():
    with pytest.raises(ValidationError, match="matches 2 places"):
        replace_exact("aaa", "aa", "b")
    with pytest.raises(ValidationError) as err:
        replace_exact("x\n" * 200, "x", "y")
    assert "matches 50+ places" in err.value.message
    assert len(err.value.details["candidates"]) == 10


def test_candidate_excerpt_of_a_long_line_is_short():
    line = "a" * 500 + " needle " + "b" * 500
    with pytest.raises(ValidationError) as err:
        replace_exact(line + "\n" + line, "needle", "x")
    excerpt = err.value.details["candidates"][0]["excerpt"]
    assert "needle" in excerpt and len(excerpt) <= 82


def test_empty_old_is_rejected():
    with pytest.raises(ValidationError, match="old_content: must not be empty"):
        replace_exact("text", "", "x")
    with pytest.raises(ValidationError, match="content_to_delete: must not be empty"):
        delete_exact("text", "")


@pytest.mark.parametrize(
    "text, old, expected",
    [
        ("a\nX\nb\n", "X\n", "a\nb\n"),
        ("a\nX\nb\n", "X", "a\nb\n"),
        ("a\n\nX\n\nb\n", "X\n", "a\n\nb\n"),
        ("a\n\nX\nY\n\nb\n", "X\nY", "a\n\nb\n"),
        ("a\n\nX\n", "X\n", "a\n"),
        ("a\n\nX", "X", "a\n"),
        ("X\n\nrest\n", "X\n", "rest\n"),
        ("keep this word here\n", " word", "keep this here\n"),
        ("Hello world\n", "Hello ", "world\n"),
        ("a\r\nX\r\nb\r\n", "X", "a\r\nb\r\n"),
    ],
)
def test_delete_exact(text, old, expected):
    assert delete_exact(text, old) == expected


def test_delete_exact_errors_name_the_field():
    with pytest.raises(NotFoundError, match="content_to_delete"):
        delete_exact("abc", "zzz")
    with pytest.raises(ValidationError, match="content_to_delete: matches 2 places"):
        delete_exact("ab ab", "ab")


# ---------------------------------------------------------------- section edits

SECTIONS = "# T\n\n## Title\nline one\n\n### Sub\nsub text\n\n## Next\nnext text\n"


@pytest.mark.parametrize("section", ["## Title", "title", "TITLE", "  ##   title  "])
def test_add_to_section_existing_normalized(section):
    assert add_to_section(SECTIONS, section, "added") == (
        "# T\n\n## Title\nline one\n\n### Sub\nsub text\nadded\n\n## Next\nnext text\n"
    )


def test_add_to_section_keeps_one_blank_line_before_next_heading():
    assert add_to_section("## A\n- x\n## B\n", "a", "- y\n\n\n") == "## A\n- x\n- y\n\n## B\n"
    assert add_to_section("## A\n\n\n\n## B\n", "a", "text") == "## A\ntext\n\n## B\n"
    assert add_to_section("## A\n- x", "a", "- y") == "## A\n- x\n- y\n"
    assert add_to_section("## A\n- x\n\n\n", "a", "\nnew paragraph") == "## A\n- x\n\nnew paragraph\n"


def test_add_to_section_creates_a_missing_section_at_the_end():
    assert add_to_section("# T\n\nintro\n", "Ideas", "- one") == "# T\n\nintro\n\n## Ideas\n\n- one\n"
    assert add_to_section("# T\nintro", "## Ideas", "- one") == "# T\nintro\n\n## Ideas\n\n- one\n"
    assert add_to_section("", "ideas", "x") == "## ideas\n\nx\n"
    assert add_to_section("# T\n", "### Deep One", "x") == "# T\n\n### Deep One\n\nx\n"
    # a heading inside code does not count
    assert add_to_section("```\n## Ideas\n```\n", "Ideas", "x") == "```\n## Ideas\n```\n\n## Ideas\n\nx\n"


def test_add_to_section_errors():
    with pytest.raises(ValidationError) as err:
        add_to_section("## A\n\n### a\n", "a", "x")
    assert err.value.message.startswith("section: 2 headings match 'a'")
    assert "line 1: ## A" in err.value.message and "line 3: ### a" in err.value.message
    with pytest.raises(ValidationError, match="section: the front matter"):
        add_to_section("---\ntype: a\n---\n", "frontmatter", "x")
    with pytest.raises(ValidationError, match="new_content"):
        add_to_section("## A\n", "a", "\n\n")
    with pytest.raises(ValidationError, match="section: must name a heading"):
        add_to_section("## A\n", "##", "x")


def test_replace_section_keeps_level_and_replaces_subsections():
    out = replace_section(SECTIONS, "title", "Renamed", "new body\n\n\n")
    assert out == "# T\n\n## Renamed\nnew body\n\n## Next\nnext text\n"


def test_replace_section_level_from_new_heading():
    assert replace_section(SECTIONS, "## Sub", "#### Deeper", "b") == (
        "# T\n\n## Title\nline one\n\n#### Deeper\nb\n\n## Next\nnext text\n"
    )
    assert replace_section(SECTIONS, "next", "# Top", "") == "# T\n\n## Title\nline one\n\n### Sub\nsub text\n\n# Top\n"


def test_replace_section_errors():
    with pytest.raises(NotFoundError) as err:
        replace_section(SECTIONS, "missing", "x", "y")
    assert err.value.message == "old_heading: no heading matches 'missing'"
    assert "## Next" in err.value.hint
    with pytest.raises(ValidationError, match="old_heading: 2 headings match"):
        replace_section("## A\n## a\n", "a", "b", "c")
    with pytest.raises(ValidationError, match="new_heading"):
        replace_section(SECTIONS, "title", "##", "c")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("# T\n\n## Empty\n\n## Next\nx\n", "# T\n\n## Next\nx\n"),
        ("# T\n\n## Empty\n\n\n", "# T\n"),
        ("# T\nx\n## Empty", "# T\nx\n"),
        ("# T\n\n## Empty\ncontent\n", "# T\n\n## Empty\ncontent\n"),
        ("# T\n\n## Empty\n\n### Child\n", "# T\n\n## Empty\n\n### Child\n"),
        ("# T\n\n## Empty\n```\n```\n", "# T\n\n## Empty\n```\n```\n"),
        ("# T\n", "# T\n"),
    ],
)
def test_remove_empty_section(text, expected):
    assert remove_empty_section(text, "empty") == expected


def test_remove_empty_section_after_deleting_its_last_line():
    text = "# T\n\n## Observations\n- only one\n\n## Notes\nn\n"
    out = remove_empty_section(delete_exact(text, "- only one"), "## Observations")
    assert out == "# T\n\n## Notes\nn\n"


def test_edits_ignore_front_matter_and_leave_it_alone():
    text = "---\ntype: a\n# Ideas\n---\n# T\n"
    out = add_to_section(text, "Ideas", "x")
    assert out == "---\ntype: a\n# Ideas\n---\n# T\n\n## Ideas\n\nx\n"


def test_large_document_stays_fast():
    # Not a timing assert: a quadratic scan would take minutes here and trip the test timeout.
    sections = "".join(f"## S{i}\n- item {i} [[link{i % 50}]] `code`\n\n" for i in range(20000))
    text = "---\ntype: a\n---\n# Big\n\n" + sections
    assert len(toc(text)) == 20002
    assert len(read_sections(text, ["s*"])) == 20000
    assert len(wikilinks(text)) == 50
    assert add_to_section(text, "s19999", "end").endswith("- item 19999 [[link49]] `code`\nend\n")
    doc = parse_document(text, fallback_name="x")
    assert render_document(doc).count("## S") == 20000


# ---------------------------------------------------------------- in-place front matter edits


def test_front_matter_lists_keep_their_style():
    from memloci.markdown import frontmatter as fm

    y = ("title: \"Hello\"  # kept\ntags:\n  - a\n  - b\naliases: [x, \"y z\"]\n"
         "# about relations\nrelations:\n  - type: knows\n    to: bob\n")
    assert fm.set_list(y, "tags", ["a", "c"]) == y.replace("  - b\n", "  - c\n")
    assert fm.set_list(y, "aliases", ["y z", "w"]) == y.replace('[x, "y z"]', '["y z", w]')
    assert fm.set_scalar(y, "title", "New") == y.replace('"Hello"', '"New"')
    assert fm.set_scalar(y, "status", "draft") == y + "status: draft\n"
    assert fm.edit_relations(y, [("knows", "Bob")], [("likes", "cat")]) == y.replace(
        "  - type: knows\n    to: bob\n", "  - type: likes\n    to: cat\n")
    assert fm.rename_relation_targets(y, "BOB", "Ana") == y.replace("to: bob", "to: Ana")
    assert fm.with_front_matter("Body\n", lambda t: fm.set_scalar(t, "type", "x")) == "---\ntype: x\n---\nBody\n"
    # Items are compared as the parser reads them: `yes` is the tag "true" and stays spelled `yes`.
    assert fm.set_list("tags: [yes, 2024-01-02, a]\n", "tags", ["true", "2024-01-02", "b"]) == "tags: [yes, 2024-01-02, b]\n"


def test_observation_dates_ride_in_a_trailing_comment():
    doc = parse_document("## Observations\n- mine <!-- 2026-11-21T04:50:00Z -->\n- a person's line\n", fallback_name="n")
    assert doc.observations == ["mine", "a person's line"]
    assert doc.dates == {"mine": "2026-11-21T04:50:00Z"}
    assert "- mine <!-- 2026-11-21T04:50:00Z -->\n- a person's line\n" in render_document(doc)


def test_rewrite_wikilinks_keeps_folder_and_extension():
    assert rewrite_wikilinks("[[Old.md]] [[a/Old]] [[a/old.md|x]]", "old", "New") == "[[New.md]] [[a/New]] [[a/New.md|x]]"
