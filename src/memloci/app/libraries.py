"""Which libraries are mounted, by name.

A library spec is `name:path[,name:path...]` (flag `--libraries`, variable
`MEMLOCI_LIBRARIES`, or the `[libraries]` table of a config file). A path ending in `.db`
(`.sqlite`, `.sqlite3`) is a SQLite library; a `postgresql://` (or `postgres://`) URL is a
library in PostgreSQL, kept in a schema of its own named after the library; any other path
is a folder holding a Markdown library. A path that looks like a URL of any other scheme is
refused (it would otherwise become a folder named `http:`), and so is a URL with no name
before it (`postgresql://u@host/db` alone would be the library `postgresql` in the folder
`//u@host/db`). With none given, one library named `default` lives in `default.db` of the data
folder (`memloci_home()`). Stores open lazily, on first use, so start-up stays fast
and a broken library is reported by the call that needs it, not by a crashed server.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memloci.core.errors import NotFoundError, ValidationError
from memloci.core.schema import schema_from_config
from memloci.core.secrets import masked_url, url_secrets
from memloci.core.settings import Settings, data_home
from memloci.store.protocols import FolderLibrary, Store

DEFAULT_LIBRARY = "default"
CONFIG_KEYS = ("name", "tools", "libraries", "schemas", "oauth", "http")  # every key a config file may have, at the top
CONFIG_EXAMPLES = {"name": "memloci", "tools": "graph,memory"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a path with a scheme is a URL, never a folder
URL_SCHEMES = ("postgresql", "postgres")  # the schemes a library URL may have (libpq's two)


def memloci_home(settings: Settings | None = None) -> Path:
    """The data directory: `settings.home`; without settings, as the environment says now
    (`$MEMLOCI_HOME`, else `$XDG_DATA_HOME/memloci`, else `~/.local/share/memloci`: settings.py)."""
    return settings.home if settings is not None else data_home()


@dataclass(frozen=True, slots=True)
class ProjectRef:
    """A project's own library, named by its root path (see projects.py)."""

    path: str
    confirm: str | None = None
    may_create: bool = True  # resources read established projects only


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
        specs.append(_spec(f"libraries[{i}]", name, path, specs))
    if not specs:
        raise ValidationError("libraries: no library given", hint="Example: --libraries 'work:~/notes,personal:~/memory/personal.db'")
    return specs


def _spec(where: str, name: str, path: str, taken: list[LibrarySpec]) -> LibrarySpec:
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


def load_config(path: str | os.PathLike[str], settings: Settings | None = None) -> dict[str, Any]:
    """A TOML config file: `name = "..."`, `[libraries] work = "~/notes"`, `tools = "graph,memory"`.
    `settings` place the `default` library a `[schemas]` table may name (its data folder)."""
    p = Path(path).expanduser()
    try:
        with p.open("rb") as f:
            config = tomllib.load(f)
    except FileNotFoundError as exc:
        raise ValidationError(f"config: {p} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"config: {p} is not valid TOML: {exc}") from exc
    for key in config:  # a misspelt key would otherwise be ignored, and its setting silently lost
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(key, CONFIG_KEYS, n=1, cutoff=0.6)
            raise ValidationError(f"config: {p}: {key}: unknown key" + (f"; did you mean {close[0]}?" if close else ""),
                                  hint=f"Known keys: {', '.join(CONFIG_KEYS)}. Fix {p} and run the command again.")
    for key in ("name", "tools"):
        if key in config and not isinstance(config[key], str):
            raise ValidationError(f"config: {p}: {key}: must be a string, e.g. {key} = \"{CONFIG_EXAMPLES[key]}\"")
    if "oauth" in config:  # [oauth]: JWTs from an issuer (server mode); checked key by key like the rest
        from memloci.http.oauth import parse_oauth_config

        config = {**config, "oauth": parse_oauth_config(config["oauth"], f"config: {p}: [oauth]")}
    if "http" in config:  # [http]: where server mode listens and what it lets in (http/settings.py)
        from memloci.http.settings import parse_http_config

        config = {**config, "http": parse_http_config(config["http"], f"config: {p}: [http]")}
    libraries = config.get("libraries", {})
    if not isinstance(libraries, dict) or not all(isinstance(v, str) for v in libraries.values()):
        raise ValidationError(f"config: {p}: [libraries] maps names to paths, e.g. work = \"~/notes\"")
    schemas = config.get("schemas", {})
    if not isinstance(schemas, dict):
        raise ValidationError(f"config: {p}: [schemas] maps library names to a preset (\"strict\") or a table of rules")
    # Without [libraries] the one library is `default`, and [schemas] may name it.
    mounted = set(libraries) or {DEFAULT_LIBRARY}
    unknown = sorted(set(schemas) - mounted)
    if unknown:
        raise ValidationError(f"config: {p}: [schemas] names libraries that are not mounted: {', '.join(unknown)}; "
                              f"mounted: {', '.join(sorted(mounted))}")
    if not libraries and DEFAULT_LIBRARY in schemas:
        rules = schema_from_config(schemas[DEFAULT_LIBRARY], f"config [schemas] {DEFAULT_LIBRARY}")
        default = LibrarySpec(DEFAULT_LIBRARY, memloci_home(settings) / f"{DEFAULT_LIBRARY}.db", "sqlite", rules)
        return {**config, "libraries": [default]}
    specs: list[LibrarySpec] = []
    for name, path in libraries.items():  # relative paths are relative to the config file
        text = str(path)  # a string: checked above
        full = Path(text).expanduser()
        where = text if _URL.match(text) else str(full if full.is_absolute() else p.parent / full)
        spec = _spec(f"config [libraries] {name}", name, where, specs)
        if name in schemas:
            spec = LibrarySpec(spec.name, spec.path, spec.kind, schema_from_config(schemas[name], f"config [schemas] {name}"))
        specs.append(spec)
    return {**config, "libraries": specs}


def config_file(settings: Settings | None = None) -> dict[str, Any]:
    """The config file the settings name (`--config`, MEMLOCI_CONFIG), else `$MEMLOCI_HOME/config.toml`
    if present; without settings, as the environment says now."""
    settings = settings if settings is not None else Settings.from_env()
    if settings.config is not None:
        return load_config(settings.config, settings)
    default = settings.home / "config.toml"
    return load_config(default, settings) if default.is_file() else {}


def default_specs(settings: Settings | None = None) -> list[LibrarySpec]:
    """The libraries to mount: `--libraries`/MEMLOCI_LIBRARIES, else the config file's, else `default`."""
    settings = settings if settings is not None else Settings.from_env()
    if settings.libraries:
        return parse_library_specs(settings.libraries)
    configured = config_file(settings).get("libraries")
    if configured:
        return configured
    return [LibrarySpec(DEFAULT_LIBRARY, settings.home / f"{DEFAULT_LIBRARY}.db")]


def _make_private(folder: Path, names: tuple[str, ...]) -> None:
    """Tighten what an older memloci left readable by others: the data folder to 0700 and the
    default library's files to 0600 (memloci's own, never a person's; links are left alone)."""
    for path, mode in ((folder, 0o700), *((folder / n, 0o600) for n in names)):
        try:
            st = path.lstat()
        except OSError:
            continue
        if not stat.S_ISLNK(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(mode)


def open_store(spec: LibrarySpec, home: Path | None = None) -> Store:
    """The store of a spec, not opened yet; `home` is the data folder (settings.home)."""
    home = home if home is not None else memloci_home()
    if spec.kind == "sqlite" and spec.path == home / f"{DEFAULT_LIBRARY}.db":
        _make_private(home, tuple(f"{spec.path.name}{s}" for s in ("", "-wal", "-shm")))
    if spec.kind == "markdown":
        from memloci.store.markdown.engine import MarkdownStore

        return MarkdownStore(spec.path, spec.name)
    if spec.kind == "postgres":
        from memloci.store.postgres.engine import PostgresStore

        return PostgresStore(str(spec.path), spec.name)
    from memloci.store.sqlite.engine import SQLiteStore

    return SQLiteStore(spec.path, spec.name)


class LibraryRegistry:
    """The mounted libraries of one process, by name."""

    def __init__(self, specs: list[LibrarySpec] | None = None, *, create_missing: bool = True,
                 settings: Settings | None = None):
        """`create_missing=False` (read-only commands) reports a missing library instead of creating it.
        `settings` (default: the environment's, read now) give the specs left out, the data folder
        and the schema of libraries without their own (--schema, MEMLOCI_SCHEMA)."""
        settings = settings if settings is not None else Settings.from_env()
        self.settings = settings
        self.specs = specs if specs is not None else default_specs(settings)
        self.create_missing = create_missing
        self._stores: dict[str, Store] = {s.name: open_store(s, settings.home) for s in self.specs}
        default = settings.schema
        fallback = schema_from_config(default, "schema (MEMLOCI_SCHEMA, --schema)") if default else None
        self.fallback_schema = fallback  # project libraries follow it too
        for spec in self.specs:
            rules = spec.schema or fallback
            if rules is not None:
                self._stores[spec.name].schema = rules
        self._projects: dict[Path, Store] = {}
        self._projects_lock = threading.Lock()
        self._watching = False

    def names(self) -> list[str]:
        return list(self._stores)

    def get(self, name: str | ProjectRef | None = None) -> Store:
        """The named library (opened on first use); the only one when `name` is left out."""
        if isinstance(name, ProjectRef):
            return self.project(name)[0]
        found: Store | None
        if name is None or name == "":
            if len(self._stores) == 1:
                found = next(iter(self._stores.values()))
            else:
                raise ValidationError(
                    f"library: several libraries are mounted ({', '.join(self._stores)}); name one",
                    hint=f"Name one of: {', '.join(self._stores)} (tool argument `library`, or `-l` on the command line).",
                )
        else:
            # library names match case-insensitively, like entity names
            found = self._stores.get(name) or next(
                (s for n, s in self._stores.items() if n.casefold() == name.casefold()), None)
            if found is None:
                raise NotFoundError(
                    f"library '{name}' is not mounted; mounted: {', '.join(self._stores)}",
                    hint=f"Use one of: {', '.join(self._stores)}.",
                )
        store = found
        store.open(create=self.create_missing)
        return store

    def project(self, ref: ProjectRef, *, may_create: bool = True) -> tuple[Store, Path | None]:
        """A project's library, and its `.mcp` folder if this call opened it for the first time
        (so the caller can carry over n2n-memory files); AWAITING_CONFIRMATION before creating."""
        from memloci.app.projects import (
            mark_journal_union,
            name_other_clone,
            project_id,
            project_library_dir,
            resolve_project_root,
        )
        from memloci.core.errors import AwaitingConfirmationError
        from memloci.store.markdown.engine import INDEX_DIR, MarkdownStore

        root = resolve_project_root(ref.path)
        with self._projects_lock:
            store = self._projects.get(root)
            if store is not None:
                return store, None
            try:
                folder = project_library_dir(root, ref.confirm,
                                             may_create=may_create and ref.may_create and self.create_missing)
            except AwaitingConfirmationError as exc:  # another clone of it open here: say so
                name_other_clone(exc, root, {r: s.name for r, s in self._projects.items()})
                raise
            # n2n files are carried over once: into a folder with no Markdown yet (a fresh clone of a
            # project that already carried them over has its .md files, only its index is missing).
            first = not (folder / INDEX_DIR).exists() and not any(folder.glob("*.md"))
            if first:
                mark_journal_union(folder)
            store = MarkdownStore(folder, project_id(root))  # named by its id: the same in every clone
            if self.fallback_schema is not None:
                store.schema = self.fallback_schema
            store.open()
            if self._watching:
                store.start_watching()
            self._projects[root] = store
        return store, folder if first else None

    def forget_project(self, store: Store) -> None:
        """Drop a project library whose first opening failed half-way (say, a bad n2n file), index
        and all, so the next call starts that opening again instead of finding it half done."""
        import shutil

        from memloci.store.markdown.engine import INDEX_DIR

        with self._projects_lock:
            for root, cached in list(self._projects.items()):
                if cached is store:
                    del self._projects[root]
            store.close()
            if not isinstance(store, FolderLibrary):  # a project library always is one: nothing else to drop
                return
            # Not while .memloci/staging holds a change a killed process left: the next opening
            # needs its kept files to put it back (this call's own failed change is back already).
            if not any((store.root / INDEX_DIR / "staging").glob("*.intent")):
                shutil.rmtree(store.root / INDEX_DIR, ignore_errors=True)

    def all(self) -> list[Store]:
        return list(self._stores.values())

    def watch(self) -> None:
        """Markdown libraries (project ones too, as they open) rescan their folders while the server runs."""
        self._watching = True
        for store in [*self._stores.values(), *self._projects.values()]:
            if isinstance(store, FolderLibrary):
                store.start_watching()

    def close(self) -> None:
        for store in [*self._stores.values(), *self._projects.values()]:
            store.close()
