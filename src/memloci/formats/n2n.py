"""n2n-memory's project files, `.mcp/memory.json` and `.mcp/context.json` (REFERENCE.md).

A project library opened for the first time carries them over: the graph goes through the
one import path (`MemoryService.import_everything`) like every other importer's, read by
the one reader of the `{"entities", "relations"}` form (interop.read_graph_object); the
context is mapped to memloci's keys. The files are only read, never through a symbolic link
(a clone's `memory.json -> ~/.ssh/...` is refused, not imported), and left as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memloci.core import confine
from memloci.core.errors import ValidationError
from memloci.formats.official import read_graph_object
from memloci.formats.source import ImportSource

PROJECT_DIR = ".mcp"  # a project's own folder: n2n-memory's files, and memloci's project library (app/projects.py)
# memloci's context keys -> n2n-memory's: read here, and spoken by the n2n tools (mcp/n2n.py)
CONTEXT_KEYS = {"active_task": "activeTask", "status": "status", "reason": "reason", "next_steps": "nextSteps",
                "last_commit": "lastCommit", "updated_at": "updatedAt"}


def _load(folder: Path, name: str) -> Any:
    """The JSON in `folder/name`, None if there is no such file."""
    try:
        return json.loads(confine.read_bytes(folder, name).decode("utf-8-sig"))
    except FileNotFoundError:
        return None
    except confine.LinkRefusedError as exc:
        raise ValidationError(f"{PROJECT_DIR}/{name}: a symbolic link; memloci does not follow links in a project, "
                              "nothing was imported", hint="Replace the link with the file itself.") from exc
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
        raise ValidationError(f"{PROJECT_DIR}/{name}: not readable JSON ({exc}); nothing was imported",
                              hint="Fix or move the file; memloci reads it on first use.") from exc


def read_n2n_graph(folder: Path) -> ImportSource | None:
    """The graph in a project's `.mcp/memory.json`; None without one. A file that is not the
    n2n form is refused whole, naming the item (`.mcp/memory.json relations[0].to: ...`)."""
    whole = _load(folder, "memory.json")
    if whole is None:
        return None
    return ImportSource("n2n-memory", read_graph_object(whole, f"{PROJECT_DIR}/memory.json"), layout="memory.json")


def read_n2n_context(folder: Path) -> dict[str, Any]:
    """A project's `.mcp/context.json` in memloci's keys ({} without one); empty values left out."""
    whole = _load(folder, "context.json")
    if whole is None:
        return {}
    if not isinstance(whole, dict):
        raise ValidationError(f"{PROJECT_DIR}/context.json: expected a JSON object, got {type(whole).__name__}")
    context = {ours: whole[theirs] for ours, theirs in CONTEXT_KEYS.items() if whole.get(theirs) not in (None, "", [])}
    if isinstance(context.get("next_steps"), str):
        context["next_steps"] = [context["next_steps"]]
    return context
