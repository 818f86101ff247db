"""All or nothing on disk for a Markdown library: the file half of one write transaction.

A write never touches a person's file while it is being computed. New bytes go to temp files
under `.memloci/staging/`; deletes and appends are only noted. Just before the index commits
(under its write lock), `apply()`:

1. makes the staged bytes durable, writes an intent record (`<id>.intent`, JSON) listing
   every operation (fsynced, with its folder, when the change has several files: a single
   file's change is whole by its rename alone, and a kill does not lose page-cache writes);
2. inserts the intent's id into `md_intents` in the index transaction that is about to commit;
3. for each file: puts the new file in place by a swap (renameat2 RENAME_EXCHANGE, which
   hands back exactly the file it replaced; where there is none, a hard link or copy of the
   old file, then a rename), keeps the old one (`<id>.b<n>`) and checks that its bytes are
   those the change was computed from (an editor may have saved meanwhile, in place or by
   rename: a conflict puts their file back; the same check just before the swap refuses
   most such saves before anything is touched); moves deleted files away, appends; fsyncs
   the folders of a change of several files. An editor that saves again on the change's
   bytes before they are taken back has its edits merged into its earlier save
   (`markdown.merge3`), or, where both edited the same lines, its earlier save is kept
   under `.memloci/conflicts/`.

Then the index commits and `done()` drops the intent and the kept files (on a background
thread: freeing a thousand old files takes seconds on a busy disk). A process killed anywhere in between
leaves an intent behind; the next writer (or opener) calls `recover()` under the write lock:
if the index holds the intent's id, the commit happened and every file operation had been
done before it, so the intent is only dropped; otherwise every operation is undone from the
kept old files. Either way files and index agree again, and no temp file is left.

This is not confine.atomic_write (memloci's one write of a single file): a change here spans
several files and the index, all or nothing, and checks what it replaced.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import queue
import shutil
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from memloci.core import confine
from memloci.core.errors import ConflictError, MemlociError, PermissionDeniedError, storage_error
from memloci.markdown.merge3 import merge3
from memloci.store.markdown.files import INDEX_DIR, sha256_hex

log = logging.getLogger(__name__)

STAGING = "staging"
INTENTS_TABLE = "CREATE TABLE IF NOT EXISTS md_intents (id TEXT PRIMARY KEY)"


@dataclass
class FileOp:
    kind: str  # "put" | "delete" | "append"
    rel: str
    expected: str | None  # sha256 of the bytes the change was computed from (None: no file then)
    check: bool = True  # False: a file only memloci appends to (journal.md)
    tmp: str | None = None  # staging file with the new bytes (put)
    data: bytes = b""  # the new bytes (put) or the bytes to append (append)
    old_size: int | None = None  # the file's size before an append
    backup: str | None = None  # staging name of the old file, once kept
    record: tuple | None = None  # (entity_id, key, sha of the whole file) for an append's index row
    kept: bool = False  # the old file is kept under `backup`


def _where(rel: str) -> tuple[list[str], str, str]:
    """(folders, file name, the path as shown) of a library-relative path, checked by confine.parts."""
    p = confine.parts(rel)
    return p[:-1], p[-1], "/".join(p)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_libc = None


def _syncfs(folder: Path) -> bool:
    """syncfs(2) on the file system holding `folder` (Linux); False where it is not available."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        syncfs = _libc.syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


RENAME_EXCHANGE = 2  # renameat2(2) flag (Linux >= 3.15)
_exchange_works: bool | None = None


def _exchange(src_dir: int, src: str, dst_dir: int, dst: str) -> bool:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE): the file that leaves `dst` is
    exactly the one this call replaced, whatever an editor did the moment before. False where
    the kernel, libc or file system cannot (the caller then links and renames)."""
    global _libc, _exchange_works
    if _exchange_works is False:
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = _libc.renameat2
    except (OSError, AttributeError):
        _exchange_works = False
        return False
    if renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), RENAME_EXCHANGE) == 0:
        _exchange_works = True
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):  # not here: fall back
        return False
    raise OSError(err, os.strerror(err), dst)


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


def _sha_at(dir_fd: int, name: str) -> str | None:
    """The sha256 of a file in an open folder (None: no such file); never through a link."""
    data = _read_at(dir_fd, name)
    return None if data is None else sha256_hex(data)


class FileChange:
    """The file operations of one write transaction, staged until `apply()`."""

    def __init__(self, root: Path, library: str):
        self.root = root
        self.library = library
        self.staging = root / INDEX_DIR / STAGING
        self.id = f"{time.time_ns():x}-{os.getpid():x}"
        self.ops: dict[str, FileOp] = {}  # by path, in the order first touched
        # A folder's names on disk by their case-folded form, read once per transaction, and the
        # paths this transaction puts, the same way: writeback.py never makes a case twin.
        self.listed: dict[str, dict[str, list[str]]] = {}
        self.folded: dict[str, str] = {}
        self._n = 0
        self._n_staged = 0

    # -- staging (while the call computes) --------------------------------------------

    def _name(self, tag: str) -> str:
        self._n += 1
        return f"{self.id}.{tag}{self._n}"

    def pending(self, rel: str) -> FileOp | None:
        return self.ops.get(rel)

    def put(self, rel: str, data: bytes, expected: str | None) -> os.stat_result:
        """Stage new bytes for `rel`; returns the temp file's stat (a rename keeps mtime and size)."""
        op = self.ops.get(rel)
        if op is None:
            op = self.ops[rel] = FileOp("put", rel, expected)
            self.folded.setdefault(rel.casefold(), rel)
        elif op.kind == "append":  # rare: appended, then rewritten in one call
            op.kind, op.data = "put", b""
        op.kind, op.data = "put", data
        if op.tmp is None:
            op.tmp = self._name("t")
        if not self._n_staged:
            confine.private_dir(self.root, f"{INDEX_DIR}/{STAGING}")  # memloci's own: no link, 0700
        self._n_staged += 1
        tmp = f"{self.staging}/{op.tmp}"
        try:
            # A new note follows the umask, like an editor's files (one replacing a person's file
            # takes its mode in _keep). Made durable in apply(), all at once.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                return os.fstat(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise storage_error(exc, f"library '{self.library}': cannot write {tmp}") from exc

    def delete(self, rel: str, expected: str | None) -> None:
        op = self.ops.get(rel)
        if op is not None:
            if op.tmp:
                (self.staging / op.tmp).unlink(missing_ok=True)
                op.tmp = None
            if op.expected is None and op.check:  # created by this very call: nothing to delete
                del self.ops[rel]
                return
            op.kind, op.data = "delete", b""
            return
        if expected is None and not confine.exists(self.root, rel):
            return
        self.ops[rel] = FileOp("delete", rel, expected)

    def append(self, rel: str, data: bytes, expected: str | None, *, check: bool = True,
               record: tuple | None = None) -> None:
        op = self.ops.get(rel)
        if op is not None and op.kind == "put":  # appending to bytes staged in this call
            self.put(rel, op.data + data, op.expected)
            return
        if op is None:
            op = self.ops[rel] = FileOp("append", rel, expected, check=check)
        op.data += data
        op.record = record

    # -- applying (under the write lock, just before the index commits) ------------------

    def apply(self, conn: sqlite3.Connection) -> list[tuple[FileOp, os.stat_result]]:
        """Write the intent, mark it in the index, change the files. Returns the appended files'
        new stats (their index rows are written after the append)."""
        if not self.ops:
            return []
        for op in self.ops.values():
            if op.kind == "append":
                try:
                    op.old_size = confine.lstat(self.root, op.rel).st_size
                except FileNotFoundError:
                    op.old_size = 0
            if op.kind in ("put", "delete"):
                op.backup = self._name("b")
        # A change of one file (besides journal.md) is all or nothing by its rename alone; the
        # intent still undoes it after a kill, and fsyncs for power loss are kept for changes
        # of several files, which a lost intent would leave half done.
        durable = sum(op.check for op in self.ops.values()) > 1
        self._write_intent(durable)
        conn.execute("INSERT INTO md_intents VALUES (?)", (self.id,))
        appended: list[tuple[FileOp, os.stat_result]] = []
        changed: set[tuple[str, ...]] = set()
        with self._staging_fd() as s:
            for op in self.ops.values():
                self._apply_one(op, s, appended, changed)
        for folders in changed if durable else ():  # the renames are durable before the index commits
            with confine.dir_fd(self.root, list(folders)) as d:
                _fsync_fd(d)
        return appended

    def _apply_one(self, op: FileOp, s: int, appended: list, changed: set) -> None:
        folders, name, shown = _where(op.rel)
        try:
            with confine.dir_fd(self.root, folders, create=op.kind == "put", rel=shown) as d:
                if op.kind == "put":
                    assert op.tmp is not None and op.backup is not None  # staged by put(), named by apply()
                    if not self._swap(op, d, name, s):
                        self._keep(op, d, name, s)
                        os.replace(op.tmp, name, src_dir_fd=s, dst_dir_fd=d)
                    if op.kept:  # checked after the file is in place: an editor's save landing
                        self._check(op, s, op.backup)  # just before it is caught; a conflict puts it back
                elif op.kind == "delete":
                    assert op.backup is not None  # named by apply()
                    try:  # kept (moved aside) until the commit, then dropped
                        os.replace(name, op.backup, src_dir_fd=d, dst_dir_fd=s)
                        op.kept = True
                    except FileNotFoundError:
                        raise ConflictError(f"{op.rel} was deleted outside memloci; nothing was written",
                                            hint="Retry in a second, after the rescan.") from None
                    self._check(op, s, op.backup)
                elif op.check and _sha_at(d, name) != op.expected:
                    raise self._conflict(op)
            if op.kind != "append":
                changed.add(tuple(folders))
            if op.kind == "append":
                # journal.md (unchecked) was never fsynced per write; a day file is
                appended.append((op, confine.append(self.root, op.rel, op.data, fsync=op.check)))
        except FileNotFoundError as exc:  # a folder on the way was removed meanwhile
            raise ConflictError(f"{op.rel} was moved or deleted outside memloci; nothing was written",
                                hint="Retry in a second, after the rescan.") from exc
        except OSError as exc:
            if exc.errno == errno.EXDEV:  # a sub-folder on another file system
                raise PermissionDeniedError(f"library '{self.library}': {op.rel} is on another file system "
                                            "than the library's .memloci folder") from exc
            raise storage_error(exc, f"library '{self.library}': cannot write {op.rel}") from exc

    def _staging_fd(self):
        return confine.dir_fd(self.root, [INDEX_DIR, STAGING], create=True, mode=confine.PRIVATE_DIR)

    def _swap(self, op: FileOp, d: int, name: str, s: int) -> bool:
        """Put the new file in place by swapping it with the old one, then keep the old one as
        `backup`. The swap hands back exactly the file it replaced, so an editor's save that
        lands a moment before is the file checked (and put back), never silently overwritten.
        False when the old file is missing or the swap is not available here."""
        try:
            old = os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(old.st_mode):
            raise confine.LinkRefusedError(op.rel)
        if not stat.S_ISREG(old.st_mode):
            return False
        assert op.tmp is not None and op.backup is not None
        self._precheck(op, d, name)
        os.chmod(op.tmp, stat.S_IMODE(old.st_mode), dir_fd=s)  # a person's file keeps its permissions
        if not _exchange(s, op.tmp, d, name):
            return False
        # The temp name now holds the replaced file (undo tells it from the new bytes by its
        # sha); under its backup name it is what a rollback puts back.
        os.replace(op.tmp, op.backup, src_dir_fd=s, dst_dir_fd=s)
        op.kept = True
        return True

    def _keep(self, op: FileOp, d: int, name: str, s: int) -> None:
        """Keep the file about to be replaced (a hard link: no copy). The caller renames the new
        file in at once, then checks the kept one is the file the change was computed from: an
        editor that saved in place or by rename is caught, and the rollback puts its file back."""
        try:
            old = os.stat(name, dir_fd=d, follow_symlinks=False)
        except FileNotFoundError:
            if op.expected is not None and op.check:
                raise ConflictError(f"{op.rel} was deleted outside memloci; nothing was written",
                                    hint="Retry in a second, after the rescan.") from None
            return
        if stat.S_ISLNK(old.st_mode):
            raise confine.LinkRefusedError(op.rel)
        assert op.tmp is not None and op.backup is not None
        self._precheck(op, d, name)
        os.chmod(op.tmp, stat.S_IMODE(old.st_mode), dir_fd=s)  # a person's file keeps its permissions
        try:
            os.link(name, op.backup, src_dir_fd=d, dst_dir_fd=s, follow_symlinks=False)
            op.kept = True
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EXDEV):
                raise
            with open(name, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW, dir_fd=d)) as src, \
                    open(op.backup, "wb", opener=lambda p, f: os.open(p, f, 0o600, dir_fd=s)) as dst:
                shutil.copyfileobj(src, dst)  # no hard links here: a copy does as well
            op.kept = True

    def _precheck(self, op: FileOp, d: int, name: str) -> None:
        """Refuse before touching the file when an editor saved since the change was computed.
        The check after the swap stays the proof; this one narrows the moment in which an
        editor's save can be replaced at all, from the whole staging to a few microseconds."""
        if op.check and _sha_at(d, name) != op.expected:
            raise self._conflict(op)

    def _check(self, op: FileOp, s: int, kept: str) -> None:
        if op.check and _sha_at(s, kept) != op.expected:
            raise self._conflict(op)

    @staticmethod
    def _conflict(op: FileOp) -> ConflictError:
        what = "was created" if op.expected is None else "changed on disk"
        return ConflictError(f"{op.rel} {what} since memloci read it; nothing was written, the file is as it was",
                             hint="The change is picked up within a second; retry the call then.")

    def _sync_staged(self) -> None:
        """The staged bytes reach the disk before the intent names them: one syncfs() of the
        library's file system for a batch (a thousand fsyncs cost seconds), fsyncs for a few."""
        temps = [op.tmp for op in self.ops.values() if op.kind == "put" and op.tmp]
        if len(temps) > 8 and _syncfs(self.staging):
            return
        for name in temps:
            fd = os.open(self.staging / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _write_intent(self, durable: bool) -> None:
        confine.private_dir(self.root, f"{INDEX_DIR}/{STAGING}")
        self._sync_staged()
        record = {"id": self.id, "ops": [
            {"kind": op.kind, "rel": op.rel, "tmp": op.tmp, "backup": op.backup, "old_size": op.old_size,
             "sha": sha256_hex(op.data) if op.kind == "put" else None} for op in self.ops.values()]}
        path = self.staging / f"{self.id}.intent"
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False))  # one string: json.dump writes piece by piece
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if durable:
            _fsync_dir(self.staging)

    # -- after the commit, or instead of it ----------------------------------------------

    def done(self) -> None:
        """The index committed: drop the intent, then the kept old files."""
        if not self.ops:
            return
        # Freeing old files takes milliseconds each on a busy disk (seconds for a batch): not
        # while the caller waits. A process that dies first leaves them to the next writer's
        # recover(), which drops a committed change's intent and kept files the same way.
        _discard([self.staging / f"{self.id}.intent"]
                 + [self.staging / op.backup for op in self.ops.values() if op.kept and op.backup])

    def rollback(self) -> None:
        """The index did not commit: put every file back as it was. Once: the second call (the
        store's safety net, outside the lock) must not touch what a later writer put there."""
        if getattr(self, "_rolled_back", False):
            return
        self._rolled_back = True
        ops = [{"kind": op.kind, "rel": op.rel, "tmp": op.tmp, "backup": op.backup, "old_size": op.old_size,
                "sha": sha256_hex(op.data) if op.kind == "put" else None,
                "data": op.data if op.kind == "put" else None} for op in self.ops.values()]
        undo(self.root, self.id, ops, self.library)


_trash: queue.SimpleQueue[list[Path]] = queue.SimpleQueue()
_trash_lock = threading.Lock()
_trash_thread: threading.Thread | None = None


def _discard(paths: list[Path]) -> None:
    """Remove `paths` (the intent first) on a background thread."""
    global _trash_thread
    _trash.put(paths)
    with _trash_lock:
        if _trash_thread is None or not _trash_thread.is_alive():
            _trash_thread = threading.Thread(target=_empty_trash, name="memloci-staging-cleanup", daemon=True)
            _trash_thread.start()


def _empty_trash() -> None:
    while True:
        _remove(_trash.get())


def _remove(paths: list[Path]) -> None:
    for p in paths:
        try:
            p.unlink(missing_ok=True)
        except OSError as exc:  # the next writer's recover() tries again
            log.debug("could not remove %s: %s", p, exc)


def _put_back(root: Path, s: int, backup: str, d: int, name: str, op: dict) -> None:
    """Move the kept old file back over `name`, which holds this change's bytes. By a swap
    where there is one: should a person have saved over `name` a moment before, what comes
    back is theirs, and it is reconciled with the old file (`_reconcile`)."""
    if not _exchange(s, backup, d, name):
        os.replace(backup, name, src_dir_fd=s, dst_dir_fd=d)
        return
    if _sha_at(s, backup) not in (op.get("sha"), None):  # not this change's bytes: a person's save,
        _exchange(s, backup, d, name)  # the newest; it goes back in place, the old file kept
        _reconcile(root, s, backup, d, name, op)


def _reconcile(root: Path, s: int, backup: str, d: int, name: str, op: dict) -> None:
    """`name` holds a person's save made after this change's bytes were put in place; `backup`
    the file the change replaced, which may be an earlier save of theirs. Both are kept: the
    later save's own edits merged into the earlier file (`merge3`, on this change's bytes as
    the base) when the process still knows them and the edits do not overlap; otherwise the
    later save stays in place and the earlier file is kept under `.memloci/conflicts/`."""
    newest = _read_at(d, name)
    kept = _read_at(s, backup)
    if newest is None or kept is None or kept == newest:
        return
    merged = merge3(op["data"], kept, newest) if op.get("data") is not None else None
    if merged is not None and merged != newest:
        tmp = f"{backup}.m"
        # The merged bytes are on disk before they replace a person's file, as every write's are:
        # memloci's one atomic write (fsynced, and its folder), then the swap, then the folder
        # of the note fsynced so the swap survives a power cut too.
        confine.write_atomic(root, f"{INDEX_DIR}/{STAGING}/{tmp}", merged, mode=0o600)
        os.chmod(tmp, stat.S_IMODE(os.stat(name, dir_fd=d, follow_symlinks=False).st_mode), dir_fd=s)
        if _exchange(s, tmp, d, name):
            _fsync_fd(d)
            if _read_at(s, tmp) == newest:
                os.unlink(tmp, dir_fd=s)
                log.warning("%s: a save made during a refused change was merged with the save before it",
                            op["rel"])
                return
            _exchange(s, tmp, d, name)  # yet another save: it stays in place
        os.unlink(tmp, dir_fd=s)
    if merged == newest:
        return
    conflicts = f"{INDEX_DIR}/conflicts"
    kept_as = f"{op['rel'].replace('/', '%2F')}.{backup}"
    confine.private_dir(root, conflicts)
    with confine.dir_fd(root, [INDEX_DIR, "conflicts"]) as c:
        os.rename(backup, kept_as, src_dir_fd=s, dst_dir_fd=c)
    log.warning("%s changed twice while a change to it was refused; the earlier file is kept as %s/%s",
                op["rel"], conflicts, kept_as)


def _read_at(dir_fd: int, name: str) -> bytes | None:
    """The bytes of a file in an open folder (None: no such file); never through a link."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def undo(root: Path, change_id: str, ops: list[dict], library: str) -> None:
    """Undo whatever of `ops` was done, newest first; safe to run again after a kill."""
    staging = root / INDEX_DIR / STAGING
    try:
        sfd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        _undo_ops(root, staging, sfd, ops, library)
    finally:
        os.close(sfd)
    (staging / f"{change_id}.intent").unlink(missing_ok=True)


def _undo_ops(root: Path, staging: Path, sfd: int, ops: list[dict], library: str) -> None:
    for op in reversed(ops):
        tmp = op.get("tmp")
        backup = op.get("backup")
        try:
            folders, name, shown = _where(op["rel"])
            with confine.dir_fd(root, folders, rel=shown) as d:
                if op["kind"] == "append":
                    size = os.stat(name, dir_fd=d, follow_symlinks=False).st_size
                    if op.get("old_size") is not None and size > op["old_size"]:
                        confine.truncate(root, op["rel"], op["old_size"])
                elif op["kind"] == "delete":
                    if backup and (staging / backup).exists() and not _there(d, name):
                        os.replace(staging / backup, name, dst_dir_fd=d)
                else:
                    placed = not tmp or not (staging / tmp).exists()  # renamed (or the tmp never made)
                    if not placed and _sha_at(sfd, tmp) != op.get("sha"):
                        # killed between a swap and keeping what it handed back: the temp
                        # name holds the old file
                        placed, backup = True, tmp
                    here = _sha_at(d, name) if placed else None
                    if placed and here == op.get("sha"):
                        if backup and (staging / backup).exists():
                            _put_back(root, sfd, backup, d, name, op)  # the old inode: bytes and mtime
                        else:
                            os.unlink(name, dir_fd=d)  # a file this change created
                    elif here is not None and backup and (staging / backup).exists():
                        _reconcile(root, sfd, backup, d, name, op)  # a person saved over it since
                    # else: not renamed yet: nothing of it to undo
        except FileNotFoundError:
            pass  # the folder or the file is not there: nothing of this operation to undo
        except (OSError, MemlociError) as exc:
            log.error("library %s: could not undo the change to %s: %s", library, op["rel"], exc)
        for leftover in (op.get("tmp"), op.get("backup")):
            if leftover:
                (staging / leftover).unlink(missing_ok=True)


def _sound(record: object) -> bool:
    """An intent as `_write_intent` writes it: operations on relative paths, staging names
    that stay inside the staging folder."""
    if not isinstance(record, dict) or not isinstance(record.get("ops"), list):
        return False
    for op in record["ops"]:
        if not isinstance(op, dict) or op.get("kind") not in ("put", "delete", "append") \
                or not isinstance(op.get("rel"), str):
            return False
        for key in ("tmp", "backup"):
            name = op.get(key)
            if name is not None and (not isinstance(name, str) or "/" in name or "\x00" in name
                                     or name in ("", ".", "..")):
                return False
    return True


def _there(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def recover(root: Path, conn: sqlite3.Connection, library: str) -> int:
    """Finish what a killed writer left (call under the write lock, in a write transaction):
    roll each intent forward (its id is in the index: it committed) or back, drop stray temp
    files, forget finished ids. Returns how many intents it found. Cheap when all is well:
    one directory listing and one small query."""
    staging = root / INDEX_DIR / STAGING
    confine.private_dir(root, f"{INDEX_DIR}/{STAGING}")  # a link here (say, committed to a clone) is refused
    names = os.listdir(staging)
    committed = {i for (i,) in conn.execute("SELECT id FROM md_intents")}
    intents = sorted(n[: -len(".intent")] for n in names if n.endswith(".intent"))
    for change_id in intents:
        path = staging / f"{change_id}.intent"
        if change_id in committed:
            log.info("library %s: a change interrupted after its commit is complete (%s)", library, change_id)
            path.unlink(missing_ok=True)
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                record = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError):  # killed while writing the intent: nothing was changed yet
            path.unlink(missing_ok=True)
            continue
        if not _sound(record):  # not one of ours: acting on it could move any file into the library
            log.error("library %s: ignoring malformed intent %s", library, change_id)
            path.unlink(missing_ok=True)
            continue
        log.warning("library %s: rolling back a change interrupted before its commit (%s, %d files)",
                    library, change_id, len(record["ops"]))
        undo(root, change_id, record["ops"], library)
    if names:
        for name in os.listdir(staging):  # temp files and kept old files of finished changes
            if not name.endswith(".intent"):
                (staging / name).unlink(missing_ok=True)
    if committed:
        left = {n[: -len(".intent")] for n in os.listdir(staging) if n.endswith(".intent")} if names else set()
        gone = [i for i in committed if i not in left]
        conn.executemany("DELETE FROM md_intents WHERE id = ?", [(i,) for i in gone])
    return len(intents)
