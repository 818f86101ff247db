"""The dashboard in a real browser: headless Chromium from Debian's `chromium` package, driven
by Playwright's Python client, against a real `memloci serve --transport http` process while
an agent writes to the same library over MCP (the Python SDK's streamable-HTTP client, in a
thread of its own).

Every test's page records each request it makes and each console error: a request whose host
is not loopback, or a console error nobody expected, fails the test that made it.

Without chromium or the playwright package the tests are skipped with the reason; under
CI=true that is a failure, since CI installs both.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import anyio
import httpx2
import pytest
from test_http import Server, create_token, memloci, session, text

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
NOTE = """---
type: document
---
# Runbook

Restart the **billing** service with `systemctl restart billing`.

- read the logs first
- then page the on-call
"""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright; its own browser download is not needed)"
    return None


def require_browser() -> None:
    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the dashboard's browser tests: {reason}")
    pytest.skip(reason)


# ---------------------------------------------------------------- the server and the agent


def dashboard_server(home: Path) -> Server:
    """`memloci serve --transport http` with a SQLite library (team) and a Markdown one (notes)."""
    return Server(home, libraries=f"team:{home / 'team.db'},notes:{home / 'notes'}")


class Agent(threading.Thread):
    """An MCP client in its own thread: it stores a memory in `team` every WAIT seconds until
    stopped, and makes the calls the tests hand it (`call`), in the same session."""

    WAIT = 1.0

    def __init__(self, server: Server, token: str | None = None):
        super().__init__(daemon=True)
        self.server, self.token = server, token
        self.stopping = threading.Event()
        self.jobs: list[tuple[str, dict[str, Any], concurrent.futures.Future]] = []
        self.lock = threading.Lock()
        self.stored = 0
        self.failure: BaseException | None = None

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        done: concurrent.futures.Future = concurrent.futures.Future()
        with self.lock:
            self.jobs.append((tool, arguments, done))
        return done.result(timeout=60)

    def run(self) -> None:
        async def main() -> None:
            async with session(self.server, self.token) as s:
                next_note = 0.0
                while not self.stopping.is_set():
                    with self.lock:
                        jobs, self.jobs = self.jobs, []
                    for tool, arguments, done in jobs:
                        result = await s.call_tool(tool, arguments)
                        if result.is_error:
                            done.set_exception(AssertionError(f"{tool}: {result.content[0].text}"))
                        else:
                            done.set_result(text(result))
                    if time.monotonic() >= next_note:
                        result = await s.call_tool("store_memory", {
                            "library": "team", "tags": ["agent"],
                            "content": f"Agent note {self.stored}: the nightly build took {40 + self.stored} seconds"})
                        assert not result.is_error, result.content[0].text
                        self.stored += 1
                        next_note = time.monotonic() + self.WAIT
                    await anyio.sleep(0.05)

        try:
            anyio.run(main)
        except BaseException as e:  # reported by the fixture that stops the agent
            self.failure = e

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)
        assert self.failure is None, f"the agent failed: {self.failure!r}"
        assert self.stored > 0, "the agent stored nothing while the browser was in use"


def seed(agent: Agent) -> dict[str, str]:
    """The library the tests look at, made by the agent over MCP. Returns the memories' hashes."""
    stored = {}
    for key, content, tags in [
        ("billing", "The billing service stores invoices in PostgreSQL 16", ["db", "decision"]),
        ("dark", "Alice prefers dark mode in every editor", ["preference"]),
        ("deploy", "Deploys go out on Tuesdays after the standup", ["ops"]),
        ("edit", "The release train leaves every second Monday", ["ops", "release"]),
        ("dup1", "Use uv to manage Python environments.", ["tooling"]),
        ("dup2", "use uv to manage python environments", ["python"]),
    ]:
        reply = agent.call("store_memory", {"library": "team", "content": content, "tags": tags})
        stored[key] = reply["content_hash"] if "content_hash" in reply else reply["memory"]["content_hash"]
    agent.call("create_entities", {"library": "team", "entities": [
        {"name": "Alice", "entityType": "person", "observations": ["likes tea", "leads the billing team"]},
        {"name": "Bob", "entityType": "person", "observations": ["on call this week"]},
        {"name": "Carol", "entityType": "person", "observations": ["joined in spring"]},
        {"name": "Billing", "entityType": "service", "observations": ["written in Go"]}]})
    agent.call("create_relations", {"library": "team", "relations": [
        {"from": "Alice", "to": "Bob", "relationType": "works_with"},
        {"from": "Bob", "to": "Carol", "relationType": "mentors"},
        {"from": "Alice", "to": "Billing", "relationType": "owns"}]})
    return stored


# ---------------------------------------------------------------- the browser


class Watched:
    """A page with what it did: every request URL, every console error and page error."""

    def __init__(self, context: Any, base: str):
        self.context = context
        self.page = context.new_page()
        self.base = base
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.allowed_errors: list[str] = []  # substrings of console errors a test expects (a refused call)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def visit(self, route: str) -> Any:
        """Go to `#/route` and wait until that view has rendered (data-render counts renders)."""
        page = self.page
        url = f"{self.base}/#/{route}"
        if page.url == url:  # the same hash changes nothing: load the page again
            page.reload()
            return self.settle(0)
        before = self.render_count() if page.url.startswith(self.base) else 0
        page.goto(url)
        return self.settle(before)

    def settle(self, before: int = 0) -> Any:
        page = self.page
        state = page.wait_for_function(  # the state as it was when seen (a live change may render again at once)
            "n => { const m = document.getElementById('main');"
            " return m && Number(m.dataset.render || 0) > n && m.dataset.state !== 'loading' && m.dataset.state; }",
            arg=before).json_value()
        assert state == "ready", page.inner_text("#main")
        return page

    def render_count(self) -> int:
        return self.page.evaluate("Number(document.getElementById('main').dataset.render || 0)")

    def check(self) -> None:
        outside = [u for u in self.requests if urlsplit(u).scheme not in ("data", "blob")
                   and urlsplit(u).hostname not in LOOPBACK]
        assert not outside, f"requests left loopback: {outside}"
        unexpected = [e for e in self.errors if not any(a in e for a in self.allowed_errors)]
        assert not unexpected, f"console errors: {unexpected}"


@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        launched = p.chromium.launch(executable_path=CHROMIUM, args=args)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, browser):
    """An open server (loopback, no token) with the seeded library and an agent writing to it."""
    home = tmp_path_factory.mktemp("dashboard")
    (home / "notes").mkdir()
    (home / "notes" / "Runbook.md").write_text(NOTE)
    server = dashboard_server(home)
    agent = Agent(server)
    agent.start()
    try:
        hashes = seed(agent)
        yield server, agent, hashes
    finally:
        try:
            agent.stop()
        finally:
            server.stop()


def new_page(browser: Any, base: str, **options: Any) -> Watched:
    context = browser.new_context(viewport=options.pop("viewport", {"width": 1280, "height": 800}), **options)
    context.set_default_timeout(20_000)
    return Watched(context, base)


@pytest.fixture
def page(browser, served):
    watched = new_page(browser, served[0].base)
    yield watched
    try:
        watched.check()
    finally:
        watched.context.close()


def api(server: Server, path: str, **params: Any) -> httpx2.Response:
    return httpx2.get(f"{server.base}{path}", params=params, timeout=30)


# ---------------------------------------------------------------- the pages


ROUTES = {
    "search?q=billing": "search-page", "memories?library=team": "memories-page",
    "entity/team/Alice": "entity-page", "entity/notes/Runbook": "entity-page", "graph/team/Alice": "graph-page",
    "graph/team": "graph-page", "history?library=team": "history-page", "previews?library=team": "previews-page",
    "health": "health-page",
}


def test_every_page_renders_with_no_console_error(page, served):
    server, _, hashes = served
    routes = {**ROUTES, f"memory/{hashes['dark']}?library=team": "memory-page"}
    for route, testid in routes.items():
        p = page.visit(route)
        assert p.get_by_test_id(testid).is_visible(), route
        assert p.get_by_test_id("header").is_visible()
    assert any("/api/events" in u for u in page.requests), "the page did not listen for changes"
    page.check()


def test_search_finds_a_stored_memory_with_why(page, served):
    p = page.visit("search")
    p.keyboard.press("/")
    assert p.evaluate("document.activeElement.id") == "q"
    before = page.render_count()
    p.keyboard.type("invoices PostgreSQL", delay=100)  # slower than the agent writes: live updates come meanwhile
    assert p.get_by_test_id("search-input").input_value() == "invoices PostgreSQL"
    p.keyboard.press("Enter")
    page.settle(before)
    hit = p.locator("[data-testid=search-hit][data-kind=memory]", has_text="stores invoices in PostgreSQL")
    assert hit.count() == 1
    assert hit.get_by_test_id("hit-why").inner_text().strip()
    # an entity by its name, and a note by a word of its body
    page.visit("search?q=Alice&kind=entities")
    assert p.locator("[data-testid=search-hit][data-kind=entity]", has_text="Alice").count() >= 1
    page.visit("search?q=systemctl&kind=notes&library=notes")
    note = p.locator("[data-testid=search-hit][data-kind=note]", has_text="Runbook")
    assert note.count() == 1
    before = page.render_count()
    note.get_by_test_id("hit-link").click()
    page.settle(before)
    assert p.get_by_test_id("entity-name").inner_text() == "Runbook"
    body = p.get_by_test_id("body-html")
    assert body.locator("strong", has_text="billing").count() == 1
    assert body.locator("li").count() == 2


def test_filters_by_tag_and_by_time(page, served):
    p = page.visit("memories?library=team")
    before = page.render_count()
    p.locator("[data-testid=filter-tag][value=ops]").focus()
    p.keyboard.press("Space")  # a tag applies at once, and the keyboard stays on it
    page.settle(before)
    assert "tag=ops" in p.url
    assert p.evaluate("document.activeElement.dataset.testid + ' ' + document.activeElement.value") == "filter-tag ops"
    rows = p.get_by_test_id("memory-row")
    texts = sorted(rows.all_inner_texts())
    assert len(texts) == 2 and all("ops" in t for t in texts), texts
    assert any("Tuesdays" in t for t in texts) and any("release train" in t for t in texts)
    # time: nothing was stored before 2001; everything after 2001
    p.get_by_test_id("filter-before").fill("2001-01-01")
    before = page.render_count()
    p.get_by_test_id("filter-apply").click()
    page.settle(before)
    assert "before=2001-01-01" in p.url
    assert p.get_by_test_id("memory-row").count() == 0
    assert "0 memories" in p.get_by_test_id("memory-total").inner_text()
    p.get_by_test_id("filter-before").fill("")
    p.get_by_test_id("filter-after").fill("2001-01-01")
    before = page.render_count()
    p.get_by_test_id("filter-apply").click()
    page.settle(before)
    assert p.get_by_test_id("memory-row").count() == 2
    # pages: 6 memories and 5 observations were seeded, so 10 a page makes two at least
    page.visit("memories?library=team&page_size=10&sort=oldest")
    first = p.get_by_test_id("memory-row").all_inner_texts()
    assert len(first) == 10 and "Page 1 of" in p.get_by_test_id("page-info").inner_text()
    before = page.render_count()
    p.get_by_test_id("pager-next").click()
    page.settle(before)
    assert "page=2" in p.url and "Page 2 of" in p.get_by_test_id("page-info").inner_text()
    assert not set(p.get_by_test_id("memory-row").all_inner_texts()) & set(first)
    assert p.get_by_test_id("pager-prev").is_visible()
    # a time phrase: the agent's notes of the last 30 days (it wrote them a moment ago), with its tag
    page.visit("memories?library=team&tag=agent&time=" + quote("last 30 days"))
    assert p.get_by_test_id("filter-time").input_value() == "last 30 days"
    assert p.get_by_test_id("memory-row").count() >= 1
    assert all("agent" in t for t in p.get_by_test_id("memory-row").all_inner_texts())


def test_graph_shows_a_neighbourhood_pans_zooms_and_expands(page, served):
    _, agent, _ = served
    p = page.visit("graph/team/Alice")
    nodes = p.get_by_test_id("graph-node")
    nodes.first.wait_for()
    names = {n.get_attribute("data-name") for n in nodes.all()}
    assert names == {"Alice", "Bob", "Billing"}, names
    assert p.locator("[data-testid=graph-edge][data-from=Alice][data-to=Bob]").count() == 1
    viewport = p.locator("[data-testid=graph-svg] g.viewport")
    start = viewport.get_attribute("transform")
    box = p.get_by_test_id("graph-svg").bounding_box()
    p.mouse.move(box["x"] + 20, box["y"] + 20)  # a corner: the background, not a node
    p.mouse.down()
    p.mouse.move(box["x"] + 120, box["y"] + 80, steps=4)
    p.mouse.up()
    panned = viewport.get_attribute("transform")
    assert panned != start
    p.get_by_test_id("graph-zoom-in").click()
    zoomed = viewport.get_attribute("transform")
    assert zoomed != panned
    p.mouse.move(box["x"] + 20, box["y"] + 20)
    p.mouse.wheel(0, 300)  # the wheel zooms the graph, not the page
    p.wait_for_function("t => document.querySelector('[data-testid=graph-svg] g.viewport').getAttribute('transform') !== t",
                        arg=zoomed)
    p.locator("[data-testid=graph-node][data-name=Bob]").click()
    p.locator("[data-testid=graph-node][data-name=Carol]").wait_for()
    assert p.locator("[data-testid=graph-node][data-name=Bob]").get_attribute("data-expanded") == "true"
    assert p.locator("[data-testid=graph-edge][data-from=Bob][data-to=Carol]").count() == 1
    # what an agent relates to a node shown expanded appears without a reload, the expansions kept
    agent.call("create_entities", {"library": "team", "entities": [{"name": "Dave", "entityType": "person",
                                                                   "observations": []}]})
    agent.call("create_relations", {"library": "team", "relations": [{"from": "Bob", "to": "Dave",
                                                                      "relationType": "mentors"}]})
    p.locator("[data-testid=graph-node][data-name=Dave]").wait_for()
    assert p.locator("[data-testid=graph-node][data-name=Carol]").count() == 1
    before = page.render_count()
    p.locator("[data-testid=graph-node][data-name=Carol]").focus()
    p.keyboard.press("Enter")
    page.settle(before)
    assert p.get_by_test_id("entity-name").inner_text() == "Carol"
    assert p.get_by_test_id("relations-in").get_by_role("link", name="Bob").count() == 1


def test_entity_observations_are_added_corrected_and_deleted(page, served):
    p = page.visit("entity/team/Billing")
    p.get_by_test_id("add-observation-input").fill("deployed with Nomad")
    before = page.render_count()
    p.get_by_test_id("add-observation-save").click()
    page.settle(before)
    observation = p.get_by_test_id("observation").filter(has_text="deployed with Nomad")
    assert observation.count() == 1
    observation.get_by_test_id("observation-correct").click()
    p.get_by_test_id("correct-input").fill("deployed with Kubernetes")
    before = page.render_count()
    p.get_by_test_id("correct-save").click()
    page.settle(before)
    assert p.get_by_test_id("observation").filter(has_text="Kubernetes").count() == 1
    assert p.get_by_test_id("observation").filter(has_text="Nomad").count() == 0
    p.get_by_test_id("observation").filter(has_text="Kubernetes").get_by_test_id("observation-delete").click()
    before = page.render_count()
    p.get_by_test_id("confirm-ok").click()
    page.settle(before)
    assert p.get_by_test_id("observation").filter(has_text="Kubernetes").count() == 0
    assert p.get_by_test_id("relations-in").get_by_role("link", name="Alice").count() == 1


def test_a_memory_is_edited_deleted_and_the_change_undone_from_history(page, served):
    server, _, hashes = served
    p = page.visit("memories?library=team&tag=release")
    before = page.render_count()
    p.get_by_test_id("memory-link").filter(has_text="release train").click()
    page.settle(before)
    p.get_by_test_id("edit-content").fill("The release train leaves every second Wednesday")
    p.get_by_test_id("edit-tags").fill("ops, release, calendar")
    before = page.render_count()
    p.get_by_test_id("edit-save").click()
    page.settle(before)
    assert "Wednesday" in p.get_by_test_id("memory-content").inner_text()
    edited = p.get_by_test_id("memory-page").get_attribute("data-hash")
    assert edited != hashes["edit"]
    assert api(server, f"/api/memories/{edited}", library="team").json()["memory"]["tags"] == ["ops", "release", "calendar"]
    # delete, with a confirm that Escape cancels
    p.get_by_test_id("memory-delete").click()
    assert p.get_by_test_id("confirm-dialog").is_visible()
    p.keyboard.press("Escape")
    assert not p.get_by_test_id("confirm-dialog").is_visible()
    p.get_by_test_id("memory-delete").click()
    before = page.render_count()
    p.get_by_test_id("confirm-ok").click()
    page.settle(before)
    assert api(server, f"/api/memories/{edited}", library="team").status_code == 404
    # history names the deletion; its undo brings the memory back
    page.visit("history?library=team")
    entries = p.get_by_test_id("history-entry")
    deletion = next(e.get_attribute("data-id") for e in entries.all() if e.get_by_test_id("undo-button").count()
                    and "delete_memory" in e.inner_text())
    before = page.render_count()  # (by its id: the agent's new entries move the rows down meanwhile)
    p.locator(f"[data-testid=history-entry][data-id='{deletion}']").get_by_test_id("undo-button").click()
    page.settle(before)
    restored = api(server, f"/api/memories/{edited}", library="team")
    assert restored.status_code == 200 and "Wednesday" in restored.json()["memory"]["content"]
    page.visit(f"memory/{edited}?library=team")
    assert p.get_by_test_id("memory-history").get_by_test_id("history-entry").count() >= 2


def test_a_person_stores_a_memory_from_the_page(page, served):
    server, _, _ = served
    p = page.visit("memories?library=team")
    p.get_by_test_id("new-memory").locator("summary").click()
    p.get_by_test_id("new-memory-content").fill("The staging database is reset every Sunday night")
    p.get_by_test_id("new-memory-tags").fill("staging, chores")
    before = page.render_count()
    p.get_by_test_id("new-memory-save").click()
    page.settle(before)
    assert "reset every Sunday" in p.get_by_test_id("memory-content").inner_text()
    stored = p.get_by_test_id("memory-page").get_attribute("data-hash")
    memory = api(server, f"/api/memories/{stored}", library="team").json()["memory"]
    assert memory["tags"] == ["staging", "chores"]
    assert p.get_by_test_id("memory-history").get_by_test_id("history-entry").count() >= 1


def test_a_cleanup_of_duplicates_is_previewed_then_executed(page, served):
    server, _, hashes = served
    p = page.visit("previews?library=team")
    p.get_by_test_id("preview-operation").select_option("cleanup_duplicates")
    before = page.render_count()
    p.get_by_test_id("preview-make-submit").click()
    page.settle(before)
    assert p.get_by_test_id("preview-page").is_visible()
    items = p.get_by_test_id("preview-item")
    assert items.count() >= 1
    assert any("uv" in t for t in items.all_inner_texts())
    # the preview changed nothing
    assert api(server, f"/api/memories/{hashes['dup2']}", library="team").status_code == 200
    assert api(server, f"/api/memories/{hashes['dup1']}", library="team").status_code == 200
    p.get_by_test_id("preview-execute").click()
    assert "Execute" in p.get_by_test_id("confirm-ok").inner_text()
    before = page.render_count()
    p.get_by_test_id("confirm-ok").click()
    page.settle(before)
    assert p.get_by_test_id("preview-executed").is_visible()
    kept = [api(server, f"/api/memories/{hashes[k]}", library="team").status_code for k in ("dup1", "dup2")]
    assert sorted(kept) == [200, 404], kept
    page.visit("previews?library=team")
    assert "executed" in p.get_by_test_id("preview-list").inner_text()


def test_a_memory_an_agent_stores_shows_without_a_reload(page, served):
    _, agent, _ = served
    p = page.visit("memories?library=team&tag=live")
    assert p.get_by_test_id("memory-row").count() == 0
    p.evaluate("window.__sameDocument = true")
    p.get_by_test_id("filter-apply").focus()
    agent.call("store_memory", {"library": "team", "content": "Live: the office wifi password rotates on Fridays",
                                "tags": ["live"]})
    p.get_by_test_id("memory-row").filter(has_text="office wifi").wait_for(timeout=20_000)
    assert p.evaluate("window.__sameDocument === true"), "the page was reloaded"
    assert p.evaluate("document.activeElement.dataset.testid") == "filter-apply", "the update moved the keyboard"
    # the notice says the view was updated
    assert "Updated" in p.get_by_test_id("notice").inner_text() or p.get_by_test_id("memory-row").count() == 1


def test_keyboard_tab_reaches_search_and_slash_focuses_it(page, served):
    p = page.visit("health")
    p.locator("body").click(position={"x": 5, "y": 700})
    for _ in range(20):
        p.keyboard.press("Tab")
        if p.evaluate("document.activeElement.id") == "q":
            break
    else:
        pytest.fail("Tab never reached the search box")
    # a focused control shows a focus ring
    outline = p.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), outline
    p.get_by_test_id("health-library").first.click()
    p.keyboard.press("/")
    assert p.evaluate("document.activeElement.id") == "q"


def test_a_phone_width_renders_without_horizontal_scroll(browser, served):
    server, _, hashes = served
    watched = new_page(browser, server.base, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        for route in [*ROUTES, f"memory/{hashes['dark']}?library=team"]:
            p = watched.visit(route)
            width = p.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (route, width)
        nav = p.get_by_test_id("nav")
        assert not nav.is_visible()
        p.get_by_test_id("nav-toggle").click()
        assert nav.is_visible()
        watched.check()
    finally:
        watched.context.close()


CONTRAST = r"""() => {
    // WCAG 2 contrast of each visible text element against the first opaque background behind it
    const rgb = (c) => (c.match(/[0-9.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
        .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
    const behind = (el) => {
        for (let e = el; e; e = e.parentElement) {
            const c = rgb(getComputedStyle(e).backgroundColor);
            if (c.length === 3 || (c.length === 4 && c[3] === 1)) return c.slice(0, 3);
        }
        return [255, 255, 255];  // the canvas (the page paints its own background: this is not reached)
    };
    const low = [];
    const selector = "main *, header *";
    for (const el of document.querySelectorAll(selector)) {
        const text = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
        if (!text || !el.getClientRects().length || el.closest("[disabled], svg")) continue;
        const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(behind(el));
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        const what = `${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}"`;
        if (!(ratio >= 4.5)) low.push(`${what}: ${ratio.toFixed(2)}`);
    }
    return low;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_has_aa_contrast_in_light_and_dark(browser, served, scheme):
    server, _, hashes = served
    watched = new_page(browser, server.base, color_scheme=scheme)
    try:
        for route in ["memories?library=team", "entity/team/Alice", "history?library=team", "health", "search?q=billing",
                      f"memory/{hashes['dark']}?library=team"]:
            p = watched.visit(route)
            assert p.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
            low = p.evaluate(CONTRAST)
            assert not low, (route, low)
        watched.check()
    finally:
        watched.context.close()


def test_the_header_library_picker_follows_and_sets_the_library(page, served):
    p = page.visit("history?library=notes")
    assert p.get_by_test_id("library-select").input_value() == "notes"
    assert "History of notes" in p.inner_text("h1")
    before = page.render_count()
    p.get_by_test_id("library-select").select_option("team")
    page.settle(before)
    assert "library=team" in p.url and "History of team" in p.inner_text("h1")


# ---------------------------------------------------------------- with tokens


@pytest.fixture(scope="module")
def guarded(tmp_path_factory, browser):
    """A server with tokens: a read token and a write token for `team`."""
    home = tmp_path_factory.mktemp("dashboard-tokens")
    (home / "notes").mkdir()
    tokens = {"reader": create_token(home, "reader", "team:read"), "writer": create_token(home, "writer", "team:write"),
              "brief": create_token(home, "brief", "team:read")}
    server = dashboard_server(home)
    agent = Agent(server, tokens["writer"])
    agent.start()
    try:
        hashes = seed(agent)
        yield server, tokens, hashes, home
    finally:
        try:
            agent.stop()
        finally:
            server.stop()


def sign_in(watched: Watched, token: str) -> None:
    p = watched.visit("signin")
    p.get_by_test_id("signin-token").fill(token)
    before = watched.render_count()
    p.get_by_test_id("signin-submit").click()
    watched.settle(before)
    assert p.get_by_test_id("search-page").is_visible()


def test_with_tokens_nothing_works_before_sign_in(browser, guarded):
    server, tokens, hashes, _ = guarded
    watched = new_page(browser, server.base)
    watched.allowed_errors = ["401"]
    try:
        for route in ["memories?library=team", "search?q=billing", f"memory/{hashes['billing']}?library=team", "health"]:
            p = watched.visit(route)
            assert p.get_by_test_id("signin-page").is_visible(), route
            assert p.get_by_test_id("memories-page").count() == 0
            assert not p.get_by_test_id("nav").is_visible()
            assert "PostgreSQL" not in p.inner_text("body")
        for path in ["/api/memories?library=team", "/api/search?q=billing", "/api/health", "/api/history?library=team",
                     f"/api/memories/{hashes['billing']}?library=team", "/api/graph?library=team&name=Alice"]:
            status = p.evaluate("path => fetch(path, {credentials: 'same-origin'}).then(r => r.status)", path)
            assert status == 401, (path, status)
        posted = p.evaluate("""() => fetch('/api/memories', {method: 'POST', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({library: 'team', content: 'written without signing in'})}).then(r => r.status)""")
        assert posted in (401, 403), posted
        # a bad token is refused, with a message and no session
        p = watched.visit("signin")
        p.get_by_test_id("signin-token").fill("mlc_not-a-token")
        p.get_by_test_id("signin-submit").click()
        p.get_by_test_id("signin-error").get_by_test_id("error").wait_for()
        assert p.evaluate("fetch('/api/session').then(r => r.json()).then(s => s.signed_in)") is False
        watched.check()
    finally:
        watched.context.close()


def test_a_read_token_sees_no_write_control_and_a_forced_write_gets_403(browser, guarded):
    server, tokens, hashes, _ = guarded
    watched = new_page(browser, server.base)
    watched.allowed_errors = ["403", "401"]
    try:
        sign_in(watched, tokens["reader"])
        p = watched.visit("memories?library=team")
        assert p.get_by_test_id("memory-row").count() >= 1
        assert p.get_by_test_id("new-memory").count() == 0
        p = watched.visit(f"memory/{hashes['billing']}?library=team")
        assert "PostgreSQL" in p.get_by_test_id("memory-content").inner_text()
        for control in ("memory-edit", "edit-save", "memory-delete"):
            assert p.get_by_test_id(control).count() == 0, control
        p = watched.visit("entity/team/Alice")
        for control in ("add-observation", "observation-correct", "observation-delete"):
            assert p.get_by_test_id(control).count() == 0, control
        p = watched.visit("history?library=team")
        assert p.get_by_test_id("history-entry").count() >= 1
        assert p.get_by_test_id("undo-button").count() == 0
        p = watched.visit("previews?library=team")
        assert p.get_by_test_id("preview-make").count() == 0
        # the page's own context, with its cookie and its CSRF token: the API still refuses
        statuses = p.evaluate("""async (hash) => {
            const s = await (await fetch('/api/session')).json();
            const headers = {'Content-Type': 'application/json', 'X-CSRF-Token': s.csrf};
            const call = (method, path, body) => fetch(path, {method, headers, credentials: 'same-origin',
                                                              body: JSON.stringify(body)}).then(r => r.status);
            return [await call('POST', '/api/memories', {library: 'team', content: 'forced by a reader'}),
                    await call('PATCH', '/api/memories/' + hash, {library: 'team', content: 'changed by a reader'}),
                    await call('DELETE', '/api/memories/' + hash + '?library=team', undefined),
                    await call('POST', '/api/previews', {library: 'team', operation: 'cleanup_duplicates', arguments: {}}),
                    s.csrf ? 1 : 0];
        }""", hashes["billing"])
        assert statuses == [403, 403, 403, 403, 1], statuses
        assert api(server, f"/api/memories/{hashes['billing']}", library="team").status_code == 401  # no cookie here
        watched.check()
    finally:
        watched.context.close()


def test_a_write_token_signs_in_and_writes_with_csrf(browser, guarded):
    server, tokens, hashes, _ = guarded
    watched = new_page(browser, server.base)
    watched.allowed_errors = ["403"]
    try:
        sign_in(watched, tokens["writer"])
        cookies = watched.context.cookies()
        session_cookie = next(c for c in cookies if c["name"] == f"memloci_session_{server.port}")
        assert session_cookie["httpOnly"] and session_cookie["sameSite"] == "Strict"
        p = watched.visit(f"memory/{hashes['deploy']}?library=team")
        p.get_by_test_id("edit-importance").select_option("high")
        before = watched.render_count()
        p.get_by_test_id("edit-save").click()
        watched.settle(before)
        assert "high" in p.get_by_test_id("memory-facts").inner_text()
        # without the CSRF header the same cookie cannot write
        status = p.evaluate("""h => fetch('/api/memories/' + h, {method: 'PATCH', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json'}, body: JSON.stringify({library: 'team', importance: 'low'})})
            .then(r => r.status)""", hashes["deploy"])
        assert status == 403
        before = watched.render_count()
        p.get_by_test_id("sign-out").click()
        watched.settle(before)
        assert p.get_by_test_id("signin-page").is_visible()
        watched.allowed_errors.append("401")
        assert p.evaluate("fetch('/api/memories?library=team').then(r => r.status)") == 401
        watched.check()
    finally:
        watched.context.close()


def test_a_revoked_token_ends_the_session_and_the_page_asks_to_sign_in_again(browser, guarded):
    server, tokens, hashes, home = guarded
    watched = new_page(browser, server.base)
    watched.allowed_errors = ["401"]
    try:
        sign_in(watched, tokens["brief"])
        p = watched.visit("memories?library=team")
        assert p.get_by_test_id("memory-row").count() >= 1
        memloci(home, "token", "revoke", "brief")
        # the next call the page makes (a live update as the agent writes, or this visit) is refused
        p = watched.visit("history?library=team")
        p.get_by_test_id("signin-page").wait_for()
        assert not p.get_by_test_id("nav").is_visible()
        assert "PostgreSQL" not in p.inner_text("body")
        watched.check()
    finally:
        watched.context.close()
