"""File operations confined to a root folder: nothing follows a symbolic link.

A Markdown library or a project's `.mcp/` may come from a clone, and a clone can carry
links (`journal.md -> ~/.bashrc`, `memories -> /etc`). Every path memloci reads or writes
inside a root goes through here: the root is opened once, then each component below it is
opened relative to its parent's file descriptor with O_NOFOLLOW, so a link anywhere on the
path (the folder, a sub-folder, the file itself) is refused, and a link swapped in between a
check and the use cannot redirect the operation either.

The rule is simple on purpose: a link below the root is refused even when it points back
inside the root. It is reported (a PERMISSION_DENIED error naming the path relative to the
root; scans list it as a problem) and never read, written or followed. The root itself is
given by the person (a mounted folder, a resolved project root) and is trusted.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from memloci.core.errors import PermissionDeniedError, ValidationError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted where a file is expected must not hang the process (the file
# type is checked right after the open); it changes nothing for regular files.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
PRIVATE_FILE = 0o600  # what memloci keeps for itself: the index, a default library's database
PRIVATE_DIR = 0o700


class LinkRefusedError(PermissionDeniedError):
    """A path below a root passes through a symbolic link; memloci does not follow it."""

    def __init__(self, rel: str, where: str | None = None):
        self.rel = rel
        at = f" ({where} is a link)" if where and where != rel else ""
        super().__init__(f"{rel}: a symbolic link{at}; memloci never follows links inside a library or project",
                         hint="Replace the link with a real file or folder, or remove it.")


def parts(rel: str | os.PathLike[str]) -> list[str]:
    """The components of a path relative to a root: no absolute path, no '..', no NUL."""
    text = os.fspath(rel)
    if "\x00" in text:
        raise ValidationError(f"path '{text!r}': contains a NUL byte")
    p = PurePosixPath(text.replace(os.sep, "/"))
    if p.is_absolute():
        raise ValidationError(f"path '{text}': must be relative to the library folder")
    out = [c for c in p.parts if c != "."]
    if ".." in out or not out:
        raise ValidationError(f"path '{text}': must name a file inside the library folder (no '..')")
    return out


def _refuse_if_link(dir_fd: int, name: str, rel: str, where: str) -> None:
    """Turn an ELOOP/ENOTDIR from O_NOFOLLOW into a clear error when a link caused it."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise LinkRefusedError(rel, where)


def _open_root(root: Path) -> int:
    # The folders above the root are the person's business (a home on another disk, say); the
    # root's own last component is not followed, so a `.mcp` swapped for a link is caught too.
    try:
        return os.open(root, _DIR_FLAGS)
    except OSError:
        if os.path.islink(root):
            raise LinkRefusedError(root.name) from None
        raise


@contextmanager
def dir_fd(root: Path, rel_dir: list[str], *, create: bool = False, mode: int = 0o777,
           rel: str | None = None) -> Iterator[int]:
    """A file descriptor of `root/rel_dir`, reached without following any link; folders on the
    way are made (with `mode`, under the umask) when `create` is set."""
    shown = rel if rel is not None else "/".join(rel_dir)
    fd = _open_root(root)
    try:
        for i, name in enumerate(rel_dir):
            where = "/".join(rel_dir[: i + 1])
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile (or a dangling link: the open below refuses it)
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    _refuse_if_link(fd, name, shown, where)
                    raise
            except OSError:
                _refuse_if_link(fd, name, shown, where)
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _split(rel: str | os.PathLike[str]) -> tuple[list[str], str, str]:
    p = parts(rel)
    return p[:-1], p[-1], "/".join(p)


def lstat(root: Path, rel: str | os.PathLike[str]) -> os.stat_result:
    """The file's own stat (FileNotFoundError if absent); a link on the way, or the file being
    a link, is refused."""
    folders, name, shown = _split(rel)
    with dir_fd(root, folders, rel=shown) as fd:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        raise LinkRefusedError(shown)
    return st


def exists(root: Path, rel: str | os.PathLike[str]) -> bool:
    """Whether something is there: a link as the last component counts (it is there, and
    refused when used); a path through a linked folder does not (nothing is reachable there)."""
    folders, name, shown = _split(rel)
    try:
        with dir_fd(root, folders, rel=shown) as fd:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        return True
    except (FileNotFoundError, NotADirectoryError, LinkRefusedError):
        return False


def is_link(root: Path, rel: str | os.PathLike[str]) -> bool:
    """Whether the path, or any folder on the way to it, is a symbolic link."""
    try:
        lstat(root, rel)
    except LinkRefusedError:
        return True
    except OSError:
        return False
    return False


def _open_file(root: Path, rel: str | os.PathLike[str], flags: int, mode: int = 0o666, *,
               create_dirs: bool = False) -> tuple[int, str]:
    """An fd on the regular file `root/rel`, opened with no link followed at any component;
    with the path as shown in errors. The caller closes the fd."""
    folders, name, shown = _split(rel)
    with dir_fd(root, folders, create=create_dirs, rel=shown) as d:
        try:
            fd = os.open(name, flags | _NOFOLLOW, mode, dir_fd=d)
        except FileNotFoundError:  # nothing there: not a link either
            raise
        except OSError:
            _refuse_if_link(d, name, shown, shown)
            raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PermissionDeniedError(f"{shown}: not a regular file")
    return fd, shown


def read_bytes(root: Path, rel: str | os.PathLike[str]) -> bytes:
    fd, _ = _open_file(root, rel, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_text(root: Path, rel: str | os.PathLike[str]) -> str:
    return read_bytes(root, rel).decode("utf-8")


_TEMP = re.compile(r"^\..{1,40}\.(\d+)\.[0-9a-f]{8}\.tmp$")  # write_atomic's temp names


def is_stray_temp(name: str) -> bool:
    """A temp file of `write_atomic` whose process is gone (killed between write and rename)."""
    match = _TEMP.match(name)
    if match is None:
        return False
    pid = int(match.group(1))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, under another user
        return False
    return False


def names_in(root: Path, rel_dir: str | os.PathLike[str] = "") -> list[str]:
    """The names in one folder of `root`, reached without following a link ([] if it is not there)."""
    try:
        with dir_fd(root, parts(rel_dir) if str(rel_dir) not in ("", ".") else []) as d:
            return os.listdir(d)
    except (FileNotFoundError, NotADirectoryError, LinkRefusedError):
        return []


def remove_stray_temps(root: Path, rel_dir: str | os.PathLike[str] = "") -> list[str]:
    """Remove the temp files a killed writer left in one folder of `root`; their names."""
    removed = []
    with dir_fd(root, parts(rel_dir) if str(rel_dir) else []) as d:
        for name in os.listdir(d):
            if is_stray_temp(name):
                try:
                    os.unlink(name, dir_fd=d)
                    removed.append(name)
                except FileNotFoundError:
                    pass
    return removed


def write_atomic(root: Path, rel: str | os.PathLike[str], data: bytes, *, mode: int = 0o666,
                 dir_mode: int = 0o777, tmp_name: str | None = None, durable: bool = True) -> os.stat_result:
    """Temp file beside the target, fsync, rename, fsync the folder; folders made as needed. A
    link at the target or on the way is refused, never replaced or written through. `mode` is
    for a new file (under the umask); an existing file keeps its permission bits."""
    folders, name, shown = _split(rel)
    tmp = tmp_name or f".{name[:40]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    with dir_fd(root, folders, create=True, mode=dir_mode, rel=shown) as d:
        try:
            old = os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise LinkRefusedError(shown)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=d)
        try:
            try:
                if old is not None:
                    os.fchmod(fd, stat.S_IMODE(old.st_mode))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
                st = os.fstat(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
            if durable:
                try:
                    os.fsync(d)  # the rename itself survives a power cut
                except OSError:
                    pass  # a file system that cannot sync a folder: the rename is done all the same
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=d)
            except OSError:
                pass
            raise
        return st


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int = 0o666, *,
                 durable: bool = True) -> os.stat_result:
    """Replace the file `path` (a config file, the token file, an export, a spooled event) with
    `data` as one step: every reader sees the old bytes or the new, never half. memloci's one
    atomic file write; a library's files go through `write_atomic` below it, and a Markdown
    library's changes of several files through store/markdown/intent.py.

    The folder is the caller's (resolved, and made if missing); the file itself is never
    followed: a link there is refused, not written through or replaced. `mode` is for a new
    file (under the umask); an existing file keeps its permission bits. `durable` fsyncs the
    file and its folder, so the new bytes survive a power cut (a spooled event skips it: it
    guards against a killed hook only). Temp files of this name that a killed writer left are
    removed first."""
    path = Path(path)
    folder = Path(os.path.realpath(path.parent))
    folder.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name[:40]}."
    for name in os.listdir(folder):
        if name.startswith(prefix) and is_stray_temp(name):
            try:
                os.unlink(folder / name)
            except FileNotFoundError:
                pass
    return write_atomic(folder, path.name, data, mode=mode, durable=durable)


def append(root: Path, rel: str | os.PathLike[str], data: bytes, *, mode: int = 0o666,
           fsync: bool = True) -> os.stat_result:
    """Append to a file (made if missing), never through a link; its stat after the append."""
    fd, _ = _open_file(root, rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode, create_dirs=True)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
        return os.fstat(fd)
    finally:
        os.close(fd)


def truncate(root: Path, rel: str | os.PathLike[str], size: int) -> None:
    fd, _ = _open_file(root, rel, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink(root: Path, rel: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
    """Remove a file; a link on the way is refused (a link as the file itself is removed, not
    followed: removing a link touches nothing outside)."""
    folders, name, shown = _split(rel)
    try:
        with dir_fd(root, folders, rel=shown) as d:
            os.unlink(name, dir_fd=d)
    except FileNotFoundError:
        if not missing_ok:
            raise


def free_backup_name(root: Path, rel: str, suffix: str = ".bak") -> str | None:
    """The first of `rel<suffix>`, `rel<suffix>.1`, ... `rel<suffix>.99` that nothing holds (a
    link counts as held), or None: a backup never replaces a file, so the first one (a person's
    original, or a `.bak` of their own) stays. Install's backups and rules sync's both."""
    for n in range(100):
        candidate = rel + (suffix if n == 0 else f"{suffix}.{n}")
        if not exists(root, candidate):
            return candidate
    return None


def check(root: Path, rel: str | os.PathLike[str]) -> Path:
    """`root/rel` after checking that no existing component below the root is a link, for
    callers (such as SQLite) that must open a path by name. Missing components are fine."""
    p = parts(rel)
    shown = "/".join(p)
    current = root
    for i, name in enumerate(p):
        current = current / name
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            raise LinkRefusedError(shown, "/".join(p[: i + 1]))
    return root.joinpath(*p)



def private_dir(root: Path, rel: str | os.PathLike[str]) -> None:
    """Make `root/rel` (links refused) readable by its owner only: 0700, also if it was there."""
    with dir_fd(root, parts(rel), create=True, mode=PRIVATE_DIR) as fd:
        if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_DIR:
            os.fchmod(fd, PRIVATE_DIR)


def private_file(root: Path, rel: str | os.PathLike[str], *, create: bool = True) -> None:
    """Make sure `root/rel` exists (empty if new; SQLite takes an empty file as a new database)
    with mode 0600 before anything is written to it. SQLite gives its -wal and -shm files
    the database file's mode, so they are private too."""
    try:
        fd, _ = _open_file(root, rel, os.O_RDONLY | (os.O_CREAT if create else 0), PRIVATE_FILE)
    except FileNotFoundError:
        if create:
            raise
        return
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
            os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
