"""MCP Memory Service (12.x, SQLite-vec backend): its database file into free memories.

Only the plain `memories` table is read; the sqlite-vec virtual tables beside it need an
extension the stock `sqlite3` module cannot load, and memloci makes its own vectors anyway.

| MMS column                     | memloci memory                                              |
|--------------------------------|-------------------------------------------------------------|
| `content`                      | `content`                                                   |
| `tags` (comma-separated)       | `tags`, in order (MMS's own `untagged` kept as written)     |
| `memory_type` (empty or NULL)  | `memory_type` (`note`)                                      |
| `metadata` (JSON object)       | `metadata`, plus `source: "mms"` (an existing `source` moves to `mms_source`) |
| `metadata` not a JSON object   | `metadata.original_metadata`: its text as written (a warning; the row is kept) |
| `created_at`, `updated_at`     | `created_at`, `updated_at` (epoch to UTC, microseconds kept) |
| `deleted_at` set               | skipped and reported: MMS soft-deleted it                   |
| `content_hash`                 | not kept: memloci hashes content itself; it names skipped rows |
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memloci.core.errors import MemlociError, ValidationError
from memloci.formats.official import MemoryLine, OfficialFile, parse_json, shown
from memloci.formats.source import ImportSource, memory_line, open_read_only, table_columns, utc_from_epoch

NEEDED = {"content", "content_hash", "tags", "memory_type", "metadata", "created_at", "updated_at"}


def read_mms(path: Path) -> ImportSource:
    """Every live memory of an MMS database; soft-deleted and unreadable rows are skipped, by id."""
    if path.is_dir():  # its data folder, most likely: name the file inside it
        inside = path / "sqlite_vec.db"
        hint = (f"Did you mean {inside}?" if inside.is_file() else
                "MCP Memory Service keeps it as sqlite_vec.db in its data folder (~/.local/share/mcp-memory/ "
                "on Linux, ~/Library/Application Support/mcp-memory/ on macOS) or at $MCP_MEMORY_SQLITE_PATH.")
        raise ValidationError(f"{path}: a directory, not a file; give MCP Memory Service's SQLite database "
                              "file (sqlite_vec.db)", hint=hint)
    conn = open_read_only(path, "an MCP Memory Service database (sqlite_vec.db)")
    try:
        columns = table_columns(conn, "memories")
        if not columns:
            raise ValidationError(f"{path}: SQLite, but no 'memories' table: not an MCP Memory Service database")
        missing = sorted(NEEDED - columns)
        if missing:
            raise ValidationError(f"{path}: table 'memories' has no column {', '.join(missing)}: "
                                  "not the MCP Memory Service 12.x layout")
        deleted = "deleted_at" if "deleted_at" in columns else "NULL"
        rows = conn.execute(f"""SELECT id, content_hash, content, tags, memory_type, metadata, created_at,
                                       updated_at, {deleted} FROM memories ORDER BY created_at, id""").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValidationError(f"{path}: cannot read the 'memories' table ({exc})") from exc
    finally:
        conn.close()
    source = ImportSource("mms", OfficialFile([], [], []), layout="memories table")
    for row_id, content_hash, content, tags, memory_type, metadata, created, updated, deleted_at in rows:
        where = f"id {shown(row_id)}"
        try:
            line, warning = _row(where, content, tags, memory_type, metadata, created, updated, deleted_at)
        except MemlociError as exc:
            label = content_hash[:12] if isinstance(content_hash, str) else shown(content_hash)
            source.skipped.append((where if deleted_at is not None else f"{where} ({label})", exc.message))
            continue
        if warning:
            source.warnings.append((where, warning))
        source.data.memories.append((row_id if isinstance(row_id, int) else len(source.data.memories), line))
    return source


def _row(where: str, content: Any, tags: Any, memory_type: Any, metadata: Any, created: Any, updated: Any,
         deleted_at: Any) -> tuple[MemoryLine, str | None]:
    """One row of `memories` as a memory, and a warning if it is not quite as MMS had it; a
    ValidationError says why the row cannot be one."""
    if deleted_at is not None:
        try:
            when = f" (deleted_at {utc_from_epoch(deleted_at, 'deleted_at')})"
        except ValidationError:
            when = ""  # deleted all the same: the reason to skip it is that, not its date
        raise ValidationError(f"deleted in MMS{when}")
    if isinstance(metadata, bytes):  # a BLOB: JSON is text
        metadata = metadata.decode("utf-8", "surrogateescape")
    problem = warning = None
    meta: Any = {}
    if metadata not in (None, ""):
        if isinstance(metadata, str):
            try:
                meta = parse_json(metadata, "metadata")
                problem = None if isinstance(meta, dict) else f"a JSON {type(meta).__name__}, not an object"
            except ValidationError as exc:
                problem = "not JSON" + exc.message.removeprefix("metadata: not valid JSON")
        else:
            problem = f"a {type(metadata).__name__}, not JSON text"
    if problem:  # the content is still good: keep it, and the metadata's text as written
        meta = {"original_metadata": metadata if isinstance(metadata, str) else str(metadata)}
        warning = f"metadata is {problem}: kept as text in metadata.original_metadata"
    if "source" in meta and meta["source"] != "mms":
        meta["mms_source"] = meta["source"]
    meta["source"] = "mms"
    if tags is not None and not isinstance(tags, str):
        raise ValidationError(f"{where}.tags: must be comma-separated text, got {type(tags).__name__}")
    created_at = utc_from_epoch(created, f"{where}.created_at")
    return memory_line(content, tags=[t for t in (tags or "").split(",") if t.strip()], memory_type=memory_type,
                       metadata=meta, created_at=created_at,
                       updated_at=utc_from_epoch(updated, f"{where}.updated_at") if updated is not None else created_at,
                       where=where), warning
