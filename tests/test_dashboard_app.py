"""The dashboard's app in this process (Starlette's TestClient over build_http_app): the route
table and its OpenAPI description, the checks of queries and bodies, the Markdown body's
rendering, and the entity graph's neighbourhood. tests/test_dashboard_api.py drives a real
server process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput, ObservationBatch, RelationInput
from memloci.http.app import build_http_app
from memloci.http.dashboard import ROUTES
from memloci.http.dashboard.openapi import openapi_path
from memloci.http.dashboard.render import body_html
from memloci.http.settings import HttpSettings
from memloci.mcp.server import build_server
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService

BASE = "http://127.0.0.1:8001"


@pytest.fixture
def dashboard(tmp_path: Path):
    registry = LibraryRegistry([LibrarySpec("team", tmp_path / "team.db"), LibrarySpec("other", tmp_path / "other.db")],
                               create_missing=True)
    service = MemoryService(registry)
    app = build_http_app(build_server(service), HttpSettings(), service=service)
    with TestClient(app, base_url=BASE) as client:
        csrf = client.get("/api/session").json()["csrf"]
        client.headers["x-csrf-token"] = csrf
        yield client, service, app
    registry.close()


def dashboard_routes(app) -> set[tuple[str, str]]:
    """(method, path) of every route of the app's dashboard mount: what openapi.json must list."""
    inner = next(r for r in app.routes if getattr(r, "path", None) == "/api/{path:path}").app
    while not hasattr(inner, "routes"):  # through the Host/Origin check and the headers
        inner = inner.app
    return {(method, openapi_path(r.path)) for r in inner.routes if isinstance(r, Route) and r.path.startswith("/api/")
            for method in r.methods - {"HEAD"}}


def test_openapi_lists_every_route_of_the_app(dashboard):
    client, _, app = dashboard
    document = client.get("/api/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    listed = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert listed == dashboard_routes(app)
    assert {"cookie", "bearer"} <= set(document["components"]["securitySchemes"])
    memories = document["paths"]["/api/memories"]["get"]
    assert {p["name"] for p in memories["parameters"]} >= {"library", "tag", "zone", "sort", "page", "page_size"}
    assert document["paths"]["/api/memories"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert len({(e.method, e.path) for e in ROUTES}) == len(ROUTES)


def test_unknown_parameters_fields_and_wrong_types_are_refused_by_name(dashboard):
    client, service, _ = dashboard
    cases = [client.get("/api/memories", params={"library": "team", "colour": "red"}),
             client.get("/api/memories", params={"library": "team", "page_size": "many"}),
             client.get("/api/memories", params={"library": "team", "page_size": "201"}),
             client.get("/api/graph", params={"library": "team", "name": "a", "depth": "4"}),
             client.post("/api/memories", json={"library": "team", "content": "x", "colour": "red"}),
             client.post("/api/memories", json={"library": "team", "content": 5}),
             client.post("/api/previews", json={"library": "team", "operation": "delete_by_tag",
                                                "arguments": {"tags": ["a"], "colour": 1}})]
    names = ["colour", "page_size", "page_size", "depth", "colour", "content", "colour"]
    for response, name in zip(cases, names, strict=True):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == "VALIDATION_ERROR" and error["message"].startswith(name), error
    assert "unknown parameter" in cases[0].json()["error"]["message"]
    assert "less than or equal to 200" in cases[2].json()["error"]["message"]
    assert service.list_memories(library="team")[1] == 0  # nothing stored by the refused bodies


def test_several_libraries_need_one_named_and_an_unknown_one_is_not_found(dashboard):
    client, _, _ = dashboard
    several = client.get("/api/memories")
    assert several.status_code == 400 and "several libraries" in several.json()["error"]["message"]
    assert client.get("/api/memories", params={"library": "nope"}).status_code == 404
    assert client.get("/api/memories/0000", params={"library": "team"}).json()["error"]["code"] == "NOT_FOUND"
    nowhere = client.get("/api/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "NOT_FOUND"
    assert nowhere.headers["cache-control"] == "no-store"
    assert client.put("/api/memories").status_code == 405


def test_markdown_body_escapes_raw_html_and_drops_script_links():
    html = body_html("# Title\n\n<script>alert(1)</script>\n\n[bad](javascript:alert(1)) [good](https://example.org) "
                     "[tab](java\tscript:alert(1))\n")
    assert "<h1>Title</h1>" in html and '<a href="https://example.org">good</a>' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")
    assert 'href="javascript' not in html and "href=\"java" not in html


def test_entity_view_and_graph_neighbourhood_of_depth_one_and_two(dashboard):
    client, service, _ = dashboard
    service.add_entities([NewEntityDocument("Alpha", "project", content="Uses <b>raw</b> HTML\n\n## Plan\n\nShip it")],
                         library="team")
    service.create_entities([EntityInput("Beta", "service", ("runs on Tuesday",)), EntityInput("Gamma", "db")],
                            library="team")
    service.create_relations([RelationInput("Alpha", "depends_on", "Beta"), RelationInput("Beta", "reads", "Gamma")],
                             library="team")
    entity = client.get("/api/entities/Alpha", params={"library": "team"}).json()
    assert entity["relations"]["outgoing"] == [{"to": "Beta", "relation_type": "depends_on"}]
    assert "&lt;b&gt;raw&lt;/b&gt;" in entity["body_html"] and "<h2>Plan</h2>" in entity["body_html"]
    one = client.get("/api/graph", params={"library": "team", "name": "Alpha"}).json()
    assert {n["name"] for n in one["nodes"]} == {"Alpha", "Beta"} and one["center"] == "Alpha"
    assert one["edges"] == [{"from": "Alpha", "to": "Beta", "relation_type": "depends_on"}]
    two = client.get("/api/graph", params={"library": "team", "name": "Alpha", "depth": 2}).json()
    assert {n["name"] for n in two["nodes"]} == {"Alpha", "Beta", "Gamma"}
    assert len(two["edges"]) == 2 and not two["truncated"]
    capped = client.get("/api/graph", params={"library": "team", "name": "Alpha", "depth": 2, "limit": 2}).json()
    assert len(capped["nodes"]) == 2 and capped["truncated"]
    fixed = client.patch("/api/entities/Beta/observations", json={"library": "team", "old": "runs on Tuesday",
                                                                  "new": "runs on Wednesday"})
    assert fixed.status_code == 200 and len(fixed.json()["change_ids"]) == 1, fixed.text
    beta = client.get("/api/entities/Beta", params={"library": "team"}).json()
    assert [o["content"] for o in beta["observations"]] == ["runs on Wednesday"]
    client.post("/api/entities/Beta/observations", json={"library": "team", "contents": ["runs"]})
    within = client.patch("/api/entities/Beta/observations", json={"library": "team", "old": "runs",
                                                                   "new": "walks\n- and swims\n## Heading"})
    assert within.status_code == 200 and within.json()["change_ids"] == [service.history(library="team", limit=1)[0].id]
    beta = client.get("/api/entities/Beta", params={"library": "team"}).json()
    assert [o["content"] for o in beta["observations"]] == ["runs on Wednesday", "walks\n- and swims\n## Heading"]
    same = client.patch("/api/entities/Beta/observations", json={"library": "team", "old": "runs on Wednesday",
                                                                 "new": "runs on Wednesday"})
    assert same.json() == {"change_ids": []}
    assert len(client.get("/api/entities/Beta", params={"library": "team"}).json()["observations"]) == 2
    missing = client.patch("/api/entities/Beta/observations", json={"library": "team", "old": "flies", "new": "x"})
    assert missing.status_code == 404


def test_memory_browser_sorts_and_filters_by_zone(dashboard):
    client, service, _ = dashboard
    for text, importance in (("first note", "low"), ("second note", "critical"), ("third note", "medium")):
        assert client.post("/api/memories", json={"library": "team", "content": text, "importance": importance,
                                                  "tags": ["n"]}).status_code == 201

    def order(**params) -> list[str]:
        return [m["content"] for m in client.get("/api/memories", params={"library": "team", **params}).json()["memories"]]

    newest = order()
    assert sorted(newest) == ["first note", "second note", "third note"]
    assert order(sort="oldest") == list(reversed(newest))
    assert order(sort="importance")[0] == "second note"
    assert order(zone="active", page_size=2, page=2) == newest[2:]
    assert client.get("/api/memories", params={"library": "team"}).json()["tags"] == [{"tag": "n", "count": 3}]


def test_a_token_s_changes_and_sign_ins_take_from_its_rate(tmp_path):
    from memloci.http.tokens import StoredTokenVerifier, TokenStore

    tokens = TokenStore(tmp_path / "tokens.json")
    secret = tokens.create("writer", ["team:write"])
    registry = LibraryRegistry([LibrarySpec("team", tmp_path / "team.db")], create_missing=True)
    service = MemoryService(registry)
    app = build_http_app(build_server(service), HttpSettings(rate_limit=2), service=service,
                         verifiers=[StoredTokenVerifier(tokens)])
    with TestClient(app, base_url=BASE) as client:
        client.headers["authorization"] = f"Bearer {secret}"
        answers = [client.post("/api/memories", json={"content": f"note {i}"}) for i in range(3)]
        assert [a.status_code for a in answers] == [201, 201, 429]
        assert answers[2].json()["error"]["code"] == "RATE_LIMITED" and int(answers[2].headers["retry-after"]) >= 1
        assert client.get("/api/memories").json()["total"] == 2  # reads are not limited, the refused one not stored
        del client.headers["authorization"]
        sign_ins = [client.post("/api/session", json={"token": "mlc_guess"}).status_code for _ in range(3)]
        assert sign_ins == [401, 401, 429]
        assert "failed sign-ins from testclient" in client.post("/api/session", json={"token": secret}).text
        other = TestClient(app, base_url=BASE, client=("10.0.0.2", 50000))  # another address: its own rate
        signed = [other.post("/api/session", json={"token": secret}).status_code for _ in range(3)]
        assert signed == [200, 200, 200]  # a sign-in that works takes nothing
        assert other.post("/api/session", json={"token": "mlc_guess"}).status_code == 401
    registry.close()


def test_nan_and_infinity_are_refused_and_an_unserialisable_answer_is_the_json_internal_error(dashboard, tmp_path):
    import sqlite3

    from memloci.core.errors import ValidationError

    client, service, _ = dashboard
    for raw in ('{"library": "team", "content": "x", "metadata": {"x": NaN}}',
                '{"library": "team", "content": "x", "importance": -Infinity}'):
        refused = client.post("/api/memories", content=raw, headers={"content-type": "application/json"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "VALIDATION_ERROR", refused.text
        assert refused.json()["error"]["message"].startswith("body:")
    with pytest.raises(ValidationError, match=r"^metadata\.x\[1\]: must be a finite number"):
        service.store_memory("y", metadata={"x": [1, float("inf")]}, library="team")
    assert service.list_memories(library="team")[1] == 0
    assert client.get("/api/memories", params={"library": "team"}).status_code == 200
    client.post("/api/memories", json={"library": "team", "content": "z"})
    with sqlite3.connect(tmp_path / "team.db") as db:  # a value no rule lets in, written behind the service's back
        db.execute("""UPDATE memories SET metadata = '{"x": NaN}'""")
    broken = client.get("/api/memories", params={"library": "team"})
    assert broken.status_code == 500 and broken.json()["error"]["code"] == "INTERNAL_ERROR", broken.text


def test_an_entity_whose_name_holds_a_slash_is_opened_and_its_observations_changed(dashboard):
    client, service, _ = dashboard
    service.create_entities([EntityInput("TCP/IP", "protocol", ("layered",))], library="team")
    opened = client.get("/api/entities/TCP%2FIP", params={"library": "team"})
    assert opened.status_code == 200 and opened.json()["name"] == "TCP/IP", opened.text
    added = client.post("/api/entities/TCP%2FIP/observations", json={"library": "team", "contents": ["four layers"]})
    assert added.status_code == 200 and added.json()["added"] == ["four layers"], added.text
    fixed = client.patch("/api/entities/TCP/IP/observations", json={"library": "team", "old": "four layers",
                                                                   "new": "five layers"})
    assert fixed.status_code == 200, fixed.text
    assert [o.content for o in service.open_nodes(["TCP/IP"], library="team").entities[0].observations] == [
        "layered", "five layers"]
    assert client.get("/api/entities/TCP%2FIP/observations", params={"library": "team"}).status_code == 404


def test_another_site_can_neither_sign_a_browser_in_nor_read_through_it(tmp_path):
    from memloci.http.tokens import StoredTokenVerifier, TokenStore

    cookie = "memloci_session_8001"  # the server's port: another server on this machine has its own

    tokens = TokenStore(tmp_path / "tokens.json")
    secret = tokens.create("reader", ["team:read"])
    registry = LibraryRegistry([LibrarySpec("team", tmp_path / "team.db")], create_missing=True)
    service = MemoryService(registry)
    app = build_http_app(build_server(service), HttpSettings(), service=service, verifiers=[StoredTokenVerifier(tokens)])
    body = json.dumps({"token": secret})
    with TestClient(app, base_url=BASE) as client:
        foreign = [client.post("/api/session", content=body, headers={"content-type": "text/plain"}),
                   client.post("/api/session", content=body, headers={"content-type": "application/json",
                                                                      "origin": "http://localhost:3000"}),
                   client.post("/api/session", content=body, headers={"content-type": "application/json",
                                                                      "sec-fetch-site": "same-site"})]
        assert [f.status_code for f in foreign] == [415, 403, 403], [f.text for f in foreign]
        assert [f.json()["error"]["code"] for f in foreign] == ["UNSUPPORTED_MEDIA_TYPE", "CSRF", "CSRF"]
        assert cookie not in client.cookies
        own = {"origin": BASE, "sec-fetch-site": "same-origin"}
        first = client.post("/api/session", json={"token": secret}, headers=own)
        assert first.status_code == 200 and first.json()["signed_in"], first.text
        old = client.cookies[cookie]
        assert client.post("/api/session", json={"token": secret}, headers=own).status_code == 200
        assert client.cookies[cookie] != old
        new = client.cookies[cookie]
        client.cookies.clear()
        client.cookies.set(cookie, old)  # the session before a new sign-in is over
        assert client.get("/api/session").json()["signed_in"] is False
        client.cookies.clear()
        client.cookies.set(cookie, new)
        assert client.get("/api/session").json()["signed_in"] is True
    registry.close()


def test_in_open_mode_another_site_cannot_read_and_a_search_counts_no_use(dashboard):
    client, service, _ = dashboard
    stored = client.post("/api/memories", json={"library": "team", "content": "The deploy runs on Fridays"})
    assert stored.status_code == 201
    for headers in ({"sec-fetch-site": "cross-site"}, {"sec-fetch-site": "same-site"},
                    {"origin": "http://localhost:3000"}):
        refused = client.get("/api/search", params={"library": "team", "q": "deploy"}, headers=headers)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "CSRF", (headers, refused.text)
        assert client.get("/api/events", headers=headers).status_code == 403
    for headers in ({}, {"sec-fetch-site": "same-origin", "origin": BASE}, {"sec-fetch-site": "none"}):
        found = client.get("/api/search", params={"library": "team", "q": "deploy"}, headers=headers)
        assert found.status_code == 200 and len(found.json()["memories"]) == 1, found.text
    service.vectors.accesses.drain()
    assert service.list_memories(library="team")[0][0].access_count == 0


def test_an_entity_of_observations_only_is_no_note_and_a_note_shows_its_prose_alone_on_every_engine(tmp_path):
    registry = LibraryRegistry([LibrarySpec("lite", tmp_path / "lite.db"),
                                LibrarySpec("folder", tmp_path / "folder", kind="markdown")], create_missing=True)
    service = MemoryService(registry)
    app = build_http_app(build_server(service), HttpSettings(), service=service)
    answers = {}
    with TestClient(app, base_url=BASE) as client:
        for library in ("lite", "folder"):
            service.create_entities([EntityInput("Kettle", "device", ("boils water quickly",))], library=library)
            service.add_entities([NewEntityDocument("Teapot", "device", content="A teapot steeps the water.\n")],
                                 library=library)
            service.add_observations([ObservationBatch("Teapot", ("holds water for four cups",))], library=library)
            found = client.get("/api/search", params={"library": library, "q": "water", "kind": "all"}).json()
            pages = {name: client.get(f"/api/entities/{name}", params={"library": library}).json()
                     for name in ("Kettle", "Teapot")}
            answers[library] = ({h["name"] for h in found["entities"]}, [(h["name"], h["line"]) for h in found["notes"]],
                                {name: page["body_html"] for name, page in pages.items()},
                                {name: [o["content"] for o in page["observations"]] for name, page in pages.items()})
    registry.close()
    assert answers["folder"] == answers["lite"]
    entities, notes, html, observations = answers["lite"]
    assert entities == {"Kettle"} and notes == [("Teapot", "A teapot steeps the water.")]
    assert html == {"Kettle": "", "Teapot": "<p>A teapot steeps the water.</p>\n"}
    assert observations == {"Kettle": ["boils water quickly"], "Teapot": ["holds water for four cups"]}


def test_the_dashboard_answers_its_own_paths_only_so_mcp_and_healthz_still_redirect(dashboard):
    client, _, _ = dashboard
    for path, target in (("/mcp/", "/mcp"), ("/healthz/", "/healthz")):
        moved = client.get(path, follow_redirects=False)
        assert moved.status_code == 307 and moved.headers["location"] == BASE + target, (path, moved.text)
    assert client.get("/").headers["content-type"].startswith("text/html")
    assert client.get("/api/session").json()["open"] is True
    nowhere = client.get("/api/nowhere")
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/nowhere").status_code == 404



@pytest.mark.parametrize("kind", ["sqlite", "markdown"])
def test_a_change_id_is_the_call_s_own_never_another_writer_s_of_the_same_moment(tmp_path, kind):
    from memloci.service import browse
    from memloci.service.history import names_memory, names_observations, undoable

    path = tmp_path / ("team.db" if kind == "sqlite" else "team")
    registry = LibraryRegistry([LibrarySpec("team", path, kind=kind)], create_missing=True)
    service = MemoryService(registry)
    since = browse.newest_change(service, "team")
    mine, _ = service.store_memory("the page stored this", library="team")
    service.store_memory("an agent stored this at the same moment", library="team")  # the newest entry
    ids = browse.changes_since(service, since, ("store_memory",), "team", lambda e: names_memory(e, mine.content_hash))
    stored = [e for e in service.history(library="team") if e.action == "store_memory"]
    assert ids == [min(e.id for e in stored)] and undoable(stored[0])
    service.create_entities([EntityInput("Ada", "person")], library="team")
    since = browse.newest_change(service, "team")
    service.add_observations([ObservationBatch("Ada", ("wrote the first program",))], library="team")
    service.add_observations([ObservationBatch("Ada", ("an agent's note",))], library="team")
    ids = browse.changes_since(service, since, ("add_observations",), "team",
                               lambda e: names_observations(e, "Ada", ["wrote the first program"], "added"))
    assert len(ids) == 1 and ids[0] == since + 1
    since = browse.newest_change(service, "team")
    service.delete_memory(mine.content_hash, library="team")
    ids = browse.changes_since(service, since, ("delete_memory",), "team", lambda e: names_memory(e, mine.content_hash))
    assert ids == [since + 1]
    assert browse.changes_since(service, since, ("delete_memory",), "team", lambda e: names_memory(e, "0" * 64)) == []
    assert not undoable(next(e for e in service.history(library="team") if e.action == "create_entities"))
    registry.close()


def test_the_body_limit_and_a_shutdown_s_refusal_of_writes_are_those_of_mcp(tmp_path):
    from memloci.http.app import Shutdown

    registry = LibraryRegistry([LibrarySpec("team", tmp_path / "team.db")], create_missing=True)
    service = MemoryService(registry)
    shutdown = Shutdown()
    app = build_http_app(build_server(service), HttpSettings(max_body_bytes=2_000), service=service, shutdown=shutdown)
    with TestClient(app, base_url=BASE) as client:
        client.headers["x-csrf-token"] = client.get("/api/session").json()["csrf"]
        large = client.post("/api/memories", json={"content": "x" * 3_000})
        assert large.status_code == 413 and "2000 bytes" in large.json()["error"]["message"], large.text
        assert client.post("/api/memories", json={"content": "small"}).status_code == 201
        shutdown.requested = True
        refused = client.post("/api/memories", json={"content": "during the drain"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "SHUTTING_DOWN", refused.text
        assert refused.headers["retry-after"] == "5"
        assert client.get("/api/memories").json()["total"] == 1  # reads are still answered
    registry.close()


def test_a_preview_lists_its_first_items_as_the_tools_do_with_the_count(dashboard):
    from memloci.mcp.maintenance import ITEMS_SHOWN

    client, service, _ = dashboard
    for i in range(ITEMS_SHOWN + 3):
        service.store_memory(f"old note {i}", tags=["old"], library="team")
    made = client.post("/api/previews", json={"library": "team", "operation": "delete_by_tag",
                                              "arguments": {"tags": ["old"]}}).json()["preview"]
    kept = client.get(f"/api/previews/{made['id']}", params={"library": "team"}).json()
    assert len(kept["items"]) == ITEMS_SHOWN and kept["count"] == ITEMS_SHOWN + 3 and kept["items_not_shown"] == 3


def test_memory_pages_in_every_order_are_read_a_page_at_a_time_and_bounded(dashboard, monkeypatch):
    from memloci.core.errors import ValidationError
    from memloci.core.model import MemoryFilter
    from memloci.service import browse

    _, service, _ = dashboard
    importances = ["low", "critical", "medium", "high", "low", "critical", "medium"]
    for i, importance in enumerate(importances):
        service.store_memory(f"note {i}", importance=importance, library="team")
    every, total = service.list_memories(page=1, page_size=100, library="team")  # newest first
    expected = {"newest": every, "oldest": every[::-1],
                "importance": sorted(every, key=lambda m: browse.IMPORTANCE_RANK[m.importance]),
                "uses": every}
    monkeypatch.setattr(browse, "READ_PAGE", 2)  # several reads for 7 memories
    for sort, order in expected.items():
        for zone in (None, "active"):
            for page in (1, 2, 3):
                got, count = browse.memory_page(service, filters=MemoryFilter(), zone=zone, sort=sort, page=page,
                                                page_size=3, library="team")
                assert count == total and got == order[(page - 1) * 3:page * 3], (sort, zone, page)
    monkeypatch.setattr(browse, "SCAN_MAX", 5)
    with pytest.raises(ValidationError, match="^sort: at most 5 memories"):
        browse.memory_page(service, filters=MemoryFilter(), sort="importance", library="team")
    assert len(browse.memory_page(service, filters=MemoryFilter(), sort="oldest", library="team")[0]) == 7
