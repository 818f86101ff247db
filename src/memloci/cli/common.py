"""What the `memloci` subcommands share: this run's settings, the service over the mounted
libraries, the console, and how a failure is reported.

The root command (main.py) starts the run with its flags and how the settings are read; a
command builds them the first time it asks (`command_settings`), inside its own error handling.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from memloci.core.errors import (
    AlreadyExistsError,
    ConflictError,
    InternalError,
    InvalidRelationError,
    LibraryMissingError,
    MemlociError,
    NotFoundError,
    StorageFullError,
    ValidationError,
)
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
    from memloci.app.config import config_file, default_specs, extraction_on
    from memloci.app.registry import LibraryRegistry
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    settings = (settings or command_settings()).with_flags(libraries=libraries)
    return MemoryService(LibraryRegistry(default_specs(settings), create_missing=not read_only, settings=settings),
                         EmbedderHandle(None if embedder else "none", settings), embed_pending=not read_only,
                         extract=extraction_on(settings, config_file(settings)))


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


SINGULAR = {"entities": "entity", "memories": "memory", "relations": "relation", "observations": "observation",
            "items": "item", "lines": "line", "archive candidates": "archive candidate"}


def counted(n: int, noun: str) -> str:
    """`n` and the noun, in the singular for one: "1 entity", "3 entities"."""
    return f"{n} {SINGULAR.get(noun, noun) if n == 1 else noun}"


def closest(value: str, choices: Sequence[str]) -> str | None:
    """The choice `value` most likely meant (a typo of it), if any."""
    found = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def check_choice(flag: str, value: str, allowed: Sequence[str],
                 error: type[ValidationError] = ValidationError) -> str:
    """`value` when it is one of `allowed`; otherwise a ValidationError (or `error`, a kind of
    it) naming the option, the values it takes and the closest one."""
    if value in allowed:
        return value
    near = f"; did you mean '{close}'?" if (close := closest(value, allowed)) else ""
    raise error(f"{flag}: '{value}' is not one of {', '.join(allowed)}{near}")


# The default hints of core/errors.py speak to a model calling a tool; at a terminal the same
# errors get these (the MCP errors keep theirs).
_PERSON_HINTS: dict[type[MemlociError], str] = {
    NotFoundError: "Check the name (memloci search, memloci stats), or create it first.",
    ValidationError: "Fix the named option or value and run the command again; nothing was changed.",
    AlreadyExistsError: "Pick another name.",
    InvalidRelationError: "Create the missing entities first; nothing was changed.",
    ConflictError: "Run the command again in a moment.",
    StorageFullError: "Free disk space (or move the library to another disk) and run the command again; "
                      "nothing was changed.",
    InternalError: "This is a fault in memloci or its storage, not in the command as typed.",
}
_CALL_WORDS = [  # what a hint written for a model says, and what it says to a person
    (re.compile(r"\b([Ss])end the (same )?call again\b"), lambda m: ("R" if m[1] == "S" else "r") + "un the command again"),
    (re.compile(r"\b([Rr])e(?:peat|try) the (?:same )?call\b"), lambda m: ("R" if m[1] == "R" else "r") + "un the command again"),
    (re.compile(r"\b([Ss])plit the batch into several calls\b"), lambda m: ("S" if m[1] == "S" else "s") + "plit it"),
]


def person_hint(exc: MemlociError) -> str:
    """The error's hint as a person at a terminal reads it: a default written for a model
    becomes the command line's own, and "send the call again" becomes "run the command again"."""
    hint = exc.hint
    for kind in type(exc).__mro__:
        if kind in _PERSON_HINTS and hint == getattr(kind, "default_hint", None):
            return _PERSON_HINTS[kind]
    for pattern, words in _CALL_WORDS:
        hint = pattern.sub(words, hint)
    return hint


def as_option(exc: MemlociError, options: dict[str, str]) -> str:
    """The error's message with a field the service names (`limit: must be ...`) named as the
    command's option or argument that gave it (`-n/--limit: must be ...`)."""
    field, sep, rest = exc.message.partition(": ")
    return f"{options[field]}{sep}{rest}" if sep and field in options else exc.message


def fail(exc: MemlociError, options: dict[str, str] | None = None) -> None:
    """Report the error on stderr (its code in bold red, then its hint for a person) and exit 1;
    `options`: the service's field names as this command's options (`{"limit": "-n/--limit"}`)."""
    err = open_console(stderr=True)
    err.print(styled((exc.code, "bold red"), ": ", as_option(exc, options or {})), highlight=False)
    hint = person_hint(exc)
    if hint:
        err.print(styled((hint, "dim")), highlight=False)
    raise typer.Exit(1)


def fail_plainly(exc: MemlociError) -> None:
    """Report the error on stderr as plain lines (no Rich), and exit 1."""
    print(f"{exc.code}: {exc.message}", file=sys.stderr)
    hint = person_hint(exc)
    if hint:
        print(hint, file=sys.stderr)
    raise typer.Exit(1)


def not_created(exc: MemlociError) -> bool:
    """A read-only command on a mounted library that has no file yet: say so, and show it empty."""
    if not isinstance(exc, LibraryMissingError):
        return False
    open_console(stderr=True).print(f"{exc.message}; it is empty until its first write.", highlight=False)
    return True
