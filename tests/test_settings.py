"""Settings: every environment variable memloci reads is parsed once, in core/settings.py, and passed down."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memloci.core.errors import ValidationError
from memloci.core.settings import Settings, data_home

SRC = Path(__file__).resolve().parents[1] / "src" / "memloci"


def test_defaults_from_an_empty_environment_not_the_process_one(monkeypatch):
    monkeypatch.setenv("MEMLOCI_HOME", "/somewhere/else")
    monkeypatch.setenv("MEMLOCI_EMBEDDER", "none")
    s = Settings.from_env({})
    assert s.home == Path.home() / ".local" / "share" / "memloci" and not s.home_set
    assert (s.config, s.libraries, s.tools, s.schema) == (None, None, None, None)
    assert (s.embedder, s.embedder_api_key, s.embedder_multilingual) == ("minilm", None, True)
    assert s.model_cache == Path.home() / ".cache" / "memloci" / "models"
    assert s.cache_for("locomo-lab") == Path.home() / ".cache" / "memloci" / "locomo-lab"
    assert (s.log_level, s.hook_deadline, s.http_host, s.http_port) == (None, None, None, None)
    assert s.child_env() == {}
    assert Settings.defaults() == s  # what library use gets without settings: never the process's environment


def test_each_variable_is_parsed(tmp_path):
    env = {
        "MEMLOCI_HOME": "~/mem", "MEMLOCI_CONFIG": str(tmp_path / "c.toml"),
        "MEMLOCI_LIBRARIES": "work:/w.db", "MEMLOCI_TOOLS": "graph", "MEMLOCI_SCHEMA": "strict",
        "MEMLOCI_EMBEDDER": "openai:http://localhost:1/v1#m", "MEMLOCI_EMBEDDER_API_KEY": "k3y",
        "MEMLOCI_EMBEDDER_MULTILINGUAL": " Off ", "MEMLOCI_CACHE": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"), "MEMLOCI_LOG_LEVEL": "debug", "MEMLOCI_HOOK_DEADLINE": "7.5",
        "MCP_SERVER_HOST": "::1", "MCP_SERVER_PORT": "9100",
    }
    s = Settings.from_env(env)
    assert s.home == Path.home() / "mem" and s.home_set
    assert s.config == tmp_path / "c.toml"
    assert (s.libraries, s.tools, s.schema) == ("work:/w.db", "graph", "strict")
    assert (s.embedder, s.embedder_api_key, s.embedder_multilingual) == ("openai:http://localhost:1/v1#m", "k3y", False)
    assert "k3y" not in repr(s)  # a key never reaches a log line by way of the settings
    assert s.model_cache == tmp_path / "cache" and s.cache_for("locomo-lab") == tmp_path / "cache" / "locomo-lab"
    assert (s.log_level, s.hook_deadline, s.http_host, s.http_port) == ("DEBUG", 7.5, "::1", 9100)
    without_cache = Settings.from_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert without_cache.model_cache == tmp_path / "xdg" / "memloci" / "models"


def test_the_data_folder_follows_the_xdg_rule(tmp_path):
    assert data_home({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "memloci"
    assert data_home({"XDG_DATA_HOME": "relative"}) == Path.home() / ".local" / "share" / "memloci"
    assert data_home({"XDG_DATA_HOME": str(tmp_path), "MEMLOCI_HOME": str(tmp_path / "m")}) == tmp_path / "m"
    assert Settings.from_env({"XDG_DATA_HOME": str(tmp_path)}).home_set is False


def test_empty_means_unset_except_the_embedder():
    blank = {name: "" for name in ("MEMLOCI_HOME", "MEMLOCI_CONFIG", "MEMLOCI_LIBRARIES", "MEMLOCI_TOOLS",
                                   "MEMLOCI_SCHEMA", "MEMLOCI_CACHE", "MEMLOCI_LOG_LEVEL", "MEMLOCI_HOOK_DEADLINE",
                                   "MEMLOCI_EMBEDDER_MULTILINGUAL", "MCP_SERVER_HOST", "MCP_SERVER_PORT")}
    s = Settings.from_env(blank)
    assert s == Settings.from_env({})
    assert Settings.from_env({"MEMLOCI_EMBEDDER": ""}).embedder == ""  # set and empty: no embedder, as before


@pytest.mark.parametrize("name, value, rule", [
    ("MEMLOCI_EMBEDDER_MULTILINGUAL", "maybe", "is not a switch"),
    ("MEMLOCI_EXTRACT", "sometimes", "is not a switch"),
    ("MEMLOCI_LOG_LEVEL", "loud", "is not a log level"),
    ("MEMLOCI_LOG_LEVEL", "10", "is not a log level"),
    ("MEMLOCI_HOOK_DEADLINE", "soon", "is not a number of seconds"),
    ("MEMLOCI_HOOK_DEADLINE", "-1", "is not a number of seconds"),
    ("MEMLOCI_HOOK_DEADLINE", "nan", "is not a number of seconds"),
    ("MEMLOCI_HOOK_DEADLINE", "inf", "is not a number of seconds"),
    ("MCP_SERVER_PORT", "http", "is not a port number"),
    ("MCP_SERVER_PORT", "70000", "is not a port number"),
    ("MCP_SERVER_PORT", "0", "is not a port number"),
])
def test_a_malformed_variable_is_refused_by_name(name, value, rule):
    with pytest.raises(ValidationError, match=f"^{name}: '?{re.escape(value)}'? {rule}"):
        Settings.from_env({name: value})


@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("ON", True), ("0", False),
                                             ("false", False), ("no", False)])
def test_the_multilingual_switch_words(value, expected):
    assert Settings.from_env({"MEMLOCI_EMBEDDER_MULTILINGUAL": value}).embedder_multilingual is expected
    assert Settings.from_env({"MEMLOCI_EXTRACT": value}).extract is expected
    assert Settings.from_env({}).extract is None  # unset: the config file decides, else on


def test_flags_overlay_and_settings_are_frozen(tmp_path):
    base = Settings.from_env({"MEMLOCI_LIBRARIES": "a:/a.db", "MEMLOCI_TOOLS": "graph", "PATH": "/bin"})
    s = base.with_flags(home=tmp_path, config=tmp_path / "c.toml", libraries="b:/b.db", schema="strict")
    assert (s.home, s.home_set, s.config, s.libraries, s.tools, s.schema) == \
        (tmp_path, True, tmp_path / "c.toml", "b:/b.db", "graph", "strict")
    assert base.with_flags() is base and base.libraries == "a:/a.db"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.home = tmp_path / "other"  # type: ignore[misc]
    # A process memloci starts sees the same settings, flags included, and nothing is written here.
    assert s.child_env(EXTRA="1") == {"PATH": "/bin", "MEMLOCI_HOME": str(tmp_path), "EXTRA": "1",
                                      "MEMLOCI_CONFIG": str(tmp_path / "c.toml"), "MEMLOCI_LIBRARIES": "b:/b.db",
                                      "MEMLOCI_TOOLS": "graph", "MEMLOCI_SCHEMA": "strict"}


def test_the_registry_takes_its_settings_as_an_argument(tmp_path, monkeypatch):
    from memloci.app.config import default_specs
    from memloci.app.registry import LibraryRegistry

    monkeypatch.setenv("MEMLOCI_SCHEMA", "default")  # the process's own: not what the registry is given
    settings = Settings.from_env({"MEMLOCI_HOME": str(tmp_path), "MEMLOCI_SCHEMA": "strict"})
    [spec] = default_specs(settings)
    assert spec.path == tmp_path / "default.db"
    registry = LibraryRegistry(default_specs(settings), settings=settings)
    assert registry.get().schema.name == "strict"
    registry.close()
    with pytest.raises(ValidationError, match="MEMLOCI_SCHEMA"):
        LibraryRegistry([spec], settings=settings.with_flags(schema="stict"))


def test_command_line_flags_reach_the_command_without_touching_the_environment(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from memloci.cli.main import app

    for name in ("MEMLOCI_HOME", "MEMLOCI_CONFIG", "MEMLOCI_LIBRARIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # where it would go without the flag
    monkeypatch.setenv("MEMLOCI_EMBEDDER", "none")
    source = tmp_path / "memory.jsonl"
    source.write_text(json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": []}) + "\n")
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["--home", str(home), "import", "jsonl", str(source)])
    assert result.exit_code == 0, result.output
    assert (home / "default.db").is_file() and not (tmp_path / "xdg").exists()
    assert "MEMLOCI_HOME" not in os.environ
    monkeypatch.setenv("MEMLOCI_LOG_LEVEL", "loud")
    refused = CliRunner().invoke(app, ["--home", str(home), "stats"])
    assert refused.exit_code == 1 and "MEMLOCI_LOG_LEVEL: 'loud' is not a log level" in refused.output


def test_the_hook_logs_a_malformed_variable_and_still_exits_0(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "MEMLOCI_HOME": str(home), "MEMLOCI_EMBEDDER_MULTILINGUAL": "maybe"}
    done = subprocess.run([sys.executable, "-m", "memloci.hooks", "claude-code"], input=b"{}", env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0 and done.stderr == b""
    log = (home / "logs" / "hook.log").read_text()
    assert "MEMLOCI_EMBEDDER_MULTILINGUAL: 'maybe' is not a switch" in log


# -- the rule: no module reads or writes the environment but core/settings.py ---------------------

_ENV = re.compile(r"\bos\.(environ|getenv|putenv|unsetenv)\b|\bfrom os import [^\n]*\b(environ|getenv)\b")
_CHILD_ENV = re.compile(r"\{\*\*os\.environ\b|\bos\.environ\.items\(\)")  # a copy handed to a child process


def _allowed(rel: str, line: str) -> bool:
    if rel == "core/settings.py":
        return True
    if rel in ("install/clients.py", "workspace/agents.py"):  # where other programs keep their configs and rules
        return True  # (APPDATA, CODEX_HOME, HOME, ...)
    if rel.startswith("bench/"):  # benchmarks set up their servers' environments explicitly
        return bool(_CHILD_ENV.search(line))
    return False


def test_no_module_outside_settings_reads_or_writes_the_environment():
    found, allowed = [], []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _ENV.search(line):
                (allowed if _allowed(rel, line) else found).append(f"{rel}:{number}: {line.strip()}")
    assert not found, "read the variable in core/settings.py and pass Settings down:\n" + "\n".join(found)
    assert any(a.startswith("core/settings.py:") for a in allowed)  # the scan sees what it looks for


def test_install_carries_the_home_flag_to_the_client(tmp_path, monkeypatch):
    """`memloci --home H install ...` writes `--home H` into the client's command, as
    `MEMLOCI_HOME=H memloci install ...` does: the flag reaches install without the environment."""
    from typer.testing import CliRunner

    from memloci.cli.main import app

    for name in ("MEMLOCI_HOME", "MEMLOCI_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    home, cfg = tmp_path / "mhome", tmp_path / "settings.json"
    result = CliRunner().invoke(app, ["--home", str(home), "install", "claude-code", "--config", str(cfg), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert '"--home",' in result.output and f'"{home}",' in result.output
    assert not cfg.exists() and not home.exists()  # a dry run changes nothing
