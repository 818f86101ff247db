"""The `memloci` command line (Typer + Rich): a thin adapter over the service, like the MCP tools.

This module builds the app, reads the settings once per run (the root command) and registers
the commands, which live in the modules beside it; what they share is in common.py."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Annotated

import typer

from memloci import __version__
from memloci.cli import imports, install, library, maintain, people, serve
from memloci.cli.bench import bench_app
from memloci.cli.common import RUN
from memloci.cli.exports import export_app
from memloci.cli.maintain import maintain_app
from memloci.cli.rules import rules_app
from memloci.cli.serve import token_app
from memloci.core.settings import Settings, set_process_defaults

app = typer.Typer(
    name="memloci",
    help="Durable memory for AI agents over MCP: knowledge graph and memories, on SQLite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts hold [schemas] and regexes: never read them as Rich markup
)
import_app = typer.Typer(help="Import memory from other servers' files.", no_args_is_help=True, rich_markup_mode=None)
imports.register(import_app)  # import jsonl, mms, memorix, basic-memory
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")
app.add_typer(bench_app, name="bench")
app.add_typer(maintain_app, name="maintain")
app.add_typer(rules_app, name="rules")
app.add_typer(token_app, name="token")  # server mode: memloci token ...


def _read_settings(home: Path | None, config: Path | None) -> Settings:
    """The program's settings: the environment, read once here, under --home/--config."""
    settings = Settings.from_env().with_flags(home=home, config=config)
    set_process_defaults()
    return settings


def _version(value: bool) -> None:
    if value:
        print(f"memloci {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    home: Annotated[Path | None, typer.Option("--home", help="Data directory (instead of MEMLOCI_HOME).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config file (instead of MEMLOCI_CONFIG).")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
) -> None:
    # Kept for the command: it builds its settings (command_settings) when it runs, inside its own
    # error handling (and the hook, which must exit 0 whatever the environment holds, in its own way).
    RUN.start(home=home, config=config, read=lambda: _read_settings(home, config))
    if ctx.invoked_subcommand != "serve":  # off while the program loaded (memloci/__init__.py); serve: at its first tools/list
        gc.enable()


# The commands, in the order `memloci --help` lists them.
serve.register(app)  # tools, serve
people.register(app)  # recall, search, memories list|show|edit|delete
library.register(app)  # stats, history, undo, backup, restore, reindex, migrate, check
install.register(app)  # install, uninstall
maintain.register(app)  # consolidate


@app.command("hook", context_settings={"ignore_unknown_options": True})
def hook_cmd(
    agent: Annotated[str, typer.Argument(help="claude-code, cursor, windsurf, codex, gemini, vscode or claude-desktop.")],
    event: Annotated[str | None, typer.Argument(help="The event as JSON (Codex's notify passes it so); "
                                                       "default: read from stdin.")] = None,
) -> None:
    """Store one agent hook event (JSON on stdin) as a memory when it is worth remembering.
    Always exits 0 within 2 s; problems go to $MEMLOCI_HOME/logs/hook.log."""
    from memloci.hooks.capture import main as hook_main

    raise typer.Exit(hook_main([agent, *([event] if event is not None else [])],
                               home=RUN.home, config=RUN.config))  # --home, --config (_root)


def main() -> None:
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] != ["--help"]:  # straight to the hook: no option parsing
        from memloci.hooks.capture import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    app()
