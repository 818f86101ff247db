"""memorix: its data folder into the graph and free memories.

Two layouts are read. `memorix.db` (memorix 1.0.x, SQLite: tables `observations`,
`graph_entities`, `graph_relations`) is the truth when it is there; memorix itself moves the
older JSON files into it. Otherwise the JSON layout: `observations.json` (an array of
observations) with the graph in `entities.jsonl` + `relations.jsonl`, or in `graph.jsonl`
(the official server's lines, `type` first).

Graph entities and relations come over as they are (an entity without a type gets `note`);
the entity observations memorix writes for a stored observation, `[#12] Title`, stay as
written and point to the memory with `metadata.memorixId` 12. Each memorix observation
becomes one free memory:

| memorix observation          | memloci memory                                                  |
|------------------------------|-----------------------------------------------------------------|
| `title`, `narrative`, `facts`| `content`: the title, a blank line, the narrative, then one `- fact` line each |
| `type` (gotcha, decision...) | `memory_type`                                                   |
| `concepts`                   | `tags`                                                          |
| `createdAt`, `updatedAt`     | `created_at`, `updated_at` (`updatedAt` missing: `createdAt`)   |
| `id`                         | `metadata.memorixId`                                            |
| `source` (agent, hook, git)  | `metadata.memorixSource`; `metadata.source` is `"memorix"`      |
| `entityName`, `title`, `facts`, `filesModified`, `projectId`, `status`, `topicKey`, `sessionId`, `progress`, `commitHash`, `relatedCommits`, `relatedEntities`, ... | `metadata`, under memorix's own key names (empty values left out) |
| `tokens`, `writeGeneration`, `hasCausalLanguage` | not kept (memorix's own bookkeeping)        |

An observation without a valid `createdAt` is skipped and reported (a date is never made up).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memloci.core import confine
from memloci.core.errors import MemlociError, ValidationError
from memloci.formats.official import MemoryLine, OfficialFile, json_lines, parse_json, shown
from memloci.formats.source import (
    ImportSource,
    entity_input,
    memory_line,
    open_read_only,
    relation_input,
    table_columns,
    utc_from_text,
)

DROPPED = {"id", "type", "narrative", "concepts", "createdAt", "updatedAt", "source",
           "tokens", "writeGeneration", "hasCausalLanguage"}
JSON_LISTS = ("facts", "filesModified", "concepts", "relatedCommits", "relatedEntities")


def observation_memory(obs: Any, where: str) -> MemoryLine:
    """One memorix observation (as memorix's own `rowToObs` shapes it) as a free memory."""
    if not isinstance(obs, dict):
        raise ValidationError(f"{where}: expected an object, got {type(obs).__name__}")
    title, narrative = obs.get("title") or "", obs.get("narrative") or ""
    facts = obs.get("facts") or []
    if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
        raise ValidationError(f"{where}.facts: must be an array of strings")
    if not isinstance(title, str) or not isinstance(narrative, str):
        raise ValidationError(f"{where}: title and narrative must be text")
    parts = [p for p in (title.strip(), narrative.strip(), "\n".join(f"- {f}" for f in facts)) if p]
    if "createdAt" not in obs:
        raise ValidationError(f"{where}: no createdAt, so the observation has no date")
    created = utc_from_text(obs["createdAt"], f"{where}.createdAt")
    metadata: dict[str, Any] = {"source": "memorix"}
    if obs.get("id") is not None:
        metadata["memorixId"] = obs["id"]
    if obs.get("source"):
        metadata["memorixSource"] = obs["source"]
    metadata.update({k: v for k, v in obs.items() if k not in DROPPED and v not in (None, "", [], {})})
    return memory_line("\n\n".join(parts), tags=obs.get("concepts") or [], memory_type=obs.get("type"),
                       metadata=metadata, created_at=created,
                       updated_at=utc_from_text(obs["updatedAt"], f"{where}.updatedAt") if obs.get("updatedAt") else created,
                       where=where)


def _add_memory(source: ImportSource, number: int, obs: Any, where: str) -> None:
    try:
        source.data.memories.append((number, observation_memory(obs, where)))
    except MemlociError as exc:
        source.skipped.append((where, exc.message))


def _add_entity(source: ImportSource, number: int, name: Any, kind: Any, observations: Any, where: str) -> None:
    try:
        source.data.entities.append((number, entity_input(name, kind, observations, where)))
    except MemlociError as exc:
        source.skipped.append((where, exc.message))


def _add_relation(source: ImportSource, where: str, from_entity: Any, relation_type: Any, to_entity: Any) -> None:
    try:
        relation = relation_input(from_entity, relation_type, to_entity, where)
    except MemlociError as exc:
        source.skipped.append((where, exc.message))
        return
    number = len(source.relation_where) + 1
    source.relation_where[number] = where
    source.data.relations.append((number, relation))


def _from_db(root: Path) -> ImportSource:
    path = root / "memorix.db"
    conn = open_read_only(path, "memorix's memorix.db")
    try:
        missing = [t for t in ("observations", "graph_entities", "graph_relations") if not table_columns(conn, t)]
        if missing:
            raise ValidationError(f"{path}: no table {', '.join(missing)}: not a memorix 1.0 database")
        conn.row_factory = sqlite3.Row
        observations = conn.execute("SELECT * FROM observations ORDER BY id").fetchall()
        entities = conn.execute("SELECT rowid, name, entityType, observations FROM graph_entities ORDER BY rowid").fetchall()
        relations = conn.execute("SELECT id, from_entity, to_entity, relationType FROM graph_relations ORDER BY id").fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValidationError(f"{path}: cannot read memorix's tables ({exc})") from exc
    finally:
        conn.close()
    source = ImportSource("memorix", OfficialFile([], [], []), layout="memorix.db")
    for number, row in enumerate(observations, start=1):
        obs = {k: row[k] for k in row.keys()}
        where = f"observation id {shown(obs.get('id'))}"
        try:
            for key in JSON_LISTS + ("progress",):  # memorix stores these as JSON text
                if isinstance(obs.get(key), str):
                    obs[key] = parse_json(obs[key], key)
        except ValidationError as exc:
            source.skipped.append((where, exc.message))
            continue
        _add_memory(source, obs["id"] if isinstance(obs.get("id"), int) else number, obs, where)
    for rowid, name, kind, observations_json in entities:
        where = f"graph entity {shown(name)}"
        try:
            if observations_json is not None and not isinstance(observations_json, str):
                raise ValidationError(f"observations: must be JSON text, got {type(observations_json).__name__}")
            items = parse_json(observations_json or "[]", "observations")
        except ValidationError as exc:
            source.skipped.append((where, exc.message))
            continue
        _add_entity(source, rowid, name, kind, items, where)
    for row_id, from_entity, to_entity, relation_type in relations:
        _add_relation(source, f"graph relation id {shown(row_id)}", from_entity, relation_type, to_entity)
    return source


def _jsonl(root: Path, name: str, source: ImportSource) -> list[tuple[int, dict[str, Any]]]:
    """The objects of a JSON Lines file; a line that is not one is skipped and listed."""
    out = []
    for number, obj in json_lines(confine.read_bytes(root, name), name):
        if isinstance(obj, ValidationError):
            source.skipped.append((f"{name}:{number}", obj.message.removeprefix(f"{name}:{number}: ")))
            continue
        if not isinstance(obj, dict):
            source.skipped.append((f"{name}:{number}", f"expected a JSON object, got {type(obj).__name__}"))
            continue
        out.append((number, obj))
    return out


def _from_json(root: Path) -> ImportSource:
    # One JSON document: bytes that are not UTF-8 spoil only the observation holding them
    # (kept as lone surrogates here, refused by that observation's checks).
    text = confine.read_bytes(root, "observations.json").decode("utf-8-sig", "surrogateescape")
    observations = parse_json(text, str(root / "observations.json"), whole=True)
    if not isinstance(observations, list):
        raise ValidationError(f"{root / 'observations.json'}: must be a JSON array of observations")
    graph = [n for n in ("entities.jsonl", "relations.jsonl", "graph.jsonl") if confine.exists(root, n)]
    source = ImportSource("memorix", OfficialFile([], [], []), layout=" + ".join(["observations.json", *graph]))
    for i, obs in enumerate(observations):
        _add_memory(source, i + 1, obs, f"observations.json[{i}] (id {shown(obs.get('id')) if isinstance(obs, dict) else '?'})")
    for name in graph:
        for number, obj in _jsonl(root, name, source):
            where = f"{name}:{number}"
            kind = obj.get("type")
            if kind == "relation" or (kind is None and name == "relations.jsonl"):
                _add_relation(source, where, obj.get("from"), obj.get("relationType"), obj.get("to"))
            elif kind == "entity" or (kind is None and name == "entities.jsonl"):
                _add_entity(source, number, obj.get("name"), obj.get("entityType"), obj.get("observations", []), where)
            else:
                source.skipped.append((where, f"a line of type {shown(kind)}, neither entity nor relation"))
    return source


def read_memorix(root: Path) -> ImportSource:
    """A memorix data folder (e.g. ~/.memorix/data): memorix.db if present, else the JSON files."""
    if not root.is_dir():
        raise ValidationError(f"{root}: not a folder; give memorix's data folder (e.g. ~/.memorix/data)")
    if confine.exists(root, "memorix.db"):
        if confine.is_link(root, "memorix.db"):
            raise confine.LinkRefusedError("memorix.db")
        return _from_db(root)
    if confine.exists(root, "observations.json"):
        return _from_json(root)
    raise ValidationError(f"{root}: neither memorix.db nor observations.json: not a memorix data folder",
                          hint="memorix keeps its data in ~/.memorix/data (or $MEMORIX_DATA_DIR).")
