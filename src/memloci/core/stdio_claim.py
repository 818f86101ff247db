"""The process's stdin and stdout belong to the MCP protocol: taken once at start-up, before
anything can print, so a library, a C extension or a child process writing to fd 1 never
corrupts the wire (it lands on stderr)."""

from __future__ import annotations

import fcntl
import os
import sys
from contextlib import suppress
from dataclasses import dataclass


@dataclass
class StdioClaim:
    """The protocol's private copies of stdin and stdout, taken before anything can print."""

    wire_in: int
    wire_out: int

    @classmethod
    def take(cls) -> StdioClaim:
        """Move the wire to private descriptors; fd 0 then reads /dev/null and fd 1 goes to stderr."""
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        sys.stdout.flush()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # print(), a C library's printf, a child process: all land on stderr
        return cls(wire_in, wire_out)

    def release(self) -> None:
        with suppress(OSError):
            sys.stdout.flush()
        with suppress(OSError):
            os.dup2(self.wire_out, 1)
            os.dup2(self.wire_in, 0)
