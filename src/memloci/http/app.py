"""The HTTP server: the SDK's streamable HTTP session manager behind our checks, run by uvicorn.

A request to `/mcp` passes, in order:

1. Host and Origin against the allow-list (the SDK's `TransportSecurityMiddleware`): 421 / 403;
2. the bearer token, through every configured verifier (see `ChainedVerifier`): 401 without one;
3. the token's rate (limits.RateLimit): 429;
4. body size and message shape (limits.MessageGuard): 413 / 400;
5. a new session beyond the token's session cap (limits.SessionCap): its oldest idle one closes, else 429;
6. the SDK's transport, then `MemlociServer`, which applies the token's scopes (scopes.py, mcp/access.py).

`GET /healthz` answers `{"status": "alive"}` to anyone and says nothing else, unless a mounted
library's database server cannot be reached: then `{"status": "degraded", ...}` (still 200: the
process serves; no library is named, check_database_health names it).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memloci.core.errors import ValidationError
from memloci.http.connections import ConnectionLimits, limited_protocol, serve_taken, take_waiting
from memloci.http.limits import MessageGuard, RateLimit, RateLimiter, SessionCap, rpc_error, send_json
from memloci.http.scopes import TokenCallers
from memloci.http.settings import HttpSettings, default_max_connections, is_loopback

log = logging.getLogger("memloci.http")
# A session with no request and no stream open for this long is closed (the SDK's default is
# 30 minutes): a client that went away without DELETE does not hold memory for half an hour.
SESSION_IDLE_SECONDS = 600
# Once the drain is over, uvicorn closes the connections left (idle ones, event streams) and
# waits this long for the last replies being written before it cuts them.
GRACE_AFTER_DRAIN_SECONDS = 5
# After the last running call's reply is sent, the server keeps listening this long while no
# request it still answers comes: a client may ask for the tool list to check that reply (the
# Python SDK does, to check a result against its output schema) and would otherwise find the
# port closed. Requests refused with 503 do not extend it.
QUIET_SECONDS = 2.0
RETRY_AFTER_SECONDS = 5  # what a 503 during shutdown tells the client: about a restart's time
SHUTTING_DOWN = -32031  # a server-defined JSON-RPC code (the -32000..-32099 range)
# In a session already open, these are still answered during shutdown: they start no work on
# any library, and a client may need the tool list to read a reply it got.
ANSWERED_WHILE_STOPPING = frozenset({"tools/list", "ping"})


class Shutdown:
    """SIGTERM in two steps. `request()`: the server keeps listening, answers every request
    that would start work with 503 (ShutdownGate), and waits for the requests it took before
    to be answered; `finish()` then lets uvicorn stop (stop listening, close the connections
    and streams, exit). A second SIGTERM or SIGINT skips the wait."""

    def __init__(self) -> None:
        self.requested = False
        self.requested_at = 0.0  # monotonic time of the SIGTERM
        self.posts = 0  # POSTs being answered (a call's reply is written before its POST ends)
        self.last_post = 0.0  # monotonic time the last POST ended
        self.refused = 0  # requests answered 503 since the SIGTERM
        self.signal_name = "SIGTERM"
        self.finish: Callable[[], None] = lambda: None

    def request(self, signal_name: str, calls_running: int) -> None:
        self.requested, self.requested_at, self.signal_name = True, time.monotonic(), signal_name
        log.info("%s: refusing new calls and sessions (503); %d calls running, %d requests being answered",
                 signal_name, calls_running, self.posts)

    def quiet(self) -> bool:
        return not self.posts and time.monotonic() - self.last_post >= QUIET_SECONDS


class ShutdownGate:
    """Counts the POSTs being answered; once shutdown is requested, answers 503 (Retry-After, a
    JSON-RPC error with the request's id) to every request that would start work: a tool call,
    `initialize` (a new session), any other request except ANSWERED_WHILE_STOPPING in an open
    session, and a GET (a new event stream). Notifications and responses still pass (a running
    call may be waiting for the client's answer), as does DELETE (closing a session). Every
    response after the SIGTERM closes its connection, so no client keeps one that is about to go."""

    def __init__(self, app: ASGIApp, shutdown: Shutdown):
        self.app, self.shutdown = app, shutdown

    def refuses(self, scope: Scope) -> tuple[bool, Any]:
        """(refuse this request?, the JSON-RPC id to answer)."""
        if scope["method"] == "GET":
            return True, None
        message = scope.get("memloci.message")  # set by MessageGuard
        if not isinstance(message, types.JSONRPCRequest):
            return False, None
        in_session = any(key == b"mcp-session-id" for key, _ in scope["headers"])
        return not (in_session and message.method in ANSWERED_WHILE_STOPPING), message.id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "GET"):
            await self.app(scope, receive, send)
            return
        if self.shutdown.requested:
            refuse, request_id = self.refuses(scope)
            if refuse:
                self.shutdown.refused += 1
                await send_json(send, 503, rpc_error(
                    SHUTTING_DOWN, "Server shutting down: it answers the calls already running and takes no new "
                    f"ones; nothing of this request was done. Retry in {RETRY_AFTER_SECONDS} s, once it is back",
                    request_id), [(b"retry-after", str(RETRY_AFTER_SECONDS).encode()), (b"connection", b"close")])
                return

        async def closing(message: Any) -> None:
            if message["type"] == "http.response.start" and self.shutdown.requested:
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        if scope["method"] == "GET":  # an event stream: open until the session or the server ends
            await self.app(scope, receive, closing)
            return
        self.shutdown.posts += 1
        try:
            await self.app(scope, receive, closing)
        finally:
            self.shutdown.posts -= 1
            self.shutdown.last_post = time.monotonic()


class ChainedVerifier:
    """A `TokenVerifier` that asks each verifier in turn; the first `AccessToken` wins.

    This is the seam for every kind of credential: the stored tokens (tokens.py) and JWTs
    from an OAuth issuer (oauth.py) are both plain SDK `TokenVerifier`s, and any other
    verifier with `async verify_token(token) -> AccessToken | None` chains in the same way.
    Whatever a verifier answers, its `AccessToken` must carry `client_id` (a name for the
    access log and rate limit) and `scopes` as library scopes `LIBRARY:read|write|admin`."""

    def __init__(self, verifiers: Sequence[TokenVerifier]):
        self.verifiers = list(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def header_allowed(value: str, patterns: Sequence[str]) -> bool:
    """Exact match of a Host (`host[:port]`) or Origin (`scheme://host[:port]`) against the allow-list,
    where `NAME:*` stands for NAME with any port: digits only, so that the SDK's prefix match
    (`http://127.0.0.1:8001.evil.com` taken for `http://127.0.0.1:*`) does not let a foreign name in."""
    value = value.lower()
    for pattern in (p.lower() for p in patterns):
        if pattern.endswith(":*"):
            base = pattern[:-2] + ":"
            if value.startswith(base) and value[len(base):].isdigit():
                return True
        elif value == pattern:
            return True
    return False


class ExactTransportSecurity(TransportSecurityMiddleware):
    """The SDK's Host/Origin check (its 421/403 answers), matching exactly (header_allowed)."""

    def _validate_host(self, host: str | None) -> bool:
        return bool(host and header_allowed(host, self.settings.allowed_hosts))

    def _validate_origin(self, origin: str | None) -> bool:
        return not origin or header_allowed(origin, self.settings.allowed_origins)  # no Origin: not a browser


class Throttle:
    """At most `limit` log lines per kind and minute: a flood of refused requests must not flood the log."""

    def __init__(self, limit: int = 10, window: float = 60.0):
        self.limit, self.window = limit, window
        self._seen: dict[Any, tuple[float, int]] = {}  # kind -> (window start, lines asked for in it)

    def allow(self, kind: Any) -> tuple[bool, int]:
        """(log this one?, how many were left out in the window just ended)."""
        now = time.monotonic()
        start, count = self._seen.get(kind, (now, 0))
        left_out = 0
        if now - start >= self.window:
            left_out, start, count = max(0, count - self.limit), now, 0
        self._seen[kind] = (start, count + 1)
        if len(self._seen) > 10_000:  # kinds include token names: keep the table bounded
            self._seen = {kind: self._seen[kind]}
        return count < self.limit, left_out


REFUSALS = {401: "no valid token", 403: "origin not allowed", 413: "body too large", 421: "host not allowed",
            429: "too many requests or sessions"}
access_log = logging.getLogger("memloci.access")


class RefusalLog:
    """One access-log line per request refused before any tool ran (401/403/413/421/429): the token's
    name when known (never the token), the method and the reason; at most 10 a minute per kind."""

    def __init__(self, app: ASGIApp):
        self.app, self.throttle = app, Throttle()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] in REFUSALS:
                self._log(scope, message["status"])
            await send(message)

        await self.app(scope, receive, watch)

    def _log(self, scope: Scope, status: int) -> None:
        token = getattr(scope.get("user"), "access_token", None)
        name = token.client_id if token is not None else "-"
        allowed, left_out = self.throttle.allow((status, name))
        if left_out:
            access_log.info("refused token=%s status=%d: %d more not logged in the last minute", name, status,
                            left_out)
        if allowed:
            access_log.info("refused token=%s method=%s status=%d reason=%s", name, scope.get("method", "-"),
                            status, REFUSALS[status])


class HostOriginCheck:
    """DNS-rebinding protection before anything else: a page in a browser must not reach the server."""

    def __init__(self, app: ASGIApp, settings: TransportSecuritySettings):
        self.app, self.check = app, ExactTransportSecurity(settings)
        self.throttle = Throttle()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = await self.check.validate_request(Request(scope), is_post=False)
        if refusal is not None:
            reason = bytes(refusal.body).decode("utf-8", "replace")
            allowed, left_out = self.throttle.allow(reason)
            if left_out:
                log.warning("refused %d more requests (%s) in the last minute", left_out, reason)
            if allowed:
                log.warning("refused a request: %s", reason)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


CORS_ALLOW_HEADERS = "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID"
CORS_EXPOSE_HEADERS = "Mcp-Session-Id, WWW-Authenticate, Retry-After"


class Cors:
    """CORS for the origins named with `--allowed-origin` (not the loopback ones let in by default,
    so a page on some local dev server gets no access it did not have): a preflight (OPTIONS) is
    answered without a token; other responses to such an origin say it may read them and see
    Mcp-Session-Id. Runs after HostOriginCheck, so a foreign Origin never gets this far."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]):
        self.app, self.origins = app, list(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = dict(scope["headers"]).get(b"origin", b"").decode("latin-1")
        allowed = bool(origin) and header_allowed(origin, self.origins)
        cors = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")] if allowed else []
        if scope["method"] == "OPTIONS":
            extra = [(b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
                     (b"access-control-allow-headers", CORS_ALLOW_HEADERS.encode()),
                     (b"access-control-max-age", b"600")] if allowed else []
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"allow", b"GET, POST, DELETE, OPTIONS"), *cors, *extra]})
            await send({"type": "http.response.body", "body": b""})
            return
        if not allowed:
            await self.app(scope, receive, send)
            return

        async def with_cors(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *cors,
                                                  (b"access-control-expose-headers", CORS_EXPOSE_HEADERS.encode())]}
            await send(message)

        await self.app(scope, receive, with_cors)


def security_settings(settings: HttpSettings) -> TransportSecuritySettings:
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=settings.host_patterns(),
                                     allowed_origins=settings.origin_patterns())


def health_endpoint(server: Any) -> Callable[[Request], Any]:
    """`GET /healthz`: alive, or degraded while a library's database cannot be reached (known
    from the last calls; nothing is asked of any database here)."""
    async def healthz(request: Request) -> JSONResponse:
        if server.unreachable_libraries():
            return JSONResponse({"status": "degraded", "problem": "the database of a mounted library cannot be "
                                                                  "reached; check_database_health names it"})
        return JSONResponse({"status": "alive"})
    return healthz


class OpenUntilTokens:
    """A loopback server started before any token existed: a request without a valid token goes
    straight to the app while `is_open()` (no token yet), and through `guarded` (401 without one)
    from the first token on."""

    def __init__(self, guarded: ASGIApp, open_app: ASGIApp, is_open: Callable[[], bool]):
        self.guarded, self.open_app, self.is_open = guarded, open_app, is_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not isinstance(scope.get("user"), AuthenticatedUser) and self.is_open():
            await self.open_app(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


def build_http_app(server: Any, settings: HttpSettings, *, verifiers: Sequence[TokenVerifier] = (),
                   extra_routes: Sequence[Any] = (), resource_metadata_url: Any = None,
                   on_shutdown: Callable[[], None] | None = None,
                   stopping: Callable[[], bool] | None = None, shutdown: Shutdown | None = None,
                   open_while: Callable[[], bool] | None = None, service: Any = None) -> Starlette:
    """The ASGI app serving `server` (a MemlociServer) at `/mcp`, and, given the `service`, the
    dashboard at `/` and `/api/` (http/dashboard/: its own sign-in with the same verifiers, behind
    the same Host/Origin check).

    `verifiers`: tried in order for each bearer token (see ChainedVerifier); with none, `/mcp`
    needs no token (allowed on loopback only: serve_http checks). `extra_routes` are added
    unauthenticated (e.g. OAuth protected-resource metadata), and `resource_metadata_url` goes
    into the 401's WWW-Authenticate header. `on_shutdown` runs after the last tool call ended;
    `stopping()` says uvicorn is stopping (then the open event streams close); `shutdown`,
    when given, is the step before (see Shutdown). `open_while()`, when given, is asked on each
    request: while it is true (no token exists yet, on a loopback server), a request without a
    token is let in; from the moment it turns false (the first `memloci token create`), every
    request needs one, with no restart."""
    server.callers = TokenCallers()  # each request's caller: its token, with its library scopes
    security = security_settings(settings)
    manager = StreamableHTTPSessionManager(app=server._lowlevel_server, stateless=settings.stateless,
                                           security_settings=security, max_request_body_size=settings.max_body_bytes,
                                           session_idle_timeout=SESSION_IDLE_SECONDS)
    server._lowlevel_server._session_manager = manager  # what MCPServer.session_manager reports
    sessions = SessionCap(StreamableHTTPASGIApp(manager), manager, settings.max_sessions_per_token)
    mcp_app: ASGIApp = MessageGuard(ShutdownGate(sessions, shutdown) if shutdown else sessions, settings.max_body_bytes)
    middleware: list[Middleware] = []
    limiter = RateLimiter(settings.rate_limit)  # a token's calls a minute, over /mcp and the dashboard's writes
    if verifiers:
        guarded = RequireAuthMiddleware(RateLimit(mcp_app, limiter), [], resource_metadata_url)
        mcp_app = guarded if open_while is None else OpenUntilTokens(guarded, mcp_app, open_while)
        middleware = [Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(ChainedVerifier(verifiers))),
                      Middleware(AuthContextMiddleware)]
    mcp_app = RefusalLog(HostOriginCheck(Cors(mcp_app, settings.allowed_origins), security))

    async def drain() -> None:
        """SIGTERM's first step (see Shutdown): wait for the calls running and the POSTs being
        answered, then for QUIET_SECONDS with no request coming, within the drain window; say in
        the log what happened; then let uvicorn stop. The open event streams are closed only
        then (sse-starlette would close them at uvicorn's stop at once, and a running call's
        reply on a stream would be lost though its write is kept)."""
        assert stopping is not None  # started only when given (lifespan)
        if shutdown is not None:
            while not shutdown.requested and not stopping():
                await anyio.sleep(0.05)
            if shutdown.requested and not stopping():
                await wait_for_running_calls(shutdown, stopping)
            shutdown.finish()
        while not stopping():
            await anyio.sleep(0.05)
        AppStatus.should_exit = True

    async def wait_for_running_calls(shutdown: Shutdown, stopping: Callable[[], bool]) -> None:
        def running() -> int:
            return max(server.calls_in_flight, shutdown.posts)

        answered_at = None
        with anyio.move_on_after(settings.drain_timeout - (time.monotonic() - shutdown.requested_at)):
            while not stopping() and (running() or not shutdown.quiet()):
                if running():
                    answered_at = None
                elif answered_at is None:
                    answered_at = time.monotonic()
                await anyio.sleep(0.02)
        if stopping():  # a second signal
            log.warning("second signal: stopping now with %d calls running", running())
        elif running():
            log.warning("drain window of %g s over with %d %s still running: stopping; their clients get no "
                        "reply", settings.drain_timeout, running(), "call" if running() == 1 else "calls")
        else:
            took = (answered_at or time.monotonic()) - shutdown.requested_at
            log.info("all running calls answered %.1f s after %s (%d requests refused): stopping", took,
                     shutdown.signal_name, shutdown.refused)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            async with anyio.create_task_group() as tasks:
                if stopping is not None:
                    tasks.start_soon(drain)
                yield
                tasks.cancel_scope.cancel()
            # uvicorn has stopped: a call still running now (the drain window is over, or a second
            # signal came) gets a moment to end its write before the session manager cancels it
            with anyio.move_on_after(5):
                while server.calls_in_flight:
                    await anyio.sleep(0.05)
            if server.calls_in_flight:
                log.warning("shutting down with %d tool calls unfinished", server.calls_in_flight)
        if on_shutdown is not None:
            on_shutdown()

    routes = [Route("/healthz", health_endpoint(server), methods=["GET"]), Route("/mcp", endpoint=mcp_app), *extra_routes]
    if service is not None:
        from memloci.http.dashboard import dashboard_app
        from memloci.http.dashboard.endpoint import Serving

        serving = Serving(limiter, settings.max_body_bytes, lambda: shutdown is not None and shutdown.requested)
        page = HostOriginCheck(dashboard_app(service, server, verifiers=verifiers, open_while=open_while,
                                             serving=serving), security)  # (it logs its refusals; the API its calls)
        # its own paths only, so /mcp/ and /healthz/ still redirect to /mcp and /healthz
        routes += [Route(path, endpoint=page) for path in ("/", "/static/{file:path}", "/api", "/api/{path:path}")]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def check_bind(settings: HttpSettings, tokens_configured: bool) -> None:
    """A non-loopback address with no token configured is refused, before anything is opened."""
    if tokens_configured:
        return
    # behind a reverse proxy: a loopback bind, but a name beyond this machine in the allowed
    # Host headers means the proxy forwards other machines' requests: as exposed as a wide bind
    exposed = [h for h in settings.allowed_hosts if not is_loopback(_host_name(h))]
    if settings.loopback and exposed:
        raise ValidationError(
            f"allowed host {exposed[0]}: refusing to serve requests for a name beyond this machine (a reverse "
            "proxy's) with no token configured: anyone who can reach the proxy would read and change every library",
            hint="Create a token first (memloci token create NAME --scope LIBRARY:write), configure [oauth], "
                 "or drop --allowed-host.")
    if not settings.loopback:
        raise ValidationError(
            f"host {settings.host}: refusing to listen beyond this machine with no token configured: anyone who "
            "can reach the port would read and change every library",
            hint="Create a token first (memloci token create NAME --scope LIBRARY:write), configure [oauth], "
                 "or listen on 127.0.0.1.")


def serve_http(server: Any, settings: HttpSettings, *, verifiers: Sequence[TokenVerifier] = (),
               tokens_configured: bool = False, extra_routes: Sequence[Any] = (), resource_metadata_url: Any = None,
               on_shutdown: Callable[[], None] | None = None,
               configured_now: Callable[[], bool] | None = None, service: Any = None) -> None:
    """Run until SIGTERM or SIGINT. Refuses (ValidationError) a non-loopback bind without tokens.
    `configured_now()` says whether a token exists now (see build_http_app's `open_while`)."""
    import uvicorn

    check_bind(settings, tokens_configured)
    shutdown = Shutdown()
    # Tokens are always checked once one exists: a server started open on loopback closes the
    # moment the first token is created (configured_now is asked on each request).
    open_while = None if tokens_configured or configured_now is None else (lambda: not configured_now())
    app = build_http_app(server, settings, verifiers=verifiers if (tokens_configured or configured_now) else (),
                         extra_routes=extra_routes, resource_metadata_url=resource_metadata_url,
                         on_shutdown=on_shutdown, stopping=lambda: runner.should_exit, shutdown=shutdown,
                         open_while=open_while, service=service)
    limits = ConnectionLimits(settings.header_timeout, settings.body_timeout,
                              settings.max_connections or default_max_connections())
    protocol = limited_protocol(limits)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=GRACE_AFTER_DRAIN_SECONDS, server_header=False,
                            http=protocol)

    class TwoStepServer(uvicorn.Server):
        """The first SIGTERM/SIGINT only requests the shutdown (see Shutdown); a second stops at once."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            if shutdown.requested:
                super().handle_exit(sig, frame)
                return
            self._captured_signals.append(sig)
            shutdown.request(signal.Signals(sig).name, server.calls_in_flight)

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            # the connections waiting in the backlog are taken in, with no await between the last
            # accept and the listeners' close (a close resets them); then served, with the grace
            # uvicorn's shutdown gives every connection between requests
            taken = take_waiting([s for srv in self.servers for s in srv.sockets])
            for srv in self.servers:
                srv.close()
            served = await serve_taken(taken, lambda: protocol(config=self.config, server_state=self.server_state,
                                                               app_state=self.lifespan.state))
            if served:
                log.debug("took in %d connections waiting to be accepted as the listener closed", served)
            await super().shutdown(sockets)

    runner = TwoStepServer(config)
    shutdown.finish = lambda: setattr(runner, "should_exit", True)  # drain() closes the streams next
    AppStatus.disable_automatic_graceful_drain()  # drain() closes the streams, after the calls end
    if settings.loopback and not tokens_configured:
        log.warning("no token configured: any program on this machine may use every library")
    if not settings.loopback and not settings.allowed_hosts:
        log.warning("listening on %s: requests are let in only with a loopback Host header until you add "
                    "--allowed-host (the name clients use)", settings.host)
    log.info("MCP endpoint: http://%s:%d/mcp", _url_host(settings.host), settings.port)
    if service is not None:
        log.info("dashboard: http://%s:%d/", _url_host(settings.host), settings.port)
    # uvicorn raises the signal it caught again once it has shut down, which would end the
    # process with 143 after a clean shutdown: the handlers it puts back ignore it instead.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    runner.run()


def _host_name(host: str) -> str:
    """`memory.example:443` -> `memory.example`, `[::1]:8001` -> `::1`."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host

