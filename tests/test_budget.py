"""Token-budgeted and compact reads: the estimate (core/tokens.py), the cuts, and the read tools'
replies under `max_tokens` and `compact` (mcp/budget.py), counted with the same estimate."""

from __future__ import annotations

import json

from conftest import Client, run_session
from hypothesis import given, settings
from hypothesis import strategies as st

from memloci.core.tokens import (
    ELLIPSIS,
    TextSize,
    boundary,
    clipped,
    estimate_tokens,
    extends,
    first_line,
    sentences,
    size_of,
)

ZWJ = "\u200d"
FAMILY = "\U0001F468" + ZWJ + "\U0001F469" + ZWJ + "\U0001F467"  # one emoji of five code points
E_ACUTE = "e\u0301"  # é as a letter and a combining accent
JAPAN = "\U0001F1EF\U0001F1F5"  # a flag: two regional indicators


# -- the estimate --------------------------------------------------------------------------

def test_latin_text_is_about_four_characters_a_token():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("We chose OAuth with PKCE.") == 7  # 25 characters
    assert estimate_tokens("Ünïcödé façade") == 4  # accented letters are narrow too


def test_cjk_characters_are_a_token_each():
    assert estimate_tokens("我们决定使用") == 6
    assert estimate_tokens("ひらがなカタカナ") == 8
    assert estimate_tokens("한국어") == 3
    assert estimate_tokens("。「」！") == 4  # CJK punctuation
    assert estimate_tokens("ＡＢＣ") == 3  # full-width forms


def test_mixed_text_adds_its_parts():
    assert estimate_tokens("OAuth 认证") == 2 + 2  # "OAuth " six narrow, two Han
    text = "我们决定使用 OAuth with PKCE。因为 mobile 需要它"
    assert size_of(text) == size_of(text[:10]) + size_of(text[10:])
    assert TextSize(3, 9).tokens == 3 + 3 and (TextSize(3, 9) - TextSize(1, 1)).tokens == 2 + 2


def test_emoji_are_a_token_each_and_their_joiners_and_accents_cost_nothing():
    assert estimate_tokens("\U0001F44D") == 1
    assert estimate_tokens("\U0001F44D\U0001F3FD") == 1  # with a skin tone
    assert estimate_tokens(FAMILY) == 3  # three people, two joiners
    assert estimate_tokens(JAPAN) == 2
    assert estimate_tokens(E_ACUTE * 4) == 1  # four narrow letters; the accents extend them
    assert estimate_tokens("\u2764\ufe0f") == 1  # a heart and its emoji presentation selector


# -- cuts ----------------------------------------------------------------------------------

def test_a_cut_never_splits_a_combining_sequence_an_emoji_a_flag_or_a_surrogate_pair():
    assert boundary(E_ACUTE * 3, 3) == 2 and boundary(E_ACUTE * 3, 1) == 0
    assert boundary(FAMILY * 2, 7) == 5 and boundary(FAMILY, 3) == 0
    assert boundary(JAPAN * 2, 3) == 2 and boundary(JAPAN * 2, 1) == 0 and boundary(JAPAN * 2, 2) == 2
    assert boundary("a\ud83d\ude00b", 2) == 1  # a surrogate pair left in a string stays whole
    assert clipped("abc " + E_ACUTE * 5, 7) == "abc " + E_ACUTE + ELLIPSIS
    assert clipped("short", 10) == "short"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(["a", " ", ".", "。", "\n", "我", "\u0301", ZWJ, "\ufe0f", "\U0001F468",
                                          "\U0001F1EF", "\U0001F3FD", "\ud83d", "\ude00"]), max_size=40),
       st.integers(min_value=0, max_value=45))
def test_every_cut_is_at_a_safe_boundary_and_sentences_join_back(text, at):
    cut = boundary(text, at)
    assert 0 <= cut <= min(at, len(text))
    if 0 < cut < len(text):
        assert not extends(text[cut]) and text[cut - 1] != ZWJ and not 0xD800 <= ord(text[cut - 1]) <= 0xDBFF
    assert "".join(sentences(text)) == text
    assert size_of(text) == size_of(text[:cut]) + size_of(text[cut:])


def test_sentences_end_at_stops_in_either_script_and_at_line_breaks():
    assert sentences("One. Two! Three? Four") == ["One. ", "Two! ", "Three? ", "Four"]
    assert sentences("第一句。第二句！第三句") == ["第一句。", "第二句！", "第三句"]
    assert sentences("a line\nanother line") == ["a line\n", "another line"]
    assert sentences("version 2.5 ships") == ["version 2.5 ships"]  # no white space: not a stop


def test_first_line_is_at_most_120_characters_and_marks_what_it_leaves_out():
    assert first_line("Only line") == "Only line"
    assert first_line("\n  Title  \nbody") == "Title" + ELLIPSIS
    long = first_line("word " * 60)
    assert len(long) <= 120 and long.endswith(ELLIPSIS) and long.startswith("word word")
    assert first_line(E_ACUTE * 200)[:-1] == E_ACUTE * 59  # 119 characters would split an accent
    assert first_line("   \n ") == ""


# -- the tools -----------------------------------------------------------------------------

LONG = ("The deploy runs on Fridays. It needs two approvals from the platform team. "
        "Rollbacks use the previous image tag. The pager rotation covers the first hour after it. ")
NOTES = [
    "Deploy checklist: " + LONG * 2,
    "部署在周五进行。需要平台团队的两次批准。回滚使用上一个镜像标签。部署后第一个小时有人值班。",
    "Deploy freeze in December. No deploy after the 15th. Exceptions need the CTO.",
    "A deploy note without any stop " + "and it goes on " * 40,
]


def cost(reply: dict) -> int:
    return estimate_tokens(json.dumps(reply, indent=2, ensure_ascii=False))


async def shown(c: Client, tool: str, **arguments) -> dict:
    """The reply's structured content, checked to be what its text content says."""
    structured, text = await c.ok(tool, **arguments)
    assert text == structured, f"{tool}: the text content is the structured content as JSON"
    return structured


def test_memory_reads_fit_their_budget_sentences_first(home):
    async def body(c: Client):
        for note in NOTES:
            await c.ok("store_memory", content=note, tags=["deploy"])
        whole = await shown(c, "retrieve_memory", query="deploy", n_results=4)
        assert len(whole["memories"]) == 4 and "truncated_to_tokens" not in whole
        for tool, arguments in (("retrieve_memory", {"query": "deploy", "n_results": 4}),
                                ("search_by_tag", {"tags": ["deploy"]}), ("list_memories", {})):
            # (a recall counts accesses, and the most used rank up: its order may change from call to call)
            ordered = tool != "retrieve_memory"
            full = await shown(c, tool, **arguments)
            big = await shown(c, tool, max_tokens=cost(full) + (10 if ordered else 100), **arguments)  # (scores move)
            assert sorted(m["content"] for m in big["memories"]) == sorted(m["content"] for m in full["memories"])
            assert "truncated_to_tokens" not in big, f"{tool}: a reply within its budget is left as it is"
            for budget in (100, 150, 250, 400, 700):
                fitted = await shown(c, tool, max_tokens=budget, **arguments)
                assert cost(fitted) <= budget, (tool, budget, cost(fitted))
                kept = fitted["memories"]
                assert fitted["truncated_to_tokens"] == budget and fitted["omitted"] == 4 - len(kept)
                originals = {m["content_hash"]: m["content"] for m in full["memories"]}
                hashes = [m["content_hash"] for m in full["memories"]]
                assert [m["content_hash"] for m in kept] == hashes[:len(kept)] if ordered else \
                    {m["content_hash"] for m in kept} <= set(hashes)
                for m in kept:
                    if m["content"] != originals[m["content_hash"]]:
                        assert m["content"].endswith(ELLIPSIS) and originals[m["content_hash"]].startswith(
                            m["content"][:-1]), m["content"]
                if fitted["omitted"]:
                    assert "max_tokens" in fitted["more"]
            if tool == "search_by_tag":  # the dropped ones are the next page
                fitted = await shown(c, tool, max_tokens=250, **arguments)
                assert fitted["is_truncated"] and fitted["next_offset"] == len(fitted["memories"])
        # sentence first: the first item stays whole while the lower ones lose trailing sentences
        ranked = await shown(c, "search_by_tag", tags=["deploy"])
        first = ranked["memories"][0]["content"]
        fitted = await shown(c, "search_by_tag", tags=["deploy"], max_tokens=cost(ranked) - 40)
        assert fitted["memories"][0]["content"] == first and fitted["omitted"] == 0
        cut = [m for m in fitted["memories"] if m["content"].endswith(ELLIPSIS)]
        assert cut and all(sentences(m["content"][:-1].rstrip())[-1].rstrip()[-1] in ".。" for m in cut), cut

    run_session(home, body)


def test_one_long_text_is_cut_by_characters_never_inside_a_character(home):
    async def body(c: Client):
        for unit in ("q\u0301", FAMILY, "认"):  # (a q with an accent has no composed form to become)
            await c.ok("store_memory", content=unit * 900, tags=[f"u{len(unit)}"])
            fitted = await shown(c, "search_by_tag", tags=[f"u{len(unit)}"], max_tokens=200)
            content = fitted["memories"][0]["content"]
            assert cost(fitted) <= 200 and content.endswith(ELLIPSIS) and fitted["omitted"] == 0
            kept = content[:-1]
            assert kept and len(kept) % len(unit) == 0 and kept == unit * (len(kept) // len(unit)), kept[-6:]

    run_session(home, body)


def test_compact_memories_and_their_details_by_hash(home):
    async def body(c: Client):
        for note in NOTES:
            await c.ok("store_memory", content=note, tags=["deploy"])
        await c.ok("store_memory", content="Title line\nsecond line\nthird line")
        for tool, arguments in (("retrieve_memory", {"query": "deploy", "n_results": 5}),
                                ("search_by_tag", {"tags": ["deploy"]}), ("list_memories", {})):
            compact = await shown(c, tool, compact=True, **arguments)
            assert compact["memories"] and "content_hashes" in compact["details"]
            for m in compact["memories"]:
                assert set(m) == {"content_hash", "content"} and len(m["content"]) <= 120 and "\n" not in m["content"]
        listed = await shown(c, "list_memories", compact=True, page_size=10)
        titled = next(m for m in listed["memories"] if m["content"].startswith("Title"))
        assert titled["content"] == "Title line" + ELLIPSIS
        hashes = [m["content_hash"] for m in listed["memories"]][::-1]
        details = await shown(c, "list_memories", content_hashes=[*hashes, "f" * 64])
        assert [m["content_hash"] for m in details["memories"]] == hashes and details["missing"] == ["f" * 64]
        assert {"tags", "created_at", "metadata"} <= set(details["memories"][0]) and not details["has_more"]
        assert NOTES[0].strip() in [m["content"] for m in details["memories"]]
        err = await c.error("list_memories", content_hashes=hashes, tags=["deploy"])
        assert err["code"] == "VALIDATION_ERROR" and err["message"].startswith("tags: not with content_hashes"), err
        compact_fitted = await shown(c, "list_memories", compact=True, max_tokens=150)
        assert cost(compact_fitted) <= 150 and compact_fitted["omitted"] == 5 - len(compact_fitted["memories"])

    run_session(home, body)


def entity(i: int, n: int = 4) -> dict:
    return {"name": f"svc-{i}", "entityType": "service",
            "observations": [f"Fact {j} of service {i} about deploys. It has a second sentence." for j in range(n)]}


def test_graph_reads_fit_their_budget_and_keep_relations_and_dates_in_step(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[entity(i) for i in range(8)])
        await c.ok("create_relations", relations=[{"from": f"svc-{i}", "to": f"svc-{i + 1}", "relationType": "calls"}
                                                  for i in range(7)])
        names = [f"svc-{i}" for i in range(8)]
        for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "deploys"}),
                                ("open_nodes", {"names": names})):
            full = await shown(c, tool, **arguments)
            for budget in (100, 200, 400, 800, 1500):
                fitted = await shown(c, tool, max_tokens=budget, **arguments)
                assert cost(fitted) <= budget, (tool, budget, cost(fitted))
                kept = [e["name"] for e in fitted["entities"]]
                assert kept == [e["name"] for e in full["entities"]][:len(kept)]
                if cost(full) > budget:
                    assert fitted["truncated_to_tokens"] == budget and fitted["omitted"] == 8 - len(kept)
                for e in fitted["entities"]:
                    if "observationDates" in e:
                        assert len(e["observationDates"]) == len(e["observations"])
                for r in fitted["relations"]:
                    ends = {r["from"], r["to"]} & set(kept)
                    assert ends == {r["from"], r["to"]} if tool == "read_graph" else ends, (tool, r, kept)
                if "why" in fitted:
                    assert set(fitted["why"]) <= set(kept)
                if fitted.get("omitted") and tool != "open_nodes":
                    assert fitted["is_truncated"] and fitted["next_offset"] == len(kept)
                if fitted.get("omitted") and tool == "open_nodes":
                    assert str(names[len(kept):]) in fitted["more"]

    run_session(home, body)


def test_compact_entities(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[entity(i) for i in range(3)] + [
            {"name": "empty", "entityType": "service", "observations": []}])
        await c.ok("create_relations", relations=[{"from": "svc-0", "to": "svc-1", "relationType": "calls"}])
        for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "service"}),
                                ("open_nodes", {"names": ["svc-0", "svc-1", "empty"]})):
            compact = await shown(c, tool, compact=True, **arguments)
            assert "open_nodes" in compact["details"]
            for e in compact["entities"]:
                assert set(e) == {"name", "entityType", "observations"} and len(e["observations"]) <= 1
                assert all(len(o) <= 120 for o in e["observations"])
            assert compact["relations"] == [{"from": "svc-0", "to": "svc-1", "relationType": "calls"}]
            if tool == "search_nodes":
                assert compact["why"] == {}
        opened = await shown(c, "open_nodes", names=["svc-0"], compact=True)
        assert opened["entities"][0]["observations"] == ["Fact 0 of service 0 about deploys. It has a second sentence."]

    run_session(home, body)


def test_max_tokens_below_its_minimum_is_refused(home):
    async def body(c: Client):
        err = await c.error("retrieve_memory", query="x", max_tokens=10)
        assert err["code"] == "VALIDATION_ERROR" and "max_tokens" in err["message"], err

    run_session(home, body, "--tools", "memory")


def test_searches_of_several_libraries_and_the_strict_set_fit_too(home, tmp_path):
    async def body(c: Client):
        for library in ("a", "b"):
            await c.ok("create_entities", library=library, entities=[entity(i) for i in range(4)])
            for note in NOTES:
                await c.ok("store_memory", library=library, content=f"{library}: {note}")
        found = await shown(c, "search_nodes", query="deploys", library="*", max_tokens=300)
        assert cost(found) <= 300 and found["omitted"] == 8 - len(found["entities"]) and found["entities"]
        assert all(e["library"] in ("a", "b") for e in found["entities"]) and set(found["why"]) <= {
            e["name"] for e in found["entities"]}
        recalled = await shown(c, "retrieve_memory", query="deploy", n_results=8, library=["a", "b"], compact=True,
                               max_tokens=200)
        assert cost(recalled) <= 200 and recalled["memories"]
        assert all(set(m) == {"content_hash", "content", "library"} for m in recalled["memories"])

    run_session(home, body, "--libraries", f"a:{tmp_path}/a.db,b:{tmp_path}/b.db")

    async def strict(c: Client):
        await c.ok("create_entities", entities=[{"name": f"svc-{i}", "entity_type": "tool",
                                                 "observations": entity(i)["observations"]} for i in range(6)])
        whole = await shown(c, "search_memory", query="deploys")
        fitted = await shown(c, "search_memory", query="deploys", max_tokens=250)
        assert cost(fitted) <= 250 < cost(whole) and fitted["data"]["results"]
        assert fitted["omitted"] == len(whole["data"]["results"]) - len(fitted["data"]["results"])
        compact = await shown(c, "search_memory", query="deploys", compact=True)
        assert all(len(e["observations"]) == 1 for e in compact["data"]["results"]) and "get_entity" in \
            compact["data"]["details"]

    run_session(home / "strict", strict, "--tools", "strict,memory", "--schema", "strict")


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                    max_leaves=12))
def test_a_replys_size_is_measured_as_it_is_written(value):
    """mcp/budget.py measures indented JSON without writing it; the size is the one as_json writes."""
    from memloci.mcp.budget import json_size
    from memloci.mcp.replies import as_json

    assert json_size(value) == size_of(as_json(value))
