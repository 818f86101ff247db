"""Project detection: the client's MCP roots as the project of project tools called without a
path (real clients over stdio, with and without the roots capability), and the project id
from the git remote (real `git` repositories, clones and worktrees)."""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path
from urllib.parse import quote

import anyio
import mcp_types as types
import pytest
from conftest import Client, server_params
from mcp import ClientSession
from mcp.client.stdio import stdio_client

from memloci.app.projects import git_remotes, project_id, remote_id
from memloci.mcp.roots import root_path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**GIT_ENV, "HOME": str(repo)}).stdout


def make_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "main.py").write_text("print('hi')\n")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path


def file_uri(path: Path) -> str:
    return "file://" + quote(str(path))


class RootsClient:
    """A client that shares its roots; `asked` counts the server's roots/list requests."""

    def __init__(self, *paths: Path | str):
        self.uris = [p if isinstance(p, str) else file_uri(p) for p in paths]
        self.asked = 0

    async def __call__(self, context) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in self.uris])


def run(home: Path, body, roots: RootsClient | None, *args: str) -> None:
    async def main():
        async with stdio_client(server_params(home, *args)) as (r, w):
            async with ClientSession(r, w, list_roots_callback=roots) as session:
                await session.initialize()
                await body(Client(session), session)

    anyio.run(main)


# -- roots ----------------------------------------------------------------------------------


def test_a_project_tool_without_a_path_uses_the_clients_root_project(tmp_path, home):
    plain = tmp_path / "downloads"
    plain.mkdir()
    app = make_repo(tmp_path / "my app", remote="git@github.com:Acme/App.git")  # a space: percent-encoded URI
    other = make_repo(tmp_path / "other")
    (other / ".mcp").mkdir()
    roots = RootsClient(plain, app, other)

    async def body(c: Client, session: ClientSession):
        # the first root that is a project, with the same handshake as an explicit path
        err = await c.error("update_context", active_task="Ship it")
        assert err["code"] == "AWAITING_CONFIRMATION" and err["detected_root"] == str(app)
        assert not (app / ".mcp").exists()
        done, _ = await c.ok("update_context", active_task="Ship it", confirm_new_project_root=str(app))
        assert done["project"] == {"id": "acme/app", "root": str(app)}
        summary, _ = await c.ok("get_graph_summary")
        assert summary["project"]["id"] == "acme/app"
        # n2n tools too, in their own argument names
        graph, _ = await c.ok("n2n_read_graph")
        assert graph["context"]["activeTask"] == "Ship it"
        # an explicit path or library still wins
        mine, _ = await c.ok("get_graph_summary", project_path=str(other))
        assert mine["project"]["root"] == str(other)
        default, _ = await c.ok("get_graph_summary", library="default")
        assert "project" not in default
        # other tools keep the mounted library: the default memory stays reachable
        await c.ok("create_entities", entities=[{"name": "global", "entityType": "note", "observations": []}])
        default_graph, _ = await c.ok("read_graph")
        project_graph, _ = await c.ok("read_graph", project_path=str(app))
        assert [e["name"] for e in default_graph["entities"]] == ["global"] and project_graph["entities"] == []
        assert roots.asked == 1  # asked once per connection

        # the client's roots change: asked again, and the new first project is used
        roots.uris = [file_uri(other)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await session.send_roots_list_changed()
        for _ in range(50):  # the notification and the next call race; wait until it is seen
            summary, _ = await c.ok("get_graph_summary")
            if summary["project"]["root"] == str(other):
                break
            await anyio.sleep(0.05)
        assert summary["project"]["root"] == str(other) and roots.asked >= 2

    run(home, body, roots, "--tools", "graph,project,n2n")


def test_clients_without_roots_or_without_a_project_root_are_unchanged(tmp_path, home):
    app = make_repo(tmp_path / "app")
    nested = app / "src"
    nested.mkdir()

    async def no_roots(c: Client, session: ClientSession):
        done, _ = await c.ok("update_context", active_task="global task")
        assert "project" not in done
        err = await c.error("n2n_read_graph")
        assert err["message"].startswith("projectPath: Field required")

    run(home, no_roots, None, "--tools", "graph,project,n2n")

    # roots that hold no project root (a sub-folder of one counts as none): the default library
    roots = RootsClient(nested, tmp_path / "missing")

    async def no_project(c: Client, session: ClientSession):
        done, _ = await c.ok("update_context", status="PLANNING")
        assert "project" not in done and done["context"]["active_task"] == "global task"

    run(home, no_project, roots, "--tools", "graph,project,n2n")
    assert roots.asked == 1 and not (app / ".mcp").exists()


def test_a_root_leading_through_a_link_is_its_real_folder_and_links_inside_stay_refused(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()
    link = tmp_path / "link-to-app"
    link.symlink_to(app)
    outside = tmp_path / "outside"
    outside.mkdir()
    trap = make_repo(tmp_path / "trap")
    (trap / ".mcp").symlink_to(outside)  # a clone carrying .mcp -> elsewhere

    async def body(c: Client, session: ClientSession):
        summary, _ = await c.ok("get_graph_summary")
        assert summary["project"]["root"] == str(app)  # the resolved root, one library for both spellings

    run(home, body, RootsClient(link), "--tools", "project")

    async def trapped(c: Client, session: ClientSession):
        err = await c.error("update_context", active_task="x", confirm_new_project_root=str(trap))
        assert err["code"] == "VALIDATION_ERROR" and "link" in err["message"]
        assert list(outside.iterdir()) == []

    run(home, trapped, RootsClient(trap), "--tools", "project")


def test_root_uris():
    assert root_path("file:///home/me/my%20app") == "/home/me/my app"
    assert root_path("file://localhost/srv/x") == "/srv/x"
    assert root_path("file://otherhost/srv/x") is None
    assert root_path("https://example.com/x") is None
    assert root_path("file:///a%00b") is None


# -- the project id ---------------------------------------------------------------------------


@pytest.mark.parametrize("url, expected", [
    ("git@github.com:User/Repo.git", "user/repo"),
    ("https://github.com/user/repo", "user/repo"),
    ("https://github.com/user/repo.git", "user/repo"),
    ("https://github.com/user/repo/", "user/repo"),
    ("ssh://git@host:22/user/repo.git", "user/repo"),
    ("https://token@gitlab.example.com/group/sub/repo.git", "group/sub/repo"),
    ("gitlab.com:group/repo", "group/repo"),
    ("/srv/git/repo.git", None),
    ("file:///srv/git/repo.git", None),
    ("../repo.git", None),
    ("https://github.com", None),
])
def test_remote_urls_give_user_repo(url, expected):
    assert remote_id(url) == expected


def test_two_clones_of_one_repository_share_the_id(tmp_path):
    app = make_repo(tmp_path / "app", remote="https://github.com/acme/app.git")
    (app / "main.py").write_text("x\n")
    git(app, "add", "-A")
    git(app, "commit", "-qm", "one")
    clone = tmp_path / "elsewhere" / "renamed"
    clone.parent.mkdir()
    subprocess.run(["git", "clone", "-q", str(app), str(clone)], check=True, capture_output=True, env=GIT_ENV)
    git(clone, "remote", "set-url", "origin", "git@github.com:acme/app.git")  # cloned over ssh instead
    assert project_id(app) == project_id(clone) == "acme/app"

    # a worktree (`.git` is a file pointing into the main clone) has the same id
    tree = tmp_path / "tree"
    git(app, "worktree", "add", "-q", str(tree))
    assert (tree / ".git").is_file() and project_id(tree) == "acme/app"

    # origin first, else the first remote; no remote: the folder name
    git(clone, "remote", "add", "aaa", "https://github.com/fork/app.git")
    assert project_id(clone) == "acme/app"
    git(clone, "remote", "remove", "origin")
    assert project_id(clone) == "fork/app"
    assert project_id(make_repo(tmp_path / "Local-Only")) == "Local-Only"


def test_the_id_never_reads_through_a_link(tmp_path):
    real = make_repo(tmp_path / "real", remote="https://github.com/secret/thing.git")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(real / ".git")
    assert project_id(linked) == "linked"
    config_link = make_repo(tmp_path / "cfg")
    os.replace(config_link / ".git" / "config", tmp_path / "moved-config")
    (config_link / ".git" / "config").symlink_to(real / ".git" / "config")
    assert git_remotes(config_link) == [] and project_id(config_link) == "cfg"
    garbage = make_repo(tmp_path / "garbage")
    (garbage / ".git" / "config").write_bytes(b"\xff\xfe[remote \"origin\"\n\turl\n[")
    assert project_id(garbage) == "garbage"


def test_a_second_clone_is_told_of_the_first(tmp_path, home):
    first = make_repo(tmp_path / "first", remote="git@github.com:acme/app.git")
    second = make_repo(tmp_path / "second", remote="https://github.com/acme/app")
    lone = make_repo(tmp_path / "lone", remote="https://github.com/acme/other")

    async def body(c: Client, session: ClientSession):
        await c.ok("update_context", project_path=str(first), confirm_new_project_root=str(first), active_task="x")
        err = await c.error("update_context", project_path=str(second), active_task="y")
        assert err["code"] == "AWAITING_CONFIRMATION" and err["detected_root"] == str(second)
        assert err["details"]["same_project"] == {"id": "acme/app", "root": str(first)}
        assert f"Another clone of acme/app at {first}" in err["hint"]
        err = await c.error("update_context", project_path=str(lone), active_task="y")
        assert "same_project" not in err["details"]
        done, _ = await c.ok("update_context", project_path=str(second), confirm_new_project_root=str(second),
                             active_task="y")
        assert done["project"] == {"id": "acme/app", "root": str(second)}

    run(home, body, None, "--tools", "project")


def test_over_http_roots_are_used_only_for_an_admin_token(tmp_path):
    from conftest import server_env

    from memloci.http.loopback import create_token, http_session, loopback_server

    home = tmp_path / "home"
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()
    env = server_env(home)
    roots = RootsClient(app)

    async def calls(headers: dict[str, str], url: str) -> tuple[dict, dict]:
        async with http_session(url, headers, list_roots_callback=roots) as session:
            with_roots = await Client(session).call("get_graph_summary")
        async with http_session(url, headers) as session:  # the same token, a client without roots
            without = await Client(session).call("get_graph_summary")
        return with_roots, without

    with loopback_server(["--tools", "project"], env, log=tmp_path / "server.log", scopes=["*:admin"]) as endpoint:
        writer = {"Authorization": f"Bearer {create_token(env, 'writer', ['*:write'])}"}
        (failed, summary, _), (failed_plain, plain, _) = anyio.run(calls, endpoint.headers, endpoint.url)
        assert not failed and summary["project"]["root"] == str(app)
        assert not failed_plain and "project" not in plain
        # for another token a root (a path on the client's machine) is ignored: the call goes to
        # its library exactly as from a client without roots, whether the path exists here or not
        asked = roots.asked
        (failed, summary, _), (failed_plain, plain, _) = anyio.run(calls, writer, endpoint.url)
        assert not failed and "project" not in summary, summary
        assert not failed_plain and summary == plain
        roots.uris = [file_uri(tmp_path / "not-on-this-server")]
        (failed, absent, _), _ = anyio.run(calls, writer, endpoint.url)
        assert not failed and absent == summary
        assert roots.asked == asked  # not even asked for
