"""`memloci install CLIENT` and `memloci uninstall CLIENT`: the command-line adapter."""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memloci.cli.common import check_choice, command_settings, fail_plainly
from memloci.core.errors import ConflictError, MemlociError
from memloci.install import clients as cl
from memloci.install.clients import InstallError

if TYPE_CHECKING:
    from memloci.install.files import Ledger

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_URL = "http://127.0.0.1:8001/mcp"

ClientArg = Annotated[str | None, typer.Argument(help=f"One of: {', '.join(cl.CLIENT_NAMES)}.", show_default=False)]
ScopeOpt = Annotated[str, typer.Option("--scope", help="user (every project) or project (one folder), where the client has both.")]
ProjectOpt = Annotated[Path | None, typer.Option("--project-dir", help="Project folder for --scope project (default: the current folder).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Edit this MCP config file instead of the client's usual one.")]
HooksConfigOpt = Annotated[Path | None, typer.Option("--hooks-config", help="Edit this hooks file instead of the client's usual one.")]
NameOpt = Annotated[str, typer.Option("--name", help="The server's name in the client's config.")]
DryOpt = Annotated[bool, typer.Option("--dry-run", help="Print the diff of every file; change nothing.")]


@contextmanager
def _ledger(dry_run: bool):
    """The ledger, held under an exclusive lock for the whole command, so two installs at once
    (into one file or two) neither lose the other's record nor interleave their edits. A dry
    run only reads it and creates nothing."""
    from memloci.install.files import Ledger

    home = command_settings().home
    if dry_run:
        yield Ledger(home / "install-ledger.json")
        return
    import fcntl  # POSIX, like the stdio claim; imported here so the CLI itself loads anywhere

    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(home / "install-ledger.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield Ledger(home / "install-ledger.json")
    finally:
        os.close(fd)


def _scope(client: cl.Client, scope: str, project_dir: Path | None) -> Path | None:
    check_choice("--scope", scope, ("user", "project"), InstallError)
    if scope not in client.scopes:
        raise InstallError(f"--scope {scope}: {client.title} has only {', '.join(client.scopes)} scope",
                           hint=client.note or None)
    if scope == "user":
        return None
    folder = (project_dir or Path.cwd()).absolute()
    if not folder.is_dir():
        raise InstallError(f"--project-dir: {folder} is not a folder")
    return folder


def _server_command(libraries: str | None, tools: str | None) -> tuple[str, list[str]]:
    words = cl.memloci_command()
    # A client starts the server without the person's shell environment: carry the data folder
    # and config file this install was made with (given by flag or variable; not the default).
    settings = command_settings()
    if settings.home_set:
        words += ["--home", os.path.abspath(settings.home)]
    if settings.config is not None:
        words += ["--config", os.path.abspath(settings.config)]
    words.append("serve")
    if libraries:
        words += ["--libraries", libraries]
    if tools:
        words += ["--tools", tools]
    return words[0], words[1:]


def _server(name: str, transport: str, url: str | None, token: str | None, token_env: str | None,
            libraries: str | None, tools: str | None) -> cl.Server:
    if not _NAME.match(name):
        raise InstallError(f"--name {name!r}: letters, digits, '_', '.', '-' (at most 64), starting with a letter or digit")
    check_choice("--transport", transport, ("stdio", "http"), InstallError)
    if token and token_env:
        raise InstallError("--token and --token-env: give one of them")
    if token_env and not _ENV.match(token_env):
        raise InstallError(f"--token-env {token_env!r} is not an environment variable name")
    if transport == "stdio":
        for flag, value in (("--url", url), ("--token", token), ("--token-env", token_env)):
            if value:
                raise InstallError(f"{flag} goes with --transport http")
        command, args = _server_command(libraries, tools)
        return cl.Server(name, "stdio", command=command, args=tuple(args))
    for flag, value in (("--libraries", libraries), ("--tools", tools)):
        if value:
            raise InstallError(f"{flag} goes with --transport stdio; an HTTP server chooses its own",
                               hint="pass it to `memloci serve --transport http` instead")
    url = url or DEFAULT_URL
    if not re.match(r"^https?://[^\s/]+", url):
        raise InstallError(f"--url {url!r} is not an http(s) URL")
    if token and "\n" in token:
        raise InstallError("--token holds a line break")
    return cl.Server(name, "http", url=url, token=token, token_env=token_env)


def _plans(client: cl.Client, server: cl.Server | None, name: str, scope: str, project: Path | None,
           config: Path | None, hooks_config: Path | None, hooks: bool, force: bool, uninstall: bool,
           ledger: Ledger):
    """(plan, kind, created_root) for the MCP file and, when asked or recorded, the hooks file."""
    from memloci.install.files import read
    from memloci.install.plan import install_plan, uninstall_plan

    folder = project or Path.cwd()
    path = (config.expanduser().absolute() if config else client.config_path(scope, folder))
    guard = project if (project is not None and config is None) else None
    entry_value = client.entry(server) if server else None
    op = {"op": "set", "path": [client.servers_key, name], "value": entry_value, "created": 1}
    out: list[tuple[Any, str, dict]] = []
    if uninstall:
        found = read(path) is not None
        recorded = ledger.find(path, client.name, name, "mcp")
        if found:
            current = _current_entry(client, path, name)
            fallback = [dict(op, value=current)] if current is not None else []
            out.append((uninstall_plan(path, client.fmt, recorded, fallback, project_dir=guard), "mcp", {}))
    else:
        out.append((install_plan(path, client.fmt, [op], force=force, created_root={}, project_dir=guard,
                                 dialect=client.json_dialect, reader=client.title), "mcp", {}))
    if client.hooks is None:
        if hooks:
            raise InstallError(f"--hooks: {client.title} has no hooks to install")
        return out
    hookset = client.hooks(scope, folder, cl.hook_command(client.name, _home_for_hooks()))
    hpath = hookset.path
    if hooks_config:
        hpath = hooks_config.expanduser().absolute()
    elif hookset.path == client.config_path(scope, folder):
        hpath = path  # Gemini keeps hooks in its settings file: follow --config there too
    hguard = project if (project is not None and hooks_config is None) else None
    hops = [{"op": "append", "path": [*hookset.key, event], "value": group, "created": len(hookset.key) + 1}
            for event, group in hookset.events.items()]
    if uninstall:
        recorded = ledger.find(hpath, client.name, name, "hooks")
        if hpath == path and not recorded:  # one file: one plan that takes out both
            mcp_recorded = ledger.find(path, client.name, name, "mcp")
            if read(path) is not None and (hooks or not mcp_recorded):
                current = _current_entry(client, path, name)
                fallback = ([dict(op, value=current)] if current is not None else []) + hops
                out = [(uninstall_plan(path, client.fmt, mcp_recorded, fallback, project_dir=guard), "mcp", {})]
        elif recorded or hooks:
            out.append((uninstall_plan(hpath, "json", recorded, hops, project_dir=hguard), "hooks", {}))
    elif hooks:
        if hpath == path:  # one file, one change: the MCP entry and the hooks together
            plan = install_plan(path, "json", [op] + hops, force=force, created_root={}, project_dir=guard,
                                dialect=client.json_dialect, reader=client.title)
            return [(plan, "mcp", {})]
        out.append((install_plan(hpath, "json", hops, force=force, created_root=hookset.created_root,
                                 project_dir=hguard, dialect=client.json_dialect, reader=client.title),
                    "hooks", hookset.created_root))
    return out


def _home_for_hooks() -> str | None:
    settings = command_settings()
    return os.path.abspath(settings.home) if settings.home_set else None


def _current_entry(client: cl.Client, path: Path, name: str):
    from memloci.install.files import meaning, read

    doc = meaning(client.fmt, read(path), str(path)) or {}
    servers = doc.get(client.servers_key)
    return servers.get(name) if isinstance(servers, dict) else None


def _list(name: str, project_dir: Path | None) -> None:
    folder = (project_dir or Path.cwd()).absolute()
    for client in cl.CLIENTS.values():
        for scope in client.scopes:
            path = client.config_path(scope, folder)
            try:
                current = _current_entry(client, path, name) if path.is_file() else None
                state = "installed" if current is not None else ("-" if path.exists() else "no file")
            except MemlociError as exc:
                state = f"unreadable: {exc.message}"
            print(f"{client.name:15} {scope:8} {state:10} {path}")


def install(
    client_name: ClientArg = None,
    scope: ScopeOpt = "user",
    project_dir: ProjectOpt = None,
    config: ConfigOpt = None,
    hooks_config: HooksConfigOpt = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio (the client starts memloci) or http (a running `memloci serve --transport http`).")] = "stdio",
    url: Annotated[str | None, typer.Option("--url", help=f"Server URL for --transport http (default {DEFAULT_URL}).")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Bearer token for --transport http, written into the file as the client's header.")] = None,
    token_env: Annotated[str | None, typer.Option("--token-env", help="Name of an environment variable holding the token: the file refers to it instead of holding the token (preferred).")] = None,
    name: NameOpt = "memloci",
    libraries: Annotated[str | None, typer.Option("--libraries", help="Passed to `memloci serve --libraries`.")] = None,
    tools: Annotated[str | None, typer.Option("--tools", help="Passed to `memloci serve --tools`.")] = None,
    hooks: Annotated[bool, typer.Option("--hooks", help="Also install `memloci hook CLIENT` for the client's hook events.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing entry of that name that differs.")] = False,
    dry_run: DryOpt = False,
    list_: Annotated[bool, typer.Option("--list", help="Show every client's config files and whether memloci is in them.")] = False,
) -> None:
    """Add memloci to an MCP client's config, keeping everything else in the file as it was.

    Example: memloci install claude-code --scope project --hooks"""
    if list_:
        _list(name, project_dir)
        return
    try:
        if client_name is None:
            raise InstallError("CLIENT is missing", hint=f"one of: {', '.join(cl.CLIENT_NAMES)}; or --list")
        client = cl.client(client_name)
        project = _scope(client, scope, project_dir)
        server = _server(name, transport, url, token, token_env, libraries, tools)
        if token and client.env_ref is not None:
            print(f"note: {client.title} can read the token from the environment: --token-env NAME keeps "
                  "it out of the file", file=sys.stderr)
        with _ledger(dry_run) as ledger:
            try:
                plans = _plans(client, server, name, scope, project, config, hooks_config, hooks, force, False,
                               ledger)
            except ConflictError:
                from memloci.install.plan import diff

                for plan, _, _ in _plans(client, server, name, scope, project, config, hooks_config, hooks,
                                         True, False, ledger):
                    sys.stderr.write(diff(plan))
                raise
            _run(plans, client, name, ledger, dry_run, "added")
        if hooks and client.name == "codex" and not dry_run:
            print("note: Codex asks you to review and trust a new hook before it runs it", file=sys.stderr)
    except MemlociError as exc:
        fail_plainly(exc)


def uninstall(
    client_name: Annotated[str, typer.Argument(help=f"One of: {', '.join(cl.CLIENT_NAMES)}.", show_default=False)],
    scope: ScopeOpt = "user",
    project_dir: ProjectOpt = None,
    config: ConfigOpt = None,
    hooks_config: HooksConfigOpt = None,
    name: NameOpt = "memloci",
    hooks: Annotated[bool, typer.Option("--hooks", help="Also look for memloci's hooks when no install of them was recorded.")] = False,
    dry_run: DryOpt = False,
) -> None:
    """Take out what `memloci install` added: the server entry and its hooks, nothing else.

    Example: memloci uninstall cursor"""
    try:
        client = cl.client(client_name)
        project = _scope(client, scope, project_dir)
        if not _NAME.match(name):
            raise InstallError(f"--name {name!r} is not a server name")
        with _ledger(dry_run) as ledger:
            plans = _plans(client, None, name, scope, project, config, hooks_config, hooks, False, True, ledger)
            _run(plans, client, name, ledger, dry_run, "removed")
    except MemlociError as exc:
        fail_plainly(exc)


def _run(plans, client: cl.Client, name: str, ledger: Ledger, dry_run: bool, verb: str) -> None:
    from memloci.install.files import commit, drop_backups
    from memloci.install.plan import diff

    changed = [(p, kind, root) for p, kind, root in plans if p.changed]
    if dry_run:
        for plan, _, _ in changed:
            sys.stdout.write(diff(plan))
        print(f"dry run: {len(changed)} file(s) would change; nothing was written", file=sys.stderr)
        return
    if not changed:
        print(f"{client.name}: nothing to do ('{name}' is {'already there' if verb == 'added' else 'not there'})")
        return
    commit([p for p, _, _ in changed], ledger)
    for plan, kind, root in changed:
        if verb == "added":
            ledger.record(plan, client.name, name, kind, root)
        else:
            for entry in ledger.find(plan.path, client.name, name, kind):
                ledger.forget(entry)
            if not plan.backup:
                drop_backups(plan, ledger)
    ledger.save()
    for plan, kind, _ in changed:
        what = "hooks" if kind == "hooks" else ("server entry and hooks" if any(
            op["op"] == "append" for op in plan.ops) else "server entry")
        bak = f" (backup: {plan.bak})" if plan.bak else ""
        gone = " and the file it had created" if plan.after is None else ""
        print(f"{client.name}: {verb} '{name}' {what} in {plan.path}{gone}{bak}")


def register(app: typer.Typer) -> None:
    app.command("install")(install)
    app.command("uninstall")(uninstall)
