"""search_nodes in-process, on real SQLite and Markdown libraries: every word and substring of a
note, CJK two-character words, tags, ranking by all words of a question, token-aware typos and
prefixes, and a library brought forward by migration 7."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput
from memloci.core.query_text import cjk_grams
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService
from memloci.store.sqlite.engine import SQLiteStore
from memloci.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from memloci.store.sqlite.sql import split_sql


@pytest.fixture(params=["sqlite", "markdown"])
def lib(request, tmp_path):
    path = tmp_path / ("lib.db" if request.param == "sqlite" else "lib")
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", path, request.param)]))
    yield service
    service.close()


def found(service: MemoryService, query: str, **kw) -> list[str]:
    return [h.entity.name for h in service.search_nodes(query, library="lib", **kw).hits]


def why(service: MemoryService, query: str) -> dict[str, str]:
    return {h.entity.name: h.why for h in service.search_nodes(query, library="lib").hits}


def test_cjk_grams_are_two_character_tokens_and_mixed_words_are_split():
    assert cjk_grams("東京の旅行計画。来月") == "東京 京の の旅 旅行 行計 計画 来月"
    assert cjk_grams("東京api サーバー") == "東京 api サー ーバ バー"
    assert cjk_grams("plain words only") == ""


def test_a_two_character_cjk_word_anywhere_in_a_note_finds_it(lib):
    lib.add_entities([NewEntityDocument("trip", content="東京の旅行計画。来月に京都へも行く。")], library="lib")
    lib.create_entities([EntityInput("会議メモ", "note", ("予算は来週に決める",)),
                         EntityInput("Kyoto office", "オフィス", ()),
                         EntityInput("unrelated", "note", ("nothing in Japanese",))], library="lib")
    for query in ["東京", "旅行計画", "計画", "京都", "東京の旅行計画"]:
        assert found(lib, query)[:1] == ["trip"], query
    assert found(lib, "予算") == ["会議メモ"]  # in an observation
    assert found(lib, "会議") == ["会議メモ"]  # in a name
    assert found(lib, "フィ") == ["Kyoto office"]  # in a type
    # a gram pair that spans two runs is not a word of either
    assert "trip" not in found(lib, "画来")


def test_tags_and_aliases_are_words_and_a_name_outweighs_them(lib):
    lib.add_entities([NewEntityDocument("deploy-guide", content="---\ntags: [kubernetes, ops]\n---\nHow we ship.\n"),
                      NewEntityDocument("Kubernetes", content="The cluster.\n"),
                      NewEntityDocument("cluster-notes", aliases=("k8s-notes",), content="Kubernetes came up once.\n")],
                     library="lib")
    names = found(lib, "kubernetes")
    assert names[0] == "Kubernetes" and set(names) == {"Kubernetes", "deploy-guide", "cluster-notes"}, names
    assert names.index("deploy-guide") < names.index("cluster-notes"), "a tag weighs more than a word of the body"
    assert found(lib, "ops") == ["deploy-guide"]
    assert found(lib, "notes")[0] == "cluster-notes"


def test_a_question_is_ranked_by_all_its_words_not_required_to_hold_them(lib):
    lib.create_entities([
        EntityInput("Secrets rotation", "runbook", ("Rotate the vault credentials every ninety days",)),
        EntityInput("Billing database", "service", ("The billing database runs on PostgreSQL",)),
        EntityInput("Onboarding", "runbook", ("New people get database access on day one",)),
    ], library="lib")
    # no entity holds every word; the one holding the rare ones ranks first
    question = "how often do we rotate credentials of the billing database?"
    names = found(lib, question)
    assert names[0] in {"Secrets rotation", "Billing database"} and len(names) == 3, names
    assert "2 of" in why(lib, question)[names[0]]
    assert found(lib, "when do we rotate vault credentials")[0] == "Secrets rotation"
    # stop words alone still search
    assert found(lib, "the") != []


def test_a_typo_or_a_prefix_of_any_word_of_a_name_finds_it(lib):
    lib.create_entities([EntityInput("Alice Chen", "person", ("Leads the data team",)),
                         EntityInput("Bob Chen", "person", ("Runs payroll",)),
                         EntityInput("Carol Chen", "person", ()),
                         EntityInput("Malice Tracker", "tool", ())], library="lib")
    lib.add_entities([NewEntityDocument("Anna Schmidt", aliases=("Annushka",), content="Designer.\n")], library="lib")
    for query in ["alcie", "Aliec", "Ali", "Che", "alcie chen", "Aliec Chen", "alice chne"]:
        assert "Alice Chen" in found(lib, query)[:3], query
    assert found(lib, "alcie chen")[0] == "Alice Chen"
    assert "name ~ alcie→alice" in why(lib, "alcie")["Alice Chen"]
    assert found(lib, "Anushka")[:1] == ["Anna Schmidt"]  # a typo of an alias
    assert found(lib, "Annu")[:1] == ["Anna Schmidt"]  # a prefix of an alias
    assert found(lib, "zzzq") == []


def test_respelling_follows_new_and_renamed_names(tmp_path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db")]))
    service.create_entities([EntityInput("Alice Chen", "person", ())], library="lib")
    assert found(service, "Bobyb") == []
    service.create_entities([EntityInput("Bobby Tables", "person", ())], library="lib")
    assert found(service, "Bobyb") == ["Bobby Tables"], "a name created after the last search is respelled to"
    service.rename_entity("Bobby Tables", "Robert Tables", library="lib")
    assert found(service, "Robrt") == ["Robert Tables"]
    assert found(service, "Bobyb") == []
    service.close()


def test_respelling_reads_every_name_again_once_the_name_log_was_trimmed(tmp_path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db")]))
    service.create_entities([EntityInput("Alice Chen", "person", ())], library="lib")
    assert found(service, "alcie") == ["Alice Chen"]  # the names are in memory from here on
    rows = [EntityInput(f"Item {i}", "note", ()) for i in range(2100)] + [EntityInput("Zanzibar Office", "place", ())]
    for k in range(0, len(rows), 500):
        service.create_entities(rows[k:k + 500], library="lib")
    store = service.store("lib")
    seq, _, full = store.name_changes(1)
    assert full and seq == 2102, "the log keeps the last 1,000 to 2,000 names, so this reader reads them all"
    assert found(service, "Zanzibra") == ["Zanzibar Office"]
    assert found(service, "alcie") == ["Alice Chen"]
    service.close()


def test_a_substring_of_a_note_body_or_observation_is_found(lib):
    lib.add_entities([NewEntityDocument("ideas", content="An unrelated thought.\n")], library="lib")
    lib.create_entities([EntityInput("Svc", "service", ("depends on libfoobar",))], library="lib")
    assert found(lib, "elated") == ["ideas"]
    assert why(lib, "elated")["ideas"] == "substring of the note"
    assert found(lib, "foobar") == ["Svc"]  # the official server's guarantee
    assert found(lib, "oo") == ["Svc"]  # shorter than a trigram: looked for row by row


def test_a_common_word_ranks_within_a_bounded_pool_without_losing_the_rare_word(tmp_path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db")]))
    rows = [EntityInput(f"Note {i}", "note", (f"billing run {i}" if i % 2 else f"quiet day {i}",)) for i in range(1400)]
    rows += [EntityInput("Invoice 7", "note", ("billing okapi",)), EntityInput("Billing", "service", ())]
    for k in range(0, len(rows), 500):
        service.create_entities(rows[k:k + 500], library="lib")
    result = service.search_nodes("billing okapi", library="lib", limit=5)
    names = [h.entity.name for h in result.hits]
    assert names[0] == "Invoice 7" and result.hits[0].why.startswith("all 2 words"), names
    assert names[1] == "Billing", "a common word in a name ranks above the same word in an observation"
    assert result.total_count == 702 and result.is_truncated
    # a page further on continues the same ranking
    second = [h.entity.name for h in service.search_nodes("billing okapi", library="lib", limit=5, offset=5).hits]
    assert len(second) == 5 and not set(second) & set(names)
    service.close()


def test_migration_7_indexes_the_words_of_an_older_library(tmp_path):
    path = tmp_path / "old.db"
    conn = SQLiteStore(path).db.connect()
    for script in MIGRATIONS[:6]:
        for statement in split_sql(script):
            conn.execute(statement)
    conn.execute("""INSERT INTO entities (id, name, name_key, entity_type, aliases, tags, body, created_at, updated_at)
                    VALUES (1, 'trip', 'trip', 'note', '["journey"]', '["travel"]', '東京の旅行計画。',
                            '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')""")
    conn.execute("""INSERT INTO memories (entity_id, content, content_hash, memory_type, created_at, updated_at)
                    VALUES (1, '予算は未定', 'h', 'observation', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')""")
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", path)]))
    for query in ["東京", "旅行計画", "予算", "travel", "journey", "jurney", "trip"]:
        assert found(service, query) == ["trip"], query
    service.close()
    check = SQLiteStore(path).db.connect()
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    check.close()


def test_a_signal_lifts_a_word_match_below_the_page_and_it_keeps_its_word_score(lib):
    # Fifteen notes hold "turbine", each body longer than the one before, so BM25 ranks them in
    # order; "Blades" holds none of the query's words. Both last ones get the same meaning signal.
    lib.add_entities([NewEntityDocument(f"note {i:02}", content="turbine " + "stator vane " * (3 * i))
                      for i in range(15)] + [NewEntityDocument("Blades", content="rotor blades cracked")],
                     library="lib")
    store = lib.store("lib")
    from memloci.search.entities import name_words
    from memloci.search.hybrid import STOP_WORDS

    def search(pool: int):
        return store.search_entities("turbine", limit=3, extra=[("note 14", 0.95, "means it"), ("Blades", 0.95, "means it")],
                                     stop_words=STOP_WORDS, names=name_words(store), count_cap=50, pool=pool)

    page_only = {h.entity.name: h for h in search(0).hits}  # the page and one more keep word scores
    assert page_only["note 14"].score == pytest.approx(0.95) and page_only["note 14"].matched_terms == 0
    pooled = search(20)
    scores = {h.entity.name: h for h in pooled.hits}
    assert [h.entity.name for h in pooled.hits] == ["note 14", "note 00", "Blades"]
    assert scores["note 14"].score > 1.0 and scores["note 14"].matched_terms == 1
    assert "bm25" in scores["note 14"].why and "means it" in scores["note 14"].why
    assert scores["Blades"].score == pytest.approx(0.95)
    assert pooled.is_truncated and pooled.total_count == 15  # every word match, counted from the pool


class _CountingSearches:
    """A real store whose word searches are counted (every other member passes through)."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def search_entities(self, query, **kw):
        self.calls.append("extra" in kw)
        return self.store.search_entities(query, **kw)

    def __getattr__(self, name):
        return getattr(self.store, name)


@pytest.mark.parametrize("signal", [[("Blades", 0.95, "means it")], []])
def test_a_fused_search_searches_the_words_once_and_finds_what_two_searches_did(lib, signal):
    lib.add_entities([NewEntityDocument(f"note {i:02}", content="turbine " + "stator vane " * (3 * i))
                      for i in range(15)] + [NewEntityDocument("Blades", content="rotor blades cracked")],
                     library="lib")
    from memloci.search.entities import COUNT_CAP, FUSION_POOL, find_entities, name_words
    from memloci.search.hybrid import STOP_WORDS

    store = _CountingSearches(lib.store("lib"))
    fused = find_entities(store, "turbine", 3, signals=lambda: signal, fuse=True)
    assert store.calls == [bool(signal)]  # one search: with the signal when there is one
    plain = store.store.search_entities("turbine", limit=3, stop_words=STOP_WORDS, names=name_words(store.store),
                                        count_cap=COUNT_CAP)
    expected = store.store.search_entities("turbine", limit=3, extra=signal, stop_words=STOP_WORDS,
                                           names=name_words(store.store), count_cap=COUNT_CAP,
                                           pool=FUSION_POOL) if signal else plain
    assert [(h.entity.name, h.score) for h in fused.hits] == [(h.entity.name, h.score) for h in expected.hits]
    assert ("Blades" in [h.entity.name for h in fused.hits]) == bool(signal)
    # Not fused: the words fill the page, so the signals are not even asked for.
    store.calls.clear()
    asked = []
    find_entities(store, "turbine", 3, signals=lambda: asked.append(1) or signal, fuse=False)
    assert store.calls == [False] and asked == []
