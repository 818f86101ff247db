"""One workspace from every location: rules deduplicated by content hash (the highest priority
kept, the first found on a tie), conflicts listed (never resolved), skill names made unique (the
first found kept, the clash recorded)."""

from __future__ import annotations

from pathlib import Path

from memloci.core import confine
from memloci.workspace.agents import Location, locations
from memloci.workspace.model import Conflict, Duplicate, Rule, Skill, SkillClash, Workspace
from memloci.workspace.read import read_location


def scan(project: Path, user_home: Path | None = None, problems: list[str] | None = None) -> list[Rule | Skill]:
    """Everything every location holds, in locations() order (project-level first). A link in
    the project is refused (PERMISSION_DENIED); a user-wide location reached through a link
    (a home's ~/.claude kept in a dotfiles repository, say) is not read, and named in `problems`."""
    found: list[Rule | Skill] = []
    for loc in locations(project, user_home):
        try:
            rules, skills = read_location(loc)
        except confine.LinkRefusedError as exc:
            if loc.scope == "project" or problems is None:
                raise
            problems.append(f"{loc.shown}: not read ({exc.message})")
            continue
        found += rules
        found += skills
    return found


def merge(found: list[Rule | Skill], problems: list[str] | None = None) -> Workspace:
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
                     managed=managed, problems=tuple(problems or ()))


def workspace(project: Path, user_home: Path | None = None) -> Workspace:
    problems: list[str] = []
    return merge(scan(project, user_home, problems), problems)


__all__ = ["scan", "merge", "workspace", "Location"]
