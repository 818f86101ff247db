"""Importers from other memory servers' storage: MCP Memory Service (`mms.py`), memorix
(`memorix.py`), basic-memory (`basic_memory.py`), and n2n-memory's project files (`n2n.py`,
carried over when a project library first opens).

Each reader turns a source into one `ImportSource`: the same `OfficialFile` that
`memloci import jsonl` reads (entities, relations, free memories with their own times), so
every importer writes through the one import path, `MemoryService.import_everything`. A
reader only reads: SQLite sources are opened read-only (`mode=ro`), folders are walked
without following a symbolic link anywhere.

One rule for bad input, in every importer (`import jsonl`'s official.read_official too): a
row, line or note that cannot be read is skipped and listed by where it is (row id, file and
line, or file) with the reason, and everything else is imported. "Cannot be read" takes in
whatever a foreign file may hold: a time that is no time in the years 1 to 9999, a value of
the wrong type, JSON that is broken, cut short or nested too deeply, bytes that are not UTF-8
(SQLite text is decoded row by row, so one bad row spoils only itself), a lone surrogate or
NUL (official.check_storable), a value beyond memloci's limits. What can be kept is kept: an MMS row whose metadata is not a
JSON object keeps its content, with the metadata's text as written under
`metadata.original_metadata`, and is listed as a warning, not skipped. Only a source that is
not what it claims to be (not SQLite, no `memories` table, no memorix files, an
`observations.json` that is not one JSON array) is refused as a whole, before any write.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memloci.core import confine, schema
from memloci.core.errors import ValidationError
from memloci.core.model import EntityInput, RelationInput
from memloci.formats.official import MemoryLine, OfficialFile, check_storable, shown

_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")  # memloci's own form of a time


@dataclass(slots=True)
class ImportSource:
    """What one reader found: the data to write, and what it skipped."""

    kind: str  # "mms" | "memorix" | "basic-memory"
    data: OfficialFile
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where: "id 5" / "a.md:3", reason)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # imported, but not as the source had it
    # where each relation came from, by the number it carries in `data.relations`
    relation_where: dict[int, str] = field(default_factory=dict)
    layout: str = ""  # e.g. "memorix.db" or "observations.json + graph.jsonl"

    def counts(self) -> dict[str, int]:
        return {"entities": len(self.data.entities), "observations": sum(len(e.observations) for _, e in self.data.entities),
                "relations": len(self.data.relations), "memories": len(self.data.memories),
                "skipped": len(self.skipped)}


YEARS = "the years 1 to 9999"  # what a time can be, here and in every engine


def utc_from_epoch(value: Any, field: str = "time") -> str:
    """Epoch seconds as memloci's UTC time, to the microsecond where the source has a fraction
    (the same text MMS keeps in its `*_iso` columns). `field` names the value in a refusal."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{field}: {shown(value)} is not a time (epoch seconds, a number, expected)")
    if not math.isfinite(value):
        raise ValidationError(f"{field}: {shown(value)} is not a time (epoch seconds must be a finite number)")
    try:
        at = datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise ValidationError(f"{field}: {shown(value)} epoch seconds is no date in {YEARS}") from exc
    return at.strftime("%Y-%m-%dT%H:%M:%S" + (".%f" if at.microsecond else "") + "Z")


def utc_from_text(value: Any, field: str = "time") -> str:
    """An ISO 8601 time (with an offset, or UTC) as memloci's UTC time; fractions kept as written
    when the time is already UTC with a `Z`. `field` names the value in a refusal."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field}: not an ISO 8601 time: {shown(value)}")
    text = value.strip()
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError as exc:
        raise ValidationError(f"{field}: not an ISO 8601 time: {shown(value)}") from exc
    if at.tzinfo is None:
        raise ValidationError(f"{field}: time without a zone: {shown(value)} (it could be any zone's wall clock)")
    if _UTC.match(text):
        return text  # already memloci's form: keep its digits exactly
    try:
        at = at.astimezone(UTC)
    except (OverflowError, ValueError) as exc:  # 0001-01-01T00:00:00+01:00 is in year 0
        raise ValidationError(f"{field}: {shown(value)} is no time in {YEARS} once in UTC") from exc
    return at.strftime("%Y-%m-%dT%H:%M:%S" + (".%f" if at.microsecond else "") + "Z")


def memory_line(content: Any, *, tags: Any, memory_type: Any, metadata: Any, created_at: str,
                updated_at: str, where: str) -> MemoryLine:
    """A free memory checked by the same rules as one stored by a tool (ValidationError naming `where`),
    and holding nothing an engine cannot store."""
    for key, value in (("content", content), ("tags", tags), ("memory_type", memory_type), ("metadata", metadata)):
        check_storable(value, f"{where}.{key}")
    return MemoryLine(
        content=schema.clean_text(content, f"{where}.content", schema.MEMORY_MAX),
        tags=tuple(schema.validate_tags(tags, f"{where}.tags")),
        memory_type=schema.clean_label(memory_type or "note", f"{where}.memory_type", schema.TAG_MAX),
        importance="medium",
        metadata=schema.validate_metadata(storable_json(metadata, f"{where}.metadata"), f"{where}.metadata"),
        created_at=created_at,
        updated_at=updated_at,
    )


def storable_json(value: Any, where: str) -> Any:
    """`value` if it is plain JSON every engine keeps (no NaN or Infinity, which PostgreSQL's
    jsonb refuses; no bytes or other Python objects)."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where}: must be plain JSON ({exc})") from exc
    except RecursionError as exc:
        raise ValidationError(f"{where}: nested too deeply") from exc
    return value


def open_read_only(path: Path, what: str) -> sqlite3.Connection:
    """A read-only connection to an existing SQLite file (the `mode=ro` URI: never created,
    never written). A file that is not SQLite is refused here, by name.

    A WAL database that no process has open (no `-wal` file beside it) is opened `immutable`:
    a plain read-only open would still create `-wal` and `-shm` files in the source folder.
    While its server runs, the `-wal` file exists and the normal read-only open sees its
    latest commits."""
    if not path.is_file():
        raise ValidationError(f"{path}: no such file ({what} expected)")
    with open(path, "rb") as f:
        header = f.read(100)
    wal = len(header) == 100 and header[:16] == b"SQLite format 3\x00" and header[18] == 2
    idle = wal and not Path(f"{path}-wal").exists()
    conn = sqlite3.connect(path.absolute().as_uri() + ("?mode=ro&immutable=1" if idle else "?mode=ro"), uri=True)
    # Text that is not UTF-8 fails the whole query with the default factory; kept with its bad
    # bytes as lone surrogates, it fails only its own row (check_storable names it).
    conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise ValidationError(f"{path}: not a SQLite database ({exc}); {what} expected") from exc
    return conn


def entity_input(name: Any, entity_type: Any, observations: Any, where: str) -> EntityInput:
    """An entity checked by the rules every create_entities call meets (ValidationError naming `where`)."""
    if not isinstance(observations, list):
        raise ValidationError(f"{where}.observations: must be an array, got {type(observations).__name__}")
    kind = entity_type if isinstance(entity_type, str) and entity_type.strip() else "note"
    check_storable(name, f"{where}.name")
    check_storable(kind, f"{where}.entityType")
    check_storable(observations, f"{where}.observations")
    return schema.validate_entity(EntityInput(name, kind, tuple(observations)), where)


def relation_input(from_entity: Any, relation_type: Any, to_entity: Any, where: str) -> RelationInput:
    for key, value in (("from", from_entity), ("relationType", relation_type), ("to", to_entity)):
        check_storable(value, f"{where}.{key}")
    return schema.validate_relation(RelationInput(from_entity, relation_type, to_entity), where)


def read_inside(root: Path, name: str) -> str:
    """A UTF-8 file of the source folder, reached without following a link."""
    try:
        return confine.read_text(root, name)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{root / name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Columns of a plain table (empty if there is no such table); virtual tables are never touched."""
    return {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
