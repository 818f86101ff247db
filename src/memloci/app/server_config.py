"""The server-mode tables of the config file, `[http]` and `[oauth]`, checked key by key when the
file is read (config.load_config): an unknown key or a wrong type is refused, never ignored.
What they mean at run time lives with the server (http/settings.py, http/oauth.py).

    [http]
    host = "127.0.0.1"
    port = 8001
    ...                                             # HTTP_KEYS; http/settings.py says what each does

    [oauth]
    issuer = "https://auth.example.com/"            # the token's `iss`, compared exactly
    jwks_url = "https://auth.example.com/.well-known/jwks.json"
    audience = "https://memory.example.com/mcp"     # the token's `aud` must contain it
    resource_url = "https://memory.example.com/mcp" # what clients reach; the metadata names it
    scope_claim = "scope"                           # "scope" (space-separated) or "scp" (a list)
    [oauth.scope_map]                               # optional: issuer scope -> library scopes
    "memory.read" = ["team:read", "personal:read"]
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from pydantic import AnyHttpUrl

from memloci.core.errors import ValidationError
from memloci.core.settings import port_number

HTTP_KEYS = {"host": str, "port": int, "stateless": bool, "allowed_hosts": list, "allowed_origins": list,
             "max_body_bytes": int, "rate_limit": int, "max_sessions_per_token": int, "header_timeout": float,
             "body_timeout": float, "max_connections": int, "drain_timeout": float}


KIND_NAMES = {list: "a list of strings", float: "a number of seconds"}


def _is_kind(value: Any, kind: type) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, not to a config file
        return kind is bool
    return isinstance(value, (int, float) if kind is float else kind)


def parse_http_config(table: Any, where: str = "config [http]") -> dict[str, Any]:
    """Check an `[http]` table key by key: an unknown key or a wrong type is refused, never ignored."""
    if not isinstance(table, dict):
        raise ValidationError(f"{where}: must be a table, e.g. [http] port = 8001")
    for key, value in table.items():
        kind = HTTP_KEYS.get(key)
        if kind is None:
            raise ValidationError(f"{where} {key}: unknown key", hint=f"Known keys: {', '.join(HTTP_KEYS)}.")
        if key == "port":
            port_number(value, f"{where} port")
        elif not _is_kind(value, kind):
            raise ValidationError(f"{where} {key}: must be {KIND_NAMES.get(kind, kind.__name__)}")
        elif isinstance(value, list) and not all(isinstance(v, str) and v for v in value):
            raise ValidationError(f"{where} {key}: must be a list of non-empty strings")
        elif isinstance(value, (int, float)) and value < 0:
            raise ValidationError(f"{where} {key}: must be 0 or more")
    if table.get("max_body_bytes") == 0:
        raise ValidationError(f"{where} max_body_bytes: must be at least 1")
    return dict(table)


OAUTH_KEYS = ("issuer", "jwks_url", "audience", "resource_url", "scope_claim", "scope_map")
_REQUIRED = ("issuer", "jwks_url", "audience", "resource_url")
LIBRARY_SCOPE = re.compile(r"^(\*|[A-Za-z0-9][A-Za-z0-9_.-]{0,63}):(read|write|admin)$")  # as http.tokens.parse_scope


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str
    jwks_url: str
    audience: str
    resource_url: str
    scope_claim: str = "scope"
    scope_map: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def metadata_url(self) -> str:
        """RFC 9728 §3.1: /.well-known/oauth-protected-resource + the resource's path."""
        from mcp.server.auth.routes import build_resource_metadata_url

        return str(build_resource_metadata_url(AnyHttpUrl(self.resource_url)))


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _url(where: str, key: str, value: str) -> str:
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValidationError(f"{where} {key}: '{value}' is not an http(s) URL")
    # Keys fetched over plain HTTP could be swapped by anyone on the path; loopback is the one exception.
    if key == "jwks_url" and parsed.scheme == "http" and not _loopback(parsed.hostname):
        raise ValidationError(f"{where} {key}: '{value}' must use https (plain http only on loopback)",
                              hint="Give the issuer's https JWKS address, e.g. https://auth.example.com/.well-known/jwks.json")
    return value


def parse_oauth_config(table: Any, where: str = "config [oauth]") -> OAuthConfig:
    """Check an `[oauth]` table key by key; an unknown or missing key is refused, never ignored."""
    if not isinstance(table, dict):
        raise ValidationError(f"{where}: must be a table, e.g. [oauth] issuer = \"https://auth.example.com/\"")
    for key in table:
        if key not in OAUTH_KEYS:
            raise ValidationError(f"{where} {key}: unknown key", hint=f"Known keys: {', '.join(OAUTH_KEYS)}.")
    missing = [k for k in _REQUIRED if k not in table]
    if missing:
        raise ValidationError(f"{where}: missing {', '.join(missing)}",
                              hint=f"[oauth] needs {', '.join(_REQUIRED)}; scope_claim and scope_map are optional.")
    for key in (*_REQUIRED, "scope_claim"):
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            raise ValidationError(f"{where} {key}: must be a non-empty string")
    _url(where, "issuer", table["issuer"])
    _url(where, "jwks_url", table["jwks_url"])
    _url(where, "resource_url", table["resource_url"])
    scope_map: dict[str, tuple[str, ...]] = {}
    raw_map = table.get("scope_map", {})
    if not isinstance(raw_map, dict):
        raise ValidationError(f"{where} scope_map: must be a table of issuer scope = library scope(s)")
    for name, value in raw_map.items():
        targets = [value] if isinstance(value, str) else value
        if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
            raise ValidationError(f"{where} scope_map.{name}: must be a library scope or a list of them")
        for t in targets:
            if not LIBRARY_SCOPE.match(t):
                raise ValidationError(f"{where} scope_map.{name}: '{t}' is not LIBRARY:read, LIBRARY:write or LIBRARY:admin")
        scope_map[name] = tuple(targets)
    return OAuthConfig(issuer=table["issuer"], jwks_url=table["jwks_url"], audience=table["audience"],
                       resource_url=table["resource_url"], scope_claim=table.get("scope_claim", "scope"),
                       scope_map=scope_map)
