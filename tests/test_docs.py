"""The documentation stays true and builds: the README is a front door of at most 300 lines whose
links lead somewhere, every page is in the site's nav, the tool reference is what the tool
definitions say, and `mkdocs build --strict` (what `make docs` runs) passes without a warning."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for heading in ("## Two commands", "## Set up your agents", "## Documentation"):
        assert heading in readme.splitlines(), heading
    assert "make run" in readme and "make test-full" in readme and "memloci install" in readme


def test_every_relative_link_of_the_readme_leads_to_a_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", readme)
             if not re.match(r"[a-z]+:", target) and not target.startswith("#")]
    assert links, "the README links into the documentation"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def nav_pages(nav: list) -> set[str]:
    pages: set[str] = set()
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            pages |= nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert nav_pages(config["nav"]) == pages
    assert config["theme"]["font"] is False  # no web fonts: the site works offline


def test_the_tool_reference_is_what_the_tool_definitions_say():
    """docs/reference/tools.md is written by docs/gen_tools.py (`make docs`); a tool, argument,
    default or range changed in the code and not in the page fails here."""
    spec = importlib.util.spec_from_file_location("gen_tools", DOCS / "gen_tools.py")
    assert spec and spec.loader
    gen_tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_tools)
    written = gen_tools.render()
    assert (DOCS / "reference" / "tools.md").read_text(encoding="utf-8") == written, \
        "docs/reference/tools.md differs from the tool definitions: run `make docs`"
    from memloci.mcp.server import KNOWN_TOOLS

    assert {name for name in KNOWN_TOOLS if f"### `{name}`" not in written} == set()


@pytest.mark.full
def test_the_site_builds_strictly_without_a_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    output = done.stdout + done.stderr
    assert "WARNING" not in output, output[-3000:]
    assert (tmp_path / "site" / "reference" / "tools" / "index.html").exists()
    architecture = (tmp_path / "site" / "architecture" / "index.html").read_text(encoding="utf-8")
    assert "Code map" in architecture  # ARCHITECTURE.md is included, not copied


def test_every_make_target_the_docs_name_is_in_the_makefile():
    """`make run`, `make test-full`, `make docs`, ... in a code span: each is a target of the Makefile."""
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))
    texts = [(ROOT / "README.md").read_text(encoding="utf-8"), *(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))]
    named = {m for text in texts for m in re.findall(r"`make (?:-\S+ )*([a-z][a-z-]*)", text)}
    assert {"run", "test", "test-full", "docs"} <= named
    assert named <= targets, named - targets
