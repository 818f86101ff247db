"""The in-process server the tests talk to (conftest.mcp_session, over the SDK's in-memory
transport) is the server `memloci serve` runs: for the same flags and environment both answer
initialize, tools/list, prompts/list and resources/list alike. Both are built by
mcp.server.serve_from; this catches a difference in what they are built from (flags, environment)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from conftest import mcp_session, process_session


async def what_it_says(session) -> dict:
    """The parts of a server's answers that do not depend on the transport."""
    init = session.initialize_result
    return {
        "server": init.server_info.name, "instructions": init.instructions,
        "capabilities": init.capabilities.model_dump(exclude_none=True),
        "tools": [t.model_dump(by_alias=True, exclude_none=True) for t in (await session.list_tools()).tools],
        "prompts": [p.model_dump(by_alias=True, exclude_none=True) for p in (await session.list_prompts()).prompts],
        "resources": [r.model_dump(by_alias=True, exclude_none=True) for r in (await session.list_resources()).resources],
    }


FLAGS = {
    "defaults": lambda tmp: (),
    "strict-schema": lambda tmp: ("--tools", "strict,memory,project", "--schema", "strict"),
    "two-libraries-named": lambda tmp: ("--libraries", f"a:{tmp}/a.db,b:{tmp}/b", "--name", "brain",
                                        "--tools", "graph,memory,documents,n2n"),
}


@pytest.mark.parametrize("flags", FLAGS)
def test_the_in_process_server_is_the_one_serve_runs(tmp_path: Path, flags: str):
    args = FLAGS[flags](tmp_path)

    async def main() -> tuple[dict, dict]:
        async with process_session(tmp_path / "home", *args) as session:
            served = await what_it_says(session)
        async with mcp_session(tmp_path / "home", *args) as session:
            in_process = await what_it_says(session)
        return served, in_process

    served, in_process = anyio.run(main)
    for key in served:
        assert in_process[key] == served[key], key
