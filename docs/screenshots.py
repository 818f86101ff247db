"""Screenshots of the dashboard for the docs: `python docs/screenshots.py` (by hand, not in tests).

It starts `memloci serve --transport http` on a loopback port with a small sample library (a
few memories, entities with relations, a note with a Markdown body), fills it over MCP, drives
the page in headless Chromium (Debian's `chromium`, through Playwright's Python client) and
writes docs/images/dashboard-*.png at 1280x800.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import sync_playwright

IMAGES = Path(__file__).resolve().parent / "images"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NOTE = """---
type: document
tags: [ops]
---
# Release runbook

How a release goes out. The **release train** leaves every second Monday.

1. Freeze `main` on Friday.
2. Tag the release and let CI build it.
3. Watch the dashboards for an hour.

See also [[Billing]].
"""
MEMORIES = [
    ("We chose PostgreSQL 16 for the billing service: row-level locks and logical replication", ["db", "decision"], "decision", "high"),
    ("Alice prefers dark mode and a 4-space indent in every editor", ["preference"], "fact", "medium"),
    ("Deploys go out on Tuesdays after the standup, never on Fridays", ["ops"], "decision", "high"),
    ("The nightly build takes about 40 minutes; the cache cuts it to 12", ["ci"], "note", "low"),
    ("Use uv to manage Python environments.", ["tooling"], "note", "medium"),
    ("use uv to manage python environments", ["python"], "note", "medium"),
    ("Bob is on call this week; page him for billing incidents", ["ops", "on-call"], "note", "medium"),
    ("Invoices are kept for ten years, as the tax office asks", ["billing", "compliance"], "fact", "critical"),
]
ENTITIES = [
    {"name": "Alice", "entityType": "person", "observations": ["leads the billing team", "likes tea", "based in Lisbon"]},
    {"name": "Bob", "entityType": "person", "observations": ["on call this week", "knows the payment gateway"]},
    {"name": "Carol", "entityType": "person", "observations": ["joined in spring"]},
    {"name": "Billing", "entityType": "service", "observations": ["written in Go", "stores invoices in PostgreSQL"]},
    {"name": "PostgreSQL", "entityType": "technology", "observations": ["version 16"]},
    {"name": "Payments", "entityType": "service", "observations": ["talks to the card processor"]},
]
RELATIONS = [("Alice", "Bob", "works_with"), ("Bob", "Carol", "mentors"), ("Alice", "Billing", "owns"),
             ("Billing", "PostgreSQL", "uses"), ("Billing", "Payments", "calls"), ("Bob", "Payments", "maintains")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def fill(url: str) -> None:
    async with httpx2.AsyncClient(timeout=60) as http, streamable_http_client(url, http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as s:
            await s.initialize()
            for content, tags, kind, importance in MEMORIES:
                await s.call_tool("store_memory", {"library": "team", "content": content, "tags": tags,
                                                   "memory_type": kind, "importance": importance})
            await s.call_tool("create_entities", {"library": "team", "entities": ENTITIES})
            await s.call_tool("create_relations", {"library": "team", "relations": [
                {"from": a, "to": b, "relationType": t} for a, b, t in RELATIONS]})
            reply = await s.call_tool("store_memory", {"library": "team", "content": "The release train leaves every second Monday",
                                                       "tags": ["ops", "release"]})
            stored = json.loads(reply.content[0].text)
            edited = stored.get("content_hash") or stored["memory"]["content_hash"]
            await s.call_tool("delete_memory", {"library": "team", "content_hash": edited})


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "notes").mkdir()
        (home / "notes" / "Release runbook.md").write_text(NOTE)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
        env.update(MEMLOCI_HOME=str(home), MEMLOCI_EMBEDDER="none")
        server = subprocess.Popen([sys.executable, "-m", "memloci", "serve", "--transport", "http", "--port", str(port),
                                   "--libraries", f"team:{home / 'team.db'},notes:{home / 'notes'}"],
                                  env=env, stdout=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    sys.exit("the server did not start")
                time.sleep(0.2)
            anyio.run(fill, f"{base}/mcp")
            shoot(base)
        finally:
            server.terminate()
            server.wait(timeout=60)


def shoot(base: str) -> None:
    with sync_playwright() as p:
        args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1280, "height": 800}, color_scheme="light")

        def visit(route: str, name: str, then=None) -> None:
            page.goto(f"{base}/#/{route}")
            page.wait_for_function("() => document.getElementById('main').dataset.state === 'ready'")
            if then:
                then()
            page.wait_for_timeout(300)
            page.screenshot(path=str(IMAGES / f"dashboard-{name}.png"))
            print(f"docs/images/dashboard-{name}.png")

        def expand() -> None:
            page.locator("[data-testid=graph-node][data-name=Bob]").click()
            page.locator("[data-testid=graph-node][data-name=Carol]").wait_for()
            page.get_by_test_id("graph-fit").click()

        def preview() -> None:
            page.get_by_test_id("preview-make-submit").click()
            page.get_by_test_id("preview-page").wait_for()

        visit("search?q=billing&library=*", "search")
        visit("memories?library=team&sort=importance", "memories")
        visit("entity/team/Alice", "entity")
        visit("entity/notes/Release%20runbook", "note")
        visit("graph/team/Alice", "graph", expand)
        visit("history?library=team", "history")
        visit("previews?library=team", "previews", preview)
        visit("health", "health")
        browser.close()


if __name__ == "__main__":
    main()
