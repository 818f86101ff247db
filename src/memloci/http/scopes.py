"""A token's library scopes `LIBRARY:read|write|admin`: who calls, as server mode tells the MCP
server (mcp/access.py declares what it needs and enforces it per call).

`write` includes `read`; `admin` includes `write` and the maintenance tools. `*` as LIBRARY
means every library. The token is the SDK's: `get_access_token()`, set by its auth middleware
for the request; with no token (an HTTP server without tokens on loopback) nothing applies.
"""

from __future__ import annotations

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from memloci.core.errors import PermissionDeniedError

LEVELS = {"read": 1, "write": 2, "admin": 3}


def _parsed(scopes: list[str]) -> list[tuple[str, int]]:
    out = []
    for scope in scopes:
        library, _, level = scope.rpartition(":")
        if level in LEVELS and library:
            out.append((library.casefold(), LEVELS[level]))
    return out


def grants(scopes: list[str], library: str, level: str) -> bool:
    """Whether `scopes` allow `level` on `library` (`*` in a scope: every library)."""
    want, lib = LEVELS[level], library.casefold()
    return any(have >= want and name in ("*", lib) for name, have in _parsed(scopes))


def best_level(scopes: list[str]) -> int:
    return max((have for _, have in _parsed(scopes)), default=0)


class TokenCaller:
    """The caller of a request, as its token's scopes allow (an mcp.access.Caller)."""

    def __init__(self, token: AccessToken):
        self.token = token

    @property
    def name(self) -> str:
        return self.token.client_id

    def grants(self, library: str, level: str) -> bool:
        return grants(self.token.scopes, library, level)

    def grants_some(self, level: str) -> bool:
        return LEVELS[level] <= best_level(self.token.scopes)

    def denied(self, what: str, library: str, level: str) -> PermissionDeniedError:
        return PermissionDeniedError(
            f"{what} needs scope {library}:{level}",
            hint=f"This token has {', '.join(self.token.scopes) or 'no scopes'}; use a token with {library}:{level} "
                 f"(memloci token create NAME --scope {library}:{level}). Nothing was changed.")


class TokenCallers:
    """Who calls, request by request: the bearer token the SDK's auth middleware verified (an
    mcp.access.Callers)."""

    def current(self) -> TokenCaller | None:
        token = get_access_token()
        return None if token is None else TokenCaller(token)
