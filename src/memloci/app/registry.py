"""The mounted libraries of one process, by name (LibraryRegistry), and the store of a spec.

Stores open lazily, on first use, so start-up stays fast and a broken library is reported by
the call that needs it, not by a crashed server. A project's own library (projects.py) opens
the first time a call names its root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from pathlib import Path

from memloci.app.projects import (
    ProjectRef,
    mark_journal_union,
    name_other_clone,
    project_id,
    project_library_dir,
    resolve_project_root,
)
from memloci.app.specs import DEFAULT_LIBRARY, LibrarySpec
from memloci.core.errors import AwaitingConfirmationError, NotFoundError, ValidationError
from memloci.core.schema import schema_from_config
from memloci.core.settings import Settings
from memloci.store.protocols import FolderLibrary, Store


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


def open_store(spec: LibrarySpec, home: Path) -> Store:
    """The store of a spec, not opened yet; `home` is the data folder (settings.home)."""
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

    def __init__(self, specs: list[LibrarySpec], *, create_missing: bool = True, settings: Settings | None = None):
        """`specs` are the libraries to mount (the program's: config.default_specs). `create_missing=False`
        (read-only commands) reports a missing library instead of creating it. `settings` give the
        data folder and the schema of libraries without their own (--schema, MEMLOCI_SCHEMA); left
        out, those of a process with no variable set (Settings.defaults: the environment is not read)."""
        settings = settings if settings is not None else Settings.defaults()
        self.settings = settings
        self.specs = specs
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
                hidden = store.root / INDEX_DIR  # the index goes; a journal and free memories there stay
                for part in list(hidden.iterdir()) if hidden.is_dir() and not hidden.is_symlink() else []:
                    if part.name in ("journal.md", "memories"):
                        continue
                    if part.is_dir() and not part.is_symlink():
                        shutil.rmtree(part, ignore_errors=True)
                    else:
                        part.unlink(missing_ok=True)
                with contextlib.suppress(OSError):  # emptied: the next opening is a first one again
                    hidden.rmdir()

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
