"""OAuth 2.1 resource server: JWT access tokens from one configured issuer.

The option is the `[oauth]` table of the config file (its keys, checked when the file is read:
app/server_config.py).

`JwtTokenVerifier` is a `TokenVerifier` of the MCP SDK: it answers an `AccessToken` whose
scopes are library scopes (`LIBRARY:read|write|admin`), or None, which the HTTP layer turns
into a 401. Whatever goes wrong (a bad signature, a clock, an unreachable issuer) is a
refused token and a log line saying why, never an exception out of the verifier.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from memloci.app.server_config import LIBRARY_SCOPE, OAuthConfig

log = logging.getLogger("memloci.http.oauth")

# Asymmetric algorithms only. HS256 with a public key as the "secret" and `none` are the
# classic ways to forge a JWT, so the header's `alg` is checked against this set before
# any key is looked up, and the key's own type must match the algorithm.
ALGORITHMS = {"RS256": ("RSA", None), "ES256": ("EC", "P-256")}
LEEWAY_SECONDS = 30  # clock skew allowed on exp/nbf/iat
JWKS_TIMEOUT_SECONDS = 5.0
JWKS_MAX_AGE_SECONDS = 600  # keys are fetched again after this, so a removed key stops working
JWKS_MIN_REFRESH_SECONDS = 10.0  # an unknown kid refetches at most this often (no fetch storms)
JWKS_MAX_BYTES = 512 * 1024


class JwksCache:
    """The issuer's public keys by kid: fetched on first use, again after JWKS_MAX_AGE_SECONDS, and
    again when a token names a kid not yet seen (key rotation), at most every min_refresh seconds."""

    def __init__(self, url: str, *, timeout: float = JWKS_TIMEOUT_SECONDS,
                 max_age: float = JWKS_MAX_AGE_SECONDS, min_refresh: float = JWKS_MIN_REFRESH_SECONDS):
        self.url, self.timeout, self.max_age, self.min_refresh = url, timeout, max_age, min_refresh
        self._keys: dict[str | None, dict[str, Any]] = {}
        self._fetched_at: float | None = None  # monotonic time of the last successful fetch
        self._tried_at: float | None = None  # of the last attempt, successful or not
        self._lock: asyncio.Lock | None = None

    async def key(self, kid: str | None) -> dict[str, Any] | None:
        """The JWK for `kid`, or None (unknown kid, or the issuer cannot be reached: logged)."""
        if kid in self._keys and self._fetched_at is not None and time.monotonic() - self._fetched_at <= self.max_age:
            return self._keys[kid]  # the common case takes no lock: a slow fetch never holds up known keys
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one fetch at a time; waiters then find the fresh keys
            now = time.monotonic()
            stale = self._fetched_at is None or now - self._fetched_at > self.max_age
            unknown = kid not in self._keys
            recent = self._tried_at is not None and now - self._tried_at < self.min_refresh
            if stale or (unknown and not recent):
                await self._refresh()
            return self._keys.get(kid)

    async def _refresh(self) -> None:
        self._tried_at = time.monotonic()
        try:
            async with httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
                reply = await client.get(self.url, headers={"Accept": "application/json"})
            if reply.status_code != 200:
                raise ValueError(f"HTTP {reply.status_code}")
            if len(reply.content) > JWKS_MAX_BYTES:
                raise ValueError(f"larger than {JWKS_MAX_BYTES} bytes")
            body = json.loads(reply.content)
            keys = body.get("keys") if isinstance(body, dict) else None
            if not isinstance(keys, list):
                raise ValueError("no 'keys' array")
        except (httpx2.HTTPError, ValueError) as exc:
            # Old keys past their age are dropped too: a key the issuer removed must stop working.
            if self._fetched_at is None or time.monotonic() - self._fetched_at > self.max_age:
                self._keys, self._fetched_at = {}, None
            log.warning("oauth: could not fetch the issuer's keys from %s: %s", self.url, exc)
            return
        fresh: dict[str | None, dict[str, Any]] = {}
        for k in keys:
            if isinstance(k, dict) and k.get("use", "sig") == "sig" and isinstance(k.get("kty"), str):
                fresh[k.get("kid") if isinstance(k.get("kid"), str) else None] = k
        if len(fresh) == 1 and None not in fresh:  # a lone key also serves tokens without a kid
            fresh[None] = next(iter(fresh.values()))
        self._keys, self._fetched_at = fresh, time.monotonic()


class JwtTokenVerifier:
    """SDK `TokenVerifier` for JWT access tokens from the configured issuer."""

    def __init__(self, config: OAuthConfig, *, jwks: JwksCache | None = None):
        self.config = config
        self.jwks = jwks or JwksCache(config.jwks_url)

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.count(".") != 2:
            log.debug("oauth: not a JWT, left to the other verifiers")
            return None
        try:
            return await self._verify(token)
        except _Refused as exc:
            log.warning("oauth: token refused: %s", exc)
        except Exception:  # a verifier must answer, whatever the token holds; the trace helps a bug report
            log.exception("oauth: token refused: unexpected error while checking it")
        return None

    async def _verify(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise _Refused(f"unreadable header ({exc})") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise _Refused(f"alg {alg!r} is not one of {', '.join(ALGORITHMS)}")
        kid = header.get("kid")
        jwk = await self.jwks.key(kid if isinstance(kid, str) else None)
        if jwk is None:  # the kid is the sender's text: quoted and cut short in the log
            raise _Refused(f"no key with kid {repr(kid)[:80]} at the issuer's JWKS")
        kty, crv = ALGORITHMS[alg]
        if jwk.get("kty") != kty or (crv and jwk.get("crv") != crv) or jwk.get("alg", alg) != alg:
            raise _Refused(f"key {kid!r} ({jwk.get('kty')}/{jwk.get('alg')}) does not fit alg {alg}")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(token, key=key, algorithms=[alg], audience=self.config.audience,
                                issuer=self.config.issuer, leeway=LEEWAY_SECONDS,
                                options={"require": ["exp", "iss", "aud"]})
        except jwt.PyJWTError as exc:
            raise _Refused(f"{type(exc).__name__}: {exc}") from None
        scopes = self.library_scopes(claims)
        client = claims.get("client_id") or claims.get("azp") or claims.get("sub") or "unknown"
        sub = claims.get("sub")
        return AccessToken(token=token, client_id=f"jwt:{client}", scopes=scopes,
                           expires_at=int(claims["exp"]), resource=self.config.resource_url,
                           subject=sub if isinstance(sub, str) else None, claims={"iss": claims["iss"]})

    def library_scopes(self, claims: dict[str, Any]) -> list[str]:
        """The scope claim as library scopes: mapped ones, plus LIBRARY:read|write|admin as they are.
        Other scopes (openid, profile, ...) are the issuer's business and are left out."""
        raw = claims.get(self.config.scope_claim)
        if isinstance(raw, str):
            names = raw.split()
        elif isinstance(raw, list) and all(isinstance(s, str) for s in raw):
            names = raw
        elif raw is None:
            names = []
        else:
            raise _Refused(f"claim {self.config.scope_claim!r} is neither a space-separated string nor a list of strings")
        scopes: list[str] = []
        for name in names:
            for s in self.config.scope_map.get(name, (name,) if LIBRARY_SCOPE.match(name) else ()):
                if s not in scopes:
                    scopes.append(s)
        if not scopes:
            raise _Refused(f"claim {self.config.scope_claim!r} grants no library scope "
                           "(expected LIBRARY:read|write|admin, or a name in [oauth] scope_map)")
        return scopes


class _Refused(Exception):
    """Why a token is refused: logged at warning (never the token itself)."""


def protected_resource_routes(config: OAuthConfig) -> list[Any]:
    """Starlette routes serving the RFC 9728 protected-resource metadata: the resource and its issuer."""
    from mcp.server.auth.routes import create_protected_resource_routes

    # Plain strings, not AnyHttpUrl: the metadata model keeps them as written, and an issuer is
    # compared character for character (a slash added to "https://auth.example.com" breaks discovery).
    return create_protected_resource_routes(resource_url=config.resource_url,  # type: ignore[arg-type]
                                            authorization_servers=[config.issuer],  # type: ignore[list-item]
                                            scopes_supported=sorted(config.scope_map) or None,
                                            resource_name="memloci")
