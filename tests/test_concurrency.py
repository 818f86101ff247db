"""No lost writes: concurrent calls in one server, several servers on one file, SIGKILL mid-batch."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from functools import partial

import anyio
import pytest
from conftest import Client, process_session, server_env


def count(db) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        entities = conn.execute("SELECT count(*) FROM entities").fetchone()[0]
        observations = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return entities, observations
    finally:
        conn.close()


def test_twenty_parallel_calls_from_one_client_all_land(home):
    async def main():
        async with process_session(home) as session:  # over stdio: its transport runs calls at once
            c = Client(session)
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(partial(c.ok, "create_entities", entities=[
                        {"name": f"parallel-{i}", "entityType": "t", "observations": [f"o{i}"]}]))
            graph, _ = await c.ok("read_graph")
            assert sorted(e["name"] for e in graph["entities"]) == sorted(f"parallel-{i}" for i in range(20))
            # and parallel observations on one entity
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(partial(c.ok, "add_observations", observations=[
                        {"entityName": "parallel-0", "contents": [f"extra {i}"]}]))
            graph, _ = await c.ok("open_nodes", names=["parallel-0"])
            assert len(graph["entities"][0]["observations"]) == 21

    anyio.run(main)
    assert count(home / "default.db") == (20, 40)


WRITER = textwrap.dedent("""
    import os, sys, anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main(tag, n):
        params = StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"], env=dict(os.environ))
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                for i in range(n):
                    calls = [
                        # its own entity
                        ("create_entities", {"entities": [
                            {"name": f"{tag}-{i}", "entityType": "t", "observations": [f"{tag} obs {i}"]}]}),
                        # the same new name as every other writer, each adding its own observation
                        ("create_entities", {"entities": [
                            {"name": f"shared-{i % 25}", "entityType": "t", "observations": [f"{tag} says {i}"]}]}),
                        # one entity every writer appends to
                        ("add_observations", {"observations": [{"entityName": "hub", "contents": [f"{tag} hub {i}"]}]}),
                    ]
                    for name, arguments in calls:
                        res = await s.call_tool(name, arguments)
                        assert not res.is_error, res.content[0].text
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
""")


@pytest.mark.full  # several server processes
def test_four_server_processes_on_one_library_lose_nothing(home, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = server_env(home)
    subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", "/dev/stdin"], env=env, check=True,
                   input='{"type": "entity", "name": "hub", "entityType": "t", "observations": []}', text=True,
                   capture_output=True)
    procs = [subprocess.Popen([sys.executable, str(script), f"w{p}", "250"], env=env,
                              stderr=subprocess.PIPE, text=True) for p in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=400)
        assert p.returncode == 0, err[-2000:]
    conn = sqlite3.connect(home / "default.db")
    names = [r[0] for r in conn.execute("SELECT name FROM entities")]
    # 1 hub + 4 x 250 own entities + 25 shared names created once, never twice
    assert len(names) == 1 + 1000 + 25 and len(set(n.casefold() for n in names)) == len(names)
    hub = {r[0] for r in conn.execute(
        "SELECT content FROM memories JOIN entities e ON e.id = entity_id WHERE e.name = 'hub'")}
    assert hub == {f"w{p} hub {i}" for p in range(4) for i in range(250)}
    shared = {r[0] for r in conn.execute(
        "SELECT content FROM memories JOIN entities e ON e.id = entity_id WHERE e.name LIKE 'shared-%'")}
    assert shared == {f"w{p} says {i}" for p in range(4) for i in range(250)}
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 3000
    conn.close()


KILLED_WRITER = textwrap.dedent("""
    import sys
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.core.model import EntityInput
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry([LibrarySpec("default", sys.argv[1])]))
    for batch in range(1000):
        print("begin", batch, flush=True)
        service.create_entities([EntityInput(f"r{sys.argv[2]}-b{batch}-e{i}", "t", (f"first {i}", f"second {i}", f"third {i}"))
                                 for i in range(1000)])
        print("done", batch, flush=True)
""")


@pytest.mark.full  # SIGKILL
def test_sigkill_mid_batch_leaves_whole_batches_only(tmp_path):
    db = tmp_path / "lib.db"
    script = tmp_path / "killed.py"
    script.write_text(KILLED_WRITER)
    for round_ in range(3):
        proc = subprocess.Popen([sys.executable, str(script), str(db), str(round_)], stdout=subprocess.PIPE, text=True)
        done = 0
        # let two batches land, then kill as soon as the third has begun: mid-transaction
        while (line := proc.stdout.readline()) != "begin 2\n":
            done += line.startswith("done")
        time.sleep(0.005 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait()
        assert done == 2 and "done 2" not in rest, "the kill must land while batch 2 is being written"
        entities, observations = count(db)
        assert entities == 2000 * (round_ + 1), f"expected whole batches only, found {entities} entities"
        assert observations == 3 * entities
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM entity_fts").fetchone()[0] == entities, \
        "the search index holds exactly the committed entities"
    conn.close()
