"""The MCP server's commands: `memloci serve` (stdio, or streamable HTTP with --transport http),
`memloci tools` (what the tools cost a model's context), and server mode's `memloci token ...`."""

from __future__ import annotations

import gc
import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any

import typer

from memloci.cli.common import (
    LibrariesOpt,
    check_choice,
    closest,
    command_settings,
    fail,
    fail_plainly,
    open_console,
    open_service,
)
from memloci.core.errors import MemlociError, ValidationError
from memloci.core.settings import Settings

TRANSPORTS = ("stdio", "http")
token_app = typer.Typer(help="Bearer tokens for `memloci serve --transport http` (stored hashed).",
                        no_args_is_help=True, rich_markup_mode=None)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="A name for the token's holder; the access log shows it.")],
    scope: Annotated[list[str], typer.Option("--scope", help="LIBRARY:read|write|admin, repeatable; * is every library.")],
    libraries: LibrariesOpt = None,
) -> None:
    """Create a token and print it once: only its SHA-256 is stored ($MEMLOCI_HOME/tokens.json).
    A scope naming a library that is not mounted is kept, with a warning."""
    from memloci.http.tokens import TokenStore, token_file

    try:
        settings = command_settings(libraries=libraries)
        store = TokenStore(token_file(settings))
        secret = store.create(name, scope)
    except MemlociError as exc:
        fail_plainly(exc)
    print(secret)
    print(f"Token '{name}' created with {', '.join(scope)}. It is shown only now: keep it in your client's "
          "configuration as the header Authorization: Bearer <token>.", file=sys.stderr)
    _warn_unmounted(name, scope, settings)


def _warn_unmounted(name: str, scopes: list[str], settings: Settings) -> None:
    """A scope for a library this configuration does not mount is most often a typo: say so on
    stderr. The token keeps it, for a library mounted later (or only by the server's --libraries)."""
    from memloci.app.config import default_specs
    from memloci.http.tokens import unmounted_libraries

    try:
        mounted = [spec.name for spec in default_specs(settings)]
    except MemlociError as exc:
        print(f"warning: cannot tell which libraries are mounted here ({exc.message}), so the scopes "
              "were not checked against them", file=sys.stderr)
        return
    for library in unmounted_libraries(scopes, mounted):
        typo = f" (did you mean '{close}'?)" if (close := closest(library, mounted)) else ""
        print(f"warning: no library '{library}' is mounted here (mounted: {', '.join(mounted)}){typo}; the token "
              f"is created, and it can use '{library}' once a server mounts it. If the name is wrong: "
              f"memloci token revoke {name}", file=sys.stderr)


@token_app.command("list")
def token_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The tokens: name, scopes, created. Never the tokens themselves (they are not stored)."""
    from memloci.http.tokens import TokenStore, token_file

    try:
        tokens = [t.public() for t in TokenStore(token_file(command_settings())).load()]
    except MemlociError as exc:
        fail_plainly(exc)
    if as_json:
        print(json.dumps({"tokens": tokens}, indent=2))
        return
    if not tokens:
        print("No tokens. Create one: memloci token create NAME --scope LIBRARY:write", file=sys.stderr)
    for t in tokens:
        print(f"{t['name']}\t{' '.join(t['scopes'])}\t{t['created']}")


@token_app.command("revoke")
def token_revoke(name: Annotated[str, typer.Argument(help="The token's name.")]) -> None:
    """Revoke a token: a running server refuses it from its next request."""
    from memloci.http.tokens import TokenStore, token_file

    try:
        TokenStore(token_file(command_settings())).revoke(name)
    except MemlociError as exc:
        fail_plainly(exc)
    print(f"Token '{name}' revoked.", file=sys.stderr)


def serve_http_command(build: Callable[[dict[str, Any]], Any], *, host: str | None, port: int | None,
                       stateless: bool, allowed_hosts: list[str] | None, allowed_origins: list[str] | None,
                       max_body: int | None, rate_limit: int | None, settings: Settings,
                       header_timeout: float | None = None, body_timeout: float | None = None,
                       max_connections: int | None = None, drain_timeout: float | None = None) -> None:
    """`memloci serve --transport http`: `build(config)` gives (service, server); the rest is ours.
    `settings` are the program's."""
    from memloci.app.config import config_file
    from memloci.http.app import check_bind, serve_http
    from memloci.http.settings import resolve
    from memloci.http.tokens import StoredTokenVerifier, TokenStore, token_file

    level = settings.log_level or "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if settings.log_level is None:  # by default: warnings, plus the access log and start/stop lines
        for ours in ("memloci.access", "memloci.http", "uvicorn.error"):
            logging.getLogger(ours).setLevel(logging.INFO)
    if level != "DEBUG":  # the SDK's and uvicorn's info lines may echo paths and URIs
        for noisy in ("mcp", "uvicorn.access", "httpx2", "httpx"):
            logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        config = config_file(settings)
        http = resolve(config, host=host, port=port, stateless=stateless, allowed_hosts=allowed_hosts,
                       allowed_origins=allowed_origins, max_body_bytes=max_body, rate_limit=rate_limit,
                       header_timeout=header_timeout, body_timeout=body_timeout, max_connections=max_connections,
                       drain_timeout=drain_timeout, process=settings)
        stored = StoredTokenVerifier(TokenStore(token_file(settings)))
        verifiers: list[Any] = [stored]
        extra_routes: list[Any] = []
        metadata_url = None
        oauth = config.get("oauth")
        if oauth is not None:  # JWTs from an issuer, tried after the stored tokens
            from memloci.http.oauth import JwtTokenVerifier, protected_resource_routes

            verifiers.append(JwtTokenVerifier(oauth))
            extra_routes = protected_resource_routes(oauth)
            metadata_url = oauth.metadata_url
        configured = oauth is not None or stored.configured()
        check_bind(http, configured)
        service, server = build(config)
    except MemlociError as exc:
        fail_plainly(exc)
    service.embedder.start_background(delay=0.5)
    service.watch_libraries()
    try:
        serve_http(server, http, verifiers=verifiers, tokens_configured=configured, extra_routes=extra_routes,
                   configured_now=stored.configured, service=service,
                   resource_metadata_url=metadata_url, on_shutdown=service.close)
    except MemlociError as exc:
        service.close()
        fail_plainly(exc)


def tools_cmd(
    libraries: LibrariesOpt = None,
    tools: Annotated[str | None, typer.Option("--tools",
                                                 help="Tool groups, comma-separated (MEMLOCI_TOOLS; default: as serve).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Each tool's size in tools/list (characters of its JSON) and the total: what the tools cost a model's context."""
    from memloci.mcp.server import tool_groups, tool_sizes

    try:
        from memloci.app.config import config_file

        settings = command_settings(libraries=libraries, tools=tools)
        rows = tool_sizes(open_service(None, read_only=True, settings=settings),
                          tool_groups(settings.tools or config_file(settings).get("tools")))
    except MemlociError as exc:
        fail(exc)
    total = sum(r["chars"] for r in rows)
    if as_json:
        print(json.dumps({"tools": rows, "total_chars": total}, indent=2))
        return
    from rich.table import Table

    table = Table("group", "tool", "chars")
    for r in rows:
        table.add_row(r["group"], r["tool"], str(r["chars"]))
    table.add_row("", "total", str(total))
    open_console().print(table)


def serve(
    libraries: LibrariesOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="Server name that MCP clients see (default: memloci).")] = None,
    tools: Annotated[str | None, typer.Option("--tools",
                                                 help="Tool groups to expose, comma-separated (MEMLOCI_TOOLS; default: all).")] = None,
    schema: Annotated[str | None, typer.Option("--schema", help="Rules for libraries without their own "
                                                  "(config [schemas]): default or strict (instead of MEMLOCI_SCHEMA).")] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (default), or http: streamable HTTP at /mcp.")] = "stdio",
    host: Annotated[str | None, typer.Option("--host", help="http: address to listen on (MCP_SERVER_HOST; default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option("--port", help="http: port (MCP_SERVER_PORT; default 8001).")] = None,
    stateless: Annotated[bool, typer.Option("--stateless", help="http: no sessions, for replicas behind a load balancer.")] = False,
    allowed_host: Annotated[list[str] | None, typer.Option("--allowed-host", help="http: a Host header to accept beside loopback names (repeatable).")] = None,
    allowed_origin: Annotated[list[str] | None, typer.Option("--allowed-origin", help="http: an Origin to accept beside loopback ones (repeatable).")] = None,
    max_body: Annotated[int | None, typer.Option("--max-body", help="http: largest request body in bytes (default 4 MiB).")] = None,
    rate_limit: Annotated[int | None, typer.Option("--rate-limit", help="http: calls a minute per token (default 1200; 0: no limit).")] = None,
    header_timeout: Annotated[float | None, typer.Option("--header-timeout", help="http: seconds to receive a request's headers, then 408 and closed (default 10).")] = None,
    body_timeout: Annotated[float | None, typer.Option("--body-timeout", help="http: seconds to receive a request's body, then 408 and closed (default 30).")] = None,
    max_connections: Annotated[int | None, typer.Option("--max-connections", help="http: connections open at once; one more gets 503 (default: the open-file limit less 256).")] = None,
    drain_timeout: Annotated[float | None, typer.Option("--drain-timeout", help="http: seconds SIGTERM waits for the calls running to be answered, then stops (default 60).")] = None,
) -> None:
    """Run the MCP server on stdio (what MCP clients start), or over HTTP with --transport http."""
    try:
        check_choice("--transport", transport, TRANSPORTS)
    except MemlociError as exc:
        fail(exc)
    if transport == "http":
        gc.enable()  # off while the program loaded (memloci/__init__.py)
        from memloci.mcp.server import serve_from

        try:
            settings = command_settings(libraries=libraries, tools=tools, schema=schema)
        except MemlociError as exc:
            fail(exc)

        serve_http_command(lambda config: serve_from(settings, name=name), host=host, port=port, stateless=stateless, allowed_hosts=allowed_host,
                           allowed_origins=allowed_origin, max_body=max_body, rate_limit=rate_limit,
                           settings=settings, header_timeout=header_timeout, body_timeout=body_timeout,
                           max_connections=max_connections, drain_timeout=drain_timeout)
        return
    from memloci.core.stdio_claim import StdioClaim
    from memloci.mcp.stdio import serve_stdio

    # First of all: from here on only the protocol reaches the real stdout (see core/stdio_claim.py).
    claim = StdioClaim.take()
    try:
        settings = command_settings(libraries=libraries, tools=tools, schema=schema)
    except MemlociError as exc:
        claim.release()
        fail(exc)
    import logging

    level = settings.log_level or "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if level != "DEBUG":  # the SDK's info lines echo resource URIs, which hold project paths
        logging.getLogger("mcp").setLevel(max(logging.WARNING, logging.getLogger().level))
    from memloci.mcp.server import serve_from

    try:
        service, server = serve_from(settings, name=name)
    except MemlociError as exc:
        claim.release()
        fail(exc)
    # The model loads once the client has its tool list (on_tools_listed), so its import does not
    # compete with the first replies, and the garbage collector, off while the program loaded
    # (memloci/__init__.py), is back on then; a client that never lists tools gets both a few
    # seconds on. What the start made lives on (a few thousand objects of garbage aside): frozen,
    # no collection walks it again, so the first one after the start does not pause for it.
    first = threading.Lock()

    def started() -> None:
        if first.acquire(blocking=False):
            gc.freeze()
            gc.enable()
            service.embedder.start_background(delay=0)

    service.embedder.start_background(delay=5.0)
    fallback = threading.Timer(5.0, started)
    fallback.daemon = True
    fallback.start()
    service.watch_libraries()  # Markdown libraries: outside edits show up within a second
    from memloci.mcp import early

    try:
        serve_stdio(server, claim, on_tools_listed=started, early=early.EARLY)
    finally:
        service.close()


def dashboard_answers(url: str) -> bool:
    """Whether a memloci HTTP server with the dashboard answers at `url` (its /api/session)."""
    import urllib.error
    import urllib.request

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    try:
        with direct.open(url + "api/session", timeout=2) as answer:
            return "signed_in" in json.loads(answer.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _open_when_up(url: str, browser: bool) -> None:
    """Wait (in a thread) for the server this process starts to answer, then open the browser."""
    import threading
    import time
    import webbrowser

    def wait_then_open() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if dashboard_answers(url):
                print(f"Dashboard: {url}", flush=True)
                if browser:
                    webbrowser.open(url)
                return
            time.sleep(0.2)

    threading.Thread(target=wait_then_open, name="memloci-ui-browser", daemon=True).start()


def _port_taken(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a closed server's port is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def ui(
    libraries: LibrariesOpt = None,
    port: Annotated[int | None, typer.Option("--port", help="Loopback port (MCP_SERVER_PORT, [http] port; default 8001).")] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Only print the dashboard's URL.")] = False,
) -> None:
    """Open the dashboard: in the browser, at the memloci HTTP server on this machine's loopback
    port; if none answers there, start one (`memloci serve --transport http` on 127.0.0.1) in
    this process, until Ctrl-C."""
    from memloci.app.config import config_file
    from memloci.http.settings import resolve

    try:
        settings = command_settings(libraries=libraries)
        http = resolve(config_file(settings), host="127.0.0.1", port=port, process=settings)
    except MemlociError as exc:
        fail(exc)
    url = f"http://127.0.0.1:{http.port}/"
    if dashboard_answers(url):
        print(f"Dashboard: {url} (a memloci server already runs there)")
        if not no_browser:
            import webbrowser

            webbrowser.open(url)
        return
    if _port_taken(http.port):
        fail(ValidationError(f"--port: {http.port} on 127.0.0.1 is taken by a program that is not a memloci server "
                             "with the dashboard (or an older memloci)",
                             hint="Stop that program, or give another port: memloci ui --port 8002."))
    from memloci.mcp.server import serve_from

    _open_when_up(url, not no_browser)
    serve_http_command(lambda config: serve_from(settings), host="127.0.0.1", port=http.port, stateless=False,
                       allowed_hosts=None, allowed_origins=None, max_body=None, rate_limit=None, settings=settings)


def register(app: typer.Typer) -> None:
    app.command("tools")(tools_cmd)
    app.command()(serve)
    app.command()(ui)
