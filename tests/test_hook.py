"""`memloci hook AGENT`: real processes fed one event on stdin, on temp MEMLOCI_HOMEs, with what
was stored read back from the real libraries (the default SQLite one, or a project's `.mcp/`)."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import server_env

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.hooks.capture import LOG_BYTES, MAX_INPUT, PrivateLog
from memloci.hooks.classify import MAX_CHARS, classify, noise_command, own_tool
from memloci.mcp.server import KNOWN_TOOLS
from memloci.service.facade import MemoryService

LONG_OUTPUT = ("FAILED tests/test_api.py::test_login - KeyError: 'session'\nTraceback (most recent call last):\n"
               "  File 'app/session.py', line 40\nThe error was fixed by reading the cookie before the header.\n")


@pytest.fixture
def places(tmp_path):
    """A home, a git project that has memory (.mcp/), and a git project that has none."""
    home, with_memory, plain = tmp_path / "home", tmp_path / "shop", tmp_path / "plain"
    for repo in (with_memory, plain):
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (with_memory / ".mcp").mkdir()
    (with_memory / "src").mkdir()
    return {"home": home, "project": with_memory, "plain": plain}


# What is stored is checked here, not how fast: on a busy machine start-up alone can take most of
# the 1.8 s deadline, so these runs get longer (the deadline itself is tested with a stalled input;
# `memloci bench hook` measures the time).
SLOW_OK = {"MEMLOCI_HOOK_DEADLINE": "30"}


def hook(home: Path, agent: str, event, *args: str) -> subprocess.CompletedProcess:
    data = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run([sys.executable, "-m", "memloci", "hook", agent, *args], input=data,
                          capture_output=True, env=server_env(home, **SLOW_OK), timeout=60)


def quiet(proc: subprocess.CompletedProcess, reply: bytes = b"") -> None:
    """Exit 0, nothing on stderr, only the agent's neutral reply on stdout."""
    assert proc.returncode == 0
    assert proc.stderr == b""
    assert proc.stdout.strip() == reply


def memories(home: Path, root: Path | None = None):
    db = home / "default.db"
    if root is None and not db.exists():
        return []
    service = MemoryService(LibraryRegistry([LibrarySpec("default", db)], create_missing=False), embed_pending=False)
    try:
        found, _ = service.list_memories(page_size=100, library=ProjectRef(str(root), None, may_create=False)
                                         if root else None)
        return found
    finally:
        service.close()


def log_text(home: Path) -> str:
    return (home / "logs" / "hook.log").read_text()


def claude_edit(root: Path, new: str, tool: str = "Edit", session: str = "sess-1") -> dict:
    return {"session_id": session, "transcript_path": str(root / "no-transcript.jsonl"), "cwd": str(root),
            "hook_event_name": "PostToolUse", "tool_name": tool,
            "tool_input": {"file_path": str(root / "src" / "cart.py"), "old_string": "x", "new_string": new},
            "tool_response": {"filePath": str(root / "src" / "cart.py"), "success": True}}


def claude_bash(root: Path, command: str, stdout: str) -> dict:
    return {"session_id": "sess-1", "transcript_path": "", "cwd": str(root), "hook_event_name": "PostToolUse",
            "tool_name": "Bash", "tool_input": {"command": command, "description": "run"},
            "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False}}


def claude_lifecycle(root: Path, event: str, transcript: Path, **extra: str) -> dict:
    return {"session_id": "sess-1", "transcript_path": str(transcript), "cwd": str(root),
            "hook_event_name": event, **extra}


def transcript(path: Path, *answers: str) -> Path:
    lines = [{"type": "user", "message": {"role": "user", "content": "How do sessions expire?"}}]
    lines += [{"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": a}]}}
              for a in answers]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# -- what is stored, and where ------------------------------------------------------------

def test_edit_in_a_project_with_memory_goes_to_its_library(places):
    home, root = places["home"], places["project"]
    code = "# We decided to keep carts in Redis instead of Postgres: they expire on their own.\nCART_TTL = 3600\n"
    quiet(hook(home, "claude-code", claude_edit(root, code)))
    [m] = memories(home, root)
    assert m.content == f"Edit src/cart.py:\n{code.strip()}"
    assert m.memory_type == "decision" and m.importance == "high"
    assert set(m.tags) == {"hook", "agent:claude-code", "event:PostToolUse", "tool:Edit", "project:shop"}
    assert m.metadata["source"] == "hook:claude-code:PostToolUse"
    assert m.metadata["session_id"] == "sess-1" and m.metadata["tool"] == "Edit"
    assert m.metadata["file_path"] == "src/cart.py"
    assert m.metadata["matched"] == ["decided", "instead of"] and m.metadata["confidence"] == 0.6
    assert memories(home) == []  # nothing in the default library
    assert "stored decision" in log_text(home)


def test_project_without_memory_uses_the_default_library_and_creates_nothing(places):
    home, plain = places["home"], places["plain"]
    quiet(hook(home, "claude-code", claude_bash(plain, "pytest -x", LONG_OUTPUT)))
    [m] = memories(home)
    assert m.content.startswith("$ pytest -x\nFAILED tests/test_api.py")
    assert m.memory_type == "problem-solution" and m.importance == "high"
    assert "project:plain" in m.tags and m.metadata["project"] == "plain"  # the project is still named
    assert "file_path" not in m.metadata
    assert not (plain / ".mcp").exists()


def test_a_project_is_named_by_its_git_remote_and_paths_stay_relative(places):
    """In a git repository without memory the memory goes to the default library, still tagged with
    the project's id (from its remote) and the file's path inside the project."""
    home, plain = places["home"], places["plain"]
    subprocess.run(["git", "-C", str(plain), "remote", "add", "origin", "git@github.com:acme/shop-web.git"],
                   check=True)
    (plain / "src").mkdir()
    quiet(hook(home, "claude-code", claude_edit(plain, "def total(cart):\n    return sum(cart.prices)\n")))
    [m] = memories(home)
    assert "project:acme/shop-web" in m.tags and m.metadata["project"] == "acme/shop-web"
    assert m.metadata["file_path"] == "src/cart.py" and m.content.startswith("Edit src/cart.py:\n")
    # a project with memory is named by the same id
    root = places["project"]
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "https://github.com/acme/shop.git"],
                   check=True)
    quiet(hook(home, "claude-code", claude_edit(root, "def refund(order):\n    return order.reverse()\n")))
    [p] = memories(home, root)
    assert "project:acme/shop" in p.tags and p.metadata["project"] == "acme/shop"


def test_a_linked_mcp_folder_is_not_followed(places, tmp_path):
    home, root = places["home"], places["project"]
    (root / ".mcp").rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".mcp").symlink_to(elsewhere)
    quiet(hook(home, "claude-code", claude_edit(root, "def total(cart):\n    return sum(cart.prices)\n")))
    assert list(elsewhere.iterdir()) == []
    [m] = memories(home)
    assert m.metadata["file_path"] == "src/cart.py"  # the default library, the path in the project


@pytest.mark.parametrize("command", ["ls -la", "cd src && ls", "pwd", "echo hello", "cat README.md",
                                     "head -n 50 app/session.py", "git status", "cd app; git status --short",
                                     "cat notes.txt | head"])
def test_noise_commands_are_skipped(places, command):
    home = places["home"]
    quiet(hook(home, "claude-code", claude_bash(places["plain"], command, LONG_OUTPUT * 3)))
    assert memories(home) == [] and "noise command" in log_text(home)


@pytest.mark.parametrize("tool", ["mcp__memloci__store_memory", "mcp__memloci__create_entities", "store_memory",
                                  "memloci__retrieve_memory", "Read", "Grep", "Glob"])
def test_own_and_read_only_tools_are_skipped(places, tool):
    home = places["home"]
    event = {"session_id": "s", "cwd": str(places["plain"]), "hook_event_name": "PostToolUse", "tool_name": tool,
             "tool_input": {"content": "We decided to keep carts in Redis. " * 10, "file_path": "/x"},
             "tool_response": LONG_OUTPUT * 3}
    quiet(hook(home, "claude-code", event))
    assert memories(home) == []


def test_short_events_are_skipped_code_has_a_lower_bar(places):
    home, plain = places["home"], places["plain"]
    quiet(hook(home, "claude-code", claude_bash(plain, "pytest -q", "1 passed in 0.01s")))  # < 100 characters
    quiet(hook(home, "claude-code", claude_edit(plain, "x = 1  # shorter than 30")))  # < 30
    assert memories(home) == []
    assert log_text(home).count("fewer than") == 2
    quiet(hook(home, "claude-code", claude_edit(plain, "RETRY_LIMIT = 5  # forty characters here")))  # >= 30
    assert len(memories(home)) == 1


def test_long_content_is_cut(places):
    home = places["home"]
    quiet(hook(home, "claude-code", claude_bash(places["plain"], "make test", "error: flaky\n" * 1000)))
    [m] = memories(home)
    assert len(m.content) == MAX_CHARS
    assert m.metadata["truncated"] is True and m.metadata["original_chars"] > MAX_CHARS


def test_a_large_event_is_cut_not_dropped_and_its_true_size_reported(places):
    """Events over 1 MB are cut like any other; original_chars is the output's real length."""
    home = places["home"]
    output = "error: flaky\n" * 160_000  # 2 MB
    quiet(hook(home, "claude-code", claude_bash(places["plain"], "make test", output)))
    [m] = memories(home)
    assert len(m.content) == MAX_CHARS and m.metadata["truncated"] is True
    assert m.metadata["original_chars"] == len("$ make test\n") + len(output)  # the header and all the output


def test_cooldown_per_event_type_and_lifecycle_events_bypass_it(places, tmp_path):
    home, root = places["home"], places["project"]
    quiet(hook(home, "claude-code", claude_edit(root, "def checkout(cart):\n    return cart.pay()\n")))
    quiet(hook(home, "claude-code", claude_edit(root, "def refund(order):\n    return order.reverse()\n")))
    assert len(memories(home, root)) == 1 and "cooldown" in log_text(home)
    assert stat.S_IMODE((home / "hook-cooldown.json").stat().st_mode) == 0o600
    # another project is another key
    quiet(hook(home, "claude-code", claude_edit(places["plain"], "def refund(order):\n    return order.reverse()\n")))
    assert len(memories(home)) == 1
    first = transcript(tmp_path / "t1.jsonl", "Sessions expire after an hour of idle time because the TTL is "
                                              "refreshed on every request; the gotcha: websockets do not refresh it.")
    second = transcript(tmp_path / "t2.jsonl", "We decided to refresh the TTL from websocket pings as well, "
                                               "instead of adding a second expiry path for sockets.")
    for path in (first, second):
        quiet(hook(home, "claude-code", claude_lifecycle(root, "PreCompact", path, trigger="auto",
                                                         custom_instructions="")))
    quiet(hook(home, "claude-code", claude_lifecycle(root, "SessionEnd", second, reason="exit")))
    stored = memories(home, root)
    compactions = [m for m in stored if m.metadata["source"] == "hook:claude-code:PreCompact"]
    ends = [m for m in stored if m.metadata["source"] == "hook:claude-code:SessionEnd"]
    assert len(compactions) == 2 and len(ends) == 1
    assert all(m.content.startswith("PreCompact (auto):\n") for m in compactions)
    assert {"websockets do not refresh it" in m.content for m in compactions} == {True, False}
    assert ends[0].metadata["trigger"] == "exit" and ends[0].memory_type == "decision"
    # the same text again is not stored twice
    quiet(hook(home, "claude-code", claude_lifecycle(root, "PreCompact", first, trigger="auto")))
    assert len(memories(home, root)) == len(stored)
    assert "already stored" in log_text(home)


def test_other_agents(places):
    home, root = places["home"], places["project"]
    code = "def apply_discount(cart, code):\n    # a gotcha: codes are case-sensitive upstream\n    return cart\n"
    quiet(hook(home, "cursor", {"hook_event_name": "afterFileEdit", "conversation_id": "c1", "generation_id": "g",
                                "workspace_roots": [str(root)], "file_path": str(root / "src" / "discount.py"),
                                "edits": [{"old_string": "pass", "new_string": code}]}))
    quiet(hook(home, "windsurf", {"agent_action_name": "post_write_code", "trajectory_id": "t1", "execution_id": "e",
                                  "timestamp": "2026-11-22T10:00:00Z",
                                  "tool_info": {"file_path": str(root / "src" / "tax.py"),
                                                "edits": [{"old_string": "", "new_string": "RATE = 0.2  # VAT rate, "
                                                                                           "changed in 2026"}]}}))
    quiet(hook(home, "gemini", {"session_id": "g1", "transcript_path": "", "cwd": str(root),
                                "hook_event_name": "AfterTool", "timestamp": "2026-11-22T10:00:00Z",
                                "tool_name": "run_shell_command", "tool_input": {"command": "npm test"},
                                "tool_response": {"llmContent": LONG_OUTPUT, "returnDisplay": ""}}), b"{}")
    quiet(hook(home, "codex", b"", json.dumps({
        "type": "agent-turn-complete", "thread-id": "th-1", "turn-id": "1", "cwd": str(root),
        "input-messages": ["why do carts vanish?"],
        "last-assistant-message": "Turns out carts vanish because the TTL was set in seconds where the client "
                                  "expected minutes; I fixed the unit in cart.py."})))
    quiet(hook(home, "vscode", {"timestamp": 1, "cwd": str(places["plain"]), "toolName": "runInTerminal",
                                "toolArgs": json.dumps({"command": "npm run build"}),
                                "toolResult": {"resultType": "success", "textResultForLlm": LONG_OUTPUT}}))
    # Windsurf sends a command's line and cwd, no output: a long line is kept, a noise one is not
    deploy = ("kubectl rollout restart deployment/cart-api -n shop && kubectl rollout status deployment/cart-api "
              "-n shop --timeout=120s")
    for line in (deploy, "ls -la " + "x" * 120):
        quiet(hook(home, "windsurf", {"agent_action_name": "post_run_command", "trajectory_id": "t1",
                                      "execution_id": "e2", "timestamp": "2026-11-22T10:01:00Z",
                                      "tool_info": {"command_line": line, "cwd": str(root)}}))
    sources = {m.metadata["source"]: m for m in memories(home, root)}
    assert set(sources) == {"hook:cursor:afterFileEdit", "hook:windsurf:post_write_code", "hook:gemini:AfterTool",
                            "hook:codex:agent-turn-complete", "hook:windsurf:post_run_command"}
    assert sources["hook:windsurf:post_run_command"].content == f"$ {deploy}"
    assert "windsurf post_run_command: skipped, noise command" in log_text(home)
    assert sources["hook:cursor:afterFileEdit"].metadata["file_path"] == "src/discount.py"
    assert sources["hook:cursor:afterFileEdit"].memory_type == "gotcha"
    assert sources["hook:windsurf:post_write_code"].memory_type == "what-changed"
    assert sources["hook:codex:agent-turn-complete"].metadata["session_id"] == "th-1"
    [m] = memories(home)
    assert m.metadata["source"] == "hook:vscode:postToolUse" and m.content.startswith("$ npm run build\n")


def test_a_running_server_embeds_what_a_hook_stored_at_its_next_search(places):
    """The hook stores without vectors; a server with the model, already serving that library,
    embeds the backlog at its next search and finds the memory by meaning."""
    import anyio
    from conftest import mcp_session

    home = places["home"]

    async def main():
        async with mcp_session(home, MEMLOCI_EMBEDDER="minilm") as session:
            result = await session.call_tool("store_memory", {"content": "The office plants need water on Mondays."})
            assert not result.is_error
            await session.call_tool("retrieve_memory", {"query": "plants"})  # the worker is up and idle
            quiet(hook(home, "claude-code", claude_bash(places["plain"], "pytest -x", LONG_OUTPUT)))
            found = await session.call_tool("retrieve_memory", {"query": "login test broke on a missing cookie",
                                                                "n_results": 1})
            health = await session.call_tool("check_database_health", {})
            assert health.structured_content["embedder"].get("pending", 0) == 0
            assert "FAILED tests/test_api.py" in found.content[0].text

    anyio.run(main)


# -- never a nuisance -------------------------------------------------------------------

GARBAGE = [
    ("claude-code", b"not json at all"),
    ("claude-code", b""),
    ("claude-code", b"\xff\xfe\x00binary\x89PNG\r\n"),
    ("claude-code", b"[1, 2, 3]"),
    ("claude-code", b'{"hook_event_name": 3}'),
    ("claude-code", b'{"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": 5}'),
    ("claude-code", b'{"hook_event_name": "PostToolUse", "tool_name": ["Bash"], "tool_input": {}}'),
    ("claude-code", b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm"}}'),
    ("cursor", b'{"hook_event_name": "afterFileEdit", "file_path": "/x", "edits": "everything"}'),
    ("windsurf", b'{"agent_action_name": "post_write_code", "tool_info": []}'),
    ("gemini", b'{"hook_event_name": "AfterTool", "cwd": 7}'),
    ("claude-desktop", b'{"anything": true}'),
    ("no-such-agent", b'{"hook_event_name": "PostToolUse"}'),
    ("claude-code", b'{"hook_event_name": "PostToolUse", "tool_response": "' + b"a" * (MAX_INPUT + 1) + b'"}'),
]


@pytest.mark.parametrize("agent,data", GARBAGE, ids=[f"{a}-{i}" for i, (a, _) in enumerate(GARBAGE)])
def test_garbage_exits_0_quietly_and_stores_nothing(places, agent, data):
    home = places["home"]
    quiet(hook(home, agent, data), b"{}" if agent == "gemini" else b"")
    assert memories(home) == []
    assert log_text(home).strip()  # said why, in the log


def test_the_memloci_script_goes_straight_to_the_hook(places):
    """The installed `memloci` script (what `memloci install --hooks` writes) runs the hook, and
    `memloci hook --help` still shows the command's help."""
    script = Path(sys.executable).parent / "memloci"
    if not script.exists():
        pytest.skip("no memloci script beside this Python")
    home = places["home"]
    proc = subprocess.run([str(script), "hook", "claude-code"], input=json.dumps(claude_bash(
        places["plain"], "pytest -x", LONG_OUTPUT)).encode(), capture_output=True, env=server_env(home, **SLOW_OK),
        timeout=60)
    quiet(proc)
    assert len(memories(home)) == 1
    helped = subprocess.run([str(script), "hook", "--help"], capture_output=True, text=True, env=server_env(home),
                            timeout=60)
    assert helped.returncode == 0 and "Usage: memloci hook" in helped.stdout


def test_no_agent_named(places):
    proc = subprocess.run([sys.executable, "-m", "memloci", "hook"], input=b"{}", capture_output=True,
                          env=server_env(places["home"], **SLOW_OK), timeout=60)
    quiet(proc)


def test_a_stalled_input_ends_at_the_deadline_with_status_0(places, tmp_path):
    """stdin that never closes: the watchdog ends the process (status 0, nothing printed)."""
    home = places["home"]
    read_end, write_end = os.pipe()
    os.write(write_end, b'{"hook_event_name": ')  # ... and the rest never comes
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "memloci", "hook", "claude-code"], stdin=read_end,
                                stdout=out, stderr=err, env=server_env(home))
    os.close(read_end)
    try:
        status = proc.wait(timeout=30)  # a safety net only; the deadline is the hook's own
    finally:
        os.close(write_end)
        if proc.poll() is None:
            proc.kill()
    assert status == 0
    assert (tmp_path / "out").read_bytes() == b"" and (tmp_path / "err").read_bytes() == b""
    assert "deadline" in log_text(home)
    assert memories(home) == []


# -- the spool: a deadline does not lose the event -------------------------------------------

def _hold_write_lock(home: Path):
    """A real writer holding the default library's SQLite write lock (as a busy server would)."""
    import sqlite3

    service = MemoryService(LibraryRegistry([LibrarySpec("default", home / "default.db")]), embed_pending=False)
    service.store_memory("Created so the library exists before a writer holds it.")
    service.close()
    conn = sqlite3.connect(home / "default.db", isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def _spooled(home: Path) -> list[Path]:
    return sorted((home / "spool").glob("*.json")) if (home / "spool").is_dir() else []


def _wait_for(check, seconds: float = 120.0) -> bool:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.2)
    return check()


def test_an_event_cut_off_by_the_deadline_is_stored_by_the_drainer(places):
    """The library is busy past the deadline: the hook exits 0 without storing, and the detached
    drainer stores the spooled event once the library is free."""
    home = places["home"]
    lock = _hold_write_lock(home)
    try:
        proc = subprocess.run([sys.executable, "-m", "memloci", "hook", "claude-code"],
                              input=json.dumps(claude_bash(places["plain"], "pytest -x", LONG_OUTPUT)).encode(),
                              capture_output=True, env=server_env(home, MEMLOCI_HOOK_DEADLINE="5"), timeout=60)
        quiet(proc)
        assert "left to the drainer" in log_text(home)
        [path] = _spooled(home)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text())["event"]["command"] == "pytest -x"
    finally:
        lock.rollback()
        lock.close()
    assert _wait_for(lambda: not _spooled(home) and len(memories(home)) == 2)
    assert any(m.content.startswith("$ pytest -x\nFAILED") for m in memories(home))


def test_a_spool_file_left_by_a_killed_hook_is_stored_by_the_next_run(places):
    home, plain = places["home"], places["plain"]
    lock = _hold_write_lock(home)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "memloci", "hook", "claude-code"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=server_env(home, **SLOW_OK))
        proc.stdin.write(json.dumps(claude_bash(plain, "pytest -x", LONG_OUTPUT)).encode())
        proc.stdin.close()
        assert _wait_for(lambda: len(_spooled(home)) == 1, 60)  # spooled; the store waits for the lock
        proc.kill()
        proc.wait(timeout=30)
    finally:
        lock.rollback()
        lock.close()
    assert len(memories(home)) == 1 and len(_spooled(home)) == 1  # only the library's first memory
    # the next run (skipped itself: the killed hook's event started the cooldown) stores it
    quiet(hook(home, "claude-code", claude_edit(plain, "def refund(order):\n    return order.reverse()\n")))
    assert _spooled(home) == []
    stored = memories(home)
    assert len(stored) == 2 and any(m.content.startswith("$ pytest -x\nFAILED") for m in stored)
    assert "cooldown" in log_text(home) and "spool drained (0 left)" in log_text(home)


def test_a_stale_spool_file_is_logged_and_dropped(places):
    from memloci.hooks import spool

    home, plain = places["home"], places["plain"]
    old = spool.write(home, {"event": {"agent": "claude-code", "event": "PostToolUse", "kind": "text",
                                       "body": "Old news. " * 20}, "root": None, "memory": False})
    week = 8 * 24 * 3600
    os.utime(old, (old.stat().st_atime - week, old.stat().st_mtime - week))
    quiet(hook(home, "claude-code", claude_bash(plain, "pytest -x", LONG_OUTPUT)))
    assert _spooled(home) == [] and "days old" in log_text(home)
    assert [m.content[:10] for m in memories(home)] == ["$ pytest -"]


def test_a_broken_library_is_logged_not_shown(places):
    home = places["home"]
    home.mkdir()
    (home / "default.db").write_bytes(b"this is not a SQLite database" * 100)
    quiet(hook(home, "claude-code", claude_bash(places["plain"], "pytest", LONG_OUTPUT)))
    assert "not stored" in log_text(home)
    assert (home / "default.db").read_bytes() == b"this is not a SQLite database" * 100


def test_log_is_private_and_rotated(tmp_path, places):
    home = places["home"]
    quiet(hook(home, "claude-code", b"garbage"))
    assert stat.S_IMODE((home / "logs" / "hook.log").stat().st_mode) == 0o600
    handler = PrivateLog(tmp_path / "x.log", maxBytes=2_000, backupCount=1, encoding="utf-8")
    logger = logging.getLogger("test-hook-rotation")
    logger.addHandler(handler)
    try:
        for i in range(200):
            logger.warning("line %d %s", i, "x" * 40)
    finally:
        logger.removeHandler(handler)
        handler.close()
    files = sorted(p.name for p in tmp_path.glob("x.log*"))
    assert files == ["x.log", "x.log.1"]
    assert all(os.path.getsize(tmp_path / f) <= 2_000 for f in files)
    assert all(stat.S_IMODE((tmp_path / f).stat().st_mode) == 0o600 for f in files)
    assert LOG_BYTES <= 1024 * 1024


# -- the rules ------------------------------------------------------------------------------

def test_every_tool_of_ours_is_recognised():
    assert all(own_tool(t) and own_tool(f"mcp__memloci__{t}") for t in KNOWN_TOOLS)
    assert not own_tool("Bash") and not own_tool("mcp__github__create_issue")


def test_noise_rules():
    assert noise_command("ls") and noise_command("FOO=1 ls -la") and noise_command("/bin/cat x | head -5")
    assert not noise_command("cd app && pytest -x") and not noise_command("git commit -m 'fix cart'")
    assert not noise_command("npm test")


def test_confidence_rises_with_each_keyword():
    one = classify("We decided on this.", "text")
    two = classify("We decided on this instead of that.", "text")
    assert one.memory_type == two.memory_type == "decision"
    assert two.confidence > one.confidence > classify("Nothing special here.", "text").confidence
    assert classify("Nothing special here.", "code").memory_type == "what-changed"
    assert classify("Nothing special here.", "text").memory_type == "discovery"
    assert classify("Watch out: a gotcha, the pitfall is silent.", "text").memory_type == "gotcha"
