"""The seven clients `memloci install` knows: where each keeps its MCP servers and its hooks, and
the shape of one server entry. Every location and key below comes from the client's own
documentation (cited per client); nothing here is guessed from another client's format.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.core.errors import ValidationError


class InstallError(ValidationError):
    """A config file or option install cannot work with; the files are as they were."""

    default_hint = "Nothing was changed."


CLIENT_NAMES = ("claude-desktop", "claude-code", "cursor", "windsurf", "vscode", "gemini", "codex")


@dataclass(frozen=True)
class Server:
    """What to write: a stdio command, or an HTTP URL with an optional bearer token."""

    name: str
    transport: str  # stdio | http
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    token: str | None = None  # literal token, written as the client's header form
    token_env: str | None = None  # name of an environment variable holding the token


@dataclass(frozen=True)
class HookSet:
    """Hook groups to append to the client's hook file: event -> the element added to its list."""

    path: Path
    key: tuple[str, ...]  # where the event map lives, e.g. ("hooks",)
    events: dict[str, Any]
    created_root: dict[str, Any] = field(default_factory=dict)  # extra keys a brand-new file needs


@dataclass(frozen=True)
class Client:
    name: str
    title: str
    fmt: str  # json | toml
    servers_key: str  # mcpServers | servers | mcp_servers
    scopes: tuple[str, ...]
    config_path: Callable[[str, Path], Path]
    entry: Callable[[Server], dict[str, Any]]
    hooks: Callable[[str, Path, str], HookSet] | None = None
    env_ref: Callable[[str], str] | None = None  # how the client spells "$VAR" in a string
    note: str = ""
    # What the client's reader takes in its JSON files (MCP and hooks; jsonedit.DIALECTS). A file
    # it could not read is refused: writing into it would report success for a dead config.
    json_dialect: str = "strict"


def _home() -> Path:
    return Path.home()


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or _home() / "AppData" / "Roaming")


def _app_support(*parts: str) -> Path:
    """The per-user application folder a desktop app uses on this OS."""
    if sys.platform == "darwin":
        return _home().joinpath("Library", "Application Support", *parts)
    if sys.platform == "win32":
        return _appdata().joinpath(*parts)
    base = os.environ.get("XDG_CONFIG_HOME") or str(_home() / ".config")
    return Path(base).joinpath(*parts)


def _bearer(s: Server, env_ref: Callable[[str], str] | None) -> dict[str, str]:
    if s.token_env:
        if env_ref is None:
            raise InstallError("--token-env: this client cannot read a token from the environment",
                               hint="pass the token itself with --token")
        return {"Authorization": "Bearer " + env_ref(s.token_env)}
    return {"Authorization": "Bearer " + s.token} if s.token else {}


def _stdio(s: Server, typed: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if typed else {}
    entry.update(command=s.command, args=list(s.args))
    return entry


def _http(s: Server, url_key: str, typed: bool, env_ref) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "http"} if typed else {}
    entry[url_key] = s.url
    headers = _bearer(s, env_ref)
    if headers:
        entry["headers"] = headers
    return entry


def _json_entry(url_key: str, typed: bool, env_ref=None, http_ok: bool = True):
    def entry(s: Server) -> dict[str, Any]:
        if s.transport == "stdio":
            return _stdio(s, typed)
        if not http_ok:
            raise InstallError(
                "--transport http: Claude Desktop's config file holds stdio servers only",
                hint="add a remote server in Claude Desktop under Settings > Connectors, "
                     "or install with --transport stdio")
        return _http(s, url_key, typed, env_ref)
    return entry


def _scoped(user: Callable[[], Path], *project_rel: str) -> Callable[[str, Path], Path]:
    def path(scope: str, project_dir: Path) -> Path:
        return user() if scope == "user" else project_dir.joinpath(*project_rel)
    return path


def _claude_style_hooks(path: Path, command: str, post_tool_matcher: str,
                        events: tuple[str, ...]) -> HookSet:
    """Claude Code's hook layout, which Codex and Gemini CLI share: event -> list of
    {matcher?, hooks: [{type: command, command}]} groups."""
    groups: dict[str, Any] = {}
    for event in events:
        group: dict[str, Any] = {}
        if event in ("PostToolUse", "AfterTool"):
            group["matcher"] = post_tool_matcher
        group["hooks"] = [{"type": "command", "command": command}]
        groups[event] = group
    return HookSet(path, ("hooks",), groups)


# --- Claude Desktop ---------------------------------------------------------------------------
# claude_desktop_config.json: macOS ~/Library/Application Support/Claude/, Windows %APPDATA%\Claude\,
# Linux ~/.config/Claude/ (modelcontextprotocol.io quickstart "For Claude Desktop Users"; the
# Linux path is the XDG one that community builds use). Key mcpServers, {command, args, env}.
# The file holds stdio servers only; remote servers are added as Connectors in the app.
# No hooks. Strict JSON: the app reports "error reading or parsing claude_desktop_config.json"
# for a trailing comma (the JSON.parse message, e.g. "Unexpected token ','").

# --- Claude Code (code.claude.com/docs/en/mcp, /docs/en/hooks) -------------------------------
# MCP: user scope is the top-level "mcpServers" of ~/.claude.json; project scope is .mcp.json
# at the project root. Entries: {"type": "stdio", command, args, env} or {"type": "http", url,
# headers}; ${VAR} is expanded in command, args, env, url and headers.
# Hooks: ~/.claude/settings.json (user) or .claude/settings.json (project): "hooks": {Event:
# [{matcher, hooks: [{type: "command", command}]}]}; matcher only for tool events. SessionStart
# with no matcher runs at every source (startup, resume, clear, compact): its reply gives the
# session the project's remembered rules back (hookSpecificOutput.additionalContext).
# Strict JSON: a settings file with a trailing comma is "Invalid or malformed JSON" and skipped
# whole; the docs show no comments in any of these files.

def _claude_code_hooks(scope: str, project_dir: Path, command: str) -> HookSet:
    path = (_home() / ".claude" / "settings.json" if scope == "user"
            else project_dir / ".claude" / "settings.json")
    return _claude_style_hooks(path, command, "Edit|Write|MultiEdit|NotebookEdit|Bash",
                               ("PostToolUse", "PreCompact", "SessionEnd", "SessionStart"))


# --- Cursor (cursor.com/docs/mcp, cursor.com/docs/agent/hooks) ------------------------------
# MCP: ~/.cursor/mcp.json (global) or .cursor/mcp.json (project), key mcpServers; remote
# servers {url, headers}; ${env:NAME} is interpolated in the file.
# Hooks: ~/.cursor/hooks.json or .cursor/hooks.json: {"version": 1, "hooks": {"afterFileEdit":
# [{"command": ...}]}}. The docs describe both files as JSON and never mention comments or
# trailing commas (JSONC is not documented), so they are held to strict JSON.

def _cursor_hooks(scope: str, project_dir: Path, command: str) -> HookSet:
    path = _home() / ".cursor" / "hooks.json" if scope == "user" else project_dir / ".cursor" / "hooks.json"
    return HookSet(path, ("hooks",), {"afterFileEdit": {"command": command}}, {"version": 1})


# --- Windsurf (docs.windsurf.com/windsurf/cascade/mcp, /cascade/hooks) ----------------------
# MCP: only ~/.codeium/windsurf/mcp_config.json (Windows %USERPROFILE%\.codeium\windsurf\),
# key mcpServers; remote servers use "serverUrl" (not "url") with "headers"; ${env:NAME}
# is interpolated. Hooks: ~/.codeium/windsurf/hooks.json (user) or .windsurf/hooks.json at
# the workspace root: {"hooks": {"post_write_code": [{"command": ..., "show_output": bool}]}}.
# The docs call mcp_config.json "a JSON file" and say nothing of comments: strict JSON.

def _windsurf_hooks(scope: str, project_dir: Path, command: str) -> HookSet:
    path = (_home() / ".codeium" / "windsurf" / "hooks.json" if scope == "user"
            else project_dir / ".windsurf" / "hooks.json")
    return HookSet(path, ("hooks",), {"post_write_code": {"command": command, "show_output": False}})


# --- VS Code (code.visualstudio.com/docs/copilot/reference/mcp-configuration) ---------------
# MCP: .vscode/mcp.json in the workspace, or mcp.json in the user profile folder
# (~/.config/Code/User, ~/Library/Application Support/Code/User, %APPDATA%\Code\User).
# Top-level key "servers" (not mcpServers), every entry has "type" (stdio | http); the file
# is JSONC. ${env:NAME} is one of the predefined variables the file accepts. No hooks.

# --- Gemini CLI (geminicli.com/docs/tools/mcp-server, /docs/cli/configuration, /docs/hooks) --
# MCP and hooks both live in settings.json: ~/.gemini/settings.json (user) or
# .gemini/settings.json (project). mcpServers entries: {command, args} or, for streamable
# HTTP, {"httpUrl", headers} ("url" would mean SSE). Strings may reference $VAR / ${VAR}.
# Read as JSON.parse(stripJsonComments(text)) (packages/cli/src/config/settings.ts, loadSettings):
# comments are fine, a trailing comma is not (strip-json-comments leaves commas by default).
# Hooks: "hooks": {AfterTool | PreCompress | SessionEnd | SessionStart: [{matcher?, hooks: [{type:
# "command", command}]}]}; SessionStart's hookSpecificOutput.additionalContext becomes the first
# turn of the history (/docs/hooks/reference), which is how the project's rules come back.

def _gemini_hooks(scope: str, project_dir: Path, command: str) -> HookSet:
    path = _home() / ".gemini" / "settings.json" if scope == "user" else project_dir / ".gemini" / "settings.json"
    return _claude_style_hooks(path, command, "write_file|replace|run_shell_command",
                               ("AfterTool", "PreCompress", "SessionEnd", "SessionStart"))


# --- Codex (developers.openai.com/codex/mcp, /codex/config-reference, /codex/hooks) ---------
# MCP: $CODEX_HOME/config.toml (default ~/.codex/config.toml), or .codex/config.toml in a
# trusted project; one [mcp_servers.<name>] table each: command/args, or url with
# bearer_token_env_var (an inline bearer token is refused there) or http_headers.
# Hooks: hooks.json next to config.toml, Claude Code's layout; PostToolUse (tools Bash,
# apply_patch) and PreCompact. Codex asks the person to trust a new hook before it runs.

def _codex_home() -> Path:
    return Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else _home() / ".codex"


def _codex_entry(s: Server) -> dict[str, Any]:
    if s.transport == "stdio":
        return {"command": s.command, "args": list(s.args)}
    entry: dict[str, Any] = {"url": s.url}
    if s.token_env:
        entry["bearer_token_env_var"] = s.token_env
    elif s.token:
        entry["http_headers"] = {"Authorization": "Bearer " + s.token}
    return entry


def _codex_hooks(scope: str, project_dir: Path, command: str) -> HookSet:
    path = _codex_home() / "hooks.json" if scope == "user" else project_dir / ".codex" / "hooks.json"
    return _claude_style_hooks(path, command, "Bash|apply_patch", ("PostToolUse", "PreCompact"))


def _env_dollar(name: str) -> str:
    return "${" + name + "}"


def _env_colon(name: str) -> str:
    return "${env:" + name + "}"


CLIENTS: dict[str, Client] = {c.name: c for c in (
    Client("claude-desktop", "Claude Desktop", "json", "mcpServers", ("user",),
           lambda scope, d: _app_support("Claude", "claude_desktop_config.json"),
           _json_entry("url", typed=False, http_ok=False)),
    Client("claude-code", "Claude Code", "json", "mcpServers", ("user", "project"),
           _scoped(lambda: _home() / ".claude.json", ".mcp.json"),
           _json_entry("url", typed=True, env_ref=_env_dollar), _claude_code_hooks, _env_dollar),
    Client("cursor", "Cursor", "json", "mcpServers", ("user", "project"),
           _scoped(lambda: _home() / ".cursor" / "mcp.json", ".cursor", "mcp.json"),
           _json_entry("url", typed=False, env_ref=_env_colon), _cursor_hooks, _env_colon),
    Client("windsurf", "Windsurf", "json", "mcpServers", ("user",),
           lambda scope, d: _home() / ".codeium" / "windsurf" / "mcp_config.json",
           _json_entry("serverUrl", typed=False, env_ref=_env_colon), _windsurf_hooks, _env_colon,
           note="Windsurf reads MCP servers from its user file only; hooks may be per workspace"),
    Client("vscode", "VS Code", "json", "servers", ("user", "project"),
           _scoped(lambda: _app_support("Code", "User", "mcp.json"), ".vscode", "mcp.json"),
           _json_entry("url", typed=True, env_ref=_env_colon), None, _env_colon, json_dialect="jsonc"),
    Client("gemini", "Gemini CLI", "json", "mcpServers", ("user", "project"),
           _scoped(lambda: _home() / ".gemini" / "settings.json", ".gemini", "settings.json"),
           _json_entry("httpUrl", typed=False, env_ref=_env_dollar), _gemini_hooks, _env_dollar,
           json_dialect="comments"),
    Client("codex", "Codex", "toml", "mcp_servers", ("user", "project"),
           _scoped(lambda: _codex_home() / "config.toml", ".codex", "config.toml"),
           _codex_entry, _codex_hooks, lambda name: name),
)}


def client(name: str) -> Client:
    if name not in CLIENTS:
        from difflib import get_close_matches

        close = get_close_matches(name, CLIENT_NAMES, n=1)
        raise InstallError(f"unknown client {name!r}; one of: {', '.join(CLIENT_NAMES)}",
                           hint=f"did you mean {close[0]!r}?" if close else None)
    return CLIENTS[name]


def memloci_command() -> list[str]:
    """The absolute command that starts this very install of memloci.

    The `memloci` script beside the running interpreter is what a venv, pipx or uv tool install
    puts there; the interpreter path is kept as it is (a venv's python is a link that must not
    be resolved). Without the script, `python -m memloci` runs the same code."""
    bindir = Path(os.path.abspath(sys.executable)).parent
    script = bindir / ("memloci.exe" if sys.platform == "win32" else "memloci")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [os.path.abspath(sys.executable), "-m", "memloci"]


def hook_command(client_name: str, home: str | None) -> str:
    """The shell command a client runs for a hook event (clients take one string)."""
    words = memloci_command() + (["--home", home] if home else []) + ["hook", client_name]
    return " ".join(shlex.quote(w) for w in words)
