"""Writing a client's config file safely: backup first, atomic replace, re-read and check, roll
back on any failure; and the ledger of what install added, so uninstall can take exactly that
back out (byte for byte when the file has not changed since)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.core import confine
from memloci.core.errors import MemlociError
from memloci.install import edits
from memloci.install import jsonedit as je
from memloci.install.clients import InstallError


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class FilePlan:
    """One file's change: its text before and after (None: absent) and what that must mean."""

    path: Path
    fmt: str  # json | toml
    before: str | None
    after: str | None
    ops: list[dict] = field(default_factory=list)
    steps: list[list[je.Splice]] = field(default_factory=list)
    expect: Any = None  # the parsed meaning the written file must have
    strict: bool = False  # the file was plain JSON, so it must stay plain JSON
    created_file: bool = False
    created_dirs: list[str] = field(default_factory=list)
    bak: Path | None = None
    backup: bool = True  # False when the result is bytes already kept (an exact undo) or ours alone
    # Install's first backup is FILE.bak (the file before memloci), and no backup replaces a file:
    # a later one takes FILE.bak.1, ...; uninstall's is FILE.uninstall.bak. So the backup of a
    # person's original is never replaced by a later one.
    bak_suffix: str = ".bak"

    @property
    def changed(self) -> bool:
        return self.before != self.after


def check_path(path: Path, project_dir: Path | None) -> None:
    """Refuse a link as the file, (project scope) any folder that leads out of the project, and
    a link as any folder between the root (the project folder, else the home folder when the
    file is in it) and the file: memloci writes where the path says, never through a link."""
    if path.is_symlink():
        raise InstallError(f"{path} is a symbolic link (to {os.readlink(path)}); memloci edits regular files only",
                           hint="pass the file it points to with --config")
    if path.exists() and not path.is_file():
        raise InstallError(f"{path} is not a regular file")
    if project_dir is not None:
        root = project_dir.resolve()
        parent = path.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.resolve().is_relative_to(root):
            raise InstallError(f"{path} leads out of the project folder {root} through a link",
                               hint="pass the file to edit with --config")
    _check_folders(path, project_dir if project_dir is not None else Path.home())


def _check_folders(path: Path, root: Path) -> None:
    """Refuse a symbolic link as a folder on the way from `root` (itself not checked: where a
    home or project folder lives is the system's business) down to `path`."""
    path, root = path.absolute(), root.absolute()
    if not path.is_relative_to(root):
        return
    folder = root
    for part in path.relative_to(root).parts[:-1]:
        folder = folder / part
        if folder.is_symlink():
            target = os.readlink(folder)
            raise InstallError(f"{folder} is a symbolic link (to {target}); memloci does not write through a linked "
                               "folder, as it does not write through a linked config file",
                               hint=f"pass the file with its real path: --config {path.resolve()}")
        if not folder.exists():
            return


def read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstallError(f"{path} is not UTF-8 text (byte {exc.start}); it was left untouched") from None


def meaning(plan_fmt: str, text: str | None, where: str) -> Any:
    if text is None:
        return None
    if plan_fmt == "toml":
        return edits.parse_toml(text, where)
    if not text.strip():
        return {}
    return edits.parse_json(text, where)[1]


# --- writes: every file through confine.atomic_write (old bytes or new, never half) ------------

def _fsync_dir(path: Path) -> None:
    """After a removal: the folder synced, so the removal survives a power cut."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o600  # a new file may hold a token: private until the person opens it up


def _backup_path(path: Path, suffix: str = ".bak") -> Path:
    """The first free name of `<file><suffix>`, `<suffix>.1`, `<suffix>.2`, ...: a backup never
    replaces a file, so the first one (the person's original, or a `.bak` of their own) stays."""
    # the folder as atomic_write resolves it (a --config outside the home may sit in a linked one)
    name = confine.free_backup_name(Path(os.path.realpath(path.parent)), path.name, suffix)
    if name is not None:
        return path.with_name(name)
    raise InstallError(f"{path}: no free name for a backup ({suffix} to {suffix}.99 are taken)")


def _kept(plan: FilePlan, ledger: Ledger) -> bool:
    """Whether the file's bytes before this change need no new backup: the file is exactly as a
    recorded install left it, and install's backup of what it held before (the person's
    original) is still there unchanged. Those bytes are that original plus memloci's own
    entries, which uninstall takes back out (or, in a file install created, memloci's alone)."""
    if plan.before is None:
        return True
    left = sha(plan.before)
    recorded = [e for e in ledger.entries if e["file"] == str(plan.path)]
    if not any(e["sha_after"] == left for e in recorded):
        return False
    return recorded[0]["created_file"] or bool(ledger.own_backups(plan.path))


def _make_dirs(path: Path) -> list[str]:
    made: list[str] = []
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for d in reversed(missing):
        d.mkdir()
        made.append(str(d))
    return made


def _restore(plan: FilePlan) -> None:
    if plan.before is None:
        try:
            plan.path.unlink()
        except FileNotFoundError:
            pass
    else:
        confine.atomic_write(plan.path, plan.before.encode("utf-8"), _mode(plan.path) if plan.path.exists() else 0o600)
    for d in reversed(plan.created_dirs):
        try:
            os.rmdir(d)
        except OSError:
            pass


def _verify(plan: FilePlan) -> None:
    where = str(plan.path)
    if plan.after is None:
        if plan.path.exists():
            raise InstallError(f"{where} is still there after removal")
        return
    got = read(plan.path)
    if got != plan.after:
        raise InstallError(f"{where} changed under us while it was being written")
    if plan.strict and not je.is_strict_json(got):
        raise InstallError(f"{where} would no longer be plain JSON")
    if meaning(plan.fmt, got, where) != plan.expect:
        raise InstallError(f"{where}: the written file does not say what was meant")


def commit(plans: list[FilePlan], ledger: Ledger) -> None:
    """Write every changed file (backup first), check each, and put all back if any step fails."""
    done: list[FilePlan] = []
    try:
        for plan in plans:
            if not plan.changed:
                continue
            if read(plan.path) != plan.before:  # the client (or a person) wrote it meanwhile
                raise InstallError(f"{plan.path} changed while memloci was working on it",
                                   hint="nothing was changed; run the command again")
            if plan.before is not None and plan.backup and not _kept(plan, ledger):
                plan.bak = _backup_path(plan.path, plan.bak_suffix)
                confine.atomic_write(plan.bak, plan.before.encode("utf-8"), _mode(plan.path))
                ledger.baks[str(plan.bak)] = sha(plan.before)
            done.append(plan)
            if plan.after is None:
                plan.path.unlink()
                _fsync_dir(plan.path.parent)
            else:
                plan.created_dirs = plan.created_dirs or _make_dirs(plan.path)
                confine.atomic_write(plan.path, plan.after.encode("utf-8"), _mode(plan.path))
            _verify(plan)
    except BaseException as exc:
        for plan in reversed(done):
            try:
                _restore(plan)
            except OSError:
                pass
        if isinstance(exc, MemlociError):
            raise
        if isinstance(exc, OSError):
            raise InstallError(f"{exc.filename or 'config file'}: {exc.strerror or exc}; "
                                  "every file was put back as it was") from None
        raise
    # Folders install made for files now gone go too, once every file is done (two files may
    # share one, as Cursor's mcp.json and hooks.json do); a folder with anything else stays.
    made = {d for plan in plans if plan.changed and plan.after is None for d in plan.created_dirs}
    for d in sorted(made, key=len, reverse=True):
        try:
            os.rmdir(d)
        except OSError:
            pass


# --- the ledger ------------------------------------------------------------------------------

class Ledger:
    """What install added where: `$MEMLOCI_HOME/install-ledger.json` (private)."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: list[dict] = []
        self.baks: dict[str, str] = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text("utf-8"))
                self.entries = list(data.get("entries", []))
                self.baks = dict(data.get("baks", {}))
            except (ValueError, AttributeError):
                raise InstallError(f"{path} does not parse; move it away to start a new ledger") from None

    def find(self, file: Path, client: str, name: str, kind: str) -> list[dict]:
        """Every install recorded for this file, client, name and kind, newest first."""
        key = (str(file), client, name, kind)
        return [e for e in reversed(self.entries) if (e["file"], e["client"], e["name"], e["kind"]) == key]

    def record(self, plan: FilePlan, client: str, name: str, kind: str, created_root: dict) -> None:
        self.entries.append({
            "file": str(plan.path), "client": client, "name": name, "kind": kind,
            "ops": plan.ops, "steps": [[[s.pos, s.old, s.new] for s in step] for step in plan.steps],
            "sha_after": sha(plan.after or ""), "created_file": plan.created_file,
            "created_dirs": plan.created_dirs, "created_root": created_root,
        })

    def own_backups(self, file: Path) -> list[Path]:
        """The backups of `file` install wrote (`FILE.bak`, `FILE.bak.N`) that are unchanged since."""
        found = []
        for bak, digest in self.baks.items():
            path = Path(bak)
            if not backup_of(path, file):
                continue
            current = read(path) if path.is_file() and not path.is_symlink() else None
            if current is not None and sha(current) == digest:
                found.append(path)
        return found

    def forget(self, entry: dict) -> None:
        self.entries.remove(entry)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"entries": self.entries, "baks": self.baks}, indent=1).encode("utf-8")
        confine.atomic_write(self.path, data, 0o600)


def backup_of(path: Path, file: Path) -> bool:
    """Whether `path` is named as install names a backup of `file`: FILE.bak or FILE.bak.N."""
    rest = path.name[len(file.name):] if path.name.startswith(file.name) else ""
    return path.parent == file.parent and (rest == ".bak" or rest.startswith(".bak."))


def drop_backups(plan: FilePlan, ledger: Ledger) -> None:
    """After an exact undo: remove the backups install wrote that now hold the very bytes the
    file holds again (only ones memloci wrote and nobody changed since), so nothing is left
    behind. A backup of anything else stays: undoing one of several installs gives back the
    state before that one, and the person's original, in FILE.bak, is kept until the file is
    that original again. A file install created and uninstall removed takes its backups along."""
    now = plan.after
    for bak, digest in list(ledger.baks.items()):
        path = Path(bak)
        if not backup_of(path, plan.path):
            continue
        current = read(path) if path.is_file() and not path.is_symlink() else None
        if current is None:
            del ledger.baks[bak]
        elif sha(current) == digest and (now is None or current == now):
            path.unlink()
            del ledger.baks[bak]


def steps_of(entry: dict) -> list[list[je.Splice]]:
    return [[je.Splice(pos, old, new) for pos, old, new in step] for step in entry["steps"]]
