"""Many clients at once over streamable HTTP lose nothing.

A real `memloci serve --transport http` on loopback, with a write token made by `memloci token
create`, and 16 Python SDK clients writing at once (store_memory and create_entities in turn,
each write followed by a read): every write the server acknowledged is then read back through
MCP, and the library file agrees. Nothing here is timed; `memloci bench http` measures speed.
"""

from __future__ import annotations

import sqlite3

from memloci.bench.http import LIBRARY, bench_env, client_tag, entity_name, loopback_server, run_load

CLIENTS = 16
WRITES = 12  # per client: 6 memories and 6 entities


def test_concurrent_http_clients_lose_no_write(tmp_path):
    env = bench_env(tmp_path / "home")
    db = tmp_path / "bench.db"
    serve = ["--libraries", f"{LIBRARY}:{db}", "--tools", "graph,memory"]
    with loopback_server(serve, env, log=tmp_path / "server.log", scopes=[f"{LIBRARY}:write"]) as endpoint:
        result = run_load(endpoint, CLIENTS, WRITES)
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert result["errors"] == 0, f"failed calls: {result['first_errors']}\n{log[-2000:]}"
    assert result["acknowledged"] == CLIENTS * WRITES
    assert result["lost_writes"] == 0, result
    assert result["stale_reads"] == 0, result  # each client sees its own write at once
    assert result["writes"]["calls"] == result["reads"]["calls"] == CLIENTS * WRITES

    # The file itself, after the server's clean shutdown: each client's writes, once each.
    with sqlite3.connect(db) as con:
        names = {row[0] for row in con.execute("SELECT name FROM entities")}
        contents = [row[0] for row in con.execute("SELECT content FROM memories WHERE entity_id IS NULL")]
        observations = con.execute("SELECT count(*) FROM memories WHERE entity_id IS NOT NULL").fetchone()[0]
    assert names == {entity_name(c, i) for c in range(CLIENTS) for i in range(1, WRITES, 2)}
    assert observations == CLIENTS * WRITES // 2  # one per entity
    assert len(contents) == len(set(contents)) == CLIENTS * WRITES // 2
    assert all(sum(f"({client_tag(c)}," in text for text in contents) == WRITES // 2 for c in range(CLIENTS))
