"""What the `memloci` subcommands share: this run's settings, the service over the mounted
libraries, the console, and how a failure is reported.

The root command (main.py) starts the run with its flags and how the settings are read; a
command builds them the first time it asks (`command_settings`), inside its own error handling.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from memloci.core.errors import LibraryMissingError, MemlociError
from memloci.core.settings import Settings

LibrariesOpt = Annotated[
    str | None,
    typer.Option("--libraries",
                 help="Libraries to mount, NAME:PATH[,NAME:PATH...] (MEMLOCI_LIBRARIES; default: 'default' in $MEMLOCI_HOME)."),
]
LibraryOpt = Annotated[str | None, typer.Option("--library", "-l", help="Library to use when several are mounted.")]


class CommandRun:
    """One run of the `memloci` command: the root command's flags (--home, --config), and the
    settings read for the run, once, the first time a command asks."""

    def __init__(self) -> None:
        self.home: Path | None = None
        self.config: Path | None = None
        self._read: Callable[[], Settings] | None = None
        self._settings: Settings | None = None

    def start(self, *, home: Path | None, config: Path | None, read: Callable[[], Settings]) -> None:
        """A new run (the root command's callback): its flags, and how its settings are read."""
        self.home, self.config, self._read, self._settings = home, config, read, None

    def settings(self, **flags: str | None) -> Settings:
        if self._settings is None:
            if self._read is None:
                raise RuntimeError("a command runs under the root command (memloci.cli.main.app), which reads the settings")
            self._settings = self._read()
        return self._settings.with_flags(**flags)


RUN = CommandRun()  # the process runs one command


def command_settings(**flags: str | None) -> Settings:
    """This command's settings: the environment's, read once for the run, under the root
    command's --home/--config and then the command's own flags (libraries, tools, schema)."""
    return RUN.settings(**flags)


def open_service(libraries: str | None, *, read_only: bool = False, embedder: bool = False,
                 settings: Settings | None = None):
    """The service over the mounted libraries; read-only commands never create a library file.
    Commands that need meaning (serve, reindex) get the configured embedder (MEMLOCI_EMBEDDER)."""
    from memloci.app.config import default_specs
    from memloci.app.registry import LibraryRegistry
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    settings = (settings or command_settings()).with_flags(libraries=libraries)
    return MemoryService(LibraryRegistry(default_specs(settings), create_missing=not read_only, settings=settings),
                         EmbedderHandle(None if embedder else "none", settings), embed_pending=not read_only)


def open_console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output keeps whole lines instead of Rich's 80-column guess. No markup: what we print
    # holds names, regexes and [tables] of the user's, which must come out as written; styles are
    # given as Text (see styled).
    return Console(stderr=stderr, width=None if stream.isatty() else 1000, markup=False)


def styled(*parts: str | tuple[str, str]) -> Any:
    """A line with styled parts, e.g. styled(("VALIDATION_ERROR", "bold red"), ": ", message)."""
    from rich.text import Text

    return Text.assemble(*parts)


def fail(exc: MemlociError) -> None:
    """Report the error on stderr (its code in bold red, then its hint) and exit 1."""
    err = open_console(stderr=True)
    err.print(styled((exc.code, "bold red"), ": ", exc.message), highlight=False)
    if exc.hint:
        err.print(styled((exc.hint, "dim")), highlight=False)
    raise typer.Exit(1)


def fail_plainly(exc: MemlociError) -> None:
    """Report the error on stderr as plain lines (no Rich), and exit 1."""
    print(f"{exc.code}: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(exc.hint, file=sys.stderr)
    raise typer.Exit(1)


def not_created(exc: MemlociError) -> bool:
    """A read-only command on a mounted library that has no file yet: say so, and show it empty."""
    if not isinstance(exc, LibraryMissingError):
        return False
    open_console(stderr=True).print(f"{exc.message}; it is empty until its first write.", highlight=False)
    return True
