"""Project memory through the real MCP client over stdio: roots, the confirmation handshake,
the hot context, summaries and export, n2n-memory carry-over, resources, refusals."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
from conftest import Client, run_session


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(repo), "PATH": "/usr/bin:/bin"}).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "main.py").write_text("print('hi')\n")
    return path


def entity(name: str, *observations: str) -> dict:
    return {"name": name, "entityType": "component", "observations": list(observations)}


def test_a_new_project_asks_first_then_keeps_memory_in_the_repo(tmp_path, home):
    app = make_repo(tmp_path / "app")
    other = make_repo(tmp_path / "other")

    async def body(c: Client):
        err = await c.error("create_entities", project_path=str(app), entities=[entity("auth", "uses JWT")])
        assert err["code"] == "AWAITING_CONFIRMATION" and err["detected_root"] == str(app)
        assert not (app / ".mcp").exists()
        created, _ = await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app),
                                entities=[entity("auth", "uses JWT")])
        assert "update_context" in created["hint"]
        await c.ok("update_context", project_path=str(app), active_task="Rotate JWT keys", status="IN_PROGRESS",
                   next_steps=["add key id", "deploy"], last_commit="abc123")
        await c.ok("update_context", project_path=str(app), reason="keys leaked in a log")  # merged
        graph, _ = await c.ok("read_graph", project_path=str(app))
        assert [e["name"] for e in graph["entities"]] == ["auth"]
        ctx = graph["context"]
        assert (ctx["active_task"], ctx["status"], ctx["next_steps"], ctx["reason"]) == (
            "Rotate JWT keys", "IN_PROGRESS", ["add key id", "deploy"], "keys leaked in a log")
        assert ctx["updated_at"].endswith("Z")
        err = await c.error("update_context", project_path=str(app), status="DONE")
        assert err["code"] == "VALIDATION_ERROR" and "status" in err["message"]

        git(app, "add", "-A")
        git(app, "commit", "-qm", "memory")
        await c.ok("add_observations", project_path=str(app),
                   observations=[{"entityName": "auth", "contents": ["tokens expire after 15 minutes"]}])
        diff = git(app, "diff")
        changed = [line for line in diff.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
        assert any(line.startswith("+- tokens expire after 15 minutes <!-- ") for line in changed)
        # the note and the journal changed; the index stays out of git
        status = sorted(line[3:] for line in git(app, "status", "--porcelain").splitlines())
        assert len(changed) < 40 and status == [".mcp/.memloci/journal.md", ".mcp/auth.md"]

        err = await c.error("read_graph", project_path=str(other))
        assert err["code"] == "AWAITING_CONFIRMATION"
        await c.ok("create_entities", project_path=str(other), confirm_new_project_root=str(other),
                   entities=[entity("billing")])
        mine, _ = await c.ok("read_graph", project_path=str(other))
        assert [e["name"] for e in mine["entities"]] == ["billing"] and mine["context"] == {}

        summary, _ = await c.ok("get_graph_summary", project_path=str(app))
        assert summary == {"entities": [{"name": "auth", "type": "component"}], "relation_count": 0,
                           "total_entity_count": 1, "is_truncated": False, "project": {"id": "app", "root": str(app)}}
        out, _ = await c.ok("export_markdown", project_path=str(app))
        text = (app / "KNOWLEDGE_GRAPH.md").read_text()
        assert out["path"] == "KNOWLEDGE_GRAPH.md" and "## auth" in text and "Rotate JWT keys" in text

        resource = await c.session.read_resource(f"memloci://graph?path={app}")
        data = json.loads(resource.contents[0].text)
        assert [e["name"] for e in data["entities"]] == ["auth"] and data["context"]["status"] == "IN_PROGRESS"
        default = json.loads((await c.session.read_resource("memloci://graph")).contents[0].text)
        assert default["entities"] == []

    run_session(home, body, MEMLOCI_LOG_LEVEL="info")


def test_wrong_places_are_refused_and_nothing_is_left_behind(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / "src").mkdir()
    readme_only = tmp_path / "notes"
    readme_only.mkdir()
    (readme_only / "README.md").write_text("# notes\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    linked = make_repo(tmp_path / "linked")
    (linked / ".mcp").symlink_to(outside)

    async def body(c: Client):
        cases = [
            (str(readme_only), "VALIDATION_ERROR", "not a project root"),
            (str(app / "src"), "VALIDATION_ERROR", f"inside the project at {app}"),
            ("relative/app", "VALIDATION_ERROR", "relative"),
            (str(app) + "\x00x", "VALIDATION_ERROR", "NUL"),
            (str(linked), "VALIDATION_ERROR", "outside the project root"),
        ]
        for path, code, words in cases:
            err = await c.error("create_entities", project_path=path, confirm_new_project_root=path,
                                entities=[entity("x")])
            assert err["code"] == code and words in err["message"], (path, err)
        await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app), entities=[entity("x")])
        for target in ("../x.md", str(tmp_path / "x.md"), "src/../../x.md"):
            err = await c.error("export_markdown", project_path=str(app), output_path=target)
            assert err["code"] == "VALIDATION_ERROR" and "output_path" in err["message"]
        resource_err = None
        try:
            await c.session.read_resource(f"memloci://graph?path={make_repo(tmp_path / 'fresh')}")
        except Exception as exc:  # resources never create a project's memory
            resource_err = exc
        assert resource_err is not None and "AWAITING_CONFIRMATION" in str(resource_err)

    run_session(home, body)
    assert not (readme_only / ".mcp").exists() and not (app / "src" / ".mcp").exists()
    assert not list(outside.iterdir()) and not (tmp_path / "x.md").exists()
    assert not (tmp_path / "fresh" / ".mcp").exists()


def test_n2n_memory_files_are_carried_over_in_full(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()
    entities = [{"name": f"module-{i:04d}", "entityType": "module", "observations": [f"fact {i}", f"owner {i % 7}"]}
                for i in range(1000)]
    relations = [{"from": f"module-{i:04d}", "to": f"module-{(i + 1) % 1000:04d}", "relationType": "imports"}
                 for i in range(1000)]
    (app / ".mcp" / "memory.json").write_text(json.dumps({"entities": entities, "relations": relations}))
    (app / ".mcp" / "context.json").write_text(json.dumps({
        "activeTask": "split the monolith", "status": "BLOCKED", "reason": "waiting for review",
        "nextSteps": ["merge PR 12"], "lastCommit": "9f1c2d", "updatedAt": "2026-11-01T10:00:00Z"}))

    async def body(c: Client):
        summary, _ = await c.ok("get_graph_summary", project_path=str(app), limit=10)
        assert summary["total_entity_count"] == 1000 and summary["relation_count"] == 1000
        opened, _ = await c.ok("open_nodes", project_path=str(app), names=["module-0999"])
        assert opened["entities"][0]["observations"] == ["fact 999", "owner 5"]
        graph, _ = await c.ok("read_graph", project_path=str(app), limit=1)
        assert graph["context"]["active_task"] == "split the monolith" and graph["context"]["next_steps"] == ["merge PR 12"]

    run_session(home, body)
    assert len(list((app / ".mcp").glob("module-*.md"))) == 1000
    assert json.loads((app / ".mcp" / "memory.json").read_text())["entities"][0]["name"] == "module-0000"


def test_logs_name_projects_by_folder(tmp_path, home):
    app = make_repo(tmp_path / "secret-client-x")

    async def main():
        errlog = tmp_path / "stderr.txt"
        with errlog.open("w") as f:
            from conftest import server_params
            from mcp.client.stdio import stdio_client

            async with stdio_client(server_params(home, MEMLOCI_LOG_LEVEL="info"), errlog=f) as (r, w):
                from mcp import ClientSession

                async with ClientSession(r, w) as session:
                    await session.initialize()
                    await session.call_tool("create_entities", {"project_path": str(app),
                                                                "confirm_new_project_root": str(app),
                                                                "entities": [entity("x")]})
        return errlog.read_text()

    log = anyio.run(main)
    assert "secret-client-x" in log and str(tmp_path) not in log


def test_resource_subscribers_hear_of_changes(tmp_path, home):
    app = make_repo(tmp_path / "app")
    uri = f"memloci://graph?path={app}"
    heard: list[str] = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            heard.append(str(root.params.uri))

    async def main():
        from conftest import server_params
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async with stdio_client(server_params(home)) as (r, w):
            async with ClientSession(r, w, message_handler=on_message) as session:
                init = await session.initialize()
                assert init.capabilities.resources.subscribe
                c = Client(session)
                await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app),
                           entities=[entity("x")])
                await session.subscribe_resource(uri)
                await session.subscribe_resource("memloci://graph")
                await c.ok("update_context", project_path=str(app), active_task="ship it")
                await c.ok("create_entities", entities=[entity("in-default")])
                await c.ok("search_nodes", query="x")  # reads notify no one
                with anyio.fail_after(10):
                    while len(heard) < 2:
                        await anyio.sleep(0.05)
                await session.unsubscribe_resource(uri)
                await c.ok("update_context", project_path=str(app), active_task="again")
                await anyio.sleep(0.3)

    anyio.run(main)
    assert heard == [uri, "memloci://graph"]


def test_exports_never_overwrite_project_files(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / "src").mkdir()
    (app / "NOTES.md").write_text("# My notes\n")

    async def body(c: Client):
        await c.ok("create_entities", project_path=str(app), confirm_new_project_root=str(app), entities=[entity("x")])
        for target in ("main.py", ".git/hooks/pre-commit.md", ".mcp/x.md", "src", "NOTES.md"):
            err = await c.error("export_markdown", project_path=str(app), output_path=target)
            assert err["code"] in ("VALIDATION_ERROR", "ALREADY_EXISTS") and "output_path" in err["message"], target
        await c.ok("export_markdown", project_path=str(app), output_path="src/graph.md")
        await c.ok("export_markdown", project_path=str(app), output_path="src/graph.md")  # its own export: replaced

    run_session(home, body)
    assert (app / "main.py").read_text() == "print('hi')\n" and (app / "NOTES.md").read_text() == "# My notes\n"
    assert not list(app.glob(".*.tmp")) and not list((app / "src").glob(".*.tmp"))


def test_clones_and_branches_keep_project_memory_clean(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / ".mcp").mkdir()
    (app / ".mcp" / "memory.json").write_text(json.dumps({"entities": [entity("kept"), entity("dropped")],
                                                          "relations": []}))

    async def setup(c: Client):
        await c.ok("read_graph", project_path=str(app))  # carries memory.json over
        await c.ok("delete_entities", project_path=str(app), entityNames=["dropped"])

    run_session(home, setup)
    git(app, "add", "-A")
    git(app, "commit", "-qm", "memory")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(app), str(clone)], check=True, capture_output=True)

    async def on_clone(c: Client):
        graph, _ = await c.ok("read_graph", project_path=str(clone))
        assert [e["name"] for e in graph["entities"]] == ["kept"]  # not carried over a second time

    run_session(home, on_clone)
    assert git(clone, "status", "--porcelain") == ""  # reading changed nothing in the working tree

    default = git(clone, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(clone, "checkout", "-qb", "feature")

    async def on_branch(c: Client, branch: str):  # each branch its own entity: only the journal is shared
        await c.ok("create_entities", project_path=str(clone), entities=[entity(f"from-{branch}", f"note from {branch}")])

    run_session(home, lambda c: on_branch(c, "feature"))
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "feature note")
    git(clone, "checkout", "-q", default)
    run_session(home, lambda c: on_branch(c, "main"))
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "main note")
    merge = subprocess.run(["git", "-C", str(clone), "merge", "-q", "-m", "merge", "feature"], capture_output=True,
                           text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                                           "GIT_COMMITTER_EMAIL": "t@x", "HOME": str(clone), "PATH": "/usr/bin:/bin"})
    journal = (clone / ".mcp" / ".memloci" / "journal.md").read_text()
    assert "from-feature" in journal and "from-main" in journal and "<<<<<<<" not in journal
    assert merge.returncode == 0, merge.stdout + merge.stderr


def test_more_wrong_places(tmp_path, home):
    app = make_repo(tmp_path / "app")
    (app / "docs").mkdir()
    (app / "docs" / ".gitignore").write_text("*.tmp\n")
    looped = make_repo(tmp_path / "looped")
    (looped / ".mcp").symlink_to(looped)
    broken = make_repo(tmp_path / "broken")
    (broken / ".mcp").mkdir()
    (broken / ".mcp" / "memory.json").write_text(json.dumps({"entities": [entity("ok")],
                                                            "relations": [{"from": "ok", "to": "ok", "relationType": ""}]}))

    async def body(c: Client):
        err = await c.error("read_graph", project_path=str(app / "docs"))
        assert err["code"] == "VALIDATION_ERROR" and f"inside the project at {app}" in err["message"]
        err = await c.error("read_graph", project_path=str(looped))
        assert err["code"] == "VALIDATION_ERROR" and "is a link" in err["message"]
        for _ in range(2):  # a carry-over that fails is tried again, never half done
            err = await c.error("read_graph", project_path=str(broken))
            assert err["code"] == "VALIDATION_ERROR" and "memory.json relations[0]" in err["message"]
        (broken / ".mcp" / "memory.json").write_text(json.dumps({"entities": [entity("ok")], "relations": []}))
        graph, _ = await c.ok("read_graph", project_path=str(broken))
        assert [e["name"] for e in graph["entities"]] == ["ok"]

    run_session(home, body)
    assert not (app / "docs" / ".mcp").exists() and not list(looped.glob("*.md"))
