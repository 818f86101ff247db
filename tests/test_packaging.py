"""memloci installs like other tools: `python -m build` makes a wheel and an sdist that carry the
package data, and the wheel, installed into a clean virtual environment, runs `memloci serve`
for a real MCP client."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
DATA = ["memloci/search/data/minilm-tokenizer.json", "memloci/search/data/NOTICE",
        "memloci/http/dashboard/static/index.html"]  # the dashboard page, served from the wheel


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """Wheel and sdist built from a copy of the sources (the build writes build/ and egg-info
    beside what it builds; the working tree stays as it is)."""
    pytest.importorskip("build", reason="the build frontend is in the test extra: pip install -e '.[test]'")
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    # The tests, plus what a checkout that ran them holds (npm's packages, Python's caches; the
    # real node_modules is 200 MB, so a small stand-in): the sdist must leave those out.
    shutil.copytree(ROOT / "tests", src / "tests", symlinks=True,
                    ignore=shutil.ignore_patterns("node_modules", "__pycache__", ".pytest_cache", ".hypothesis"))
    for junk in ("conformance/node_modules/pkg/index.js", "__pycache__/conftest.cpython-311.pyc",
                 ".pytest_cache/v/cache/lastfailed", "fixtures/__pycache__/x.pyc"):
        (src / "tests" / junk).parent.mkdir(parents=True, exist_ok=True)
        (src / "tests" / junk).write_text("")
    out = src / "dist"
    # The test extra installs the build backend, so the build needs no network; without it,
    # an isolated build fetches the backend pyproject.toml names.
    try:
        backend = int(importlib.metadata.version("setuptools").split(".")[0]) >= 77
    except importlib.metadata.PackageNotFoundError:
        backend = False
    isolation = ["--no-isolation"] if backend else []
    result = subprocess.run([sys.executable, "-m", "build", *isolation, "--outdir", str(out), str(src)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def test_build_makes_a_wheel_and_an_sdist_with_the_package_data(dist):
    wheels, sdists = list(dist.glob("memloci-*.whl")), list(dist.glob("memloci-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    for data in DATA:
        assert data in names
    assert "memloci/install/jsonedit.py" in names and "memloci/__main__.py" in names
    assert not [n for n in names if n.startswith("tests/")]
    entry_points = zipfile.ZipFile(wheels[0]).read(
        next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "memloci = memloci.cli.main:main" in entry_points
    metadata = zipfile.ZipFile(wheels[0]).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert not [r for r in runtime if any(t in r for t in ("pytest", "hypothesis", "build"))]  # no test tools
    with tarfile.open(sdists[0]) as sdist:
        members = sdist.getnames()
    for data in DATA:
        assert any(m.endswith("src/" + data) for m in members)
    # The test suite runs from the sdist: its files, the data it reads, the conformance client.
    top = members[0].split("/")[0]
    inside = {m.split("/", 1)[1] for m in members if "/" in m}
    expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("*")
                if p.is_file() and "node_modules" not in p.parts and "__pycache__" not in p.parts
                and ".pytest_cache" not in p.parts and ".hypothesis" not in p.parts}
    assert expected <= inside, sorted(expected - inside)[:10]
    for needed in ("tests/conftest.py", "tests/conformance/client.mjs", "tests/conformance/package-lock.json",
                   "tests/golden_vault/Daily", "tests/fixtures/importers"):
        assert any(m == f"{top}/{needed}" or m.startswith(f"{top}/{needed}/") for m in members), needed
    assert not [m for m in members if "node_modules" in m or "__pycache__" in m or ".pytest_cache" in m]


def test_the_wheel_in_a_clean_venv_serves_a_real_client(dist, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    # The wheel's dependencies come from this environment's site-packages, added as a plain
    # path: its .pth files (the editable install of the working tree) are not run, so
    # `memloci` can only come from the wheel.
    site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(dist.glob("memloci-*.whl"))
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(wheel)], check=True, timeout=300)

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "home")
    probe = subprocess.run([str(py), "-c", (
        "import json, memloci; from memloci.search.embedder import create_embedder\n"
        "vec = create_embedder('minilm-exact').embed(['the tokenizer ships in the wheel'])\n"
        "print(json.dumps({'file': memloci.__file__, 'dim': int(vec.shape[1])}))")],
        capture_output=True, text=True, env=env, timeout=300)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(found["file"]).is_relative_to(venv) and found["dim"] == 384

    # The installed command writes itself into a client's config and that entry serves.
    config = tmp_path / "mcp.json"
    done = subprocess.run([str(venv / "bin" / "memloci"), "install", "cursor", "--config", str(config)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    entry = json.loads(config.read_text())["mcpServers"]["memloci"]
    assert entry["command"] == str(venv / "bin" / "memloci")
    env["MEMLOCI_EMBEDDER"] = "none"

    async def main():
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    tools = anyio.run(main)
    assert {"create_entities", "read_graph", "search_nodes"} <= set(tools)
