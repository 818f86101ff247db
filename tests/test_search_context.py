"""Session context (search/context.py) and the second pass seeded by the first (search/feedback.py):
the pure parts on small inputs, the seeds' vectors read from a real SQLite library's index, and
retrieve_memory lifting a turn that shares no word with the question but sits between two that match."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import Memory
from memloci.search import context, feedback, hybrid
from memloci.search.embedder import EmbedderHandle
from memloci.search.vectors import VectorIndex
from memloci.service.facade import MemoryService


def test_session_support_is_the_best_other_match_within_reach_of_the_same_thread():
    threads = {1: "m:dialogue:1", 2: "m:dialogue:1", 3: "m:dialogue:1", 9: "m:dialogue:1", 4: "m:dialogue:2", 5: ""}
    scores = {1: 0.9, 2: 0.1, 3: 0.4, 9: 0.8, 4: 0.7, 5: 0.6}
    support = context.session_support(threads, scores, reach=2)
    assert support == {1: 0.4, 2: 0.9, 3: 0.9}  # 9 is 6 ids away from 3; 4 is alone in its thread; 5 has none
    assert context.session_support(threads, scores, reach=100)[3] == 0.9
    assert context.session_support(threads, scores, reach=100)[9] == 0.9
    assert context.session_support({1: "t", 2: "u"}, {1: 1.0, 2: 1.0}, reach=5) == {}


def test_a_memorys_thread_is_its_conversation_and_an_observation_has_none():
    free = Memory(1, "Caroline: hi", "h", (), "dialogue", "medium", {"session": 3}, "t", "t", 0, None, None)
    assert context.thread_of(free) == "m:dialogue:3"
    assert context.thread_of(Memory(2, "hi", "h", (), "note", "medium", {}, "t", "t", 0, None, None)) == ""
    observation = Memory(3, "hi", "h", (), "dialogue", "medium", {"session": 3}, "t", "t", 0, None, "Alice")
    assert context.thread_of(observation) == ""


@pytest.fixture
def service(tmp_path: Path):
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]), EmbedderHandle("none"))
    yield service
    service.close()


def test_the_second_pass_reads_the_seeds_vectors_from_the_index(service):
    """Closeness to the mean of the best hits' vectors, scaled over the candidates; nothing to
    seed from when there are no more candidates than seeds or no vectors."""
    store = service.store()
    ids = [service.store_memory(text)[0].id for text in ("alpha one", "alpha two", "beta", "gamma")]
    vectors = [np.array(v, dtype=np.float32) for v in ([1, 0], [0.8, 0.6], [0.6, 0.8], [0, 1])]
    store.save_vectors([(i, m.content_hash, v) for i, m, v in
                        zip(ids, store.load_memories(ids).values(), vectors)], "m")
    index = VectorIndex(store, "m")
    index.refresh()  # (a search refreshes it first; the second pass reads what that search held)
    assert index.rows([ids[3], 999, ids[0]])[0] == [ids[3], ids[0]]  # held ones, in the order asked
    first = {ids[0]: 0.9, ids[1]: 0.8, ids[2]: 0.1, ids[3]: 0.05}
    near = feedback.seeded(index, first, seeds=2)
    assert near[ids[0]] == pytest.approx(1.0) and near[ids[3]] == pytest.approx(0.0)
    assert near[ids[0]] == pytest.approx(near[ids[1]]) and near[ids[1]] > near[ids[2]] > near[ids[3]]
    assert feedback.seeded(index, {ids[0]: 1.0, ids[1]: 0.5}, seeds=2) == {}
    assert feedback.seeded(index, first, seeds=0) == {}


@pytest.mark.parametrize("weight, lifted", [(0.0, False), (0.5, True)])
def test_a_turn_between_two_matches_of_its_conversation_is_lifted(tmp_path: Path, monkeypatch, weight, lifted):
    """"Yeah, it got off to a bad start" shares no word with the question; it sits between two
    turns about the road trip, so session context ranks it above a turn of another conversation
    that shares one word."""
    monkeypatch.setattr(context, "SESSION_WEIGHT", weight)
    monkeypatch.setattr(context, "SESSION_REACH", 2)
    monkeypatch.setattr(feedback, "FEEDBACK_WEIGHT", 0.0)
    service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / "lib.db", "sqlite")]), EmbedderHandle("none"))
    try:
        turns = [(1, "Melanie: The road trip this past weekend was insane, the canyon was huge."),
                 (1, "Caroline: Wow, how did the road trip go?"),
                 (1, "Melanie: Yeah, it got off to a bad start, we got lost twice."),
                 (1, "Melanie: But the road trip ended well, we camped under the stars."),
                 (2, "Caroline: I bought a new weekend bag for the road."),
                 (2, "Melanie: Nice, I love the beach."),
                 (2, "Caroline: The painting class starts soon."),
                 (2, "Melanie: Good luck with it.")]
        for session, text in turns:
            service.store_memory(text, memory_type="dialogue", metadata={"session": session})
        hits = service.retrieve_memory("How was the road trip weekend?", n_results=8).hits
        order = [h.memory.content for h in hits]
        start = order.index(turns[2][1]) if turns[2][1] in order else len(order)
        bag = order.index(turns[4][1])
        assert (start < bag) is lifted, [(h.memory.content, h.why) for h in hits]
        if lifted:
            assert "beside matches" in hits[start].why
    finally:
        service.close()


def test_the_weights_are_module_level_for_the_lab():
    """`memloci bench locomo --folds` chooses these by name (bench/locomo_lab.py's tuned modules)."""
    assert isinstance(context.SESSION_WEIGHT, float) and isinstance(context.SESSION_REACH, int)
    assert isinstance(feedback.FEEDBACK_WEIGHT, float) and isinstance(feedback.FEEDBACK_SEEDS, int)
    assert hybrid.context is context and hybrid.feedback is feedback


def test_expansion_terms_are_the_seeds_words_the_question_lacks():
    seeds = [["nate", "play", "csgo", "street", "fighter", "tournament"],
             ["nate", "won", "valorant", "tournament", "final"],
             ["tournament", "fun", "the", "12"]]
    terms = feedback.expansion_terms(seeds, {"nate", "play", "video", "games"}, hybrid.STOP_WORDS)
    assert terms[0] == "tournament"  # in every seed
    assert "nate" not in terms and "the" not in terms and "12" not in terms and "fun" in terms
    assert len(feedback.expansion_terms([[f"word{i}" for i in range(50)]], set(), hybrid.STOP_WORDS)) == \
        feedback.EXPANSION_TERMS
    assert feedback.expansion_terms([], {"x"}, hybrid.STOP_WORDS) == []


@pytest.mark.parametrize("weight", [0.0, 0.3])
def test_the_best_hits_words_find_a_memory_the_question_shares_no_word_with(tmp_path: Path, monkeypatch, weight):
    """With the model: the seeds' words ("tournament") find the memory; by words alone (no
    model) the second search is not made, so a query keeps to the memories that match it."""
    monkeypatch.setattr(feedback, "EXPANSION_WEIGHT", weight)
    monkeypatch.setattr(context, "SESSION_WEIGHT", 0.0)
    texts = ("I play CS:GO at the tournament every week.", "The Street Fighter tournament was a blast to play.",
             "I won the Valorant tournament final last Saturday!", "My script got a reading at the festival.")
    for embedder in ("minilm", "none"):
        service = MemoryService(LibraryRegistry([LibrarySpec("lib", tmp_path / f"{embedder}.db", "sqlite")]),
                                EmbedderHandle(embedder))
        try:
            for text in texts:
                service.store_memory(text)
            if embedder == "minilm":
                assert service.flush_embeddings(timeout=300)
            hits = service.retrieve_memory("What games does he play?", n_results=4).hits
            why = {h.memory.content: h.why for h in hits}
            if embedder == "none":
                assert set(why) == set(texts[:2]), why
            else:
                assert ("words of the best hits" in why[texts[2]]) is (weight > 0), why
        finally:
            service.close()
