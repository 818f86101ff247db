"""The start cache of `memloci serve` over stdio (mcp/early.py): which configuration a start
serves, and the file that keeps the SDK's replies to `initialize` and `tools/list` for it.

A configuration is the program's arguments, the working folder, the environment memloci reads,
the config file's bytes, memloci's source files (size and time of each) and the packages
installed beside the SDK; its digest names the file (`Settings.cache_for("handshake")`). A file
is read only when this user owns it, no one else can write it and it is not a link, and its
replies are trusted only under a digest of them and the configuration (`seal`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from memloci.core.settings import Settings

log = logging.getLogger("memloci.stdio")

KEPT_FILES = 64  # configurations remembered per user; the oldest go first
# The environment memloci reads (core/settings.py; a test keeps the two lists together) and
# what decides where the home, the config and the caches are.
ENVIRONMENT_PREFIXES = ("MEMLOCI_", "MCP_")
ENVIRONMENT_NAMES = ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


def configuration(settings: Settings, args: list[str]) -> tuple[Path, str]:
    """The cache file of the configuration `settings` and `args` make, and its digest."""
    config_path = settings.config if settings.config is not None else settings.home / "config.toml"
    try:
        config_bytes: bytes | None = Path(config_path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        config_bytes = None
    digest = hashlib.sha256()
    environment = {k: v for k, v in settings.environ.items()
                   if k.startswith(ENVIRONMENT_PREFIXES) or k in ENVIRONMENT_NAMES}
    digest.update(json.dumps([args, os.getcwd(), sorted(environment.items()), str(config_path),
                              sys.executable, sys.version]).encode("utf-8", "surrogateescape"))
    digest.update(hashlib.sha256(config_bytes).digest() if config_bytes is not None else b"-")
    digest.update(code_stamp().encode("utf-8", "surrogateescape"))
    return settings.cache_for("handshake") / f"{digest.hexdigest()[:40]}.json", digest.hexdigest()


def code_stamp() -> str:
    """memloci's source files (path, size, time) and the packages installed beside the SDK (name,
    version and time of each)."""
    import importlib.util

    package = Path(__file__).resolve().parent.parent
    stamps = []
    for folder, folders, files in os.walk(package):
        folders.sort()
        for name in sorted(files):
            if name.endswith((".py", ".json", ".toml")):
                st = os.stat(os.path.join(folder, name))
                stamps.append(f"{os.path.join(folder, name)}:{st.st_size}:{st.st_mtime_ns}")
    spec = importlib.util.find_spec("mcp")
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        # a package installed again under the same name and version has a new dist-info folder
        with os.scandir(site) as entries:
            stamps.extend(sorted(f"{e.name}:{e.stat(follow_symlinks=False).st_mtime_ns}" for e in entries
                                 if e.name.endswith((".dist-info", ".egg-info", ".pth"))))
    return "\n".join(stamps)


def seal(digest: str, replies: dict[str, dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps([digest, replies], sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


def record(digest: str, replies: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A cache file's content: the replies, the configuration they are of, and a digest of both."""
    return {"configuration": digest, "replies": replies, "sha256": seal(digest, replies)}


def read_own(path: Path) -> bytes:
    """The bytes of the cache file `path` when this user wrote it: not a link, owned by this user,
    writable by no one else (a cache folder others can write, as /tmp, could hold anyone's file);
    else nothing."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return b""
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def prune(folder: Path) -> None:
    """Only the KEPT_FILES newest cache files stay."""
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    for old in files[:-KEPT_FILES]:
        old.unlink(missing_ok=True)


def write(path: Path, digest: str, replies: dict[str, dict[str, str]]) -> None:
    """Keep `replies` for the configuration `digest` in `path`; never fails the start."""
    from memloci.core.confine import atomic_write
    from memloci.core.errors import MemlociError

    try:
        atomic_write(path, json.dumps(record(digest, replies), ensure_ascii=False).encode("utf-8"), 0o600, durable=False)
        prune(path.parent)
    except (OSError, MemlociError) as exc:  # a link where the file goes is refused (core/confine.py)
        log.info("start cache not written: %s", exc)
