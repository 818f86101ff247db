"""The dashboard's API against real `memloci serve --transport http` processes (httpx2, and the
MCP SDK's streamable HTTP client for what an agent does at the same time): open mode on loopback,
sign-in with tokens, CSRF, scopes, the Host and Origin checks, and the pages' reads and writes
end to end, with live events. The in-process checks are in tests/test_dashboard_app.py."""

from __future__ import annotations

import json
import threading
import time

import anyio
import httpx2
import pytest
from test_http import Server, create_token, session, text

from memloci.http.dashboard import ROUTES

STORE = "store_memory"


def base(server: Server) -> str:
    return f"http://127.0.0.1:{server.port}"


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """A loopback server with no token: the dashboard opens directly."""
    home = tmp_path_factory.mktemp("dash-open")
    server = Server(home)
    client = httpx2.Client(base_url=base(server), timeout=30)
    csrf = client.get("/api/session").json()["csrf"]
    client.headers["x-csrf-token"] = csrf
    yield server, client
    client.close()
    server.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A server with tokens: a reader and a writer of `team`."""
    home = tmp_path_factory.mktemp("dash-tokens")
    tokens = {"reader": create_token(home, "reader", "team:read"), "writer": create_token(home, "writer", "team:write")}
    server = Server(home)
    yield server, tokens
    server.stop()


def mcp_store(server: Server, content: str, token: str | None = None, **arguments) -> dict:
    async def main():
        async with session(server, token) as s:
            result = await s.call_tool(STORE, {"library": "team", "content": content, **arguments})
            assert not result.is_error, result.content[0].text
            return text(result)

    return anyio.run(main)


def signed_in(server: Server, token: str) -> httpx2.Client:
    client = httpx2.Client(base_url=base(server), timeout=30)
    answer = client.post("/api/session", json={"token": token})
    assert answer.status_code == 200, answer.text
    client.headers["x-csrf-token"] = answer.json()["csrf"]
    return client


def count(client: httpx2.Client) -> int:
    return client.get("/api/memories", params={"library": "team"}).json()["total"]


def test_open_mode_needs_no_sign_in(opened):
    server, client = opened
    me = client.get("/api/session").json()
    assert me["signed_in"] and me["open"] and me["csrf"]
    assert {(lib["name"], lib["write"]) for lib in me["libraries"]} == {("team", True), ("other", True)}
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff" and page.headers["referrer-policy"] == "no-referrer"
    assert client.get("/api/libraries").headers["cache-control"] == "no-store"


def test_search_finds_a_memory_an_agent_stored_over_mcp(opened):
    server, client = opened
    mcp_store(server, "The deploy key rotates every ninety days", tags=["ops"])
    for library in ("team", "*"):
        found = client.get("/api/search", params={"q": "deploy key rotates", "library": library}).json()
        hits = [m for m in found["memories"] if "ninety days" in m["content"]]
        assert hits and hits[0]["library"] == "team" and hits[0]["why"], found


def test_memories_filter_by_tag_and_time(opened):
    server, client = opened
    for content, tag in (("Lunch is at noon on Fridays", "food"), ("The office closes at six", "office")):
        assert client.post("/api/memories", json={"library": "team", "content": content, "tags": [tag]}).status_code == 201
    food = client.get("/api/memories", params={"library": "team", "tag": "food"}).json()
    assert [m["content"] for m in food["memories"]] == ["Lunch is at noon on Fridays"]
    assert {"tag": "food", "count": 1} in food["tags"]
    both = client.get("/api/memories", params=[("library", "team"), ("tag", "food"), ("tag", "office")]).json()
    assert both["total"] == 2
    at = food["memories"][0]["created_at"]
    assert client.get("/api/memories", params={"library": "team", "tag": "food", "after": at}).json()["total"] == 1
    assert client.get("/api/memories", params={"library": "team", "tag": "food", "before": at}).json()["total"] == 0
    assert client.get("/api/memories", params={"library": "team", "time": "2019-03"}).json()["total"] == 0
    month = client.get("/api/memories", params={"library": "team", "tag": "food", "time": at[:7]}).json()
    assert month["total"] == 1, month


def test_edit_shows_in_history_and_undoes(opened):
    server, client = opened
    stored = client.post("/api/memories", json={"library": "team", "content": "The API port is 8080"}).json()
    old = stored["memory"]["content_hash"]
    edited = client.patch(f"/api/memories/{old}", json={"library": "team", "content": "The API port is 9090",
                                                         "tags": ["ports"]})
    assert edited.status_code == 200, edited.text
    new, (change,) = edited.json()["memory"]["content_hash"], edited.json()["change_ids"]
    entries = client.get("/api/history", params={"library": "team"}).json()["entries"]
    entry = next(e for e in entries if e["id"] == change)
    assert entry["action"] == "update_memory" and entry["undoable"] and "9090" in entry["summary"]
    assert client.get(f"/api/memories/{new}", params={"library": "team"}).json()["history"][0]["id"] == change
    undone = client.post(f"/api/history/{change}/undo", json={"library": "team"})
    assert undone.status_code == 200 and undone.json()["undone"] == change
    assert client.get(f"/api/memories/{old}", params={"library": "team"}).json()["memory"]["content"] == "The API port is 8080"
    assert client.get(f"/api/memories/{new}", params={"library": "team"}).status_code == 404


def test_delete_and_undo(opened):
    server, client = opened
    memory = client.post("/api/memories", json={"library": "team", "content": "Backups run at 3am"}).json()["memory"]
    gone = client.delete(f"/api/memories/{memory['content_hash']}", params={"library": "team"}).json()
    assert gone["deleted"] == [memory["content_hash"]] and len(gone["change_ids"]) == 1
    assert client.get(f"/api/memories/{memory['content_hash']}", params={"library": "team"}).status_code == 404
    assert client.post(f"/api/history/{gone['change_ids'][0]}/undo", json={"library": "team"}).status_code == 200
    back = client.get(f"/api/memories/{memory['content_hash']}", params={"library": "team"})
    assert back.status_code == 200 and back.json()["memory"]["content"] == "Backups run at 3am"


def test_cleanup_preview_then_execute(opened):
    server, client = opened
    for content in ("Standup moves to 10am.", "standup moves to 10am"):
        assert client.post("/api/memories", json={"library": "team", "content": content}).status_code == 201
    before = count(client)
    made = client.post("/api/previews", json={"library": "team", "operation": "cleanup_duplicates"})
    assert made.status_code == 200, made.text
    preview = made.json()["preview"]
    assert preview["id"] and preview["items"] and count(client) == before  # a preview changes nothing
    kept = client.get(f"/api/previews/{preview['id']}", params={"library": "team"}).json()
    assert kept["operation"] == "cleanup_duplicates" and not kept["executed"] and kept["items"]
    listed = client.get("/api/previews", params={"library": "team"}).json()["previews"]
    assert any(p["id"] == preview["id"] and not p["executed"] for p in listed)
    done = client.post(f"/api/previews/{preview['id']}/execute", json={"library": "team"})
    assert done.status_code == 200, done.text
    assert done.json()["executed"] == preview["id"] and done.json()["change_id"]
    assert count(client) == before - 1
    again = client.post(f"/api/previews/{preview['id']}/execute", json={"library": "team"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "CONFLICT"


def test_entity_view_renders_markdown_with_raw_html_escaped(opened):
    server, client = opened

    async def main():
        async with session(server, None) as s:
            made = await s.call_tool("add_entities", {"library": "team", "entities": [
                {"name": "Runbook", "entity_type": "note", "content": "# Runbook\n\n<script>alert(1)</script>\n\n"
                                                                       "- **restart** the worker\n"}]})
            assert not made.is_error, made.content[0].text

    anyio.run(main)
    entity = client.get("/api/entities/Runbook", params={"library": "team"}).json()
    assert "&lt;script&gt;" in entity["body_html"] and "<script>" not in entity["body_html"]
    assert "<strong>restart</strong>" in entity["body_html"]
    found = client.get("/api/search", params={"q": "restart worker", "library": "team", "kind": "notes"}).json()
    assert [n["name"] for n in found["notes"]] == ["Runbook"]


def test_graph_neighbourhood_of_depth_one_and_two(opened):
    server, client = opened

    async def main():
        async with session(server, None) as s:
            await s.call_tool("create_entities", {"library": "other", "entities": [
                {"name": n, "entityType": "thing", "observations": []} for n in ("A", "B", "C")]})
            await s.call_tool("create_relations", {"library": "other", "relations": [
                {"from": "A", "to": "B", "relationType": "uses"}, {"from": "B", "to": "C", "relationType": "uses"}]})

    anyio.run(main)
    one = client.get("/api/graph", params={"library": "other", "name": "A"}).json()
    two = client.get("/api/graph", params={"library": "other", "name": "A", "depth": 2}).json()
    assert {n["name"] for n in one["nodes"]} == {"A", "B"} and len(one["edges"]) == 1
    assert {n["name"] for n in two["nodes"]} == {"A", "B", "C"} and len(two["edges"]) == 2


def changes_seen(server: Server, wanted, act) -> list[dict]:
    """The `change` events of /api/events until one `wanted(change)` is true, while `act()` runs."""
    seen: list[dict] = []
    ready = threading.Event()

    def listen() -> None:
        with httpx2.Client(base_url=base(server), timeout=30) as sse, sse.stream("GET", "/api/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            event = None
            for line in stream.iter_lines():
                ready.set()  # (the stream's first line, a comment, comes at once)
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "change":
                    seen.append(json.loads(line.split(":", 1)[1]))
                    if wanted(seen[-1]):
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert ready.wait(30)
    act()
    listener.join(30)
    return seen


def test_events_deliver_a_change_an_mcp_client_makes(opened):
    server, _ = opened
    seen = changes_seen(server, lambda c: c["action"] == STORE and c["library"] == "team",
                        lambda: mcp_store(server, "A memory an agent stores while the page is open"))
    assert any(c["action"] == STORE and c["library"] == "team" and c["change_id"] for c in seen), seen


def test_events_deliver_a_change_another_process_makes(opened):
    from test_http import memloci

    server, client = opened
    memory = client.post("/api/memories", json={"library": "other", "content": "Gone soon"}).json()["memory"]
    home = server.log.parent
    libraries = f"team:{home / 'team.db'},other:{home / 'other.db'}"
    seen = changes_seen(server, lambda c: c["action"] == "delete_memory",
                        lambda: memloci(home, "memories", "delete", memory["content_hash"], "--yes", "--libraries",
                                        libraries, "-l", "other"))
    assert [c["library"] for c in seen if c["action"] == "delete_memory"] == ["other"], seen


def test_unknown_parameter_is_refused_by_name(opened):
    server, client = opened
    answer = client.get("/api/history", params={"library": "team", "lmit": "5"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "VALIDATION_ERROR" and answer.json()["error"]["message"].startswith("lmit")


def example(path: str) -> str:
    return path.replace("{hash}", "abc").replace("{name}", "A").replace("{id:int}", "1")


def test_with_tokens_every_api_call_needs_a_sign_in(guarded):
    server, _ = guarded
    plain = httpx2.Client(base_url=base(server), timeout=30)
    me = plain.get("/api/session").json()
    assert not me["signed_in"] and not me["open"] and me["csrf"] is None and me["libraries"] == []
    for endpoint in [e for e in ROUTES if e.signed_in]:
        answer = plain.request(endpoint.method, example(endpoint.path), json={} if endpoint.method != "GET" else None)
        assert answer.status_code == 401, (endpoint.method, endpoint.path, answer.text)
        assert answer.json()["error"]["code"] == "UNAUTHORIZED"
    assert plain.get("/api/events").status_code == 401
    assert plain.get("/api/memories", headers={"authorization": "Bearer mlc_not-a-token"}).status_code == 401
    bad = plain.post("/api/session", json={"token": "mlc_not-a-token"})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers


def test_sign_in_sets_an_http_only_strict_cookie_and_sign_out_ends_it(guarded):
    server, tokens = guarded
    client = httpx2.Client(base_url=base(server), timeout=30)
    answer = client.post("/api/session", json={"token": tokens["writer"]})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"memloci_session_{server.port}=") and "HttpOnly" in cookie  # the port's own name
    assert "SameSite=strict" in cookie.replace("Strict", "strict") and "Path=/" in cookie and "Secure" not in cookie
    assert tokens["writer"] not in cookie
    proxied = httpx2.post(f"{base(server)}/api/session", json={"token": tokens["writer"]},
                          headers={"x-forwarded-proto": "https"})  # a proxy on this machine ends TLS
    assert "Secure" in proxied.headers["set-cookie"], proxied.headers
    me = answer.json()
    assert me["signed_in"] and me["name"] == "writer" and me["libraries"] == [
        {"name": "team", "engine": "sqlite", "read": True, "write": True}]
    assert client.get("/api/memories", params={"library": "team"}).status_code == 200
    assert client.get("/api/memories", params={"library": "other"}).status_code == 403
    client.delete("/api/session")
    assert client.get("/api/memories", params={"library": "team"}).status_code == 401
    log = server.log.read_text()
    assert "api token=writer method=GET route=/api/memories status=200" in log
    assert tokens["writer"] not in log and "library=team" not in log  # the route, never the values


def test_a_cookie_write_without_the_csrf_header_changes_nothing(guarded):
    server, tokens = guarded
    client = signed_in(server, tokens["writer"])
    before = count(client)
    for csrf in (None, "not-the-token"):
        headers = {"x-csrf-token": csrf} if csrf else {}
        client.headers.pop("x-csrf-token", None)
        answer = client.post("/api/memories", json={"library": "team", "content": "forged"}, headers=headers)
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "CSRF"
    assert count(client) == before
    bearer = httpx2.post(f"{base(server)}/api/memories", json={"library": "team", "content": "a script's memory"},
                         headers={"authorization": f"Bearer {tokens['writer']}"})
    assert bearer.status_code == 201  # a bearer header is not ambient: no CSRF token needed
    assert count(client) == before + 1


def test_a_read_token_cannot_write_through_the_api(guarded):
    server, tokens = guarded
    writer = signed_in(server, tokens["writer"])
    memory = writer.post("/api/memories", json={"library": "team", "content": "Only writers change this"}).json()
    content_hash = memory["memory"]["content_hash"]
    reader = signed_in(server, tokens["reader"])
    assert reader.get("/api/session").json()["libraries"][0]["write"] is False
    before = count(writer)
    history = writer.get("/api/history", params={"library": "team"}).json()["entries"]
    bearer = httpx2.Client(base_url=base(server), timeout=30, headers={"authorization": f"Bearer {tokens['reader']}"})
    team = {"library": "team"}
    writes = {  # every write of the route table, with a body that would pass its checks
        ("POST", "/api/memories"): {"json": {**team, "content": "sneaky"}},
        ("PATCH", "/api/memories/{hash}"): {"json": {**team, "content": "changed"}},
        ("DELETE", "/api/memories/{hash}"): {"params": team},
        ("POST", "/api/history/{id:int}/undo"): {"json": team},
        ("POST", "/api/entities/{name:path}/observations"): {"json": {**team, "contents": ["x"]}},
        ("DELETE", "/api/entities/{name:path}/observations"): {"json": {**team, "contents": ["x"]}},
        ("PATCH", "/api/entities/{name:path}/observations"): {"json": {**team, "old": "x", "new": "y"}},
        ("POST", "/api/previews"): {"json": {**team, "operation": "cleanup_duplicates"}},
        ("POST", "/api/previews/{id:int}/execute"): {"json": team},
    }
    assert set(writes) == {(e.method, e.path) for e in ROUTES if e.writes}
    for client in (reader, bearer):
        answers = []
        for (method, path), arguments in writes.items():
            url = path.replace("{hash}", content_hash).replace("{id:int}", str(history[0]["id"])).replace("{name:path}", "X")
            answers.append(client.request(method, url, **arguments))
        for answer in answers:
            assert answer.status_code == 403, answer.text
            error = answer.json()["error"]
            assert error["code"] == "PERMISSION_DENIED" and "team:write" in error["message"]
        assert client.get("/api/memories", params={"library": "team"}).status_code == 200
    assert count(writer) == before
    assert writer.get("/api/history", params={"library": "team"}).json()["entries"] == history


def test_a_bad_host_or_a_foreign_origin_is_refused(guarded):
    server, tokens = guarded
    auth = {"authorization": f"Bearer {tokens['writer']}"}
    for path in ("/", "/static/index.html", "/api/session", "/api/memories?library=team"):
        assert httpx2.get(base(server) + path, headers={"host": "evil.example"}).status_code == 421
        assert httpx2.get(base(server) + path, headers={**auth, "origin": "http://evil.example"}).status_code == 403
    posted = httpx2.post(f"{base(server)}/api/memories", json={"library": "team", "content": "cross-site"},
                         headers={**auth, "origin": "https://evil.example"})
    assert posted.status_code == 403
    assert "cross-site" not in json.dumps(httpx2.get(f"{base(server)}/api/memories?library=team", headers=auth).json())


def test_a_revoked_token_ends_its_sessions(guarded, tmp_path):
    server, _ = guarded
    home = server.log.parent
    token = create_token(home, "shortlived", "team:read")
    client = signed_in(server, token)
    assert client.get("/api/history", params={"library": "team"}).status_code == 200
    from test_http import memloci

    memloci(home, "token", "revoke", "shortlived")
    deadline = time.monotonic() + 10
    while client.get("/api/history", params={"library": "team"}).status_code != 401:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_sigterm_with_an_event_stream_open_exits_cleanly(tmp_path):
    server = Server(tmp_path)
    ended = threading.Event()
    opened_stream = threading.Event()
    failed: list[str] = []

    def listen() -> None:
        try:
            with httpx2.Client(base_url=base(server), timeout=120) as sse, sse.stream("GET", "/api/events") as stream:
                for _ in stream.iter_lines():
                    opened_stream.set()
        except httpx2.HTTPError as exc:
            failed.append(repr(exc))
        ended.set()

    threading.Thread(target=listen, daemon=True).start()
    assert opened_stream.wait(30)
    assert server.stop() == 0  # the stream did not hold the drain up, and the exit is clean
    assert ended.wait(30)
    assert failed == []  # the stream's body ended as a body ends, not cut mid-transfer
    log = server.log.read_text()
    assert "Traceback" not in log and " ERROR " not in log and "ERROR:" not in log, log


def test_one_caller_keeps_at_most_eight_event_streams_open(opened):
    import contextlib

    from memloci.http.dashboard.events import STREAMS_PER_CALLER

    server, _ = opened
    lines = []  # each stream's line reader, kept: a reader let go closes its stream
    with contextlib.ExitStack() as streams:
        for _ in range(STREAMS_PER_CALLER):
            sse = streams.enter_context(httpx2.Client(base_url=base(server), timeout=30))
            lines.append(streams.enter_context(sse.stream("GET", "/api/events")).iter_lines())
            assert next(lines[-1]) == ": ready"
        refused = httpx2.get(base(server) + "/api/events", timeout=30)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED", refused.text
    deadline = time.monotonic() + 30  # the streams closed: a new one opens
    while True:
        with httpx2.Client(base_url=base(server), timeout=30) as sse, sse.stream("GET", "/api/events") as stream:
            if stream.status_code == 200:
                break
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_memloci_ui_starts_a_loopback_server_or_finds_the_one_running(tmp_path):
    import signal
    import subprocess
    import sys

    from conftest import server_env
    from test_http import free_port

    port = free_port()
    argv = [sys.executable, "-m", "memloci", "ui", "--no-browser", "--port", str(port),
            "--libraries", f"team:{tmp_path / 'team.db'}"]
    first = subprocess.Popen(argv, env=server_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == f"Dashboard: http://127.0.0.1:{port}/"
        assert httpx2.get(f"http://127.0.0.1:{port}/api/session").json()["open"] is True
        second = subprocess.run(argv, env=server_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert second.returncode == 0 and "already runs there" in second.stdout
        create_token(tmp_path, "first", "team:read")  # open mode ends with the first token, with no restart
        closed = httpx2.get(f"http://127.0.0.1:{port}/api/memories")
        assert closed.status_code == 401 and httpx2.get(f"http://127.0.0.1:{port}/api/session").json()["open"] is False
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=90) == 0


def test_memloci_ui_refuses_a_port_another_program_holds(tmp_path):
    import socket

    from test_http import memloci

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        refused = memloci(tmp_path, "ui", "--no-browser", "--port", str(port), check=False)
    assert refused.returncode == 1 and f"--port: {port} on 127.0.0.1 is taken" in refused.stderr
