"""Small pieces of SQL text every module of the SQLite engine writes with (the Markdown engine
too, over its index): id lists cut to fit SQLite's limits, their `?` marks, and a script cut
into statements."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

CHUNK = 500  # ids per IN (...) list


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def marks(n: int) -> str:
    """`?, ?, ...` for an IN list of `n` values."""
    return ",".join("?" * n)


def split_sql(script: str) -> list[str]:
    """Statements of a migration script; sqlite3.complete_statement keeps trigger bodies whole."""
    statements, buffer = [], ""
    for line in script.splitlines():
        line = line.split("--", 1)[0]
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            if buffer.strip().rstrip(";").strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
