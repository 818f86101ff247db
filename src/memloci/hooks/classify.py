"""Is a hook event worth remembering, and what kind of memory is it?

Worth remembering: not memloci's own tool call, not a read-only tool (Read, Grep, ...), not a
noise command (`ls`, `cd`, `pwd`, `echo`, `cat`/`head` of a file, `git status`, ...), and at
least MIN_TEXT characters of text (MIN_CODE for a code edit). What is kept is cut at MAX_CHARS.

The type comes from keyword rules (TYPE_RULES, the table the README shows): each rule's
keywords are counted in the text, the type with the most distinct matches wins (ties go to the
earlier row), and nothing matched means `what-changed` for a code edit, `discovery` otherwise.
Importance follows from the type. Confidence starts at BASE_CONFIDENCE and rises by
STEP_CONFIDENCE with each keyword matched, up to MAX_CONFIDENCE.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

MIN_TEXT = 100
MIN_CODE = 30
MAX_CHARS = 4_000
BASE_CONFIDENCE = 0.3
STEP_CONFIDENCE = 0.15
MAX_CONFIDENCE = 0.95

# (type, importance, keywords): matched case-insensitively on word boundaries.
TYPE_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("decision", "high", ("decided", "decision", "we will", "chose", "going with", "opted", "settled on",
                          "instead of", "switch to", "agreed")),
    ("gotcha", "high", ("gotcha", "careful", "watch out", "caveat", "pitfall", "beware", "surprising",
                        "unexpected", "don't forget", "must not", "footgun", "silently")),
    ("problem-solution", "high", ("fixed", "fix", "bug", "error", "exception", "traceback", "failed", "failing",
                                  "resolved", "workaround", "root cause", "solved", "crash")),
    ("trade-off", "medium", ("trade-off", "tradeoff", "pros", "cons", "at the cost", "downside", "versus",
                             "vs", "compromise", "slower but", "faster but")),
    ("how-it-works", "medium", ("how it works", "works by", "architecture", "under the hood", "is responsible for",
                                "calls", "flow", "pipeline", "protocol", "design")),
    ("what-changed", "low", ("changed", "renamed", "added", "removed", "refactor", "refactored", "migrated",
                             "migration", "updated", "bumped", "deprecated")),
    ("discovery", "medium", ("found", "discovered", "turns out", "learned", "noticed", "realized", "til")),
)
IMPORTANCE = {name: importance for name, importance, _ in TYPE_RULES}
_PATTERNS = {name: [(k, re.compile(rf"(?<![\w-]){re.escape(k)}(?![\w-])", re.IGNORECASE)) for k in words]
             for name, _, words in TYPE_RULES}

# Tools that only read: what they return is already in the project.
READ_ONLY_TOOLS = {
    "read", "glob", "grep", "ls", "todowrite", "todoread", "notebookread", "read_file", "read_many_files",
    "list_directory", "search_file_content", "list_dir", "file_search", "codebase_search", "grep_search",
    "view", "find", "search", "readfile", "listdir", "exitplanmode",
}
# memloci's own tools (every group, as mcp/server.py's KNOWN_TOOLS; a test keeps them equal): an
# agent storing a memory through memloci must not be stored a second time by its hook.
OWN_TOOLS = {
    "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
    "delete_relations", "read_graph", "search_nodes", "open_nodes", "store_memory", "retrieve_memory",
    "search_by_tag", "delete_memory", "update_memory", "list_memories", "check_database_health",
    "list_libraries", "list_entities", "read_entities", "get_entities_toc", "read_entities_sections",
    "add_entity_content", "replace_entity_content", "delete_entity_content", "rename_entity", "merge_entities",
    "read_manual", "update_manual_section", "add_manual_section", "delete_manual_section", "find_relations",
    "add_entities", "replace_entity_section", "update_context", "get_graph_summary", "export_markdown",
    "get_entity", "get_graph", "add_observation", "create_relation", "search_memory", "delete_relation",
    "flush_memory",
    # the maintenance group
    "delete_by_tag", "delete_by_timeframe", "delete_before_date", "cleanup_duplicates", "update_memory_metadata",
    "memory_cleanup", "list_tags", "knowledge_analysis", "knowledge_export", "archive_memories",
    "unarchive_memories", "consolidate", "garbage_collect_relations", "execute_preview", "list_previews",
    # the workspace group
    "list_rules", "preview_rules_sync", "sync_rules", "remember_rules",
}
# Commands whose output is not worth remembering (`git` ones by subcommand).
NOISE_COMMANDS = {"ls", "ll", "la", "cd", "pwd", "echo", "printf", "cat", "head", "tail", "less", "more", "which",
                  "whoami", "clear", "true", "date", "env", "printenv", "tree", "wc", "file", "stat", "history",
                  "exit", "sleep", "type", "realpath", "basename", "dirname", "touch", "mkdir"}
NOISE_GIT = {"status", "log", "branch", "remote", "show", "rev-parse", "stash", "fetch", "add", "checkout",
             "switch", "diff"}
_SEPARATORS = re.compile(r"&&|\|\||[;|\n]")


@dataclass(frozen=True, slots=True)
class Verdict:
    keep: bool
    why: str = ""  # why it was skipped


@dataclass(frozen=True, slots=True)
class Classification:
    memory_type: str
    importance: str
    confidence: float
    matched: tuple[str, ...]


def own_tool(tool: str | None) -> bool:
    """memloci's own tool, however the agent names MCP tools (mcp__memloci__x, memloci__x, x)."""
    if not tool:
        return False
    name = tool.lower()
    if "memloci" in name:
        return True
    name = name.rsplit("__", 1)[-1]
    return name in OWN_TOOLS or name.startswith("n2n_")  # --tools n2n: n2n-memory's names


def noise_command(command: str) -> bool:
    """Every part of the command line (split at ;, &&, ||, |) is a noise command."""
    parts = [p.strip() for p in _SEPARATORS.split(command) if p.strip()]
    if not parts:
        return True
    for part in parts:
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        while words and "=" in words[0] and not words[0].startswith("="):  # FOO=1 cmd
            words = words[1:]
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program == "git":
            sub = next((w for w in words[1:] if not w.startswith("-")), "")
            if sub not in NOISE_GIT:
                return False
        elif program not in NOISE_COMMANDS:
            return False
    return True


def worth_keeping(kind: str, tool: str | None, command: str | None, body: str) -> Verdict:
    if own_tool(tool):
        return Verdict(False, f"memloci's own tool {tool}")
    if tool and tool.lower() in READ_ONLY_TOOLS:
        return Verdict(False, f"read-only tool {tool}")
    if command is not None and noise_command(command):
        return Verdict(False, "noise command")
    least = MIN_CODE if kind == "code" else MIN_TEXT
    size = len(body.strip())
    if size < least:
        return Verdict(False, f"{size} characters, fewer than {least}")
    return Verdict(True)


def classify(text: str, kind: str) -> Classification:
    best: str | None = None
    best_matches: tuple[str, ...] = ()
    for name, _, _ in TYPE_RULES:
        matched = tuple(k for k, pattern in _PATTERNS[name] if pattern.search(text))
        if len(matched) > len(best_matches):
            best, best_matches = name, matched
    if best is None:
        best = "what-changed" if kind == "code" else "discovery"
    confidence = min(MAX_CONFIDENCE, BASE_CONFIDENCE + STEP_CONFIDENCE * len(best_matches))
    return Classification(best, IMPORTANCE[best], round(confidence, 2), best_matches)


def cut(text: str, most: int = MAX_CHARS) -> tuple[str, bool]:
    """The text within `most` characters, and whether it was cut."""
    return (text, False) if len(text) <= most else (text[:most], True)
