"""The hook's spool: an event is written here before it is stored, so a deadline cannot lose it.

A hook has 2 s; on a busy machine importing the store alone can take longer. So once an event
is judged worth keeping (before any heavy import) it is written to
`$MEMLOCI_HOME/spool/<time>-<pid>.json` (0600, written to a temporary name and renamed, so a
file there is always whole). The hook then stores it and removes the file. When the deadline
cuts the hook short, its watchdog starts a detached drainer (`python -m memloci.hooks --drain`)
that stores every spooled event with no deadline. Each hook run also drains files a dead hook
left behind, when it has time. Storing the same event twice is harmless: the content hash
makes the second a no-op. A file older than STALE_S is logged and dropped.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from memloci.core import confine

STALE_S = 7 * 24 * 3600
LIVE_WRITER_S = 60.0  # a file whose writer still runs is its writer's, for this long
DRAIN_PATIENCE_S = 300.0  # the drainer retries what failed (a busy library) this long
DRAIN_RETRY_S = 2.0

log = logging.getLogger("memloci.hook")


def folder(home: Path) -> Path:
    return home / "spool"


def write(home: Path, record: dict[str, Any]) -> Path:
    """Spool `record` atomically (0600); returns its path."""
    where = folder(home)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = where / f"{time.time_ns()}-{os.getpid()}.json"
    # not durable (no fsync): the spool guards against a killed hook, not a power cut (a file cut
    # by one is unreadable JSON, logged and dropped), and an fsync on a busy disk costs the hook its time
    confine.atomic_write(path, json.dumps(record, ensure_ascii=False).encode("utf-8"), 0o600, durable=False)
    return path


def pending(home: Path) -> list[Path]:
    """The spooled events, oldest first."""
    try:
        return sorted((p for p in folder(home).iterdir() if p.suffix == ".json" and not p.name.startswith(".")),
                      key=lambda p: p.name)
    except OSError:
        return []


def remove(path: Path) -> None:
    with suppress(FileNotFoundError):
        path.unlink()


def _writer_alive(path: Path) -> bool:
    try:
        pid = int(path.stem.split("-")[1])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def drain(home: Path, store: Callable[[dict[str, Any]], str], *, until: float | None = None,
          wait: bool = True, skip: Path | None = None) -> int:
    """Store and remove each spooled event; returns how many are left. One drainer at a time
    (a lock file): `wait=False` gives up at once when another holds it. `until` is a
    time.monotonic() past which no new file is started. A hook (`wait=False`) leaves files
    whose writer is still running to that writer."""
    if not folder(home).is_dir():
        return 0
    fd = os.open(folder(home) / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return len(pending(home))
        now = time.time()
        with suppress(OSError):  # the temp file of a hook killed mid-write
            for tmp in folder(home).glob(".*.tmp"):
                if confine.is_stray_temp(tmp.name):
                    remove(tmp)
        left = 0
        for path in pending(home):
            if path == skip:
                continue
            if until is not None and time.monotonic() > until:
                left += 1
                continue
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue  # its writer stored it meanwhile
            if age > STALE_S:
                log.warning("spool: dropped %s, %.0f days old", path.name, age / 86400)
                remove(path)
                continue
            if not wait and age < LIVE_WRITER_S and _writer_alive(path):
                left += 1
                continue
            try:
                record = json.loads(path.read_bytes().decode("utf-8"))
                if not isinstance(record, dict):
                    raise ValueError("not an object")
            except FileNotFoundError:
                continue
            except ValueError as exc:  # never written by a hook (the write is atomic): nothing to store
                log.warning("spool: dropped %s, unreadable: %s", path.name, exc)
                remove(path)
                continue
            try:
                result = store(record)
            except Exception as exc:  # a busy or broken library: kept for the next try
                log.error("spool: %s not stored yet: %s: %s", path.name, type(exc).__name__, exc)
                left += 1
                continue
            log.info("spool: %s: %s", path.name, result)
            remove(path)
        return left
    finally:
        os.close(fd)


def spawn_drainer(env: dict[str, str] | None = None) -> None:
    """Start `python -m memloci.hooks --drain`, detached, with no terminal (the hook exits next).
    `env` carries the hook's settings (Settings.child_env); None: this process's environment."""
    subprocess.Popen([sys.executable, "-m", "memloci.hooks", "--drain"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     close_fds=True, env=env)


def run_drainer(home: Path, store: Callable[[dict[str, Any]], str]) -> None:
    """The drainer's whole life: drain until nothing is left, retrying failures for a while."""
    give_up = time.monotonic() + DRAIN_PATIENCE_S
    while drain(home, store) and time.monotonic() < give_up:
        time.sleep(DRAIN_RETRY_S)
