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

from conftest import Client, mcp_session, server_env


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
        async with mcp_session(home) as session:
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
                    res = await s.call_tool("create_entities", {"entities": [
                        {"name": f"{tag}-{i}", "entityType": "t", "observations": [f"{tag} obs {i}"]}]})
                    assert not res.is_error, res.content[0].text
                    if i % 50 == 0:
                        res = await s.call_tool("add_observations", {"observations": [
                            {"entityName": f"{tag}-0", "contents": [f"{tag} extra {i}"]}]})
                        assert not res.is_error, res.content[0].text
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
""")


def test_four_server_processes_on_one_library_lose_nothing(home, tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = server_env(home)
    procs = [subprocess.Popen([sys.executable, str(script), f"w{p}", "250"], env=env,
                              stderr=subprocess.PIPE, text=True) for p in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
    # 4 x 250 entities, each with one observation, plus 5 extra observations per writer
    assert count(home / "default.db") == (1000, 1020)


KILLED_WRITER = textwrap.dedent("""
    import sys
    from memloci.libraries import LibraryRegistry, LibrarySpec
    from memloci.model import EntityInput
    from memloci.service import MemoryService

    service = MemoryService(LibraryRegistry([LibrarySpec("default", sys.argv[1])]))
    batch = 0
    while True:
        service.create_entities([EntityInput(f"b{batch}-e{i}", "t", (f"first {i}", f"second {i}", f"third {i}"))
                                 for i in range(1000)])
        batch += 1
        print(batch, flush=True)
""")


def test_sigkill_mid_batch_leaves_whole_batches_only(tmp_path):
    db = tmp_path / "lib.db"
    script = tmp_path / "killed.py"
    script.write_text(KILLED_WRITER)
    for delay in (0.9, 1.7, 2.6):
        proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # at least one batch committed, the next one under way
        time.sleep(delay % 1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        entities, observations = count(db)
        assert entities > 0 and entities % 1000 == 0, entities
        assert observations == 3 * entities
    conn = sqlite3.connect(db)
    fts = conn.execute("SELECT count(*) FROM entity_fts").fetchone()[0]
    assert fts == entities, "the search index holds exactly the committed entities"
