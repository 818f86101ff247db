"""One workspace from every location: rules deduplicated by content hash (the highest priority
kept, the first found on a tie), conflicts listed (never resolved), skill names made unique (the
first found kept, the clash recorded)."""

from __future__ import annotations

from pathlib import Path

from memloci.workspace.agents import Location, locations
from memloci.workspace.model import Conflict, Duplicate, Rule, Skill, SkillClash, Workspace
from memloci.workspace.read import read_location


def scan(project: Path, user_home: Path | None = None, agents: tuple[str, ...] | None = None) -> list[Rule | Skill]:
    """Everything every location holds, in locations() order (project-level first)."""
    found: list[Rule | Skill] = []
    for loc in locations(project, user_home):
        if agents is not None and loc.agent not in agents:
            continue
        rules, skills = read_location(loc)
        found += rules
        found += skills
    return found


def merge(found: list[Rule | Skill]) -> Workspace:
    rules = [r for r in found if isinstance(r, Rule) and not r.managed]
    skills = [s for s in found if isinstance(s, Skill) and not s.managed]
    managed = tuple(x for x in found if x.managed)
    by_hash: dict[str, list[Rule]] = {}
    for rule in rules:
        by_hash.setdefault(rule.hash, []).append(rule)
    kept: list[Rule] = []
    duplicates: list[Duplicate] = []
    for group in by_hash.values():
        best = max(group, key=lambda r: r.priority)  # max keeps the first of equal priorities
        kept.append(best)
        if len(group) > 1:
            duplicates.append(Duplicate(best, tuple(r for r in group if r is not best)))
    by_key: dict[tuple, list[Rule]] = {}
    for rule in kept:
        by_key.setdefault(rule.key, []).append(rule)
    conflicts = [Conflict(key, tuple(group)) for key, group in by_key.items() if len(group) > 1]
    by_name: dict[str, list[Skill]] = {}
    for skill in skills:
        by_name.setdefault(skill.name.casefold(), []).append(skill)
    clashes = [SkillClash(g[0].name, g[0], tuple(g[1:])) for g in by_name.values()
               if len(g) > 1 and len({s.hash for s in g}) > 1]
    return Workspace(rules=tuple(kept), skills=tuple(g[0] for g in by_name.values()),
                     duplicates=tuple(duplicates), conflicts=tuple(conflicts), skill_clashes=tuple(clashes),
                     managed=managed)


def workspace(project: Path, user_home: Path | None = None) -> Workspace:
    return merge(scan(project, user_home))


__all__ = ["scan", "merge", "workspace", "Location"]
