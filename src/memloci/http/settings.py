"""Where the HTTP server listens and what it lets in.

Each setting comes from the first of: a `memloci serve` flag, an environment variable
(`MCP_SERVER_HOST`, `MCP_SERVER_PORT`: the names the MCP Memory Service documents), the
`[http]` table of the config file, the default:

    [http]
    host = "127.0.0.1"
    port = 8001
    stateless = false
    allowed_hosts = ["memory.example.com"]        # Host header values beside the loopback names
    allowed_origins = ["https://app.example.com"] # Origin header values beside the loopback ones
    max_body_bytes = 4194304                      # a larger request body is refused (413)
    rate_limit = 1200                             # calls a minute per token; 0 turns the limit off
    max_sessions_per_token = 16                   # open sessions per token; 0 turns the limit off
    header_timeout = 10                           # seconds to receive a request's headers; then 408, closed
    body_timeout = 30                             # seconds to receive a request's body; then 408, closed
    max_connections = 768                         # open at once; one more: 503, closed (default: the
                                                  # open-file limit less 256; 768 under 1024 files)
    drain_timeout = 60                            # seconds SIGTERM waits for the calls running; then stops
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field, replace
from typing import Any

from memloci.core.errors import ValidationError
from memloci.core.settings import Settings, port_number

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001
DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_RATE_LIMIT = 1200  # per token and minute: far above an agent's pace, low enough to stop a runaway loop
# Sessions per token: an agent needs one or two; without a cap, one token (even read-only) could
# fill the SDK's 10,000 sessions and lock every other client out.
DEFAULT_MAX_SESSIONS_PER_TOKEN = 16
DEFAULT_HEADER_TIMEOUT = 10.0  # seconds: a client on a slow link sends its few hundred bytes of headers in far less
DEFAULT_BODY_TIMEOUT = 30.0  # seconds: 4 MiB (the largest body) arrives in 30 s at about 1 Mbit/s
# Seconds SIGTERM waits for the calls running to be answered before the server stops anyway:
# within systemd's default stop timeout (90 s), with room for the close after it.
DEFAULT_DRAIN_TIMEOUT = 60.0
# Connections at once, by default: the open-file limit less this many, kept for the libraries,
# the model, the journal and the log, so that a flood of connections cannot starve them.
FILES_KEPT_FREE = 256
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*",
                    "http://127.0.0.1", "http://localhost", "http://[::1]"]


@dataclass(frozen=True)
class HttpSettings:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    stateless: bool = False
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = DEFAULT_MAX_BODY
    rate_limit: int = DEFAULT_RATE_LIMIT
    max_sessions_per_token: int = DEFAULT_MAX_SESSIONS_PER_TOKEN
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int | None = None  # None: default_max_connections()
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def host_patterns(self) -> list[str]:
        """Host header values let in: loopback names, the address bound (when it is one), and the allowed ones."""
        extra = [] if self.host in ("0.0.0.0", "::", "") or self.loopback else [_bracketed(self.host) + ":*",
                                                                               _bracketed(self.host)]
        # a name given without a port is let in on any port (direct, or through a proxy on 443)
        allowed = [p for h in self.allowed_hosts for p in ((h,) if _has_port(h) else (h, f"{h}:*"))]
        return [*LOOPBACK_HOSTS, *extra, *allowed]

    def origin_patterns(self) -> list[str]:
        return [*LOOPBACK_ORIGINS, *self.allowed_origins]


def default_max_connections() -> int:
    """The open-file limit (soft) less FILES_KEPT_FREE, and at least 64."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # no such limit on this system
        return 1024
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 65536
    return max(64, soft - FILES_KEPT_FREE)


def _has_port(host: str) -> bool:
    return host.rpartition(":")[2].isdigit() or host.endswith(":*") if not host.endswith("]") else False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_port = port_number  # one rule for a port, whether a flag, MCP_SERVER_PORT or `[http] port` gives it


def resolve(config: dict[str, Any], *, host: str | None = None, port: int | None = None, stateless: bool | None = None,
            allowed_hosts: list[str] | None = None, allowed_origins: list[str] | None = None,
            max_body_bytes: int | None = None, rate_limit: int | None = None,
            header_timeout: float | None = None, body_timeout: float | None = None,
            max_connections: int | None = None, drain_timeout: float | None = None,
            process: Settings) -> HttpSettings:
    """The settings in force: flags first, then MCP_SERVER_HOST/MCP_SERVER_PORT (`process`, the
    program's Settings), then `[http]`, then defaults."""
    table = config.get("http") or {}
    settings = HttpSettings(**table)
    if process.http_host:
        settings = replace(settings, host=process.http_host)
    if process.http_port is not None:
        settings = replace(settings, port=process.http_port)
    flags: dict[str, Any] = {"host": host, "port": port, "stateless": stateless or None,
                             "max_body_bytes": max_body_bytes, "rate_limit": rate_limit,
                             "header_timeout": header_timeout, "body_timeout": body_timeout,
                             "max_connections": max_connections, "drain_timeout": drain_timeout}
    settings = replace(settings, **{k: v for k, v in flags.items() if v is not None})
    if port is not None:
        _port(port, "--port")
    if settings.max_body_bytes < 1:
        raise ValidationError("--max-body: must be at least 1 byte")
    if settings.rate_limit < 0:
        raise ValidationError("--rate-limit: must be 0 (no limit) or more calls a minute")
    for name, seconds in (("--header-timeout", settings.header_timeout), ("--body-timeout", settings.body_timeout),
                          ("--drain-timeout", settings.drain_timeout)):
        if not (math.isfinite(seconds) and 0 < seconds <= 3600):
            raise ValidationError(f"{name}: must be more than 0 and at most 3600 seconds, not {seconds:g}")
    if settings.max_connections is None:
        settings = replace(settings, max_connections=default_max_connections())
    elif settings.max_connections < 1:
        raise ValidationError("--max-connections: must be at least 1")
    return replace(settings, allowed_hosts=[*settings.allowed_hosts, *(allowed_hosts or [])],
                   allowed_origins=[*settings.allowed_origins, *(allowed_origins or [])])
