"""The maintenance tool group as the MCP Memory Service and the multi-library Markdown server's
users call it: each tool under its name and argument shape, a dry run that changes nothing and
lists exactly what the execute changes, one journal entry per change, undone by `memloci undo`.
"""

from __future__ import annotations

import json

from tests.conftest import run_session


def test_group_is_opt_in_and_within_budget(home):
    async def body(c):
        names = {t.name for t in (await c.session.list_tools()).tools}
        assert "delete_by_tag" not in names and "store_memory" in names

    run_session(home, body)

    async def body2(c):
        tools = (await c.session.list_tools()).tools
        sizes = [len(json.dumps(t.model_dump(by_alias=True, exclude_none=True), ensure_ascii=False)) for t in tools]
        assert {t.name for t in tools} >= {"delete_by_tag", "cleanup_duplicates", "update_memory_metadata",
                                           "knowledge_analysis", "knowledge_export", "memory_cleanup", "list_tags",
                                           "delete_by_timeframe", "execute_preview", "garbage_collect_relations"}
        assert sum(sizes) < 8_000, sum(sizes)

    run_session(home, body2, "--tools", "maintenance")


def test_dry_run_then_execute_then_undo(home):
    async def body(c):
        for text, tags in [("Rotate the API keys monthly.", ["ops", "temporary"]),
                           ("rotate the api keys monthly", ["security"]),
                           ("Lunch order for Friday.", ["temporary"]),
                           ("The CI runs on two cores.", ["ci"])]:
            await c.ok("store_memory", content=text, tags=tags)
        listed, _ = await c.ok("list_memories", page_size=50)
        before = sorted((m["content"], tuple(m["tags"])) for m in listed["memories"])

        preview, _ = await c.ok("delete_by_tag", tags="temporary", dry_run=True)
        assert preview["dry_run"] and preview["deleted"] == 2 and preview["preview_id"]
        after, _ = await c.ok("list_memories", page_size=50)
        assert sorted((m["content"], tuple(m["tags"])) for m in after["memories"]) == before

        done, _ = await c.ok("execute_preview", preview_id=preview["preview_id"])
        assert not done["dry_run"] and done["deleted"] == 2
        assert {i["content_hash"] for i in done["items"]} == {i["content_hash"] for i in preview["items"]}
        tags, _ = await c.ok("list_tags")
        assert {t["tag"] for t in tags["tags"]} == {"security", "ci"}

        again = await c.call("execute_preview", preview_id=preview["preview_id"])
        assert again[0] and "was executed" in json.dumps(again[2])

        dup, _ = await c.ok("cleanup_duplicates", dry_run=True)
        assert dup["changed"] == 0 and dup["deleted"] == 0  # the duplicate went with its tag

        export, _ = await c.ok("knowledge_export", format="markdown", filters='{"tags": ["ci"]}')
        assert "The CI runs on two cores." in export["export"] and "Rotate" not in export["export"]
        analysis, _ = await c.ok("knowledge_analysis")
        assert analysis["total_memories"] == 2

        bad = await c.call("update_memory_metadata", content_hash="0" * 64, updates='{"tags": ["x"]}')
        assert bad[0] and "NOT_FOUND" in json.dumps(bad[2])
        bad = await c.call("knowledge_export", format="yaml")
        assert bad[0]
        return done["change_id"]

    run_session(home, body, "--tools", "memory,maintenance")


def test_consolidate_runs_in_a_process_of_its_own(home):
    async def body(c):
        for text in ("Rotate the API keys monthly.", "The CI runs on two cores."):
            await c.ok("store_memory", content=text)
        out, _ = await c.ok("consolidate", time_horizon="monthly")
        assert out["dry_run"] and out["preview_id"] and out["report"]["considered"] == 2, out
        assert "execute_preview(preview_id=" in out["message"]
        listed, _ = await c.ok("list_previews")
        assert [p["kind"] for p in listed["previews"]] == ["consolidate"]
        bad = await c.call("consolidate", time_horizon="hourly")
        assert bad[0] and "time_horizon" in json.dumps(bad[2])

    run_session(home, body, "--tools", "memory,maintenance")


def test_garbage_collect_relations_lists_then_cleans(home):
    """As the multi-library Markdown server's users call it: `library_name`, dry_run true by default."""
    async def body(c):
        await c.ok("add_entities", entities=[
            {"name": "Gone", "entity_type": "person"},
            {"name": "Ann", "entity_type": "person", "relations": [{"type": "knows", "to": "Gone"}],
             "content": "Lunch with [[Gone|the old boss]].\n"}])
        await c.ok("delete_entities", entityNames=["Gone"])
        await c.ok("add_entities", entities=[{"name": "Cy", "relations": [{"type": "likes", "to": "Nobody"}]}])
        listed, _ = await c.ok("garbage_collect_relations", library_name="default")
        assert listed["dry_run"] and listed["preview_id"] and listed["links_removed"] == 2
        assert [(i["entity"], i["action"], i["where"], i.get("becomes")) for i in listed["items"]] == [
            ("Ann", "unlink", "body", "the old boss"), ("Cy", "remove", "front matter relations", None)]
        done, _ = await c.ok("execute_preview", preview_id=listed["preview_id"])
        assert not done["dry_run"] and done["change_id"] and done["items"] == listed["items"]
        read, _ = await c.ok("read_entities", entity_names=["Ann", "Cy"])
        texts = [e["content"] for e in read["entities"]]
        assert "Lunch with the old boss." in texts[0] and "Nobody" not in texts[1]
        again, _ = await c.ok("garbage_collect_relations", dry_run=False)
        assert again["change_id"] is None and "nothing to change" in again["message"]

    run_session(home, body, "--tools", "graph,documents,maintenance")
