"""What retrieve_memory keeps between calls, and what it skips, never changes its answers:
a memory's speaker is read again when its text changes, its decay when its uses or tags do,
its metadata is its own dict at every read, and the best n are the first n of a longer list
(candidates that cannot reach the best n are not read at all). Real SQLite files."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from memloci.core.model import Memory
from memloci.rules import retention as rules


def _hashes(hits) -> list[tuple[str, float, str]]:
    return [(h.memory.content_hash, h.score, h.why) for h in hits]


def test_a_speaker_is_read_again_when_the_text_changes(service):
    memory, _ = service.store_memory("Alice: we planted tomatoes in the garden", metadata={"date": "8 May, 2023"})
    hits = service.retrieve_memory("What did Alice plant in the garden?").hits
    assert "by Alice" in hits[0].why
    service.update_memory(memory.content_hash, content="Bob: we planted tomatoes in the garden")
    hits = service.retrieve_memory("What did Bob plant in the garden?").hits
    assert hits[0].memory.content.startswith("Bob:") and "by Bob" in hits[0].why
    assert "by Alice" not in service.retrieve_memory("What did Alice plant in the garden?").hits[0].why


def test_relevance_follows_uses_importance_and_tags():
    memory = Memory(1, "x", "h", (), "note", "medium", {}, "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", 0, None, None)
    now = rules.parse_time("2026-03-01T00:00:00Z")
    plain = rules.relevance(memory, now)
    assert rules.relevance(memory, now) == plain  # asked again: the same
    used = rules.relevance(replace(memory, access_count=2), now)
    assert used == plain * 1.2  # (exactly the formula's float)
    assert rules.retention(replace(memory, access_count=3), now).immunity_reason == "used 3 times"
    assert rules.retention(replace(memory, tags=("Pinned",)), now).immunity_reason == "tag Pinned"
    assert rules.retention(memory, now).immunity_reason is None
    assert rules.relevance(replace(memory, importance="low"), now) < plain
    assert rules.relevance(replace(memory, memory_type="decision"), now) > plain  # the type's importance


def test_metadata_is_a_new_dict_at_every_read(service):
    memory, _ = service.store_memory("Caroline: the support group met today", metadata={"date": "8 May, 2023", "n": 1})
    first = service.retrieve_memory("support group").hits[0].memory
    first.metadata["date"] = "changed by a caller"
    again = service.retrieve_memory("support group").hits[0].memory
    assert again.metadata == {"date": "8 May, 2023", "n": 1}
    service.update_memory(memory.content_hash, metadata={"date": "9 May, 2023", "nested": {"a": [1]}})
    updated = service.retrieve_memory("support group").hits[0].memory
    assert updated.metadata == {"date": "9 May, 2023", "n": 1, "nested": {"a": [1]}}  # (merged)
    updated.metadata["nested"]["a"].append(2)
    assert service.retrieve_memory("support group").hits[0].memory.metadata["nested"] == {"a": [1]}


def test_the_best_n_are_the_first_n_of_a_longer_list(service):
    service.clock = lambda: datetime(2026, 3, 1, tzinfo=UTC)  # (decay reads the clock)
    speakers = ["Caroline", "Melanie", "Jon", "Gina"]
    for i in range(40):
        who = speakers[i % 4]
        when = " last week" if i % 3 == 0 else ""
        service.store_memory(f"{who}: we talked about painting and the garden{when}, note {i}",
                             metadata={"date": f"{1 + i % 28} May, 2023"},
                             importance=["low", "medium", "high"][i % 3])
    for query in ["When did Caroline talk about painting?", "What did Melanie say about the garden on 8 May, 2023?",
                  "painting garden", "What did Jon paint?"]:
        whole = _hashes(service.retrieve_memory(query, n_results=40, count_use=False).hits)
        for n in (1, 3, 10, 25):
            assert _hashes(service.retrieve_memory(query, n_results=n, count_use=False).hits) == whole[:n], (query, n)
        floor = min(whole[4][1], 0.99)  # (min_similarity is at most 1; boosts lift scores past it)
        above = _hashes(service.retrieve_memory(query, n_results=40, min_similarity=floor, count_use=False).hits)
        assert above == [h for h in whole if h[1] >= floor and h[1] > 0]


def test_a_speaker_is_read_from_the_text_not_from_another_with_its_hash(service):
    # Two texts one hash apart in whitespace only: "Caroline: ..." names a speaker, "Caroline:\n..." does not.
    memory, _ = service.store_memory("Caroline: we planted tomatoes in the garden")
    assert "by Caroline" in service.retrieve_memory("What did Caroline plant?", count_use=False).hits[0].why
    service.delete_memory(memory.content_hash)
    again, _ = service.store_memory("Caroline:\nwe planted tomatoes in the garden")
    assert again.content_hash == memory.content_hash
    hit = service.retrieve_memory("What did Caroline plant?", count_use=False).hits[0]
    assert hit.memory.content.startswith("Caroline:\n") and "by Caroline" not in hit.why
