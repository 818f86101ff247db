"""Who calls the dashboard and its API, and what it may do: the same tokens and scopes as /mcp.

- Open mode: a loopback server with no token configured (as /mcp, see http/app.py
  `OpenUntilTokens`): no sign-in, every library. It ends with the first token created.
- Sign-in (`POST /api/session` with a token) verifies the token with /mcp's verifiers and
  starts a session kept in memory, named by an HttpOnly, SameSite=Strict cookie. The token is
  verified again on each use, so a revoked token ends its sessions at once; a session lasts
  SESSION_SECONDS at most.
- `Authorization: Bearer TOKEN` (scripts): the token alone, no session, no CSRF token (a bearer
  header is never sent by a browser on its own).
- A cookie request that changes anything (any method but GET and HEAD) carries `X-CSRF-Token`
  equal to its session's; in open mode, the process's (GET /api/session tells it).
- A request with ambient credentials (cookie, open mode) and every sign-in comes from the page
  itself: an `Origin` header, when sent, is the server's own origin, and `Sec-Fetch-Site`, when
  sent, is `same-origin` or `none` (a script or curl sends neither and passes). So another site
  can neither sign a browser in, nor read, search or change anything through it.
- Scopes: `LIBRARY:read` to read a library, `LIBRARY:write` to change it (http/scopes.py).
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp.server.auth.provider import AccessToken, TokenVerifier
from starlette.requests import Request

from memloci.core.errors import MemlociError
from memloci.http.scopes import TokenCaller

SESSION_COOKIE = "memloci_session"  # + "_" + the server's port: see session_cookie
CSRF_HEADER = "x-csrf-token"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 10_000  # sessions kept at once; the oldest goes first
SAFE_METHODS = ("GET", "HEAD")


def session_cookie(request: Request) -> str:
    """The session cookie's name on this server: `memloci_session_<port>`. A browser keeps
    cookies by host, not by port, so two servers on one machine (two `memloci ui`) must not
    share a name, or signing in to one signs the other out."""
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return f"{SESSION_COOKIE}_{port}"


class UnauthorizedError(MemlociError):
    """No valid sign-in: 401."""

    code = "UNAUTHORIZED"
    default_hint = "Sign in with a token (POST /api/session {\"token\": ...}) or send Authorization: Bearer TOKEN."


class UnsupportedMediaTypeError(MemlociError):
    """A body that is not declared `application/json`: 415."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    default_hint = "Send the body as JSON with the header Content-Type: application/json."


class CsrfError(MemlociError):
    """A cookie request that changes something without its session's X-CSRF-Token: 403."""

    code = "CSRF"
    default_hint = "Send the header X-CSRF-Token with the csrf value GET /api/session answers."


@dataclass
class Session:
    token: str  # verified again on each use: a revoked token ends the session
    csrf: str
    expires: float  # monotonic


@dataclass(frozen=True)
class Who:
    """The caller of one request. `caller` None: open mode, every library at every level."""

    caller: TokenCaller | None
    via: str  # "open", "cookie" or "bearer"
    csrf: str | None  # what a write must carry (cookie and open mode); None for bearer

    @property
    def name(self) -> str | None:
        return None if self.caller is None else self.caller.name

    @property
    def scopes(self) -> list[str]:
        return [] if self.caller is None else list(self.caller.token.scopes)

    def may(self, library: str, level: str) -> bool:
        return self.caller is None or self.caller.grants(library, level)

    def need(self, library: str, level: str, what: str) -> None:
        """Raise PERMISSION_DENIED naming the scope `what` on `library` needs, unless granted."""
        if self.caller is not None and not self.caller.grants(library, level):
            raise self.caller.denied(what, library, level)


class Access:
    """Sign-in, sessions and the checks every dashboard request passes."""

    def __init__(self, verifiers: Sequence[TokenVerifier], open_while: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.verifiers = list(verifiers)
        self.open_while = open_while
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        self.open_csrf = secrets.token_urlsafe(32)  # open mode's: there is no session to bind it to

    def is_open(self) -> bool:
        """No sign-in needed: no verifier (a loopback server without tokens), or none created yet."""
        return not self.verifiers or (self.open_while is not None and self.open_while())

    async def verify(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None

    async def sign_in(self, token: str, replacing: str | None = None) -> tuple[str, Session, AccessToken] | None:
        """A new session for a valid token: (its id for the cookie, the session, the token's grant).
        The session `replacing` (the browser's cookie before) ends: one browser, one session."""
        grant = await self.verify(token)
        if grant is None:
            return None
        self.sessions.pop(replacing or "", None)
        now = self.clock()
        self.sessions = {k: s for k, s in self.sessions.items() if s.expires > now}
        while len(self.sessions) >= MAX_SESSIONS:
            self.sessions.pop(next(iter(self.sessions)))
        session_id = secrets.token_urlsafe(32)
        session = Session(token, secrets.token_urlsafe(32), now + SESSION_SECONDS)
        self.sessions[session_id] = session
        return session_id, session, grant

    def sign_out(self, request: Request) -> None:
        self.sessions.pop(request.cookies.get(session_cookie(request), ""), None)

    async def who(self, request: Request) -> Who | None:
        """The caller of `request`, or None: not signed in (401, unless open mode)."""
        header = request.headers.get("authorization", "")
        if header[:7].casefold() == "bearer ":
            grant = await self.verify(header[7:].strip())
            if grant is not None:
                return Who(TokenCaller(grant), "bearer", None)
            return None if not self.is_open() else Who(None, "open", self.open_csrf)
        session_id = request.cookies.get(session_cookie(request))
        session = self.sessions.get(session_id) if session_id else None
        if session is not None:
            grant = await self.verify(session.token) if session.expires > self.clock() else None
            if grant is not None:
                return Who(TokenCaller(grant), "cookie", session.csrf)
            self.sessions.pop(session_id or "", None)  # expired, or its token revoked
        if self.is_open():
            return Who(None, "open", self.open_csrf)
        return None

    @staticmethod
    def check_csrf(request: Request, who: Who) -> None:
        """A change made with ambient credentials (cookie, open mode) needs the CSRF header."""
        if request.method in SAFE_METHODS or who.csrf is None:
            return
        sent = request.headers.get(CSRF_HEADER, "")
        if not sent or not hmac.compare_digest(sent.encode(), who.csrf.encode()):
            raise CsrfError(f"header X-CSRF-Token: {'missing' if not sent else 'does not match this session'}; "
                            f"a {request.method} from the page must carry it (nothing was changed)")


def refused(who: Who | None) -> MemlociError | None:
    """401 for a request that is not signed in."""
    if who is None:
        return UnauthorizedError("sign-in needed: no session cookie and no valid bearer token")
    return None


CROSS_SITE = ("cross-site", "same-site")  # Sec-Fetch-Site values of a request another site started


def check_site(request: Request, who: Who | None) -> None:
    """CSRF 403 for a request with ambient credentials (cookie, open mode, or a sign-in) that
    another site started: its `Sec-Fetch-Site` says cross-site or same-site, or its `Origin` is
    not this server's own (scheme://host:port as the request reached it). A bearer request
    passes: a browser never adds that header on its own."""
    if who is not None and who.via == "bearer":
        return
    site = request.headers.get("sec-fetch-site", "").strip().casefold()
    if site in CROSS_SITE:
        raise CsrfError(f"header Sec-Fetch-Site: {site}: the API answers its own page only (nothing was done)",
                        hint="Open the dashboard from this server's address; scripts send Authorization: Bearer.")
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.url.netloc}"
        if origin.strip().rstrip("/").casefold() != own.casefold():
            raise CsrfError(f"header Origin: {origin!r} is not this server's origin {own} (nothing was done)",
                            hint="Open the dashboard from this server's address; scripts send Authorization: Bearer.")
