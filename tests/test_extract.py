"""Extraction by memorix's patterns (rules/extract.py), with the examples its entity extractor
and auto-relations document: each kind of name, the property chains that are not file paths,
English and Chinese causal phrases, and the relation types by memory type."""

from __future__ import annotations

import pytest

from memloci.rules.extract import RELATION_TYPES, Extracted, candidates, extract, file_stem, module_tail, relation_type


def test_file_paths_and_not_property_chains():
    found = extract("Fixed the expiry check in src/auth/jwt.ts and ./config.json")
    assert found.files == ("src/auth/jwt.ts", "./config.json")
    assert extract('"src/config.ts"').files == ("src/config.ts",)
    assert extract("see ./package.json").files == ("./package.json",)
    # property chains: a blocked prefix, or two dots with no separator
    assert extract("read config.llm.apiKey then process.env.FOO").files == ()
    assert extract("this.state and options.timeout").files == ()
    # one dot: only a known extension makes a file
    assert extract("bump package.json and README.md").files == ("package.json", "README.md")
    assert extract("call foo.bar and user.name").files == ()
    assert extract("a.ts").files == ()  # memorix keeps files of 5 characters and more


def test_file_paths_in_backticks_at_a_sentence_end_and_after_cjk():
    assert extract("Edit `src/app.py`.").files == ("src/app.py",)
    assert extract("It lives in lib/db.go.").files == ("lib/db.go",)
    assert extract("修改了src/auth/jwt.ts的过期检查").files == ("src/auth/jwt.ts",)
    assert extract("see https://example.com/docs/guide.md").files == ()  # a URL's path is the URL's


def test_module_paths():
    found = extract("Search moved to @orama/orama; the graph lives in memcp.core.graph")
    assert found.modules == ("@orama/orama", "memcp.core.graph")
    assert extract("memcp.core").modules == ()  # two parts are not a module path


def test_urls_mentions_and_identifiers():
    found = extract("Per https://github.com/modelcontextprotocol/servers/issues/12, @alice asked JwtVerifier "
                    "to call TokenStore (mail bob@example.com)")
    assert found.urls == ("https://github.com/modelcontextprotocol/servers/issues/12",)
    assert found.mentions == ("alice",)  # an e-mail address is no mention
    assert found.identifiers == ("JwtVerifier", "TokenStore")
    assert extract("FastAPI and HTTP are not camel case; GraphManager is").identifiers == ("GraphManager",)


def test_cjk_terms_in_brackets_and_backticks():
    found = extract("重构了「认证模块」和『会话存储』，【数据库】迁移后 `数据库连接` 更稳定")
    assert found.terms == ("认证模块", "会话存储", "数据库", "数据库连接")
    assert extract("「a」 and 「认」 and `abc`").terms == ()  # one ideograph, or none, is no term


@pytest.mark.parametrize("text", [
    "Switched to WAL because writers blocked readers", "Therefore the cache is per library",
    "Timeouts due to the pool size", "A crash caused by a null id", "As a result, startup is faster",
    "We decided to drop MySQL", "SQLite, chosen because it needs no server", "Batch writes so that the lock is short",
    "Split the module in order to test it", "Caching leads to stale reads", "A retry results in duplicates",
    "Fixed by pinning the version", "Resolved by a restart",
    "因为缓存失效，请求变慢", "所以改用了连接池", "由于锁等待太久", "这会导致超时", "重复写入造成数据错误",
    "结果是启动更快", "因此每个库一个进程", "为了测试拆分了模块", "解决了内存泄漏", "修复登录问题",
    "修正了时区", "决定不用 MySQL", "选择 SQLite", "采用 WAL 模式",
])
def test_causal_phrases_in_english_and_chinese(text):
    assert extract(text).causal


@pytest.mark.parametrize("text", ["Uses FastAPI for the HTTP layer", "becausewe", "Prefers email", "使用缓存"])
def test_text_without_causal_phrases(text):
    assert not extract(text).causal


def test_relation_types_as_memorix_types_them():
    assert relation_type("decision", True) == "causes"  # causal language wins over the type
    assert relation_type("problem-solution", False) == "fixes"
    assert relation_type("fix", False) == relation_type("bugfix", False) == "fixes"
    assert relation_type("decision", False) == relation_type("trade-off", False) == "decides"
    assert relation_type("what-changed", False) == relation_type("Change", False) == "modifies"
    assert relation_type("gotcha", False) == relation_type("warning", False) == "warns_about"
    assert relation_type("note", False) == relation_type(None, False) == "references"
    assert {relation_type(t, c) for t in ("fix", "decision", "change", "gotcha", None) for c in (True, False)} \
        == set(RELATION_TYPES)


def test_candidates_are_stems_tails_mentions_and_terms_once_each():
    found = extract("JwtVerifier in src/auth/jwt.ts uses @orama/orama and memcp.core.graph; ask @alice about "
                    "「认证」, jwtverifier and `数据库连接`")
    assert candidates(found) == ["JwtVerifier", "jwt", "orama", "graph", "alice", "认证", "数据库连接"]
    assert file_stem("./config.json") == "config" and file_stem("C:\\src\\main.rs") == "main"
    assert module_tail("@orama/orama") == "orama" and module_tail("memcp.core.graph") == "graph"
    # under 3 characters (2 for CJK) is no name to look up; URLs are no candidates
    assert candidates(Extracted(files=("src/db.ts",), mentions=("al",), urls=("https://x.io",))) == []
    assert candidates(Extracted(terms=("认证",), mentions=("bob",))) == ["bob", "认证"]
