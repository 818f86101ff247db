"""Bearer tokens: `memloci token create|list|revoke`, and the verifier the HTTP server asks.

A token is shown once, when created, and never stored: `$MEMLOCI_HOME/tokens.json` holds
only its SHA-256 with the token's name, scopes and creation time. The file is 0600 and
replaced atomically (temp file, fsync, rename) under an exclusive lock, so two `memloci
token` commands never lose each other's change and a killed one leaves the old file.
A running server re-reads the file when it changes: a revoked token stops working at once.

    {"version": 1, "tokens": [{"name": "alice", "sha256": "...", "scopes": ["team:write"],
                               "created": "2026-11-22T23:50:00Z"}]}
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import AccessToken

from memloci.app.config import memloci_home
from memloci.core.confine import atomic_write
from memloci.core.errors import AlreadyExistsError, LibraryUnreadableError, NotFoundError, ValidationError
from memloci.core.settings import Settings

TOKEN_PREFIX = "mlc_"  # recognisable in a leaked config file or a secret scanner
LEVELS = ("read", "write", "admin")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_LIBRARY = re.compile(r"^(\*|[A-Za-z0-9][A-Za-z0-9_.-]{0,63})$")


def token_file(settings: Settings | None = None) -> Path:
    """`$MEMLOCI_HOME/tokens.json`, in the data folder of `settings` (default: the environment's)."""
    return memloci_home(settings) / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_scope(text: str) -> str:
    """`LIBRARY:read|write|admin` (LIBRARY may be `*`, every library), or a ValidationError saying why not."""
    library, sep, level = text.strip().rpartition(":")
    if not sep or level not in LEVELS or not _LIBRARY.match(library):
        raise ValidationError(f"scope '{text}': expected LIBRARY:read, LIBRARY:write or LIBRARY:admin "
                              "(LIBRARY a library name, or * for every library)",
                              hint="Example: --scope team:write --scope personal:read")
    return f"{library}:{level}"


def unmounted_libraries(scopes: list[str], mounted: list[str]) -> list[str]:
    """The libraries `scopes` name (each parsed by parse_scope) that are not in `mounted`, in
    scope order; `*` names none. Such a scope is kept: the library may be mounted later."""
    named = (parse_scope(s).rpartition(":")[0] for s in scopes)
    known = {m.casefold() for m in mounted}  # a scope names its library in any case (scopes.grants)
    return list(dict.fromkeys(lib for lib in named if lib != "*" and lib.casefold() not in known))


@dataclass(frozen=True)
class StoredToken:
    name: str
    sha256: str
    scopes: tuple[str, ...]
    created: str

    def public(self) -> dict[str, Any]:
        return {"name": self.name, "scopes": list(self.scopes), "created": self.created}


class TokenStore:
    """The token file: read it, and change it under a lock, one writer at a time."""

    def __init__(self, path: Path | None = None):
        self.path = path or token_file()

    def load(self) -> list[StoredToken]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:  # never an empty store: that would open the server
            raise LibraryUnreadableError(f"tokens: {self.path.name} cannot be read ({type(exc).__name__})",
                                         hint="Fix or remove the token file, then create the tokens again.") from exc
        try:
            return [StoredToken(t["name"], t["sha256"], tuple(t["scopes"]), t["created"]) for t in data["tokens"]]
        except (KeyError, TypeError) as exc:
            raise LibraryUnreadableError(f"tokens: {self.path.name} is not a memloci token file") from exc

    @contextmanager
    def _locked(self) -> Iterator[list[StoredToken]]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(self.path.with_name(".tokens.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield self.load()
        finally:
            os.close(lock)

    def _save(self, tokens: list[StoredToken]) -> None:
        body = json.dumps({"version": 1, "tokens": [{**t.public(), "sha256": t.sha256} for t in tokens]}, indent=2)
        # private from its first byte, never through a link, synced with its folder
        atomic_write(self.path, body.encode("utf-8") + b"\n", 0o600)

    def create(self, name: str, scopes: list[str]) -> str:
        """A new token (returned once, never stored) with `scopes`."""
        if not _NAME.match(name):
            raise ValidationError(f"name '{name}': use 1-64 letters, digits, '.', '_', '@' or '-', "
                                  "starting with a letter or digit")
        if not scopes:
            raise ValidationError("scope: give at least one --scope LIBRARY:read|write|admin")
        parsed = list(dict.fromkeys(parse_scope(s) for s in scopes))
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._locked() as tokens:
            if any(t.name == name for t in tokens):
                raise AlreadyExistsError(f"token '{name}' already exists",
                                         hint=f"Revoke it first (memloci token revoke {name}) or pick another name.")
            created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self._save([*tokens, StoredToken(name, digest(secret), tuple(parsed), created)])
        return secret

    def revoke(self, name: str) -> None:
        with self._locked() as tokens:
            kept = [t for t in tokens if t.name != name]
            if len(kept) == len(tokens):
                raise NotFoundError(f"no token named '{name}'", hint="List them with memloci token list.")
            self._save(kept)


class StoredTokenVerifier:
    """The SDK's `TokenVerifier` over the token file: `client_id` is the token's name and
    `scopes` its library scopes. The file is read again whenever it changes on disk."""

    def __init__(self, store: TokenStore | None = None):
        self.store = store or TokenStore()
        self._seen: tuple[int, int] | None = None
        self._by_hash: dict[str, StoredToken] = {}
        self._lock = threading.Lock()

    def configured(self) -> bool:
        """Whether any token exists (a non-loopback server needs one)."""
        self._refresh()
        return bool(self._by_hash)

    def _refresh(self) -> None:
        try:
            st = self.store.path.stat()
            stamp = (st.st_mtime_ns, st.st_ino)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._seen or stamp is None:
                self._by_hash = {t.sha256: t for t in self.store.load()}
                self._seen = stamp

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            self._refresh()
        except LibraryUnreadableError:  # a damaged file lets no one in; the server log says why
            import logging

            logging.getLogger("memloci.http").error("token file cannot be read: every token is refused")
            return None
        found = self._by_hash.get(digest(token))
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, scopes=list(found.scopes))
