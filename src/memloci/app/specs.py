"""Library specs: which library lives where, and how a spec is written.

A library spec is `name:path[,name:path...]` (flag `--libraries`, variable
`MEMLOCI_LIBRARIES`, or the `[libraries]` table of a config file: config.py). A path ending in
`.db` (`.sqlite`, `.sqlite3`) is a SQLite library; a `postgresql://` (or `postgres://`) URL is a
library in PostgreSQL, kept in a schema of its own named after the library; any other path
is a folder holding a Markdown library. A path that looks like a URL of any other scheme is
refused (it would otherwise become a folder named `http:`), and so is a URL with no name
before it (`postgresql://u@host/db` alone would be the library `postgresql` in the folder
`//u@host/db`). With none given, one library named `default` lives in `default.db` of the data
folder (config.default_specs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memloci.core.errors import ValidationError
from memloci.core.secrets import masked_url, url_secrets

DEFAULT_LIBRARY = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a path with a scheme is a URL, never a folder
URL_SCHEMES = ("postgresql", "postgres")  # the schemes a library URL may have (libpq's two)


def is_url(path: str) -> bool:
    """Whether a library path is a URL (it has a scheme), never a folder."""
    return _URL.match(path) is not None


@dataclass(frozen=True, slots=True)
class LibrarySpec:
    name: str
    path: Path | str  # a str only for kind "postgres": the URL as given (a Path would fold its `//`)
    kind: str = "sqlite"
    schema: Any = None  # a schema.LibrarySchema; None: MEMLOCI_SCHEMA, else the default

    @property
    def shown_path(self) -> str:
        """Where the library lives, as a user may see it: a URL's password masked."""
        return masked_url(str(self.path)) if self.kind == "postgres" else str(self.path)


def parse_library_specs(spec: str) -> list[LibrarySpec]:
    """Parse `work:/path/work.db,personal:/path/notes.db` into specs, with errors that say what is wrong."""
    specs: list[LibrarySpec] = []
    parts = [p.strip() for p in spec.split(",")]
    for i, part in enumerate(parts):
        if not part:
            continue
        if _URL.match(part):
            # A URL with no name before it: `postgresql` would be read as the name and
            # `//u@host/db` as a Markdown folder at the filesystem's root.
            raise ValidationError(
                f"libraries[{i}] '{masked_url(part)}': a URL needs a library name before it; "
                f"expected NAME:{URL_SCHEMES[0]}://...",
                hint="Example: --libraries 'team:postgresql://user@host/db'")
        name, sep, path = part.partition(":")
        name, path = name.strip(), path.strip()
        if _URL.match(path) and "/" not in path.partition("://")[2] and "?" not in path \
                and any(parts[i + 1:]):
            # A comma inside a URL's host list (postgresql://h1,h2/db) was split here, and what
            # follows would be read as another library (`h2` at the folder `/db`): refused.
            raise ValidationError(
                f"libraries[{i}] '{masked_url(path)}': the URL ends at a comma before its database; "
                "--libraries splits on commas, so a multi-host URL cannot be given here",
                hint="Put this library in the config file ([libraries] team = \"postgresql://h1,h2/db\"), "
                     "or end a one-host URL with its database (postgresql://user@host/db).")
        if not sep or not path:
            raise ValidationError(
                f"libraries[{i}] '{part}': expected NAME:PATH",
                hint="Example: --libraries 'work:~/memory/work.db,personal:~/memory/personal.db'",
            )
        if not _NAME.match(name):
            raise ValidationError(
                f"libraries[{i}] name '{name}': use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        if any(s.name.casefold() == name.casefold() for s in specs):
            raise ValidationError(f"libraries[{i}] name '{name}': mounted twice; library names must be unique")
        specs.append(library_spec(f"libraries[{i}]", name, path, specs))
    if not specs:
        raise ValidationError("libraries: no library given", hint="Example: --libraries 'work:~/notes,personal:~/memory/personal.db'")
    return specs


def library_spec(where: str, name: str, path: str, taken: list[LibrarySpec]) -> LibrarySpec:
    """One library's spec, checked (`where` names it in errors): its name unique among `taken`, its
    path a URL of a served scheme, a .db file or a folder."""
    if not _NAME.match(name):
        raise ValidationError(f"{where} name '{name}': use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if any(s.name.casefold() == name.casefold() for s in taken):
        raise ValidationError(f"{where} name '{name}': mounted twice; library names must be unique")
    if _URL.match(path):
        return _url_spec(where, name, path)
    if re.match(r"(?i)(postgresql|postgres):", path):  # one slash short: not a folder named `postgresql:`
        raise ValidationError(f"{where} path '{masked_url(path)}': a library URL starts with "
                              f"{' or '.join(s + '://' for s in URL_SCHEMES)}",
                              hint="Example: --libraries 'team:postgresql://user@host/db'")
    p = Path(path).expanduser().resolve()
    if any(s.path == p for s in taken):
        raise ValidationError(f"{where} path '{path}': already mounted under another name")
    if p.suffix.lower() in {".db", ".sqlite", ".sqlite3"} and not p.is_dir():
        return LibrarySpec(name, p, "sqlite")
    if p.exists() and not p.is_dir():
        raise ValidationError(
            f"{where} path '{path}': not a folder (a Markdown library) nor a .db file (a SQLite library)",
            hint="Give a folder of Markdown files, or a path ending in .db; either is created if missing.")
    return LibrarySpec(name, p, "markdown")


def _url_spec(where: str, name: str, url: str) -> LibrarySpec:
    """A library stored on a server: PostgreSQL is the one served. Several libraries may share a
    URL (each has its own schema)."""
    scheme = url.partition(":")[0]
    url = scheme.lower() + url[len(scheme):]  # libpq reads the scheme in lower case only
    if scheme.lower() not in URL_SCHEMES:
        raise ValidationError(
            f"{where} path '{masked_url(url)}': the URL scheme '{scheme}' is not served; "
            f"a library URL is {' or '.join(s + '://' for s in URL_SCHEMES)}",
            hint="Example: --libraries 'team:postgresql://user@host/db'; a folder or a .db file needs no scheme.")
    _check_conninfo(where, url)
    return LibrarySpec(name, url, "postgres")


def _check_conninfo(where: str, url: str) -> None:
    """Refuse at start-up what libpq would refuse at the first call: an unknown parameter, a
    port that is not a number (one per host of a multi-host URL)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # the store says how to install the engine when the library opens
        return
    try:
        params = conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq's own words
        text = str(exc).strip()
        for secret in url_secrets(url):
            text = text.replace(secret, "***")
        raise ValidationError(f"{where} path '{masked_url(url)}': {text.replace(url, masked_url(url))}",
                              hint="See libpq's connection URIs: postgresql://user@host:5432/db?sslmode=require") from None
    for port in str(params.get("port") or "").split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ValidationError(f"{where} path '{masked_url(url)}': port '{port}' is not a number from 1 to 65535")
