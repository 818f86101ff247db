"""Where each coding agent keeps its rules, workflows and skills, user-wide and per project.

Every location below comes from the agent's own documentation, cited beside it; nothing is
guessed from another agent's layout. A location is a root (the project folder, or the home
folder for a user-wide file) and a path below it, so every read and write goes through
core/confine.py from that root and never follows a link.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memloci.core.errors import ValidationError

AGENTS = ("claude-code", "codex", "cursor", "windsurf", "copilot", "gemini")
# What a location holds, and so how it is read:
#   memory    one Markdown file of instructions, read as one rule per section (CLAUDE.md, AGENTS.md ...)
#   rules     a folder of rule files, one rule each, with the agent's front matter (`pattern` names them)
#   skills    a folder of skill folders, each with SKILL.md (front matter name, description)
#   workflows a folder of Windsurf workflow files
KINDS = ("memory", "rules", "skills", "workflows")
PROJECT_PRIORITY, USER_PRIORITY = 20, 10  # a project's own rule outranks a user-wide copy of it


@dataclass(frozen=True)
class Location:
    agent: str
    scope: str  # project | user
    kind: str
    root: Path
    rel: str  # below root, '/'-separated
    pattern: str = ""  # for a rules folder: the file names' ending (".mdc", ".instructions.md")
    fmt: str = "markdown"  # the front matter the files carry: markdown | claude | mdc | windsurf | copilot | skill

    @property
    def shown(self) -> str:
        return self.rel if self.scope == "project" else f"~/{self.rel}" if self.root == Path.home() else str(self.root / self.rel)

    @property
    def priority(self) -> int:
        return PROJECT_PRIORITY if self.scope == "project" else USER_PRIORITY


def home() -> Path:
    """The user-wide root: $HOME (tests point it at a folder of their own)."""
    return Path(os.environ.get("HOME") or Path.home())


def locations(project: Path, user_home: Path | None = None) -> list[Location]:
    """Every documented location of every agent, project-level first, in AGENTS order."""
    h = user_home or home()
    p = project
    codex = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else h / ".codex"
    return [
        # --- Claude Code (code.claude.com/docs/en/memory, code.claude.com/docs/en/skills) -------
        # Project memory ./CLAUDE.md (or ./.claude/CLAUDE.md), user memory ~/.claude/CLAUDE.md;
        # rules: .claude/rules/*.md and ~/.claude/rules/*.md, each optionally scoped with a
        # `paths:` list of globs in YAML front matter; skills: .claude/skills/<name>/SKILL.md and
        # ~/.claude/skills/<name>/SKILL.md with front matter `name` and `description`.
        Location("claude-code", "project", "memory", p, "CLAUDE.md"),
        Location("claude-code", "project", "memory", p, ".claude/CLAUDE.md"),
        Location("claude-code", "project", "rules", p, ".claude/rules", ".md", "claude"),
        Location("claude-code", "project", "skills", p, ".claude/skills", fmt="skill"),
        Location("claude-code", "user", "memory", h, ".claude/CLAUDE.md"),
        Location("claude-code", "user", "rules", h, ".claude/rules", ".md", "claude"),
        Location("claude-code", "user", "skills", h, ".claude/skills", fmt="skill"),
        # --- Codex (developers.openai.com/codex/guides/agents-md, developers.openai.com/codex/skills)
        # AGENTS.md at the repository root (nested ones apply below their folder), and
        # $CODEX_HOME/AGENTS.md (default ~/.codex) user-wide. Skills: .agents/skills/<name>/SKILL.md
        # in the repository and $HOME/.agents/skills user-wide; SKILL.md must hold name and description.
        Location("codex", "project", "memory", p, "AGENTS.md"),
        Location("codex", "project", "skills", p, ".agents/skills", fmt="skill"),
        Location("codex", "user", "memory", codex, "AGENTS.md"),
        Location("codex", "user", "skills", h, ".agents/skills", fmt="skill"),
        # --- Cursor (cursor.com/docs/context/rules) -----------------------------------------
        # Project rules .cursor/rules/*.mdc, front matter `description`, `globs` (comma-separated
        # text or a list), `alwaysApply` (bool); the legacy single file .cursorrules at the root.
        # User rules live in Cursor's settings, not in a file.
        Location("cursor", "project", "rules", p, ".cursor/rules", ".mdc", "mdc"),
        Location("cursor", "project", "memory", p, ".cursorrules"),
        # --- Windsurf (docs.windsurf.com/windsurf/cascade/memories, .../cascade/workflows) ----
        # Workspace rules .windsurf/rules/*.md with front matter `trigger` (always_on | manual |
        # model_decision | glob), `globs`, `description`; global rules in
        # ~/.codeium/windsurf/memories/global_rules.md; workflows .windsurf/workflows/*.md
        # (a title, a description, then steps), run with /workflow-name.
        Location("windsurf", "project", "rules", p, ".windsurf/rules", ".md", "windsurf"),
        Location("windsurf", "project", "workflows", p, ".windsurf/workflows", ".md", "windsurf"),
        Location("windsurf", "user", "memory", h, ".codeium/windsurf/memories/global_rules.md"),
        # --- GitHub Copilot (docs.github.com/en/copilot/how-tos/configure-custom-instructions/
        #     add-repository-instructions) --------------------------------------------------
        # .github/copilot-instructions.md for the whole repository; path-specific
        # .github/instructions/NAME.instructions.md with front matter `applyTo` (comma-separated
        # globs) and an optional `description`.
        Location("copilot", "project", "memory", p, ".github/copilot-instructions.md"),
        Location("copilot", "project", "rules", p, ".github/instructions", ".instructions.md", "copilot"),
        # --- Gemini CLI (geminicli.com/docs/cli/gemini-md) -----------------------------------
        # GEMINI.md at the project root (and its ancestors and sub-folders), ~/.gemini/GEMINI.md
        # user-wide.
        Location("gemini", "project", "memory", p, "GEMINI.md"),
        Location("gemini", "user", "memory", h, ".gemini/GEMINI.md"),
    ]


def agent_names(spec: str, flag: str) -> list[str]:
    """`--to claude-code,cursor`: every name must be an agent memloci knows."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in AGENTS]
    if unknown or not names:
        raise ValidationError(f"{flag}: unknown agent(s) {', '.join(unknown) or '(none given)'}; "
                              f"known agents: {', '.join(AGENTS)}")
    return names
