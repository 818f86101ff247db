"""`memloci rules ...`: one workspace across coding agents. `list` shows every agent's rules and
skills with their duplicates and conflicts; `sync` copies one agent's rules and workflows into
the others' own formats (`--dry-run`: the diff, nothing written); `unsync` takes back what syncs
added; `check` exits 1 on a conflict (for CI); `remember` stores each rule as a memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from memloci.cli.common import LibrariesOpt, LibraryOpt, command_settings, fail, open_console, open_service
from memloci.core.errors import MemlociError, ValidationError

rules_app = typer.Typer(help="One workspace across coding agents: their rules, workflows and skills.",
                        no_args_is_help=True, rich_markup_mode=None)

ProjectOpt = Annotated[Path | None, typer.Option("--project", help="The project's root folder (default: the current "
                                                                   "folder). User-wide files are read from $HOME.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
FromOpt = Annotated[str, typer.Option("--from", help="The agent(s) whose rules are copied, comma-separated.")]
ToOpt = Annotated[str, typer.Option("--to", help="The agents that get them, comma-separated.")]


def _state() -> Path:
    """memloci's home, where the ledger of syncs lives; and the tests' kill point, if set."""
    from memloci.workspace import sync as ws_sync

    settings = command_settings()
    at = settings.environ.get(ws_sync.KILL_AFTER)
    if at is not None:
        try:
            ws_sync.kill_after_writes = int(at)
        except ValueError:
            fail(ValidationError(f"{ws_sync.KILL_AFTER}: expected a whole number of writes, got {at!r}"))
    return settings.home


def _show_workspace(data: dict[str, Any]) -> None:
    from rich.table import Table

    console = open_console()
    table = Table("source", "title", "scope", "globs", "hash", title=f"rules of {data['project']}")
    for r in data["rules"]:
        table.add_row(f"{r['agent']} {r['path']}", r["title"], r["scope"], ", ".join(r["globs"]), r["hash"][:12])
    console.print(table)
    if data["skills"]:
        skills = Table("source", "name", "kind", "steps", "hash", title="skills and workflows")
        for s in data["skills"]:
            skills.add_row(f"{s['agent']} {s['path']}", s["name"], s["kind"], str(s["steps"]), s["hash"][:12])
        console.print(skills)
    for d in data["duplicates"]:
        console.print(f"duplicate {d['hash'][:12]}: {d['kept']} kept; same text in {', '.join(d['also'])}",
                      highlight=False)
    for c in data["conflicts"]:
        where = f" ({', '.join(c['globs'])})" if c["globs"] else ""
        console.print(f"conflict: '{c['title']}', {c['scope']}{where}: "
                      + "; ".join(f"{r['id']} ({r['hash'][:12]})" for r in c["rules"])
                      + " say different things; a person decides", highlight=False)
    for c in data["skill_clashes"]:
        console.print(f"skill name clash '{c['name']}': {c['kept']} kept; also {', '.join(c['also'])}",
                      highlight=False)
    for p in data["problems"]:
        console.print(f"refused: {p}", highlight=False)
    if data["copies"]:
        console.print(f"{data['copies']} cop{'y' if data['copies'] == 1 else 'ies'} written by `memloci rules sync` "
                      "not listed", highlight=False)


@rules_app.command("list")
def list_(project: ProjectOpt = None, as_json: JsonOpt = False,
          agents: Annotated[str | None, typer.Option("--agents", help="Only these agents, comma-separated.")] = None,
          ) -> None:
    """Every agent's rules and skills: source, scope, globs, hash; then duplicates and conflicts."""
    from memloci.service.workspace import list_rules

    try:
        data = list_rules(project, agents, "--agents")
    except MemlociError as exc:
        fail(exc)
    if as_json:
        print(json.dumps(data, indent=1))
        return
    _show_workspace(data)


@rules_app.command("check")
def check(project: ProjectOpt = None) -> None:
    """Exit 1 when rules conflict (for CI), naming each conflict; 0 otherwise."""
    from memloci.service.workspace import list_rules

    try:
        data = list_rules(project)
    except MemlociError as exc:
        fail(exc)
    for c in data["conflicts"]:
        print(f"conflict: '{c['title']}' ({c['scope']}): " + ", ".join(r["id"] for r in c["rules"]))
    if data["conflicts"]:
        raise typer.Exit(1)
    print(f"no conflicts among {len(data['rules'])} rule(s)")


def _show_plan(data: dict[str, Any], dry_run: bool) -> None:
    for f in data["files"]:
        print(f["diff"], end="")
    for s in data["skipped"]:
        print(f"skipped: {s}")
    verb = "would change" if dry_run else "changed"
    print(f"{verb} {len(data['files'])} file(s)" + (" (dry run: nothing written)" if dry_run else ""))


@rules_app.command("sync")
def sync(sources: FromOpt, targets: ToOpt, project: ProjectOpt = None,
         dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the diff of every file; change nothing.")] = False,
         as_json: JsonOpt = False) -> None:
    """Copy the rules and workflows of --from into the --to agents' own formats."""
    from memloci.service.workspace import preview_sync, run_sync

    try:
        data = (preview_sync if dry_run else run_sync)(project, sources, targets, _state())
    except MemlociError as exc:
        fail(exc)
    if as_json:
        print(json.dumps(data, indent=1))
        return
    _show_plan(data, dry_run)


@rules_app.command("unsync")
def unsync(targets: Annotated[str | None, typer.Option("--to", help="Only these agents (default: all).")] = None,
           project: ProjectOpt = None, as_json: JsonOpt = False) -> None:
    """Take back exactly what syncs added: memloci's blocks out, the files it made removed."""
    from memloci.service.workspace import project_folder
    from memloci.workspace.agents import agent_names
    from memloci.workspace.sync import unsync as run_unsync

    try:
        plan = run_unsync(project_folder(project), agent_names(targets, "--to") if targets else None, _state())
    except MemlociError as exc:
        fail(exc)
    data = plan.to_data()
    if as_json:
        print(json.dumps(data, indent=1))
        return
    _show_plan(data, False)


@rules_app.command("remember")
def remember(project: ProjectOpt = None, libraries: LibrariesOpt = None, library: LibraryOpt = None) -> None:
    """Store each rule as a memory (type rule), so retrieval finds it; a second run stores nothing new."""
    from memloci.service.workspace import remember_rules

    try:
        service = open_service(libraries)
        try:
            data = remember_rules(service, project, library)
        finally:
            service.close()
    except MemlociError as exc:
        fail(exc)
    print(data["message"])
