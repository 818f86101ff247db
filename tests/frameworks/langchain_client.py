"""The LangChain side of tests/test_frameworks.py, run as LangChain users run it: in its own
environment (.venv-langchain, pinned in requirements-langchain.txt) on MCP SDK 1.x, with memloci's
server in a subprocess over stdio.

    langchain_client.py '{"command": ..., "args": [...], "env": {...}}'

starts the server that JSON names, loads its tools with langchain-mcp-adapters (`load_mcp_tools` on
an SDK 1.x ClientSession) and converts each with langchain-core's `convert_to_openai_tool(strict=True)`.
It prints one JSON line with every tool's converted function (or the conversion's error), then reads
calls from stdin, one JSON line each ({"name": ..., "arguments": {...}}), calls the tool through its
LangChain tool object (`ainvoke`) and prints one JSON line per call: {"ok": true, "text": ...} or
{"ok": false, "error": ...}. It ends at the end of stdin. The test builds the arguments, so the
table of calls has one home."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def reply(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def main(server: dict[str, Any]) -> None:
    params = StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in await load_mcp_tools(session, handle_tool_errors=False)}
        functions: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for name, tool in tools.items():
            try:
                functions[name] = convert_to_openai_tool(tool, strict=True)["function"]
            except Exception as exc:  # reported: the test asserts there are none
                errors[name] = f"{type(exc).__name__}: {exc}"
        reply({"functions": functions, "errors": errors})
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            call = json.loads(line)
            try:
                out = await tools[call["name"]].ainvoke(call["arguments"])  # ToolException on an isError reply
            except Exception as exc:
                reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
                continue
            reply({"ok": True, "text": out if isinstance(out, str) else json.dumps(out, default=str)})


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
