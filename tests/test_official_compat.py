"""Drop-in checks against the real official server (`@modelcontextprotocol/server-memory`).

`make test` installs it with npm into .official/ when npm is available; without it these
tests are skipped (and say so).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import server_env
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL = Path(os.environ.get("MEMLOCI_OFFICIAL_SERVER",
                               ROOT / ".official/node_modules/@modelcontextprotocol/server-memory/dist/index.js"))

pytestmark = pytest.mark.skipif(not OFFICIAL.exists() or not shutil.which("node"),
                                reason="official server not installed (make test installs it when npm is available)")

SCRIPT = [
    ("create_entities", {"entities": [
        {"name": "Alice", "entityType": "person", "observations": ["Works at Acme", "Likes green tea"]},
        {"name": "Acme", "entityType": "company", "observations": ["Makes anvils"]},
        {"name": "Bob", "entityType": "person", "observations": []}]}),
    ("create_relations", {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"},
                                        {"from": "Bob", "to": "Alice", "relationType": "knows"}]}),
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["Plays chess"]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["Likes green tea"]}]}),
    ("delete_relations", {"relations": [{"from": "Bob", "to": "Alice", "relationType": "knows"}]}),
    ("search_nodes", {"query": "anvils"}),
    ("open_nodes", {"names": ["Alice"]}),
    ("read_graph", {}),
]


async def _play(params: StdioServerParameters) -> list[tuple[bool, object]]:
    replies = []
    async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w):
        async with ClientSession(r, w) as session:
            await session.initialize()
            for name, arguments in SCRIPT:
                result = await session.call_tool(name, arguments)
                text = result.content[0].text
                try:
                    replies.append((bool(result.is_error), json.loads(text)))
                except json.JSONDecodeError:
                    replies.append((bool(result.is_error), text))
    return replies


def _official(memory: Path) -> StdioServerParameters:
    return StdioServerParameters(command=shutil.which("node"), args=[str(OFFICIAL)],
                                 env={**os.environ, "MEMORY_FILE_PATH": str(memory)})


def _strip(value):
    """The official fields only: what a client written for the official server reads."""
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, dict):
        keep = {"name", "entityType", "observations", "from", "to", "relationType", "entities", "relations",
                "entityName", "addedObservations"}
        return {k: _strip(v) for k, v in value.items() if k in keep}
    return value


def test_same_calls_give_the_same_text_replies(home, tmp_path):
    ours = anyio.run(_play, StdioServerParameters(command=sys.executable, args=["-m", "memloci", "serve"],
                                                  env=server_env(home)))
    theirs = anyio.run(_play, _official(tmp_path / "memory.jsonl"))
    assert [e for e, _ in ours] == [e for e, _ in theirs] == [False] * len(SCRIPT)
    for (name, _), (_, mine), (_, official) in zip(SCRIPT, ours, theirs):
        if isinstance(official, str):
            assert mine == official, name  # "Entities deleted successfully" and friends
        else:
            assert _strip(mine) == official, name


def test_export_loads_in_the_official_server_and_its_file_imports_here(home, tmp_path):
    memory = tmp_path / "memory.jsonl"
    anyio.run(_play, _official(memory))  # the official server writes its own file
    subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", str(memory)], env=server_env(home),
                   check=True, capture_output=True)
    exported = tmp_path / "exported.jsonl"
    subprocess.run([sys.executable, "-m", "memloci", "export", "jsonl", str(exported)], env=server_env(home),
                   check=True, capture_output=True)

    async def read(params):
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                return json.loads((await session.call_tool("read_graph", {})).content[0].text)

    original = anyio.run(read, _official(memory))
    reloaded = anyio.run(read, _official(exported))
    assert reloaded == original
    assert {e["name"] for e in original["entities"]} == {"Alice", "Acme", "Bob"}
