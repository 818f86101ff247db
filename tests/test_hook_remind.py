"""At session start the hook hands Claude Code and Gemini CLI the project's remembered rules
(hooks/remind.py): real `memloci hook` processes on temp MEMLOCI_HOMEs, rules remembered with
`rules remember`'s own code into real SQLite libraries."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_hook import hook, log_text, memories, quiet

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.settings import Settings
from memloci.core.tokens import ELLIPSIS
from memloci.hooks.remind import MAX_CONTEXT_CHARS, MAX_RULES, reminder, rule_memories
from memloci.service.facade import MemoryService
from memloci.service.workspace import remember_rules

RULES = """# Shop

## Tests

Run pytest with -x before each commit; never the whole suite at once.

## Money

Prices are integers in cents; never floats.
"""


@pytest.fixture
def shop(tmp_path, monkeypatch):
    """A git project with a CLAUDE.md of two rules, a home, and no user-wide rules."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    root = tmp_path / "shop"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "CLAUDE.md").write_text(RULES)
    return root, tmp_path / "home"


def remember(root: Path, home: Path, library: ProjectRef | None = None) -> dict:
    service = MemoryService(LibraryRegistry([LibrarySpec("default", home / "default.db")]), embed_pending=False)
    try:
        return remember_rules(service, root, library)
    finally:
        service.close()


def start(root: Path, source: str = "startup") -> dict:
    return {"session_id": "sess-1", "transcript_path": "", "cwd": str(root), "hook_event_name": "SessionStart",
            "source": source}


def context(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0 and proc.stderr == b""
    reply = json.loads(proc.stdout)
    assert set(reply) == {"hookSpecificOutput"} and reply["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return reply["hookSpecificOutput"]["additionalContext"]


def test_remembered_rules_come_back_at_session_start_and_a_superseded_one_does_not(shop):
    root, home = shop
    remember(root, home)
    (root / "CLAUDE.md").write_text(RULES.replace("never floats", "never floats; round half to even"))
    assert len(remember(root, home)["superseded"]) == 1
    stored = len(memories(home))

    text = context(hook(home, "claude-code", start(root)))
    assert text.startswith("Rules of this project (shop) that memloci remembers")
    assert "Prices are integers in cents; never floats; round half to even." in text
    assert "never floats.\n" not in text + "\n"  # the old text of that rule is not given back
    assert text.count("Run pytest with -x before each commit") == 1
    assert "SessionStart (startup): reminded of 2 rule(s) of project shop" in log_text(home)
    # Gemini CLI's reply has the same shape (hookSpecificOutput.additionalContext)
    assert context(hook(home, "gemini", start(root, "resume"))) == text
    assert len(memories(home)) == stored  # a session start stores nothing


def test_rules_kept_in_the_projects_own_library_come_back_too(shop):
    root, home = shop
    (root / ".mcp").mkdir()
    remember(root, home, ProjectRef(str(root), None))
    assert memories(home) == []  # in the project's library only
    text = context(hook(home, "claude-code", start(root, "compact")))
    assert "Prices are integers in cents; never floats." in text and "Run pytest with -x" in text


def test_no_rules_and_no_project_give_the_neutral_reply(shop, tmp_path):
    root, home = shop
    quiet(hook(home, "claude-code", start(root)))
    quiet(hook(home, "gemini", start(tmp_path)), b"{}")  # outside a project
    log = log_text(home)
    assert "no rules remembered for project shop" in log and "outside a project" in log
    assert memories(home) == []


def test_a_broken_library_gives_the_neutral_reply_and_a_log_line(shop):
    root, home = shop
    home.mkdir()
    (home / "default.db").write_bytes(b"this is not a SQLite database, " * 100)
    quiet(hook(home, "gemini", start(root)), b"{}")
    assert "rules of 'default' library not read" in log_text(home)


def test_the_reminder_is_bounded_and_cut_cleanly(shop):
    root, home = shop
    service = MemoryService(LibraryRegistry([LibrarySpec("default", home / "default.db")]), embed_pending=False)
    try:
        for n in range(MAX_RULES + 5):
            service.store_memory(f"Rule of shop, from cursor .cursor/rules/r{n}.mdc: rule {n}\n\n" + "Keep it so. " * 20,
                                 tags=["rule", "project:shop"], memory_type="rule", metadata={"rule_id": f"cursor:r{n}"})
        service.store_memory("Rule of another project", tags=["rule", "project:other"], memory_type="rule")
    finally:
        service.close()
    found = rule_memories(root, False, Settings.defaults().with_flags(home=home))
    assert len(found) == MAX_RULES and all("project:shop" in m.tags for m in found)

    text = reminder("shop", [m.content for m in found])
    assert len(text) <= MAX_CONTEXT_CHARS
    shown = text.split("\n\n")
    assert shown[-1].startswith("(") and "more rule(s) not shown" in shown[-1]
    whole = [m.content for m in found if m.content in text]
    assert len(whole) >= 5 and text.count("Rule of shop") in (len(whole), len(whole) + 1)
    cut = [p for p in shown if p.endswith(ELLIPSIS)]
    assert all(len(p) >= 150 for p in cut)  # a cut rule is shown only with room for a useful part
    # the bound holds at any size
    for most in (300, 777, 1500):
        assert len(reminder("shop", [m.content for m in found], most)) <= most
    assert reminder("shop", []) == ""
