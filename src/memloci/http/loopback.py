"""`memloci serve --transport http` as a process on a loopback port, and an MCP client session to it.

What drives a real HTTP server from outside starts it here: `memloci bench http` and the tests
(conformance over HTTP, replicas, roots, OAuth, many clients at once). The server is a real
process started with `python -m memloci`, reached through the SDK's streamable HTTP client;
nothing here imports the server's own code.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT = 90.0  # seconds: a cold start on a loaded 2-core machine imports a lot


@dataclass(frozen=True)
class Endpoint:
    """A running `memloci serve --transport http`: where to reach it, with which headers."""

    url: str
    headers: dict[str, str]
    process: subprocess.Popen
    log: Path  # the server's stderr


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick; another process could take it
    before the server binds, so `loopback_server` tries again when the bind fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memloci_command(*args: str) -> list[str]:
    """The command line of `memloci ARGS` with this interpreter (the installed package, or PYTHONPATH's)."""
    return [sys.executable, "-m", "memloci", *args]


def create_token(env: dict[str, str], name: str, scopes: list[str]) -> str:
    """`memloci token create NAME --scope S ...`: the bearer token it prints once."""
    argv = memloci_command("token", "create", name, *[a for s in scopes for a in ("--scope", s)])
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"memloci token create failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    found = re.findall(r"\bmlc_[A-Za-z0-9_-]+", proc.stdout)  # tokens.py's TOKEN_PREFIX
    if len(found) != 1:
        raise RuntimeError(f"memloci token create should print one token, got: {proc.stdout!r}")
    return found[0]


def wait_listening(port: int, process: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until the port accepts a connection (uvicorn binds after the app has started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memloci serve --transport http exited {process.returncode}:\n"
                               f"{log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"memloci serve --transport http did not listen on port {port} within {timeout:.0f}s:\n"
                       f"{log.read_text(errors='replace')[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (a clean shutdown finishes in-flight calls), then SIGKILL if it hangs."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def loopback_server(serve_args: list[str], env: dict[str, str], *, log: Path, scopes: list[str] | None = None,
                    headers: dict[str, str] | None = None, cwd: Path | None = None,
                    timeout: float = START_TIMEOUT) -> Iterator[Endpoint]:
    """`memloci serve --transport http --port P <serve_args>` on a free loopback port; with
    `scopes`, a token holding them (made in the `MEMLOCI_HOME` of `env`) goes in the headers.
    `serve_args` are what follows `serve` (a leading "serve" is taken off)."""
    args = serve_args[1:] if serve_args[:1] == ["serve"] else serve_args
    headers = dict(headers or {})
    if scopes:
        headers["Authorization"] = f"Bearer {create_token(env, 'conformance', scopes)}"
    for attempt in range(3):
        port = free_port()
        with log.open("ab") as errlog:
            process = subprocess.Popen(memloci_command("serve", "--transport", "http", "--port", str(port), *args),
                                       env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=errlog, stderr=errlog)
        try:
            wait_listening(port, process, log, timeout)
        except RuntimeError:
            stop(process)
            if attempt < 2 and "address already in use" in log.read_text(errors="replace").lower():
                continue  # another process took the port between our probe and the bind
            raise
        try:
            yield Endpoint(f"http://127.0.0.1:{port}/mcp", headers, process, log)
        finally:
            stop(process)
        return


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str], session_class: type | None = None, **session_kwargs: Any):
    """A Python SDK client session over streamable HTTP to `url`, initialized (its InitializeResult
    kept as `session.init_result`)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            (session_class or ClientSession)(read, write, **session_kwargs) as session:
        session.init_result = await session.initialize()
        yield session
