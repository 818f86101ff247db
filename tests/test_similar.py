"""Duplicates, contradictions, clusters and summaries (search/similar.py, search/changes.py,
search/clusters.py): pure functions, checked on small inputs. The real default model gives the
vectors where meaning is the point; elsewhere vectors are built by hand."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime

import numpy as np
import pytest

import memloci
from memloci.core.errors import ValidationError
from memloci.core.model import Memory
from memloci.search import similar
from memloci.search.changes import changes
from memloci.search.clusters import (
    associations,
    clusters,
    default_max_size,
    split_sentences,
    summarize,
    within_horizon,
)
from memloci.search.similar import (
    NEAR_DUPLICATE_MIN,
    SAME_SUBJECT_MIN,
    contradictions,
    exact_duplicates,
    may_be_near,
    near_duplicates,
    normalized_text,
    similar_pairs,
    swapped_words,
)

SET = memloci.__file__.rsplit("/", 1)[0] + "/bench/data/near_duplicates.json"


def memory(k: int, content: str, *, tags: tuple[str, ...] = (), created: str | None = None, uses: int = 0,
           importance: str = "medium") -> Memory:
    return Memory(id=k, content=content, content_hash=hashlib.sha256(content.encode()).hexdigest()[:16], tags=tags,
                  memory_type="note", importance=importance, metadata={},
                  created_at=created or f"2026-03-01T10:{k // 60:02d}:{k % 60:02d}Z", updated_at="",
                  access_count=uses, last_accessed_at=None, entity=None)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def grouped_vectors(sizes: list[int], seed: int = 3, noise: float = 0.5, dim: int = 64) -> np.ndarray:
    """Rows in groups: each a noisy copy of its group's random direction."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((len(sizes), dim)))
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return unit(centres[labels] + noise / np.sqrt(dim) * rng.standard_normal((len(labels), dim)))


@pytest.fixture(scope="module")
def model():
    from memloci.search.embedder import EmbedderUnavailable, create_embedder

    try:
        return create_embedder("minilm")
    except EmbedderUnavailable as exc:  # pragma: no cover - the default model is a dependency
        pytest.skip(f"the default model cannot load: {exc}")


# --- exact duplicates -------------------------------------------------------------------------

def test_normalized_text_folds_width_case_space_and_trailing_punctuation():
    assert normalized_text("  The  Standup\tis at ９:３０ !! ") == "the standup is at 9:30"
    assert normalized_text("STRASSE") == normalized_text("straße")
    assert normalized_text("会議は金曜日。") == normalized_text("会議は金曜日")
    assert normalized_text("v4.2 ships") != normalized_text("v4.3 ships")
    assert normalized_text("...") == ""


def test_exact_duplicates_merge_into_the_oldest():
    newest = memory(1, "The standup is at 9:30.", tags=("work",), created="2026-03-03T00:00:00Z", uses=2,
                    importance="high")
    oldest = memory(2, "the standup is at 9:30", tags=("Work", "team"), created="2026-03-01T00:00:00Z", uses=1)
    middle = memory(3, "The  standup is at 9:30!", tags=("meetings",), created="2026-03-02T00:00:00Z", uses=4,
                    importance="low")
    other = memory(4, "The standup is at 10:00.")
    groups = exact_duplicates([newest, other, oldest, middle])
    assert len(groups) == 1
    group = groups[0]
    assert group.keeper == oldest and group.duplicates == (middle, newest)
    assert group.tags == ("Work", "team", "meetings")  # first-seen spelling, in the order of creation
    assert group.access_count == 7 and group.created_at == "2026-03-01T00:00:00Z" and group.importance == "high"
    assert exact_duplicates([middle, oldest, newest, other]) == groups  # the input order does not matter
    assert exact_duplicates([other, oldest]) == []


# --- pairs at scale ---------------------------------------------------------------------------

def _brute_force(vectors: np.ndarray, min_score: float, per_row: int) -> set[tuple[int, int]]:
    scores = vectors @ vectors.T
    np.fill_diagonal(scores, -1)
    kept = set()
    for i in range(len(vectors)):
        best = sorted((j for j in range(len(vectors)) if scores[i, j] >= min_score), key=lambda j: (-scores[i, j], j))
        kept |= {(min(i, j), max(i, j)) for j in best[:per_row]}
    return kept


@pytest.mark.parametrize("per_row", [2, 40])
def test_similar_pairs_in_strips_are_the_exact_pairs(monkeypatch, per_row):
    vectors = grouped_vectors([30, 12, 50, 3, 25, 80], noise=0.9)
    monkeypatch.setattr(similar, "STRIP_CELLS", 3000)  # many strips of 64 rows
    found = similar_pairs(vectors, 0.5, per_row=per_row)
    assert {(i, j) for i, j, _ in found} == _brute_force(vectors, 0.5, per_row)
    assert all(i < j and s >= 0.5 for i, j, s in found) and found == sorted(found)


def test_similar_pairs_stay_bounded_among_identical_rows():
    vectors = np.repeat(unit(np.ones((1, 8))), 400, axis=0)
    found = similar_pairs(vectors, 0.9, per_row=5)
    partners = np.bincount([i for i, _, _ in found] + [j for _, j, _ in found], minlength=400)
    assert len(found) <= 400 * 5 and partners.min() >= 5


# --- what differs -----------------------------------------------------------------------------

def test_changes_name_numbers_names_negations_and_times():
    assert [c.describe() for c in changes("The review has 3 slots.", "The review has 5 slots.")] == ["number 3 -> 5"]
    assert [c.describe() for c in changes("Anna owns billing.", "Maria owns billing.")] == ["name Anna -> Maria"]
    assert [c.kind for c in changes("The build uses pnpm.", "The build doesn't use pnpm.")] == ["negation"]
    assert [c.describe() for c in changes("The review is on Friday.", "The review is on Monday.")] == [
        "time friday -> monday"]
    assert [c.kind for c in changes("服务器需要扩容。", "服务器不需要扩容。")] == ["negation"]
    assert [c.kind for c in changes("我有时间。", "我没有时间。")] == ["negation"]
    assert [c.kind for c in changes("会議に出る。", "会議に出ない。")] == ["negation"]
    assert [c.kind for c in changes("张伟负责支付服务。", "李娜负责支付服务。")] == ["name"]
    assert [c.kind for c in changes("周五开会。", "周四开会。")] == ["number", "time"]
    # the same facts in other words: nothing differs
    assert changes("The backup failed twice this week.", "This week the backup failed two times.") == ()
    assert changes("Search runs on three nodes in Frankfurt.", "In Frankfurt, search has 3 nodes.") == ()
    assert changes("Sara's flight leaves at 11:40.", "Sara flies at 11:40.") == ()
    assert changes("The office is on the 2nd floor.", "The office is on the second floor.") == ()
    assert [c.describe() for c in changes("100 calls per minute.", "100 calls per second.")] == [
        "time minute -> second"]


def test_swapped_words_are_a_small_edit_of_content_words():
    assert swapped_words("We chose PostgreSQL for the billing service.",
                         "We chose PostgreSQL for the search service.") == (("bill",), ("search",))
    assert swapped_words("The TLS certificate for api.example.com expires on March 3.",
                         "On March 3 the TLS certificate for api.example.com will expire.") is None
    assert swapped_words("Walk the dog twice a day.", "The dog needs two walks a day.") is None
    # the same words in another order; a Chinese or Japanese word swapped (no spaces to find it by)
    assert swapped_words("Kenji prefers Slack over email.", "Kenji prefers email over Slack.") == (
        ("slack over email",), ("email over slack",))
    assert swapped_words("女儿的钢琴演奏会在周六下午三点。", "儿子的钢琴演奏会在周六下午三点。") == (("女",), ("子",))
    assert swapped_words("アンナはピーナッツアレルギーなので、昼食では避けること。",
                         "アンナは甲殻類アレルギーなので、昼食では避けること。") == (("ピーナッツ",), ("甲殻類",))
    assert swapped_words("api.example.com の証明書は3月3日に切れる。", "3月3日に api.example.com の証明書が切れる。") is None


# --- meaning, with the real model -------------------------------------------------------------

def test_near_duplicates_are_offered_and_changed_facts_are_not(model):
    texts = ["The nightly backup failed twice this week because the disk was full.",
             "A full disk made the nightly backup fail on two nights this week.",
             "The nightly backup failed five times this week because the disk was full.",
             "The nightly backup failed twice this week because the network was down.",
             "Anna is allergic to peanuts."]
    memories = [memory(k, t) for k, t in enumerate(texts)]
    found = near_duplicates(memories, model.embed(texts))
    assert [(d.keeper.id, d.duplicate.id) for d in found] == [(0, 1)]
    assert found[0].score >= NEAR_DUPLICATE_MIN


def test_a_newer_contradiction_is_proposed_with_its_reason(model):
    texts = ["The team standup starts at 9:30 every weekday.", "The API rate limit is 100 requests per minute.",
             "The team standup starts at 10:00 every weekday.", "Kenji prefers Slack over email."]
    memories = [memory(k, t) for k, t in enumerate(texts)]
    found = contradictions(memories, model.embed(texts))
    assert [(c.older.id, c.newer.id, c.reason) for c in found] == [(0, 2, "number 9:30 -> 10")]
    assert found[0].score >= SAME_SUBJECT_MIN


def test_the_labelled_set_holds_the_measured_precision(model):
    """The set the thresholds were measured on: English pairs keep precision >= 0.95."""
    facts = json.loads(open(SET, encoding="utf-8").read())["facts"]
    assert sum(len(f["paraphrases"]) for f in facts) >= 150 and sum(len(f["variants"]) for f in facts) >= 300
    english = [f for f in facts if f["lang"] == "en"]
    texts = [t for f in english for t in [f["text"], *f["paraphrases"], *(v["text"] for v in f["variants"])]]
    vectors = model.embed(texts)
    true_dup = false_dup = true_con = false_con = 0
    for n in range(len(english)):
        base = 10 * n
        pair = [memory(0, texts[base])]
        for k in range(1, 10):
            two = [*pair, memory(1, texts[base + k])]
            both = vectors[[base, base + k]]
            is_paraphrase = k < 4
            dup, con = bool(near_duplicates(two, both)), bool(contradictions(two, both))
            true_dup += dup and is_paraphrase
            false_dup += dup and not is_paraphrase
            true_con += con and not is_paraphrase
            false_con += con and is_paraphrase
    assert true_dup / (true_dup + false_dup) >= 0.95 and true_dup >= 0.45 * 3 * len(english)
    assert true_con / (true_con + false_con) >= 0.95 and true_con >= 0.7 * 6 * len(english)


# --- horizons, associations, clusters ---------------------------------------------------------

def test_a_horizon_takes_the_memories_created_within_it_before_now():
    now = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
    memories = [memory(1, "a", created="2026-03-31T11:00:00Z"), memory(2, "b", created="2026-03-30T12:00:00Z"),
                memory(3, "c", created="2026-03-25T00:00:00Z"), memory(4, "d", created="2026-01-15T00:00:00Z"),
                memory(5, "e", created="2026-04-01T00:00:00Z")]
    ids = {h: [m.id for m in within_horizon(memories, h, now)] for h in ("daily", "weekly", "monthly", "quarterly")}
    assert ids == {"daily": [1], "weekly": [1, 2, 3], "monthly": [1, 2, 3], "quarterly": [1, 2, 3, 4]}
    with pytest.raises(ValidationError, match="time_horizon"):
        within_horizon(memories, "hourly", now)
    with pytest.raises(ValidationError, match="now"):
        within_horizon(memories, "daily", datetime(2026, 3, 31))


def _library(sizes: list[int], noise: float = 0.5) -> tuple[list[Memory], np.ndarray]:
    vectors = grouped_vectors(sizes, noise=noise)
    return [memory(k, f"memory {k}") for k in range(len(vectors))], vectors


def test_clusters_find_the_groups_and_measure_them():
    memories, vectors = _library([6, 4, 5, 1, 1])
    report = clusters(memories, vectors, max_size=10)
    assert [[m.id for m in c.members] for c in report.clusters] == [list(range(0, 6)), list(range(10, 15)),
                                                                      list(range(6, 10))]
    assert report.refused == () and report.sizes() == {4: 1, 5: 1, 6: 1} and report.considered == 17
    for c in report.clusters:
        assert c.cohesion > 0.6 and c.separation > 0.5 and c.to_rest < 0.3
    links = associations(memories, vectors)
    assert links and all(a.score >= 0.6 and a.a.id < a.b.id for a in links)


def test_no_cluster_swallows_the_library():
    memories, vectors = _library([60, 3], noise=0.3)
    report = clusters(memories, vectors)  # the default limit for 63 memories
    assert default_max_size(63) == 7 and default_max_size(4) == 5 and default_max_size(10_000) == 50
    assert [len(c.members) for c in report.clusters] == [3]
    [refused] = report.refused
    assert len(refused.cluster.members) == 60 and "60 memories, above the size limit of 7" in refused.reason


def test_clusters_of_poor_quality_are_refused_with_the_reason():
    memories, vectors = _library([5, 5])
    report = clusters(memories, vectors, min_cohesion=0.99)
    assert report.clusters == () and len(report.refused) == 2
    assert all("below 0.99" in r.reason for r in report.refused)
    report = clusters(memories, vectors, min_separation=0.99)
    assert report.clusters == () and all("above their mean cosine to the rest" in r.reason for r in report.refused)
    with pytest.raises(ValidationError, match="max_size"):
        clusters(memories, vectors, max_size=1)
    with pytest.raises(ValidationError, match="vectors: one row per memory"):
        clusters(memories[:-1], vectors)
    with pytest.raises(ValidationError, match="vectors: one row per memory"):
        near_duplicates(memories, vectors[0])


def test_clusters_do_not_depend_on_the_input_order():
    memories, vectors = _library([7, 5, 4, 2, 1])
    order = list(range(len(memories)))
    random.Random(5).shuffle(order)
    first = clusters(memories, vectors, max_size=10)
    second = clusters([memories[k] for k in order], vectors[order], max_size=10)
    assert [[m.id for m in c.members] for c in first.clusters] == [[m.id for m in c.members] for c in second.clusters]


# --- summaries --------------------------------------------------------------------------------

def test_sentences_split_in_english_chinese_and_japanese():
    assert split_sentences("We ship v4.2 to api.example.com today. Is it ready? Yes, e.g. the docs are.\nNext") == [
        "We ship v4.2 to api.example.com today.", "Is it ready?", "Yes, e.g. the docs are.", "Next"]
    assert split_sentences("今天开会。明天下雨！他说「好的。」然后走了？ok") == [
        "今天开会。", "明天下雨！", "他说「好的。」", "然后走了？", "ok"]
    assert split_sentences("証明書は3月3日に切れる。更新手順はwikiにある") == ["証明書は3月3日に切れる。", "更新手順はwikiにある"]
    assert split_sentences("   ") == []


def test_a_summary_takes_the_central_sentences_within_the_limit():
    members = [memory(1, "The billing service uses PostgreSQL. Lunch was pizza.", created="2026-03-01T00:00:00Z"),
               memory(2, "PostgreSQL runs the billing service because billing needs transactions.",
                      created="2026-03-02T00:00:00Z"),
               memory(3, "The billing service uses PostgreSQL!", created="2026-03-03T00:00:00Z"),
               memory(4, "Billing transactions need PostgreSQL, which the billing service uses.",
                      created="2026-03-04T00:00:00Z")]
    summary = summarize(members, max_chars=120)
    assert summary.sources == tuple(m.content_hash for m in members)
    assert len(summary.text) <= 120 and "pizza" not in summary.text
    assert summary.text.count("The billing service uses PostgreSQL") == 1  # a repeated sentence is taken once
    assert summary.text.startswith("The billing service uses PostgreSQL.")  # in the order it was said
    assert summarize(list(reversed(members)), max_chars=120) == summary
    cut = summarize(members, max_chars=10)
    assert len(cut.text) == 10 and cut.text.endswith("…")
    with pytest.raises(ValidationError, match="max_chars"):
        summarize(members, max_chars=0)


def test_a_chinese_summary_keeps_whole_sentences():
    members = [memory(1, "服务器磁盘快满了。需要扩容。"), memory(2, "磁盘空间不足，服务器需要扩容。今天午饭吃面。")]
    summary = summarize(members, max_chars=24)
    assert "磁盘空间不足，服务器需要扩容。" in summary.text and len(summary.text) <= 24 and "午饭" not in summary.text
    assert all(s.endswith("。") for s in split_sentences(summary.text))


# --- the bench --------------------------------------------------------------------------------

@pytest.mark.full
def test_bench_lifecycle_reports_what_it_found(tmp_path):
    import os
    import subprocess
    import sys

    out = tmp_path / "lifecycle.json"
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "lifecycle", "--sizes", "300", "--out", str(out)],
                          capture_output=True, text=True, env=os.environ | {"MEMLOCI_CACHE": str(tmp_path / "cache")},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["planted"]["exact"] == {"planted": 41, "found": 41, "missed": 0, "wrong": 0}
    near = next(r for r in report["labelled"]["en"]["near_duplicates"]
                if r["threshold"] == NEAR_DUPLICATE_MIN and r["test"] == "meaning+words")
    assert near["precision"] >= 0.95
    assert report["set_clusters"]["purity"] == 1.0 and report["set_clusters"]["refused"] == 0
    [timed] = report["timing"]
    assert timed["memories"] == 300 and timed["largest"] <= timed["max_size"] and timed["clusters"] + timed["refused"] >= 10
    bad = subprocess.run([sys.executable, "-m", "memloci", "bench", "lifecycle", "--sizes", "x"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "--sizes" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.full
def test_bench_lifecycle_times_consolidation_search_under_it_and_extraction(tmp_path):
    import os
    import subprocess
    import sys

    out = tmp_path / "lifecycle.json"
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "lifecycle", "--parts", "engines,under-load,extraction",
                           "--sizes", "200", "--engines", "sqlite,markdown", "--load-size", "300", "--rounds", "1",
                           "--baseline", "2", "--entities", "50", "--calls", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env=os.environ | {"MEMLOCI_CACHE": str(tmp_path / "cache"), "MEMLOCI_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert [(r["engine"], r["memories"], r["considered"], r["with_meaning"]) for r in report["engines"]] == \
        [("sqlite", 200, 200, 200), ("markdown", 200, 200, 200)]
    assert report["engines"][0]["associations"] == report["engines"][1]["associations"] > 0
    [run] = report["under_load"]["rounds"]
    assert run["errors"] == 0 and run["consolidated"]["considered"] == 300 and run["during"]["calls"] > 0
    assert run["child_nice"] == [10]  # the server ran consolidation in a child process at low priority
    assert report["extraction"]["relations_made"]["off"] == 0 < report["extraction"]["relations_made"]["on"]
    bad = subprocess.run([sys.executable, "-m", "memloci", "bench", "lifecycle", "--parts", "engines,nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "--parts" in bad.stderr and "Traceback" not in bad.stderr


def test_may_be_near_keeps_paraphrases_that_share_few_words_and_drops_other_facts():
    """The words test store_memory runs before embedding anything: the labelled paraphrase pair
    that shares the fewest words passes, a changed fact or a text about something else does not,
    and Chinese or Japanese text always may be near (its words are not split here)."""
    school = "School for the kids runs from 8:15 to 3:00."
    assert may_be_near(school, "The children start school at 8:15 and finish at 3:00.")
    assert not may_be_near(school, "The children start school at 8:30 and finish at 3:00."), "a changed number"
    assert not may_be_near(school, "The kids love the new playground at the park."), "words in common, another fact"
    assert not may_be_near("Caroline: Thanks!", "Caroline: I went hiking with my dog yesterday."), "a time in one only"
    assert may_be_near("证书三月三日到期", "三月三日证书到期")
