"""The SQLite engine directly: connection reuse, snapshots, damaged files, the journal."""

from __future__ import annotations

import threading

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import LibraryUnreadableError
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.service.facade import MemoryService


def test_connections_are_reused_across_short_lived_threads(service):
    service.create_entities([EntityInput("A", "t", ("x",))])
    store = service.store()

    def read():
        service.read_graph()

    for _ in range(30):  # the event loop's worker threads come and go like this
        t = threading.Thread(target=read)
        t.start()
        t.join()
    assert store.db._idle.qsize() == 1, "one idle connection serves them all"


def test_a_reader_part_way_through_does_not_block_other_calls(service):
    service.create_entities([EntityInput(f"E{i}", "t", (f"o{i}",)) for i in range(50)])
    results = []

    def worker(i):
        service.create_entities([EntityInput(f"T{i}", "t")])
        results.append(service.read_graph(limit=5).total_entity_count)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and service.read_graph().total_entity_count == 58


def test_export_is_one_snapshot(service):
    service.create_entities([EntityInput("A", "t", ("a",)), EntityInput("B", "t")])
    service.create_relations([RelationInput("A", "r", "B")])
    graph = service.export_graph(order="name")
    assert [e.name for e in graph.entities] == ["A", "B"] and len(graph.relations) == 1


def test_damaged_pages_are_an_error_not_an_empty_or_partial_answer(tmp_path):
    db = tmp_path / "lib.db"
    registry = LibraryRegistry([LibrarySpec("default", db)])
    service = MemoryService(registry)
    service.create_entities([EntityInput(f"entity {i}", "t", (f"observation {i} " * 20,)) for i in range(500)])
    registry.close()
    data = bytearray(db.read_bytes())
    assert len(data) > 64 * 1024
    data[8192:40960] = b"\xde\xad\xbe\xef" * ((40960 - 8192) // 4)
    db.write_bytes(bytes(data))
    service = MemoryService(LibraryRegistry([LibrarySpec("default", db)]))
    with pytest.raises(LibraryUnreadableError, match="storage error|not a readable SQLite database"):
        service.read_graph()


def test_journal_records_changes_with_removed_text(service):
    service.create_entities([EntityInput("A", "t", ("keep", "drop"))])
    service.create_entities([EntityInput("a", "t", ("keep",))])  # changes nothing: not journaled
    service.delete_observations([ObservationBatch("A", ("drop",))])
    service.delete_entities(["A"])
    entries = service.history()
    assert [e.action for e in entries] == ["delete_entities", "delete_observations", "create_entities"]
    assert {k: v for k, v in entries[1].detail.items() if k != "undo"} == {"removed": {"A": ["drop"]}}
    kept = entries[1].detail["undo"]["entities"][0]  # the whole entity as it was, for undo
    assert kept["name"] == "A" and [o["content"] for o in kept["observations"]] == ["keep", "drop"]
    assert entries[0].detail["removed"][0]["observations"] == ["keep"]
