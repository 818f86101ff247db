"""Backup and restore of a whole library, while servers keep running.

A backup is one file, never written over:
- a SQLite library's is a SQLite database made with SQLite's online backup API
  (`sqlite3.Connection.backup`): a consistent snapshot even while other processes write;
- a Markdown library's is a `.tar.gz` of its folder (every file but `.git/` and `.memloci/`,
  whose journal and free memories it holds all the same; symbolic links are left out) plus a
  snapshot of its index as `.memloci/index.db`, both taken under the library's write lock, so
  files and index agree and keep every date, vector and the journal.

Restore puts a backup back into the mounted library. A library that holds data is replaced only
when asked (`force`), and then its current state is first saved as a pre-restore backup beside
it, which the result names. The restore is journaled. SQLite writes the snapshot into the live
database through the same backup API, so other processes see the old data or the new, never a
mix; a Markdown restore replaces the files under the write lock, then the index.
"""

from __future__ import annotations

import gzip
import io
import os
import sqlite3
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from memloci.core import confine
from memloci.core.errors import AlreadyExistsError, ConflictError, ValidationError, storage_error
from memloci.core.model import now_iso
from memloci.store.protocols import FolderLibrary, Portable, Store

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
INDEX_MEMBER = ".memloci/index.db"
SKIPPED_DIRS = {".memloci", ".git"}
# The names a backup may have, by the kind of library (what it writes): the first is suggested.
BACKUP_SUFFIXES = {"sqlite": (".db", ".sqlite", ".sqlite3"), "markdown": (".tar.gz", ".tgz")}
_FORMATS = {"sqlite": "a SQLite database", "markdown": "a .tar.gz of its folder"}
_ANY_SUFFIX = (".tar.gz", ".tgz", ".gz", ".tar", ".zip", ".db", ".sqlite", ".sqlite3", ".bak")
# What a Markdown library keeps in its hidden folder as data, not index: its journal and the day
# files of its free memories (store/markdown/layout.py); a backup holds them as files.
KEPT_HIDDEN = (".memloci/journal.md", ".memloci/memories/")


class PortableStore(Store, Portable, Protocol):
    """A store whose library can be copied out whole and put back: what a backup reads and writes."""


def _connect_ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True, timeout=60)


def copy_database(source: Path, target: Path, *, new_file: bool = True) -> None:
    """`source` into `target` with SQLite's online backup API (consistent under concurrent writers).
    A new file is made self-contained; a live library keeps its journal mode (WAL)."""
    src = _connect_ro(source)
    try:
        dst = sqlite3.connect(target, timeout=60)
        try:
            src.backup(dst)
            if new_file and dst.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            dst.close()
    finally:
        src.close()


def library_files(root: Path) -> list[str]:
    """The files a Markdown library's backup holds: regular files, links and memloci's index left out."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink()
                         and not (here == root and d in SKIPPED_DIRS))
        for name in sorted(files):
            path = here / name
            if not path.is_symlink() and path.is_file():
                found.append(path.relative_to(root).as_posix())
    return found + [rel for rel in _hidden_files(root) if rel.startswith(KEPT_HIDDEN)]


def _hidden_files(root: Path) -> list[str]:
    """Regular files of the library's hidden folder, links left out (the folder itself a link: none)."""
    hidden = root / INDEX_MEMBER.split("/")[0]
    if hidden.is_symlink() or not hidden.is_dir():
        return []
    found = []
    for folder, dirs, files in os.walk(hidden, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
        found += [(here / n).relative_to(root).as_posix() for n in sorted(files)
                  if not (here / n).is_symlink() and (here / n).is_file()]
    return found


def _kind_of(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(16)
    if head == SQLITE_MAGIC:
        return "sqlite"
    if head[:2] == GZIP_MAGIC:
        return "markdown"
    raise ValidationError(f"path: {path} is not a memloci backup (neither a SQLite file nor a .tar.gz)")


def _fresh_target(dest: Path) -> Path:
    dest = dest.expanduser().absolute()
    if dest.exists() or dest.is_symlink():
        raise AlreadyExistsError(f"path: {dest} exists; a backup never replaces a file",
                                 hint="Give a new file name (a date in it helps).")
    if not dest.parent.is_dir():
        raise ValidationError(f"path: the folder {dest.parent} does not exist")
    return dest


def _check_name(store: PortableStore, dest: Path) -> None:
    """A backup's name says what it holds: a SQLite library's ends in .db (.sqlite, .sqlite3), a
    Markdown library's in .tar.gz (.tgz). A name that says otherwise is refused, not corrected:
    the file is then where the person looks for it, under the name they gave."""
    kind = store.kind if store.kind == "sqlite" or isinstance(store, FolderLibrary) else None
    if kind is None or dest.name.lower().endswith(BACKUP_SUFFIXES[kind]):
        return
    stem = dest.name
    for suffix in _ANY_SUFFIX:
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    wanted = BACKUP_SUFFIXES[kind]
    endings = f"{', '.join(wanted[:-1])} or {wanted[-1]}"
    raise ValidationError(f"path: '{dest.name}' does not end in {endings}; the backup of {kind} library "
                          f"'{store.name}' is {_FORMATS[kind]}, which backup writes under a {wanted[0]} name",
                          hint=f"Give it a {wanted[0]} name, e.g. {dest.with_name(stem + wanted[0])}; nothing was written.")


def backup_library(store: PortableStore, dest: Path) -> dict[str, Any]:
    """Write a backup of `store` to the new file `dest` (its name ending as BACKUP_SUFFIXES says
    for the library's kind); what was written."""
    _check_name(store, dest)
    dest = _fresh_target(dest)
    # Not confine.atomic_write: SQLite's backup API and tarfile write the copy to a path, and a
    # backup is a new file published by a hard link, which never replaces one that appeared meanwhile.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        # Private from its first byte: a backup holds everything the library does.
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        if store.kind == "sqlite":
            store.open()
            copy_database(Path(store.path), tmp)
        elif isinstance(store, FolderLibrary):
            _tar_library(store, Path(store.path), tmp)
        else:
            raise ValidationError(f"library '{store.name}': a {store.kind} library is backed up with its server's tools")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.link(tmp, dest)  # never over a file that appeared meanwhile
    except FileExistsError:
        raise AlreadyExistsError(f"path: {dest} exists; a backup never replaces a file") from None
    except OSError as exc:
        raise storage_error(exc, f"path: cannot write {dest}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    at = now_iso()
    store.note_backup(at, str(dest))
    return {"library": store.name, "kind": store.kind, "path": str(dest), "at": at, "bytes": dest.stat().st_size}


def _tar_library(store: FolderLibrary, database: Path, target: Path) -> None:
    root = Path(store.root)
    with tempfile.TemporaryDirectory() as scratch:
        index = Path(scratch) / "index.db"
        with store.files_frozen(), tarfile.open(target, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for rel in library_files(root):
                data = confine.read_bytes(root, rel)  # never through a link
                _add_member(tar, rel, data, os.lstat(root / rel).st_mtime)  # a note's mtime can be its date
            copy_database(database, index)  # under the same lock: it agrees with the files
            _add_member(tar, INDEX_MEMBER, index.read_bytes(), time.time())


def _add_member(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600  # private, whoever unpacks it
    info.pax_headers = {"mtime": repr(mtime)}  # exact to the nanosecond-ish, not whole seconds
    info.mtime = int(mtime)
    tar.addfile(info, io.BytesIO(data))


def _read_tar(path: Path) -> tuple[dict[str, tuple[bytes, float]], bytes | None]:
    """Files (relative path -> bytes and mtime) and the index snapshot of a Markdown backup, checked first:
    only regular files, relative paths, nothing climbing out."""
    files: dict[str, tuple[bytes, float]] = {}
    index = None
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                name = PurePosixPath(member.name)
                if member.isdir():
                    continue
                if not member.isfile() or name.is_absolute() or ".." in name.parts:
                    raise ValidationError(f"path: {path} holds '{member.name}', which is not a plain file "
                                          "inside the library; nothing was restored")
                file = tar.extractfile(member)
                assert file is not None  # a regular file (checked above)
                data = file.read()
                if name.as_posix() == INDEX_MEMBER:
                    index = data
                elif name.parts[0] in SKIPPED_DIRS and not name.as_posix().startswith(KEPT_HIDDEN):
                    continue
                else:
                    mtime = float(member.pax_headers.get("mtime", member.mtime))
                    files[name.as_posix()] = (data, mtime)
    except (tarfile.TarError, gzip.BadGzipFile, EOFError) as exc:
        raise ValidationError(f"path: {path} is not a readable .tar.gz ({exc})") from exc
    return files, index


def _check_database(path: Path) -> None:
    try:
        conn = _connect_ro(path)
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ValidationError(f"path: {path} is not a readable SQLite file ({exc})") from exc
    if ok != "ok" or not {"entities", "memories", "journal"} <= tables:
        raise ValidationError(f"path: {path} is not a sound memloci library ({ok if ok != 'ok' else 'tables missing'})")


def restore_library(store: PortableStore, source: Path, *, force: bool = False) -> dict[str, Any]:
    """Put the backup `source` back into `store`; refused if the library holds data, unless `force`."""
    source = source.expanduser().absolute()
    if not source.is_file():
        raise ValidationError(f"path: {source} is not a file")
    kind = _kind_of(source)
    if kind != store.kind or (kind == "markdown") != isinstance(store, FolderLibrary):
        raise ValidationError(f"path: {source} is a backup of a {kind} library; library '{store.name}' is {store.kind}")
    files, index = _read_tar(source) if kind == "markdown" else ({}, None)
    if kind == "sqlite":
        _check_database(source)
    store.open()
    folder = store if isinstance(store, FolderLibrary) else None  # a Markdown library, checked above
    held = store.holds_data() + (len(library_files(Path(folder.root))) if folder is not None else 0)
    saved = None
    if held:
        if not force:
            raise ConflictError(f"library '{store.name}' holds data; a restore would replace it (nothing was changed)",
                                hint="Pass --force: the current data is first saved to a pre-restore backup, named in the output.")
        stamp = time.strftime("%Y%m%dT%H%M%S")
        where = Path(folder.root) if folder is not None else Path(store.path)
        suffix = ".db" if kind == "sqlite" else ".tar.gz"
        name = f"{where.name}.pre-restore-{stamp}"
        n = 1
        while (where.parent / f"{name}{suffix}").exists():  # two restores in one second
            n += 1
            name = f"{where.name}.pre-restore-{stamp}-{n}"
        saved = backup_library(store, where.parent / f"{name}{suffix}")["path"]
    version = store.vectors_version()
    if folder is None:
        copy_database(source, Path(store.path), new_file=False)
    else:
        _restore_folder(folder, Path(store.path), files, index)
    store.note_event("restore", {"from": str(source), "saved_before": saved}, vectors_floor=version)
    return {"library": store.name, "kind": kind, "from": str(source), "saved_before": saved}


def _restore_folder(store: FolderLibrary, database: Path, files: dict[str, tuple[bytes, float]],
                    index: bytes | None) -> None:
    root = Path(store.root)
    store.replace_files({rel: data for rel, (data, _) in files.items()},
                        [rel for rel in library_files(root) if rel not in files])  # one change: all or none
    for rel, (_, mtime) in files.items():
        os.utime(root / rel, (mtime, mtime), follow_symlinks=False)  # dates taken from mtimes stay
    if index is not None:
        with tempfile.TemporaryDirectory() as scratch:
            snapshot = Path(scratch) / "index.db"
            snapshot.write_bytes(index)
            copy_database(snapshot, database, new_file=False)
    store.sync()  # the files' new mtimes; anything the index does not hold
    if index is None:
        store.rebuild_index()
        store.reload_journal()
