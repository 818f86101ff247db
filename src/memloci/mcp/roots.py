"""The client's MCP roots as the project of project tools called without a project path.

A client that declares the `roots` capability (Claude Code, VS Code, ...) is asked for its roots
(`roots/list`) on the first such call of a connection; the answer is kept for that connection
until the client sends `notifications/roots/list_changed`. The project is the first root that
is a `file://` URI of a project root, by the same rule as an explicit path
(projects.resolve_project_root: a folder holding .git, pyproject.toml, package.json, ...; a
sub-folder of a project does not count). Its path is then put into the call's arguments, as if
the client had given it, so everything an explicit path goes through applies unchanged: the
AWAITING_CONFIRMATION handshake with `detected_root`, confinement (no symlink out of the
root). Over HTTP, a root is a path on the client's machine, not the server's: roots are used
only for a `*:admin` token (which may name any folder on the server anyway); for any other
token they are ignored and the call goes to its library as without roots (access.py
`may_use_roots`).

Which tools: those whose job is project memory, called with no library and no project path:
the project group (`update_context`, `get_graph_summary`, `export_markdown`) and every n2n tool.
The other tools keep working on the mounted library when no path is given, so a client with
roots still reaches its default memory. A client without roots, a client whose roots hold no
project, or one that does not answer within ROOTS_TIMEOUT seconds: behaviour unchanged.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio

from memloci.app.projects import resolve_project_root
from memloci.core.errors import MemlociError

log = logging.getLogger("memloci.mcp")

ROOTS_TIMEOUT = 5.0  # seconds a client may take to list its roots before the call goes on without
ROOTS_MAX = 100  # roots looked at per connection; a client listing thousands gets the first ones


def root_path(uri: str) -> str | None:
    """The local path of a `file://` root URI (percent-decoded), None for any other URI or host."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    path = unquote(parsed.path)
    return path if path.startswith("/") and "\x00" not in path else None


def first_project(paths: list[str]) -> str | None:
    """The first path that is a project root (projects.resolve_project_root), or None."""
    for path in paths:
        try:
            return str(resolve_project_root(path, field="roots"))
        except (MemlociError, OSError, RuntimeError):  # RuntimeError: a link loop
            continue
    return None


def connection_of(ctx: Any) -> Any:
    """The client's connection: a request's session object is new per request, its connection is not."""
    return getattr(ctx.session, "_connection", ctx.session)


class ClientRoots:
    """Each connection's roots, asked once and forgotten when the client says they changed."""

    def __init__(self) -> None:
        # weak: a closed connection's roots go with it
        self._known: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()

    def forget(self, ctx: Any) -> None:
        """`notifications/roots/list_changed`: ask again on the next call."""
        try:
            self._known.pop(connection_of(ctx), None)
        except TypeError:  # not weakly referenceable: nothing was kept for it
            pass

    async def project_root(self, context: Any) -> str | None:
        """The project root the client's roots name, or None (no roots capability, no project)."""
        try:
            capabilities = context.client_capabilities
            connection = connection_of(context)
        except Exception:  # no request context (a direct call in a test, say)
            return None
        if capabilities is None or getattr(capabilities, "roots", None) is None:
            return None
        try:
            paths = self._known.get(connection)
        except TypeError:
            paths = None
        if paths is None:
            paths = await self._ask(context)
            try:
                self._known[connection] = paths
            except TypeError:
                pass
        return await anyio.to_thread.run_sync(first_project, paths)  # file checks: off the event loop

    @staticmethod
    async def _ask(context: Any) -> list[str]:
        try:
            with anyio.fail_after(ROOTS_TIMEOUT), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots are deprecated from protocol 2026-07-28; still served
                result = await context.session.list_roots()
        except Exception as exc:  # no back-channel (stateless HTTP), an error, a timeout: no roots
            log.info("roots/list failed: %s", type(exc).__name__)
            return []
        paths = [p for p in (root_path(str(r.uri)) for r in result.roots[:ROOTS_MAX]) if p is not None]
        log.debug("client roots: %s", paths)
        return [str(Path(p)) for p in paths]
