"""A repository holding rules for four agents (Claude Code, Codex, Cursor, Windsurf) and
Copilot's path instructions, with one duplicate across formats (the package-manager rule, in
CLAUDE.md and as a Cursor rule) and one conflict (the generated client, in CLAUDE.md and
AGENTS.md, saying different things); and a home folder with a user-wide CLAUDE.md."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

FILES = {
    "CLAUDE.md": "# Acme\n\nA web shop.\n\n## Package manager\n\nUse pnpm, never npm or yarn.\n\n"
                 "## Generated client\n\nNever edit src/generated/ by hand; run `pnpm gen`.\n",
    "AGENTS.md": "# Agents\r\n\r\n## Generated client\r\n\r\nRegenerate src/generated/ with `make client`; "
                 "hand edits there are lost.\r\n",
    ".cursor/rules/pnpm.mdc": "---\ndescription: Package manager\nglobs:\nalwaysApply: true\n---\n"
                              "# Package manager\n\nUse pnpm, never npm   or yarn.\n",
    ".cursor/rules/tests.mdc": "---\ndescription: Where tests go\nglobs: src/**/*.ts\nalwaysApply: false\n---\n"
                               "# Tests\n\nEvery module has a test beside it: `x.ts` and `x.test.ts`.\n",
    ".windsurf/rules/style.md": "---\ntrigger: always_on\n---\n\n# Style\n\nIndent with 2 spaces; no semicolons.\n",
    ".windsurf/workflows/release.md": "---\ndescription: Cut a release\n---\n\n# Release\n\n"
                                      "1. Run `pnpm test` and stop if it fails.\n"
                                      "2. Bump the version in package.json.\n"
                                      "3. Tag the commit `vX.Y.Z` and push the tag.\n",
    ".github/instructions/api.instructions.md": "---\napplyTo: \"src/api/**\"\n---\n"
                                               "API handlers validate their input with zod.\n",
}
HOME_FILES = {".claude/CLAUDE.md": "## Tone\n\nBe brief.\n"}


def make(root: Path) -> tuple[Path, Path]:
    project, home = root / "repo", root / "home"
    for files, base in ((FILES, project), (HOME_FILES, home)):
        for rel, text in files.items():
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
    return project, home


def tree(root: Path) -> dict[str, str]:
    """Every file and folder under `root` with a hash of its bytes: equal trees, equal bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# --- each agent's documented format, as its parser reads it ----------------------------------

def front(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n"), "front matter first"
    head, _, body = text[4:].partition("\n---\n")
    data = yaml.safe_load(head) or {}
    assert isinstance(data, dict)
    return data, body


def check_mdc(text: str) -> dict:
    """Cursor (cursor.com/docs/context/rules) reads its front matter as flat `key: value` lines,
    not YAML: description (text), globs (bare comma-separated globs, empty for none: a quote or
    a bracket would be taken as part of a pattern), alwaysApply (the word true or false)."""
    assert text.startswith("---\n"), "front matter first"
    head, _, body = text[4:].partition("\n---\n")
    data: dict = {}
    for line in head.split("\n"):
        key, sep, value = line.partition(":")
        assert sep and key in {"description", "globs", "alwaysApply"} and key not in data, line
        data[key] = value.strip()
    assert data.get("description"), data
    assert "globs" in data and not any(c in data["globs"] for c in "\"'[]"), data
    assert all(g.strip() == g and g for g in data["globs"].split(",")) if data["globs"] else True, data
    assert data.get("alwaysApply") in ("true", "false"), data
    data["alwaysApply"] = data["alwaysApply"] == "true"
    assert body.strip()
    return data


SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def check_skill(path: Path) -> dict:
    """Agent Skills (code.claude.com/docs/en/skills, agentskills.io): SKILL.md front matter name
    (lower-case letters, digits, hyphens; at most 64; the folder's name) and description (1-1024)."""
    data, body = front(path.read_text("utf-8"))
    assert isinstance(data.get("name"), str) and SKILL_NAME.match(data["name"]) and len(data["name"]) <= 64
    assert data["name"] == path.parent.name
    assert isinstance(data.get("description"), str) and 0 < len(data["description"]) <= 1024
    assert body.strip()
    return data


def check_instructions(text: str) -> dict:
    """Copilot (docs.github.com ... add-repository-instructions): applyTo, comma-separated globs."""
    data, body = front(text)
    assert isinstance(data.get("applyTo"), str) and data["applyTo"].strip()
    assert set(data) <= {"applyTo", "description", "excludeAgent"}
    assert body.strip()
    return data


def check_windsurf(text: str) -> dict:
    """Windsurf (docs.windsurf.com/windsurf/cascade/memories): trigger, globs for trigger glob."""
    data, body = front(text)
    assert data.get("trigger") in ("always_on", "manual", "model_decision", "glob")
    if data["trigger"] == "glob":
        assert isinstance(data.get("globs"), str) and data["globs"]
    if data["trigger"] == "model_decision":
        assert isinstance(data.get("description"), str) and data["description"]
    assert body.strip()
    return data


def check_workflow(text: str) -> dict:
    """Windsurf (docs.windsurf.com/windsurf/cascade/workflows): a Markdown file with a title, a
    description and steps, within the 12000 characters a workflow file may hold."""
    data, body = front(text)
    assert set(data) <= {"description", "auto_execution_mode"}, data
    assert isinstance(data.get("description"), str) and data["description"]
    assert re.search(r"^# \S", body, re.M), "a title"
    assert re.search(r"^\s*(\d+[.)]|[-*+])\s+\S", body, re.M), "steps"
    assert len(text) <= 12000
    return data
