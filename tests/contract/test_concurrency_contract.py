"""No lost writes across processes, on every engine: 4 real writer processes × 250 rounds of
calls on one library (writer.py), at once. Every entity is created once (a name all of them
create is merged, never doubled), and every observation each of them was told was stored is
there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memloci.core.model import EntityInput

WRITERS, ROUNDS = 4, 250


def test_four_writer_processes_on_one_library_lose_nothing(engine):
    spec = engine.spec_text()
    engine.open(spec).create_entities([EntityInput("hub", "t")])  # left open, as a server beside the writers would be
    procs = [subprocess.Popen([sys.executable, str(Path(__file__).with_name("writer.py")), spec, f"w{p}", str(ROUNDS)],
                              stderr=subprocess.PIPE, text=True) for p in range(WRITERS)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]

    graph = engine.open(spec).export_graph()
    names = [e.name for e in graph.entities]
    # the hub, each writer's own entities, and 25 shared names created once, never twice
    assert len(names) == 1 + WRITERS * ROUNDS + 25 and len({n.casefold() for n in names}) == len(names)
    by_name = {e.name: [o.content for o in e.observations] for e in graph.entities}
    assert sorted(by_name["hub"]) == sorted(f"w{p} hub {i}" for p in range(WRITERS) for i in range(0, ROUNDS, 5))
    shared = [o for n, obs in by_name.items() if n.startswith("shared-") for o in obs]
    assert sorted(shared) == sorted(f"w{p} says {i}" for p in range(WRITERS) for i in range(ROUNDS))
    assert all(by_name[f"w{p}-{i}"] == [f"w{p} obs {i}"] for p in range(WRITERS) for i in range(ROUNDS))
    assert sum(len(obs) for obs in by_name.values()) == WRITERS * (2 * ROUNDS + ROUNDS // 5)


def test_a_second_server_sees_the_first_ones_writes(engine):
    """Two services on one library, as two servers would be: each reads what the other wrote,
    searches included (their caches of names and words follow the other's writes)."""
    spec = engine.spec_text()
    first, second = engine.open(spec), engine.open(spec)
    first.create_entities([EntityInput("Falcon", "project", ("Uses PostgreSQL",))])
    assert [h.entity.name for h in second.search_nodes("falcon").hits] == ["Falcon"]
    second.create_entities([EntityInput("Heron", "project", ("Moved to SQLite",))])
    first.create_entities([EntityInput("falcon", "project", ("Ships in May",))])  # a merge, not a second Falcon
    assert [h.entity.name for h in first.search_nodes("heron").hits] == ["Heron"]
    assert [o.content for o in second.open_nodes(["FALCON"]).entities[0].observations] == ["Uses PostgreSQL",
                                                                                            "Ships in May"]
    first.store_memory("The freeze starts on Friday", tags=["ops"])
    assert [h.memory.content for h in second.retrieve_memory("freeze").hits] == ["The freeze starts on Friday"]
    second.delete_entities(["Falcon"])
    assert first.open_nodes(["Falcon"]).entities == () and first.search_nodes("falcon").hits == ()
    assert first.read_graph().total_entity_count == second.read_graph().total_entity_count == 1
