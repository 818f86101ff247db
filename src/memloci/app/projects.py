"""Project libraries: memory kept inside a project, in `<root>/.mcp/` (a Markdown library).

A caller names a project by its absolute root path. memloci never picks a root by itself:
the path must hold a strong project marker (.git, pyproject.toml, package.json, ...). A
sub-folder of a project is refused with the enclosing root named (memloci looks upward only
for that hint), and a folder with nothing but a README is refused as a weak root, so memory
never lands in the wrong place. The first use of a root without `.mcp/` asks for
confirmation (AWAITING_CONFIRMATION with `detected_root`); the same call with
`confirm_new_project_root` set to that root creates it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from memloci.core import confine
from memloci.core.errors import AwaitingConfirmationError, NotFoundError, ValidationError
from memloci.formats.n2n import PROJECT_DIR

log = logging.getLogger(__name__)

STRONG_MARKERS = (
    ".git", ".hg", ".svn", PROJECT_DIR, "package.json", "pyproject.toml", "requirements.txt", "setup.py",
    "setup.cfg", "Pipfile", "Cargo.toml", "go.mod", "pom.xml", "build.gradle", "build.gradle.kts",
    "composer.json", "tsconfig.json", "deno.json", "Gemfile", "mix.exs", "pubspec.yaml", "Package.swift",
    "CMakeLists.txt", ".vscode", ".idea", ".gitignore",
)
VCS_MARKERS = (".git", ".hg", ".svn")
LOOSE_MARKERS = {".gitignore", ".vscode", ".idea", "requirements.txt"}  # also found in sub-folders
WEAK_MARKERS = ("README.md", "README", "README.txt", "README.rst", "LICENSE", "docs")


@dataclass(frozen=True, slots=True)
class ProjectRef:
    """A project's own library, named by its root path (the registry opens it: registry.py)."""

    path: str
    confirm: str | None = None
    may_create: bool = True  # resources read established projects only


def project_label(root: Path) -> str:
    """How logs name a project: its id (project_id: `user/repo`, else the folder name), the full
    path only at debug level."""
    return str(root) if log.isEnabledFor(logging.DEBUG) else project_id(root)


def _markers(folder: Path, names: tuple[str, ...]) -> list[str]:
    return [m for m in names if (folder / m).exists()]


def resolve_project_root(project_path: str, field: str = "project_path") -> Path:
    """The project root a caller named, checked; a clear error otherwise (nothing is created)."""
    if not isinstance(project_path, str) or not project_path.strip():
        raise ValidationError(f"{field}: must be an absolute path to a project root")
    if "\x00" in project_path:
        raise ValidationError(f"{field}: contains a NUL byte")
    given = Path(project_path)
    if not given.is_absolute():
        raise ValidationError(f"{field}: '{project_path}' is relative; give the absolute path of the project root",
                              hint="For example /home/me/code/my-app.")
    if not given.is_dir():
        raise NotFoundError(f"{field}: {project_path} is not an existing folder",
                            hint="Give the absolute path of an existing project root (the folder holding .git "
                                 "or pyproject.toml); check its spelling.")
    root = given.resolve()
    found = _markers(root, STRONG_MARKERS)
    if found and not set(found) <= LOOSE_MARKERS:
        return root
    if found:  # only .gitignore/.vscode/...: a root unless it sits inside a versioned project
        enclosing = next((p for p in root.parents if _markers(p, VCS_MARKERS)), None)
        if enclosing is None:
            return root
        raise ValidationError(f"{field}: {project_path} is inside the project at {enclosing}, not its root",
                              hint=f"Use the project root: {enclosing}", details={"detected_root": str(enclosing)})
    for parent in root.parents:
        if _markers(parent, STRONG_MARKERS):
            raise ValidationError(
                f"{field}: {project_path} is inside the project at {parent}, not its root",
                hint=f"Use the project root: {parent}", details={"detected_root": str(parent)})
    weak = _markers(root, WEAK_MARKERS)
    if weak:
        raise ValidationError(
            f"{field}: {project_path} has only {', '.join(weak)}, not a project marker; it is not a project root",
            hint="A project root holds .git, pyproject.toml, package.json, Cargo.toml, go.mod, ... (git init makes one).")
    raise ValidationError(f"{field}: {project_path} holds no project marker (.git, pyproject.toml, package.json, ...)",
                          hint="Point at the root of a project, or create one (git init).")


def project_library_dir(root: Path, confirm: str | None, *, may_create: bool = True) -> Path:
    """`<root>/.mcp`, checked to stay inside the root; created only on confirmation."""
    folder = root / PROJECT_DIR
    if folder.is_symlink():  # a link could lead outside the root, or to the root itself, or into .git
        where = "outside the project root" if not folder.resolve().is_relative_to(root) else "elsewhere in the project"
        raise ValidationError(f"project_path: {PROJECT_DIR} in {root.name} is a link that leads {where}",
                              hint="memloci keeps a project's memory in a real .mcp folder; replace the link.")
    if folder.exists():
        if not folder.is_dir():
            raise ValidationError(f"project_path: {folder} exists and is not a folder")
        return folder
    confirmed = confirm is not None and confirm.strip() != "" and "\x00" not in confirm and \
        Path(confirm).is_absolute() and Path(confirm).resolve() == root
    if not may_create or not confirmed:
        if confirm:
            raise ValidationError(f"confirm_new_project_root: '{confirm}' is not the detected root {root}",
                                  details={"detected_root": str(root)})
        raise AwaitingConfirmationError(
            f"{root} has no project memory yet; memloci will create {folder} there",
            hint="Repeat the same call with confirm_new_project_root set to detected_root to create it.",
            details={"detected_root": str(root)})
    folder.mkdir()
    log.info("created project memory in %s", project_label(root))
    return folder


def mark_journal_union(folder: Path) -> None:
    """`.mcp/.gitattributes` saying `.memloci/journal.md merge=union`, written once, when memloci
    first makes `.mcp/` a project library (the README names this file): two branches that both
    append to the journal then merge without a conflict. A person's notes folder never gets one,
    and an existing file (or a link there) is left alone (an older one's `journal.md merge=union`
    names every journal.md, the moved one too)."""
    if not confine.exists(folder, ".gitattributes"):
        confine.write_atomic(folder, ".gitattributes", b".memloci/journal.md merge=union\n", mode=0o644)


# -- project id: the same for every clone of one repository -------------------------------

_SCP_REMOTE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>[^/].*)$")  # git@github.com:user/repo.git
_REMOTE_SECTION = re.compile(r'^\s*\[\s*remote\s+"(?P<name>(?:[^"\\]|\\.)*)"\s*\]\s*(?:[#;].*)?$')
_URL_LINE = re.compile(r"^\s*url\s*=\s*(?P<url>.*?)\s*$", re.IGNORECASE)
_ANY_SECTION = re.compile(r"^\s*\[")
CONFIG_MAX = 1 << 20  # a git config larger than this is not read (a clone cannot make us parse gigabytes)


def remote_id(url: str) -> str | None:
    """`user/repo` from a git remote URL: the path without the host, a trailing `.git` or `/`,
    lower-cased; None when the URL names no path (a bare host) or is a local path.

    `git@github.com:User/Repo.git`, `https://github.com/user/repo(.git)`,
    `ssh://git@host:22/user/repo.git` all give `user/repo`. The host is dropped, so a mirror on
    another host with the same path is the same project; a local path (`/srv/git/repo.git`,
    `file://...`) names no shared project and gives None."""
    url = url.strip().strip('"')
    if "://" in url:
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "file":
            return None
        path = rest.partition("/")[2]  # drop user@host:port
    else:
        m = _SCP_REMOTE.match(url)
        if not m or url.startswith(("/", ".", "~")):
            return None
        path = m.group("path")
    path = path.split("?", 1)[0].split("#", 1)[0].strip("/")
    if path.lower().endswith(".git"):
        path = path[:-4].rstrip("/")
    path = path.lstrip("~")  # ssh://host/~user/repo
    return path.lower() or None


def _git_config(root: Path) -> bytes | None:
    """The text of the repository's `config`: `.git/config`, or for a worktree or submodule (a
    `.git` file saying `gitdir: PATH`) the config of that git folder, or of its common folder
    (`commondir`) for a worktree. No link is followed: `.git` as a link, or a link on the way
    to `config` inside the git folder, gives None. The `gitdir:` pointer is git's own and may
    lead outside the root (a worktree's git folder sits in the main clone); only `config` and
    `commondir` are read there."""
    try:
        if confine.is_link(root, ".git"):
            return None
        if (root / ".git").is_dir():
            gitdir = root / ".git"
        else:
            line = confine.read_bytes(root, ".git")[:4096].decode("utf-8", "replace").strip()
            if not line.startswith("gitdir:"):
                return None
            target = Path(line[len("gitdir:"):].strip())
            gitdir = target if target.is_absolute() else root / target
            if gitdir.is_symlink() or not gitdir.is_dir():
                return None
            try:
                common = confine.read_bytes(gitdir, "commondir").decode("utf-8", "replace").strip()
            except FileNotFoundError:
                common = ""
            if common:
                gitdir = Path(common) if Path(common).is_absolute() else gitdir / common
                if gitdir.is_symlink() or not gitdir.is_dir():
                    return None
        if confine.lstat(gitdir, "config").st_size > CONFIG_MAX:
            return None
        return confine.read_bytes(gitdir, "config")
    except (OSError, confine.PermissionDeniedError, ValidationError):
        return None


def git_remotes(root: Path) -> list[tuple[str, str]]:
    """(name, url) of each remote in the repository's config, in file order (first url of each)."""
    text = _git_config(root)
    if text is None:
        return []
    remotes: dict[str, str] = {}
    current: str | None = None
    for line in text.decode("utf-8", "replace").splitlines():
        section = _REMOTE_SECTION.match(line)
        if section:
            current = section.group("name")
        elif _ANY_SECTION.match(line):
            current = None
        elif current is not None and current not in remotes:
            url = _URL_LINE.match(line)
            if url and url.group("url"):
                remotes[current] = url.group("url")
    return list(remotes.items())


def project_id(root: Path) -> str:
    """The project's id: from its git remote (`origin`, else the first remote with a usable URL),
    else the folder name. Two clones of one repository share it; see remote_id for the rule."""
    remotes = git_remotes(root)
    ordered = sorted(remotes, key=lambda r: r[0] != "origin")  # stable: origin first, then file order
    for _, url in ordered:
        found = remote_id(url)
        if found:
            return found
    return root.name or "project"


def name_other_clone(exc: AwaitingConfirmationError, root: Path, open_projects: dict[Path, str]) -> None:
    """A clone without project memory while another clone of the same repository (the same id)
    is open in this server: the handshake names it (`details.same_project`), since its memory
    reaches this clone by committing `.mcp/` there and pulling here, not by starting afresh."""
    pid = project_id(root)
    twin = next((other for other, name in open_projects.items() if other != root and name == pid), None)
    if twin is not None:
        exc.details["same_project"] = {"id": pid, "root": str(twin)}
        exc.hint = (f"{exc.hint} Another clone of {pid} at {twin} keeps memory: commit its {PROJECT_DIR}/ and pull "
                    "here to share it (or confirm to start this clone's own).")
