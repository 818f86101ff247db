"""What the `workspace` tools and `memloci rules` share: the workspace as data, a sync's preview
and execution, and each rule stored as a memory of the project (type `rule`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memloci.app.projects import ProjectRef, project_id
from memloci.core.errors import ValidationError
from memloci.workspace import sync as ws_sync
from memloci.workspace.agents import agent_names
from memloci.workspace.merge import workspace
from memloci.workspace.model import Rule, Skill, Workspace

RULE_MEMORY_TYPE = "rule"
PAGE = 100  # rule memories read per page when looking for the ones a changed rule supersedes


def project_folder(path: str | Path | None) -> Path:
    folder = Path(path).expanduser().resolve() if path else Path.cwd().resolve()
    if not folder.is_dir():
        raise ValidationError(f"project: {folder} is not a folder", hint="Name the project's root folder.")
    return folder


def rule_data(r: Rule) -> dict[str, Any]:
    return {"id": r.id, "agent": r.agent, "path": r.path, "title": r.title, "scope": r.scope,
            "globs": list(r.globs), "always_apply": r.always_apply, "priority": r.priority, "hash": r.hash,
            "description": r.description}


def skill_data(s: Skill) -> dict[str, Any]:
    return {"name": s.name, "agent": s.agent, "path": s.path, "kind": s.kind, "description": s.description,
            "steps": len(s.steps), "hash": s.hash}


def workspace_data(ws: Workspace) -> dict[str, Any]:
    return {"rules": [rule_data(r) for r in ws.rules], "skills": [skill_data(s) for s in ws.skills],
            "duplicates": [{"kept": d.kept.id, "hash": d.kept.hash, "also": [r.id for r in d.dropped]}
                           for d in ws.duplicates],
            "conflicts": [{"scope": c.key[0], "globs": list(c.key[1]), "title": c.rules[0].title,
                           "rules": [rule_data(r) for r in c.rules]} for c in ws.conflicts],
            "skill_clashes": [{"name": c.name, "kept": c.kept.path, "also": [s.path for s in c.dropped]}
                              for c in ws.skill_clashes],
            "copies": len(ws.managed), "problems": list(ws.problems)}


def list_rules(project: str | Path | None, agents: str | None = None, agents_flag: str = "agents") -> dict[str, Any]:
    """The workspace as data; `agents` (comma-separated) keeps only those agents' rules and skills,
    and the duplicates and conflicts they are part of (found over every agent all the same)."""
    folder = project_folder(project)
    data = workspace_data(workspace(folder))
    if agents:
        keep = set(agent_names(agents, agents_flag))
        data["rules"] = [r for r in data["rules"] if r["agent"] in keep]
        data["skills"] = [s for s in data["skills"] if s["agent"] in keep]
        data["conflicts"] = [c for c in data["conflicts"] if any(r["agent"] in keep for r in c["rules"])]
        data["duplicates"] = [d for d in data["duplicates"]
                              if any(i.split(":", 1)[0] in keep for i in [d["kept"], *d["also"]])]
    return {"project": str(folder), **data}


# The names of the --from and --to options (the tools': from_agents and to_agents), for errors
CLI_FLAGS = ("--from", "--to")


def preview_sync(project: str | Path | None, sources: str, targets: str, state: Path,
                 flags: tuple[str, str] = CLI_FLAGS) -> dict[str, Any]:
    plan = ws_sync.plan_sync(project_folder(project), agent_names(sources, flags[0]), agent_names(targets, flags[1]),
                             state)
    return {"dry_run": True, **plan.to_data()}


def run_sync(project: str | Path | None, sources: str, targets: str, state: Path,
             flags: tuple[str, str] = CLI_FLAGS) -> dict[str, Any]:
    plan = ws_sync.sync(project_folder(project), agent_names(sources, flags[0]), agent_names(targets, flags[1]), state)
    return {"dry_run": False, **plan.to_data()}


def rule_project_tag(pid: str) -> str:
    """The tag that names a rule memory's project (what a hook reads the project's rules by)."""
    return f"project:{pid}"[:64]


def _remembered(service: Any, project_tag: str, library: str | ProjectRef | None) -> dict[str, Any]:
    """The project's rule memories not yet superseded, by the rule's id (metadata rule_id)."""
    found: dict[str, Any] = {}
    offset, total = 0, 1
    while offset < total:
        page, total = service.search_by_tag_page(["rule", project_tag], match_all=True, limit=PAGE, offset=offset,
                                                 library=library)
        if not page:
            break
        for m in page:
            if m.memory_type == RULE_MEMORY_TYPE and isinstance(m.metadata.get("rule_id"), str):
                found.setdefault(m.metadata["rule_id"], m)  # newest first: the first is the current one
        offset += len(page)
    return found


def remember_rules(service: Any, project: str | Path | None, library: str | ProjectRef | None = None) -> dict[str, Any]:
    """Each rule of the project (duplicates once) stored as a memory of type `rule`, tagged with
    its agent, scope, project and hash; a rule already stored (same text) is not stored again.
    A rule whose text changed since it was stored (same id: its agent, file and title) is stored
    as a memory superseding the old one, so retrieval finds the rule as it is now."""
    folder = project_folder(project)
    ws = workspace(folder)
    pid = project_id(folder)
    project_tag = rule_project_tag(pid)
    earlier = _remembered(service, project_tag, library)
    stored: list[dict[str, str]] = []
    already: list[dict[str, str]] = []
    superseded: list[dict[str, str]] = []
    for rule in ws.rules:
        where = f" (files {', '.join(rule.globs)})" if rule.globs else ""
        content = f"Rule of {pid}{where}, from {rule.agent} {rule.path}: {rule.title}\n\n{rule.content.strip()}"
        tags = ["rule", f"agent:{rule.agent}", f"scope:{rule.scope}", f"rule:{rule.hash}", project_tag]
        old = earlier.get(rule.id)
        replaces = old.content_hash if old is not None and old.metadata.get("rule_hash") != rule.hash else None
        memory, created = service.store_memory(content, tags=tags, memory_type=RULE_MEMORY_TYPE,
                                               metadata={"rule_id": rule.id, "rule_hash": rule.hash},
                                               supersedes=replaces, library=library)
        if replaces is not None:
            superseded.append({"rule": rule.id, "content_hash": memory.content_hash, "supersedes": replaces})
        (stored if created else already).append({"rule": rule.id, "content_hash": memory.content_hash})
    return {"project": str(folder), "stored": stored, "already_stored": already, "superseded": superseded,
            "message": f"{len(stored)} rule(s) stored as memories, {len(already)} already stored"
                       + (f", {len(superseded)} superseding the rule's earlier text" if superseded else "")}
