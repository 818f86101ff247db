"""`memloci install` / `uninstall` on real config files of the seven clients, run as real
processes: other servers and every byte outside the entry kept, a backup written first, the
result parses, --dry-run writes nothing, uninstall gives back the original bytes, and a file
memloci cannot read is refused untouched."""

from __future__ import annotations

import difflib
import json
import os
import resource
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import MemlociError
from memloci.install import jsonedit
from memloci.service.facade import MemoryService

# Config files as people and clients leave them: other servers, other keys, comments and
# trailing commas where the format allows them, odd indentation, CRLF line ends.
FIXTURES = {
    "claude-desktop": ("claude_desktop_config.json", """{
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop"]
        }
    }
}
"""),
    "claude-code": (".claude.json", """{
\t"numStartups": 12,
\t"projects": {"/home/me/app": {"mcpServers": {}, "allowedTools": []}},
\t"mcpServers": {
\t\t"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}
\t},
\t"theme": "dark"
}"""),
    "cursor": ("mcp.json", '{\r\n  "mcpServers": {\r\n    "browser": {\r\n      "command": "npx",\r\n'
                           '      "args": ["@playwright/mcp@latest"]\r\n    }\r\n  }\r\n}\r\n'),
    "windsurf": ("mcp_config.json", '{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}\n'),
    "vscode": ("mcp.json", """{
  // Servers for this workspace
  "inputs": [
    {"type": "promptString", "id": "key", "password": true},
  ],
  "servers": {
    /* the team's shared one */
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]}, // keep
  },
}
"""),
    "gemini": ("settings.json", """{
   "theme": "Dracula",
   // tools from npm
   "mcpServers": {
      "weather": {
         "command": "node",
         "args": ["weather.js"],
         "timeout": 5000
      }
   }
}
"""),
    "codex": ("config.toml", """# Codex settings
model = "o3"
approval_policy = "on-request"

[mcp_servers.docs]
command = "npx"   # the docs server
args = ["-y", "docs-mcp"]

[profiles.fast]
model = "o4-mini"
"""),
}
SERVERS_KEY = {"vscode": "servers", "codex": "mcp_servers"}
OTHER = {"claude-desktop": "filesystem", "claude-code": "github", "cursor": "browser", "windsurf": "git",
         "vscode": "fetch", "gemini": "weather", "codex": "docs"}
BROKEN = {"json": '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  \n', "toml": 'model = "o3"\n[mcp_servers.a\n'}


def memloci(tmp_path: Path, *args: str, limit_fsize: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLOCI_", "CODEX_"))}
    env.update(MEMLOCI_HOME=str(tmp_path / "mhome"), HOME=str(tmp_path / "userhome"), XDG_CONFIG_HOME="")

    def limit():
        if limit_fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

    return subprocess.run([sys.executable, "-m", "memloci", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60, preexec_fn=limit)


@pytest.fixture
def in_process(tmp_path, monkeypatch):
    """`memloci ARGS` run in this process (typer's CliRunner), in the environment `memloci()`
    gives a process: for tests of what install decides, where a process would only add time."""
    from typer.testing import CliRunner

    from memloci.cli.main import app

    for name in [k for k in os.environ if k.startswith(("MEMLOCI_", "CODEX_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMLOCI_HOME", str(tmp_path / "mhome"))
    monkeypatch.setenv("HOME", str(tmp_path / "userhome"))
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    monkeypatch.chdir(tmp_path)

    def run(_tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
        result = CliRunner().invoke(app, list(args))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)

    return run


def parse(client: str, text: str):
    if client == "codex":
        return tomllib.loads(text)
    return jsonedit.to_py(jsonedit.parse(text))


def only_insertions(before: str, after: str) -> bool:
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    return all(tag in ("equal", "insert") for tag, *_ in ops)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("client", list(FIXTURES))
def test_install_keeps_the_file_and_uninstall_gives_it_back(tmp_path, client):
    name, original = FIXTURES[client]
    path = write(tmp_path / "cfg" / name, original)

    dry = memloci(tmp_path, "install", client, "--config", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+" in dry.stdout and "memloci" in dry.stdout and "serve" in dry.stdout
    assert path.read_bytes() == original.encode() and not (tmp_path / "cfg" / (name + ".bak")).exists()

    done = memloci(tmp_path, "install", client, "--config", str(path))
    assert done.returncode == 0, done.stderr
    after = path.read_bytes().decode()
    bak = path.with_name(name + ".bak")
    assert bak.read_bytes() == original.encode()  # the backup came first and holds the original
    assert only_insertions(original, after)  # every byte outside the entry is where it was
    before_doc, doc = parse(client, original), parse(client, after)
    key = SERVERS_KEY.get(client, "mcpServers")
    assert doc[key][OTHER[client]] == before_doc[key][OTHER[client]]
    assert {k: v for k, v in doc.items() if k != key} == {k: v for k, v in before_doc.items() if k != key}
    entry = doc[key]["memloci"]
    assert Path(entry["command"]).is_absolute() and os.access(entry["command"], os.X_OK)
    assert "serve" in entry["args"]
    if client in ("vscode", "claude-code"):
        assert entry["type"] == "stdio"
    if client not in ("vscode", "gemini"):  # plain JSON stays plain JSON
        if client != "codex":
            json.loads(after)

    again = memloci(tmp_path, "install", client, "--config", str(path))
    assert again.returncode == 0 and "nothing to do" in again.stdout and path.read_bytes().decode() == after

    gone = memloci(tmp_path, "uninstall", client, "--config", str(path))
    assert gone.returncode == 0, gone.stderr
    assert path.read_bytes() == original.encode()
    assert sorted(p.name for p in path.parent.iterdir()) == [name]  # the backup went with it


@pytest.mark.parametrize("client", list(FIXTURES))
def test_a_file_that_does_not_parse_is_refused_untouched(tmp_path, client):
    name, _ = FIXTURES[client]
    broken = BROKEN["toml" if client == "codex" else "json"]
    path = write(tmp_path / name, broken)
    result = memloci(tmp_path, "install", client, "--config", str(path))
    assert result.returncode == 1
    assert "does not parse" in result.stderr and "line " in result.stderr and "column " in result.stderr
    assert path.read_bytes() == broken.encode()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "mhome") == [name]


def test_uninstall_after_other_edits_takes_out_only_the_entry(tmp_path):
    name, original = FIXTURES["vscode"]
    path = write(tmp_path / name, original)
    assert memloci(tmp_path, "install", "vscode", "--config", str(path)).returncode == 0
    edited = path.read_text().replace('"password": true', '"password": false')
    edited = edited.replace("// keep", "// keep this one")
    path.write_text(edited)
    assert memloci(tmp_path, "uninstall", "vscode", "--config", str(path)).returncode == 0
    expected = original.replace('"password": true', '"password": false').replace("// keep", "// keep this one")
    assert path.read_text() == expected
    assert path.with_name(name + ".bak").read_text() == original  # install's backup of the original stays
    assert path.with_name(name + ".uninstall.bak").read_text() == edited  # the edited file, before the removal


def test_codex_uninstall_after_other_edits(tmp_path):
    name, original = FIXTURES["codex"]
    path = write(tmp_path / name, original)
    assert memloci(tmp_path, "install", "codex", "--config", str(path)).returncode == 0
    path.write_text(path.read_text().replace('model = "o3"', 'model = "o3-pro"'))
    assert memloci(tmp_path, "uninstall", "codex", "--config", str(path)).returncode == 0
    assert path.read_text() == original.replace('model = "o3"', 'model = "o3-pro"')


def test_a_different_entry_needs_force_and_uninstall_brings_it_back(tmp_path):
    original = '{\n  "mcpServers": {\n    "memloci": {"command": "/old/memloci", "args": ["serve"]}\n  }\n}\n'
    path = write(tmp_path / "mcp.json", original)
    refused = memloci(tmp_path, "install", "cursor", "--config", str(path))
    assert refused.returncode == 1 and "CONFLICT" in refused.stderr and "--force" in refused.stderr
    assert "-    \"memloci\": {\"command\": \"/old/memloci\"" in refused.stderr  # the diff --force would apply
    assert path.read_text() == original
    forced = memloci(tmp_path, "install", "cursor", "--config", str(path), "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(path.read_text())["mcpServers"]["memloci"]["command"] != "/old/memloci"
    assert memloci(tmp_path, "uninstall", "cursor", "--config", str(path)).returncode == 0
    assert path.read_text() == original


HOOK_FIXTURE = """{
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PostToolUse": [
      {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
    ]
  }
}
"""


@pytest.mark.parametrize("client,events", [
    ("claude-code", {"PostToolUse", "PreCompact", "SessionEnd", "SessionStart"}),
    ("cursor", {"afterFileEdit"}),
    ("windsurf", {"post_write_code"}),
    ("codex", {"PostToolUse", "PreCompact"}),
])
def test_hooks_join_the_clients_hook_file_and_leave_with_uninstall(tmp_path, client, events):
    cfg = tmp_path / ("config.toml" if client == "codex" else "mcp.json")
    hooks = write(tmp_path / "hooks.json", HOOK_FIXTURE)
    result = memloci(tmp_path, "install", client, "--config", str(cfg), "--hooks-config", str(hooks), "--hooks")
    assert result.returncode == 0, result.stderr
    doc = json.loads(hooks.read_text())
    assert doc["permissions"] == {"allow": ["Bash(npm test)"]}
    assert set(doc["hooks"]) == events | {"PostToolUse"}
    assert doc["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "prettier --write"
    for event in events:
        added = json.dumps(doc["hooks"][event][-1])
        assert f"hook {client}" in added and str(tmp_path / "mhome") in added
    assert only_insertions(HOOK_FIXTURE, hooks.read_text())
    assert memloci(tmp_path, "uninstall", client, "--config", str(cfg), "--hooks-config", str(hooks)).returncode == 0
    assert hooks.read_text() == HOOK_FIXTURE and not cfg.exists()


def test_gemini_keeps_server_and_hooks_in_one_settings_file(tmp_path):
    name, original = FIXTURES["gemini"]
    path = write(tmp_path / name, original)
    assert memloci(tmp_path, "install", "gemini", "--config", str(path), "--hooks").returncode == 0
    doc = parse("gemini", path.read_text())
    assert "memloci" in doc["mcpServers"]
    assert set(doc["hooks"]) == {"AfterTool", "PreCompress", "SessionEnd", "SessionStart"}
    assert doc["hooks"]["AfterTool"][0]["matcher"]
    assert "matcher" not in doc["hooks"]["SessionStart"][0]  # every source: startup, resume, clear
    assert memloci(tmp_path, "uninstall", "gemini", "--config", str(path)).returncode == 0
    assert path.read_text() == original


def test_clients_without_hooks_refuse_the_hooks_option(tmp_path):
    for client in ("claude-desktop", "vscode"):
        result = memloci(tmp_path, "install", client, "--config", str(tmp_path / "x.json"), "--hooks")
        assert result.returncode == 1 and "no hooks" in result.stderr
    assert not (tmp_path / "x.json").exists()


def test_project_scope_creates_and_removes_its_files(tmp_path):
    project = tmp_path / "app"
    project.mkdir()
    result = memloci(tmp_path, "install", "cursor", "--scope", "project", "--project-dir", str(project), "--hooks")
    assert result.returncode == 0, result.stderr
    assert json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["memloci"]
    assert json.loads((project / ".cursor" / "hooks.json").read_text())["version"] == 1
    assert memloci(tmp_path, "uninstall", "cursor", "--scope", "project", "--project-dir", str(project)).returncode == 0
    assert list(project.iterdir()) == []  # no file, no backup, no folder left behind


def test_scopes_and_options_are_checked(tmp_path):
    cases = [
        (["install", "windsurf", "--scope", "project"], "only user scope"),
        (["install", "cursor", "--scope", "team"], "--scope: 'team' is not one of user, project"),
        (["install", "cursour"], "did you mean 'cursor'"),
        (["install", "cursor", "--url", "http://x/mcp"], "--url goes with --transport http"),
        (["install", "cursor", "--transport", "http", "--token", "a", "--token-env", "B"], "give one of them"),
        (["install", "claude-desktop", "--transport", "http"], "stdio servers only"),
        (["install", "cursor", "--name", "bad name"], "--name"),
    ]
    for args, message in cases:
        result = memloci(tmp_path, *args)
        assert result.returncode == 1 and message in result.stderr, (args, result.stderr)
    assert not (tmp_path / "userhome").exists()


def test_http_entries_use_each_clients_header_and_env_forms(tmp_path):
    url = "http://127.0.0.1:8123/mcp"
    forms = {
        "cursor": ({"url": url, "headers": {"Authorization": "Bearer ${env:MEMLOCI_TOKEN}"}}),
        "windsurf": ({"serverUrl": url, "headers": {"Authorization": "Bearer ${env:MEMLOCI_TOKEN}"}}),
        "claude-code": ({"type": "http", "url": url, "headers": {"Authorization": "Bearer ${MEMLOCI_TOKEN}"}}),
        "vscode": ({"type": "http", "url": url, "headers": {"Authorization": "Bearer ${env:MEMLOCI_TOKEN}"}}),
        "gemini": ({"httpUrl": url, "headers": {"Authorization": "Bearer ${MEMLOCI_TOKEN}"}}),
        "codex": ({"url": url, "bearer_token_env_var": "MEMLOCI_TOKEN"}),
    }
    for client, expected in forms.items():
        path = tmp_path / f"{client}.{'toml' if client == 'codex' else 'json'}"
        result = memloci(tmp_path, "install", client, "--config", str(path), "--transport", "http",
                         "--url", url, "--token-env", "MEMLOCI_TOKEN")
        assert result.returncode == 0, result.stderr
        assert parse(client, path.read_text())[SERVERS_KEY.get(client, "mcpServers")]["memloci"] == expected
    literal = memloci(tmp_path, "install", "codex", "--config", str(tmp_path / "lit.toml"), "--transport", "http",
                      "--token", "s3cret")
    assert literal.returncode == 0
    assert tomllib.loads((tmp_path / "lit.toml").read_text())["mcp_servers"]["memloci"]["http_headers"] == {
        "Authorization": "Bearer s3cret"}
    assert (tmp_path / "lit.toml").stat().st_mode & 0o077 == 0  # a new file holding a token is private


def test_a_link_as_config_file_is_refused(tmp_path):
    real = write(tmp_path / "real.json", '{"mcpServers": {}}\n')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = memloci(tmp_path, "install", "cursor", "--config", str(link))
    assert result.returncode == 1 and "symbolic link" in result.stderr
    assert link.is_symlink() and real.read_text() == '{"mcpServers": {}}\n'


def test_a_link_as_config_folder_is_refused_as_a_linked_file_is(tmp_path, in_process):
    """~/.cursor -> elsewhere: install and uninstall refuse to write through it, naming the link and
    its target, whether the path is the client's usual one, a --config under home, or a hooks file."""
    home, outside = tmp_path / "userhome", tmp_path / "elsewhere"
    home.mkdir()
    outside.mkdir()
    (home / ".cursor").symlink_to(outside)
    for args in (["install", "cursor"], ["install", "cursor", "--config", str(home / ".cursor" / "mcp.json")],
                 ["install", "cursor", "--hooks", "--config", str(tmp_path / "mcp.json")]):
        result = in_process(tmp_path, *args)
        assert result.returncode == 1, (args, result.stdout)
        assert f"{home / '.cursor'} is a symbolic link (to {outside})" in result.stderr, (args, result.stderr)
        assert f"--config {outside.resolve() / ('hooks.json' if '--hooks' in args else 'mcp.json')}" in result.stderr
    assert list(outside.iterdir()) == [] and not (tmp_path / "mcp.json").exists()
    there = write(outside / "mcp.json", '{"mcpServers": {"memloci": {"command": "x"}}}\n')
    refused = in_process(tmp_path, "uninstall", "cursor")
    assert refused.returncode == 1 and "is a symbolic link" in refused.stderr
    assert there.read_text() == '{"mcpServers": {"memloci": {"command": "x"}}}\n'
    there.unlink()
    # a deeper folder too (Windsurf's ~/.codeium/windsurf), and the real path is taken
    (outside / "windsurf").mkdir()
    (home / ".codeium").mkdir()
    (home / ".codeium" / "windsurf").symlink_to(outside / "windsurf")
    assert "is a symbolic link" in in_process(tmp_path, "install", "windsurf").stderr
    done = in_process(tmp_path, "install", "cursor", "--config", str(outside / "mcp.json"))
    assert done.returncode == 0 and (outside / "mcp.json").is_file()


def test_project_scope_refuses_a_folder_that_leads_outside(tmp_path):
    project, outside = tmp_path / "app", tmp_path / "elsewhere"
    project.mkdir()
    outside.mkdir()
    (project / ".cursor").symlink_to(outside)
    result = memloci(tmp_path, "install", "cursor", "--scope", "project", "--project-dir", str(project))
    assert result.returncode == 1 and "leads out of the project" in result.stderr
    assert list(outside.iterdir()) == []


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path):
    # A real failure: the process may not write files larger than the original (RLIMIT_FSIZE),
    # so the backup succeeds and the new file's write fails half way.
    name, original = FIXTURES["claude-desktop"]
    path = write(tmp_path / name, original)
    result = memloci(tmp_path, "install", "claude-desktop", "--config", str(path), limit_fsize=len(original) + 10)
    assert result.returncode == 1 and "put back" in result.stderr, result.stderr
    assert path.read_bytes() == original.encode()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # confine.atomic_write's temp files


def test_a_backup_that_is_not_ours_is_kept(tmp_path):
    name, original = FIXTURES["windsurf"]
    path = write(tmp_path / name, original)
    mine = write(tmp_path / (name + ".bak"), "a person's own backup\n")
    assert memloci(tmp_path, "install", "windsurf", "--config", str(path)).returncode == 0
    assert mine.read_text() == "a person's own backup\n"
    assert (tmp_path / (name + ".bak.1")).read_text() == original


@pytest.mark.parametrize("edit", [False, True])
def test_the_backup_keeps_the_persons_first_original_across_installs(tmp_path, in_process, edit):
    """FILE.bak holds the file as it was before memloci's first install, whatever installs come
    later: one that changes nothing writes no backup, a later one never replaces FILE.bak (bytes
    memloci left need none; a person's edits since go to FILE.bak.1), and uninstalling everything
    gives back the original, or the person's edited file, with FILE.bak removed only then."""
    name, original = FIXTURES["cursor"]
    path = write(tmp_path / "cfg" / name, original)
    bak = path.with_name(name + ".bak")
    assert in_process(tmp_path, "install", "cursor", "--config", str(path)).returncode == 0
    assert bak.read_bytes() == original.encode()
    again = in_process(tmp_path, "install", "cursor", "--config", str(path))
    assert "nothing to do" in again.stdout and "(backup:" not in again.stdout
    edited = path.read_bytes().decode()
    if edit:  # the person changes the other server between the installs
        edited = edited.replace('"npx"', '"bunx"')
        path.write_bytes(edited.encode())
    second = in_process(tmp_path, "install", "cursor", "--config", str(path), "--name", "second")
    assert second.returncode == 0, second.stderr
    assert bak.read_bytes() == original.encode()
    kept = sorted(p.name for p in path.parent.iterdir())
    if edit:  # the edited bytes are backed up too, beside the original, never over it
        assert kept == [name, name + ".bak", name + ".bak.1"] and "(backup: " in second.stdout
        assert path.with_name(name + ".bak.1").read_bytes() == edited.encode()
    else:  # the file was as memloci left it: the original and the ledger already give it back
        assert kept == [name, name + ".bak"] and "(backup:" not in second.stdout
    assert in_process(tmp_path, "install", "cursor", "--config", str(path), "--name", "third").returncode == 0
    assert bak.read_bytes() == original.encode()
    for server in ("third", "second", "memloci"):
        assert in_process(tmp_path, "uninstall", "cursor", "--config", str(path), "--name", server).returncode == 0
    if edit:
        assert path.read_bytes() == original.replace('"npx"', '"bunx"').encode()  # the edit stays
        assert bak.read_bytes() == original.encode()
    else:
        assert path.read_bytes() == original.encode()
        assert sorted(p.name for p in path.parent.iterdir()) == [name]


def test_a_file_install_created_gets_no_backup_and_goes_whole(tmp_path, in_process):
    path = tmp_path / "cfg" / "mcp.json"
    for server in ("memloci", "second"):
        done = in_process(tmp_path, "install", "cursor", "--config", str(path), "--name", server)
        assert done.returncode == 0 and "(backup:" not in done.stdout, done.stdout
    assert sorted(p.name for p in path.parent.iterdir()) == ["mcp.json"]
    for server in ("second", "memloci"):
        assert in_process(tmp_path, "uninstall", "cursor", "--config", str(path), "--name", server).returncode == 0
    assert not path.parent.exists()  # the file and the folder install made


def test_list_shows_where_memloci_is(tmp_path):
    home = tmp_path / "userhome"
    write(home / ".cursor" / "mcp.json", '{"mcpServers": {}}')
    assert memloci(tmp_path, "install", "cursor").returncode == 0
    listing = memloci(tmp_path, "install", "--list")
    assert listing.returncode == 0
    rows = {tuple(line.split()[:3]) for line in listing.stdout.splitlines()}
    assert ("cursor", "user", "installed") in rows
    assert ("claude-desktop", "user", "no") in rows
    assert len(listing.stdout.splitlines()) == 12  # every client, every scope it has


@pytest.mark.parametrize("client", ["claude-code", "cursor"])
def test_the_written_command_is_a_working_mcp_server(tmp_path, client):
    path = tmp_path / "mcp.json"
    result = memloci(tmp_path, "install", client, "--config", str(path), "--tools", "graph")
    assert result.returncode == 0, result.stderr
    entry = json.loads(path.read_text())["mcpServers"]["memloci"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_EMBEDDER"] = "none"

    async def main():
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env)
        async with stdio_client(params) as (read, write_):
            async with ClientSession(read, write_) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    tools = anyio.run(main)
    assert "create_entities" in tools and "read_graph" in tools
    assert (tmp_path / "mhome").is_dir()  # the data folder the install was made with


def test_a_write_that_does_not_check_out_is_rolled_back(tmp_path):
    # The check after the write reads the file back and compares its meaning with the plan's;
    # a plan whose text and meaning disagree must leave the original in place.
    from memloci.core.errors import ValidationError
    from memloci.install.files import FilePlan, Ledger, commit

    original = '{"mcpServers": {"a": {"command": "x"}}}\n'
    path = write(tmp_path / "mcp.json", original)
    other = write(tmp_path / "hooks.json", '{"hooks": {}}\n')
    first = FilePlan(other, "json", '{"hooks": {}}\n', '{"hooks": {"x": []}}\n', expect={"hooks": {"x": []}})
    wrong = FilePlan(path, "json", original, '{"mcpServers": {}}\n', expect={"mcpServers": {"b": {}}})
    with pytest.raises(ValidationError, match="does not say what was meant"):
        commit([first, wrong], Ledger(tmp_path / "ledger.json"))
    assert path.read_text() == original and other.read_text() == '{"hooks": {}}\n'  # both put back
    assert (tmp_path / "mcp.json.bak").read_text() == original


def test_a_file_changed_since_it_was_read_is_not_overwritten(tmp_path):
    from memloci.core.errors import ValidationError
    from memloci.install.files import Ledger, commit
    from memloci.install.plan import install_plan

    path = write(tmp_path / "mcp.json", '{"mcpServers": {}}\n')
    op = {"op": "set", "path": ["mcpServers", "memloci"], "value": {"command": "m"}, "created": 1}
    plan = install_plan(path, "json", [op], force=False, created_root={}, project_dir=None)
    path.write_text('{"mcpServers": {"theirs": {"command": "t"}}}\n')  # the client saved meanwhile
    with pytest.raises(ValidationError, match="changed while"):
        commit([plan], Ledger(tmp_path / "ledger.json"))
    assert path.read_text() == '{"mcpServers": {"theirs": {"command": "t"}}}\n'


# --- the text splicer on generated files: any layout, insert then remove gives the bytes back ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from memloci.install import edits  # noqa: E402

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-999, 999), st.text("ab \"\\é\n", max_size=6))
_values = st.recursive(_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text("abcxyz", min_size=1, max_size=4), kids, max_size=3)),
    max_leaves=8)


def _layout(value, indent, trailing, comments, nl, depth=0):
    """JSON text in one of the layouts people and clients write, with JSONC extras when asked."""
    if not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, ensure_ascii=False)
    pairs = ([f"{json.dumps(k, ensure_ascii=False)}: {_layout(v, indent, trailing, comments, nl, depth + 1)}"
              for k, v in value.items()] if isinstance(value, dict)
             else [_layout(v, indent, trailing, comments, nl, depth + 1) for v in value])
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    if indent is None:
        return opening + ", ".join(pairs) + closing
    pad, outer = indent * (depth + 1), indent * depth
    lines = [pad + p + ("," if i < len(pairs) - 1 or trailing else "") + (" // note" if comments and i % 2 else "")
             for i, p in enumerate(pairs)]
    return opening + nl + nl.join(lines) + nl + outer + closing


@settings(max_examples=150, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(["mcpServers", "servers", "theme", "hooks"]), _values, max_size=4),
       indent=st.sampled_from([None, "  ", "    ", "\t"]), jsonc=st.booleans(), crlf=st.booleans(),
       kind=st.sampled_from(["set", "append"]))
def test_splices_keep_every_layout_and_come_back_out(doc, indent, jsonc, crlf, kind):
    nl = "\r\n" if crlf else "\n"
    text = _layout(doc, indent, trailing=jsonc and indent is not None, comments=jsonc, nl=nl) + nl
    path = ["mcpServers", "memloci"] if kind == "set" else ["hooks", "PostToolUse"]
    value = {"command": "/opt/memloci", "args": ["serve"]} if kind == "set" else {"hooks": [{"command": "m"}]}
    op = {"op": kind, "path": path, "value": value, "created": 0}
    try:
        splices, recorded = edits.json_splices(text, op, "f", force=True)
    except MemlociError:  # the path runs through a value that is not an object or list: refused
        return
    new = jsonedit.apply(text, splices)
    assert jsonedit.to_py(jsonedit.parse(new)) == edits.apply_value(doc, recorded) if splices else True
    if not jsonc:
        json.loads(new)
    assert only_insertions(text, new) or "old" in recorded
    back = new
    for step in edits.json_unsplices(new, recorded, "f"):
        back = jsonedit.apply(back, step)
    assert jsonedit.to_py(jsonedit.parse(back)) == edits.revert_value(edits.apply_value(doc, recorded), recorded)
    if splices and "old" not in recorded:
        assert back == text


@pytest.mark.full  # SIGKILL
def test_killed_at_any_moment_the_file_is_whole_and_the_next_run_cleans_up(tmp_path):
    import random
    import signal
    import time

    name, original = FIXTURES["cursor"]
    path = write(tmp_path / "cfg" / name, original)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "mhome")
    assert memloci(tmp_path, "install", "cursor", "--config", str(path)).returncode == 0
    installed = path.read_bytes()
    assert memloci(tmp_path, "uninstall", "cursor", "--config", str(path)).returncode == 0
    rng = random.Random(15)
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "install_loop.py"), str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        assert proc.stdout.readline().strip() == "looping"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert path.read_bytes() in (original.encode(), installed)  # never half a file
        for bak in path.parent.glob(name + ".bak*"):
            assert bak.read_bytes() in (original.encode(), installed)
    # The next runs work from whatever state was left, and leave the original bytes.
    assert memloci(tmp_path, "install", "cursor", "--config", str(path)).returncode == 0
    assert path.read_bytes() == installed
    assert memloci(tmp_path, "uninstall", "cursor", "--config", str(path)).returncode == 0
    assert path.read_bytes() == original.encode()
    assert not list(path.parent.glob(".*.tmp"))  # what killed runs left was swept by the next


@pytest.mark.full  # several processes
def test_installs_at_the_same_time_lose_nothing(tmp_path):
    # Several installs into one file at once: the ledger lock makes them take turns, so every
    # entry lands, and every uninstall (again all at once) leaves the original bytes.
    name, original = FIXTURES["gemini"]
    path = write(tmp_path / name, original)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "mhome")

    def run_all(verb):
        procs = [subprocess.Popen([sys.executable, "-m", "memloci", verb, "gemini", "--config", str(path),
                                   "--name", f"m{i}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for i in range(5)]
        for proc in procs:
            assert proc.wait(timeout=120) == 0, proc.stderr.read()

    run_all("install")
    servers = parse("gemini", path.read_text())["mcpServers"]
    assert {f"m{i}" for i in range(5)} | {"weather"} == set(servers)
    run_all("uninstall")
    assert path.read_text() == original
    assert json.loads((tmp_path / "mhome" / "install-ledger.json").read_text())["entries"] == []


def test_one_uninstall_takes_back_several_installs(tmp_path):
    name, original = FIXTURES["gemini"]
    path = write(tmp_path / name, original)
    assert memloci(tmp_path, "install", "gemini", "--config", str(path)).returncode == 0
    assert memloci(tmp_path, "install", "gemini", "--config", str(path), "--hooks").returncode == 0
    assert "hooks" in parse("gemini", path.read_text())
    assert memloci(tmp_path, "uninstall", "gemini", "--config", str(path)).returncode == 0
    assert path.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "mhome") == [name]


def test_the_written_hook_command_takes_the_fast_path_and_stores(tmp_path):
    """The exact hook command install writes (`<memloci> --home H hook CLIENT`), run by a shell
    as a client runs it, stores the event and never loads the full command line (Typer costs
    about a second of the hook's 2 s). PYTHONPROFILEIMPORTTIME lists every import made before
    the hook points stderr at /dev/null, which is where the command line would be loaded."""
    cfg, hooks = tmp_path / "cfg" / "settings.json", write(tmp_path / "cfg" / "hooks.json", "{}\n")
    done = memloci(tmp_path, "install", "claude-code", "--config", str(cfg), "--hooks-config", str(hooks), "--hooks")
    assert done.returncode == 0, done.stderr
    command = json.loads(hooks.read_text())["hooks"]["PostToolUse"][-1]["hooks"][0]["command"]
    assert "--home" in command and command.endswith("hook claude-code")
    plain = tmp_path / "plain"
    plain.mkdir()
    event = {"session_id": "s", "transcript_path": "", "cwd": str(plain), "hook_event_name": "PostToolUse",
             "tool_name": "Bash", "tool_input": {"command": "pytest -x", "description": "run"},
             "tool_response": {"stdout": "FAILED tests/test_api.py::test_login - KeyError: 'session'\n"
                                         "The error was fixed by reading the cookie before the header.\n" * 3,
                               "stderr": "", "interrupted": False}}
    # No MEMLOCI_HOME: the command's own --home must say where the memory goes.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update(PYTHONPROFILEIMPORTTIME="1", MEMLOCI_HOOK_DEADLINE="30", MEMLOCI_EMBEDDER="none")
    proc = subprocess.run(command, shell=True, input=json.dumps(event).encode(), capture_output=True, env=env,
                          cwd=plain, timeout=60)
    assert proc.returncode == 0
    imported = proc.stderr.decode()
    assert "memloci.hooks.capture" in imported  # the import list was written
    assert "typer" not in imported and "memloci.cli.main" not in imported
    home = tmp_path / "mhome"
    service = MemoryService(LibraryRegistry([LibrarySpec("default", home / "default.db")], create_missing=False),
                            embed_pending=False)
    try:
        found, _ = service.list_memories(page_size=10)
    finally:
        service.close()
    assert [m.content.split("\n")[0] for m in found] == ["$ pytest -x"]


@pytest.mark.parametrize("form", [["--home", "HOME"], ["--home=HOME"], []])
def test_memloci_hook_with_or_without_home_behaves_the_same(tmp_path, form):
    """`memloci --home H hook` and `--home=H` store where `MEMLOCI_HOME=H memloci hook` does,
    and `--home H hook --help` is still the command's help."""
    script = Path(sys.executable).parent / "memloci"
    if not script.exists():
        pytest.skip("no memloci script beside this Python")
    home = tmp_path / "h"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update(MEMLOCI_HOOK_DEADLINE="30", MEMLOCI_EMBEDDER="none", **({} if form else {"MEMLOCI_HOME": str(home)}))
    args = [w.replace("HOME", str(home)) for w in form]
    event = {"session_id": "s", "transcript_path": "", "cwd": str(tmp_path), "hook_event_name": "PreCompact",
             "trigger": "auto", "custom_instructions": ""}
    proc = subprocess.run([str(script), *args, "hook", "claude-code"], input=json.dumps(event).encode(),
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stderr == b"" and proc.stdout.strip() == b""
    assert (home / "logs" / "hook.log").is_file()  # the hook ran with this home
    helped = subprocess.run([str(script), *args, "hook", "--help"], capture_output=True, text=True, env=env,
                            timeout=60)
    assert helped.returncode == 0 and "Usage: memloci hook" in helped.stdout


STRICT_CASES = [  # (client, text, line, column of the fault)
    ("claude-desktop", '{\n  "mcpServers": {\n    "a": {"command": "x", "args": []},\n  }\n}\n', 3, 38),
    ("claude-desktop", '{\n  // my servers\n  "mcpServers": {}\n}\n', 2, 3),
    ("claude-code", '{\n\t"theme": "dark", /* mine */\n\t"mcpServers": {}\n}\n', 2, 19),
    ("claude-code", '{"mcpServers": {"a": {"command": "x", "args": ["y",]}}}\n', 1, 51),
    ("cursor", '{\n  "mcpServers": {},\n}\n', 2, 19),
    ("windsurf", '{\n  "mcpServers": {} // global\n}\n', 2, 20),
    ("gemini", '{\n  // fine in Gemini\n  "mcpServers": {},\n}\n', 3, 19),  # comments yes, trailing commas no
]


@pytest.mark.parametrize("client,text,line,column", STRICT_CASES)
def test_a_strict_json_client_file_with_a_comment_or_trailing_comma_is_refused(tmp_path, client, text, line, column):
    """A client that reads its file with JSON.parse cannot read a comment or a trailing comma:
    install refuses the file, says where, and leaves it (and the folder) as it was."""
    path = write(tmp_path / "cfg.json", text)
    result = memloci(tmp_path, "install", client, "--config", str(path))
    assert result.returncode == 1, result.stdout
    assert f"line {line}, column {column}" in result.stderr and "left untouched" in result.stderr
    assert path.read_bytes() == text.encode()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "mhome") == ["cfg.json"]


def test_jsonc_is_still_taken_where_the_client_reads_it(tmp_path):
    """VS Code reads JSONC (comments and trailing commas), Gemini CLI strips comments."""
    vs = write(tmp_path / "mcp.json", '{\n  // mine\n  "servers": {},\n}\n')
    assert memloci(tmp_path, "install", "vscode", "--config", str(vs)).returncode == 0
    assert "memloci" in parse("vscode", vs.read_text())["servers"]
    gem = write(tmp_path / "settings.json", '{\n  /* mine */\n  "mcpServers": {}\n}\n')
    assert memloci(tmp_path, "install", "gemini", "--config", str(gem)).returncode == 0
    assert "memloci" in parse("gemini", gem.read_text())["mcpServers"]


def test_a_hooks_file_with_a_comment_is_refused_and_nothing_is_written(tmp_path):
    cfg = write(tmp_path / "mcp.json", '{"mcpServers": {}}\n')
    hooks_text = '{\n  "hooks": {} // mine\n}\n'
    hooks = write(tmp_path / "settings.json", hooks_text)
    result = memloci(tmp_path, "install", "claude-code", "--config", str(cfg), "--hooks-config", str(hooks), "--hooks")
    assert result.returncode == 1 and "line 2, column 15" in result.stderr
    assert hooks.read_text() == hooks_text and cfg.read_text() == '{"mcpServers": {}}\n'
