"""`memloci rules sync` as a process: killed with SIGKILL after each of its file writes and at
spread moments, it leaves every file whole (its old bytes or the new), and the next unsync or
sync completes; over HTTP the workspace tools are a `*:admin` caller's alone."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from workspace_fixture import make, tree

SYNC = ["rules", "sync", "--from", "windsurf,cursor", "--to", "claude-code,codex,copilot,gemini"]
KILL_AFTER = "MEMLOCI_RULES_KILL_AFTER"  # workspace/sync.py: SIGKILL itself after that many writes
SPREAD_KILLS = 12


def memloci(project: Path, home: Path, state: Path, *args: str, **env: str) -> subprocess.Popen:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLOCI_", "CODEX_"))}
    environ.update(HOME=str(home), MEMLOCI_HOME=str(state), **env)
    return subprocess.Popen([sys.executable, "-m", "memloci", *args, "--project", str(project)], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen) -> tuple[int, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out + err


def whole(project: Path, old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Files that are neither their old bytes nor their new ones (a temp file a killed write left
    is not a file of the project's: the next command removes it)."""
    bad = []
    for rel, digest in tree(project).items():
        if rel.endswith(".tmp") and Path(rel).name.startswith("."):
            continue
        if digest not in (old.get(rel), new.get(rel)) and not (rel.endswith(".bak") and digest in old.values()):
            bad.append(rel)
    return bad


def test_a_sync_killed_after_any_write_or_at_any_moment_leaves_every_file_whole(tmp_path):
    project, home = make(tmp_path / "a")
    old = tree(project)
    # the tree a whole sync leaves, made in a copy
    done_project, done_home = make(tmp_path / "b")
    code, out = finished(memloci(done_project, done_home, tmp_path / "b-state", *SYNC))
    assert code == 0, out
    new = tree(done_project)
    assert new != old
    state = tmp_path / "state"
    rounds = 0
    recoveries_killed = 0
    for after in range(0, 40):
        code, out = finished(memloci(project, home, state, *SYNC, **{KILL_AFTER: str(after)}))
        if code == 0:
            break  # fewer writes than that: the sync is whole
        assert code == -signal.SIGKILL, out
        rounds += 1
        assert not whole(project, old, new), whole(project, old, new)
        # the next command, putting the files back, is killed after its first write too
        code, out = finished(memloci(project, home, state, "rules", "unsync", **{KILL_AFTER: "1"}))
        recoveries_killed += code == -signal.SIGKILL
        assert code in (0, -signal.SIGKILL), out
        assert not whole(project, old, new), whole(project, old, new)
        code, out = finished(memloci(project, home, state, "rules", "unsync"))
        assert code == 0, out
        assert tree(project) == old, f"after a kill at write {after} and unsync"
    assert rounds >= 9  # before the first write, then files and backups: every one was a kill point
    assert recoveries_killed >= rounds // 2
    assert tree(project) == new
    code, out = finished(memloci(project, home, state, "rules", "unsync"))
    assert code == 0 and tree(project) == old, out
    # at spread moments: the process start is most of a sync's time, so the delays cover it all
    started = time.monotonic()
    finished(memloci(project, home, state, *SYNC))
    length = time.monotonic() - started
    finished(memloci(project, home, state, "rules", "unsync"))
    killed = 0
    rng = random.Random(27)
    for n in range(SPREAD_KILLS):
        proc = memloci(project, home, state, *SYNC)
        time.sleep(length * (0.3 + 0.8 * rng.random()))
        proc.send_signal(signal.SIGKILL)
        code, _ = finished(proc)
        killed += code == -signal.SIGKILL
        assert not whole(project, old, new), (n, whole(project, old, new))
        if n % 2:  # the next command is an unsync, or a sync that completes
            code, out = finished(memloci(project, home, state, "rules", "unsync"))
            assert code == 0 and tree(project) == old, out
        else:
            code, out = finished(memloci(project, home, state, *SYNC))
            assert code == 0 and tree(project) == new, out
            code, out = finished(memloci(project, home, state, "rules", "unsync"))
            assert code == 0 and tree(project) == old, out
    assert killed >= SPREAD_KILLS // 2
    shutil.rmtree(state)


def test_over_http_the_workspace_tools_need_every_library_s_admin(tmp_path):
    from test_http import Server, create_token, run, text

    project, _ = make(tmp_path / "w")
    home = tmp_path / "server"
    admin = create_token(home, "admin", "*:admin")
    team_admin = create_token(home, "team-admin", "team:admin")
    server = Server(home, "--tools", "memory,workspace")
    before = tree(project)
    try:
        async def refused(s):
            names = {t.name for t in (await s.list_tools()).tools}
            assert not names & {"list_rules", "preview_rules_sync", "sync_rules", "remember_rules"}
            for tool, args in (("sync_rules", {"from_agents": "windsurf", "to_agents": "gemini"}),
                               ("list_rules", {})):
                error = text(await s.call_tool(tool, {**args, "project": str(project)}))["error"]
                assert error["code"] == "PERMISSION_DENIED" and "needs scope *:admin" in error["message"]

        run(server, team_admin, refused)
        assert tree(project) == before

        async def allowed(s):
            names = {t.name for t in (await s.list_tools()).tools}
            assert {"list_rules", "preview_rules_sync", "sync_rules", "remember_rules"} <= names
            done = await s.call_tool("sync_rules", {"from_agents": "windsurf", "to_agents": "gemini",
                                                    "project": str(project)})
            assert not done.is_error, done.content[0].text

        run(server, admin, allowed)
        assert (project / "GEMINI.md").is_file()
    finally:
        assert server.stop() == 0
