"""Lifecycle work off the request path: consolidation of a mounted library runs in a process of
its own (`memloci consolidate --json --nice`), at low priority, one BLAS thread, so the server's
searches keep their cores and their interpreter; and the schedule that starts such runs (off by
default; when on, a run writes a preview for a person or agent to execute, unless the config
says to execute).

The child process opens the library the server has mounted by its spec (the stored vectors carry
the meaning; a run that executes loads the configured embedder, as the server has it, to give the
summaries it writes their vectors before it ends, so the server's searches never wait for them),
and answers with its outcome as JSON on stdout.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from memloci.app.specs import LibrarySpec
from memloci.core.errors import InternalError, MemlociError, error_for_code
from memloci.core.settings import child_environment

log = logging.getLogger("memloci.lifecycle")

RUN_TIMEOUT_S = 3_600.0  # a consolidation of 100,000 memories takes minutes on two busy cores
SCHEDULES = {"daily": 86_400.0, "weekly": 7 * 86_400.0, "monthly": 30 * 86_400.0}


def consolidate_elsewhere(spec: LibrarySpec, home: Path, time_horizon: str, *, dry_run: bool,
                          config: Path | None = None, timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Run `memloci consolidate` on the library of `spec` in a child process at low priority;
    its outcome (as `memloci consolidate --json` prints it). The library's spec goes through the
    environment, never the command line (a PostgreSQL URL may hold a password)."""
    env = child_environment({"MEMLOCI_LIBRARIES": f"{spec.name}:{spec.path}",
                             "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    argv = [sys.executable, "-m", "memloci", "--home", str(home), *(["--config", str(config)] if config else []),
            "consolidate", "--horizon", time_horizon,
            "--json", "--nice", *([] if dry_run else ["--execute"])]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise InternalError(f"consolidate: the run of library '{spec.name}' took over {timeout:.0f} s and was stopped",
                            hint="Run `memloci consolidate` by hand to see its progress.") from exc
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise InternalError(f"consolidate: the run of library '{spec.name}' ended with status {done.returncode} "
                            f"and no answer: {done.stderr.strip()[-500:]}")
    if "error" in answer:
        err = answer["error"]
        raise error_for_code(err.get("code", "INTERNAL_ERROR"), err.get("message", ""), err.get("hint"))
    return answer


class Schedule:
    """Consolidation of every mounted library at an interval (SCHEDULES), each run a child process
    (consolidate_elsewhere); previews unless `execute`. Off unless configured."""

    def __init__(self, specs: list[LibrarySpec], home: Path, every: float, time_horizon: str, *, execute: bool,
                 config: Path | None = None):
        self.specs = specs
        self.home = home
        self.config = config
        self.every = every
        self.time_horizon = time_horizon
        self.execute = execute
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memloci-schedule", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            for spec in self.specs:
                if self._stop.is_set():
                    return
                try:
                    out = consolidate_elsewhere(spec, self.home, self.time_horizon, dry_run=not self.execute,
                                                config=self.config)
                except MemlociError as exc:
                    log.warning("scheduled consolidation of library '%s' failed: %s", spec.name, exc.message)
                    continue
                self.runs += 1
                log.info("scheduled consolidation of library '%s': %s", spec.name, out.get("message", ""))
