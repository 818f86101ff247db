"""`memloci rules sync` and `unsync`: scan, plan, back up, write, read back, roll back.

A sync is worked out whole before anything is written (a `Plan`: per file, its text before and
after and the diff). Writing it:
1. the ledger (`rules-ledger.json` in memloci's data folder, never in the project) first records
   the sync as pending, with every file's bytes before and after;
2. a person's file about to change for the first time gets a backup, `FILE.bak` (or the first
   free `FILE.bak.N`): it holds their first original and is never replaced by a later sync;
3. each file is written atomically (confine.write_atomic: temp file, fsync, rename, folder
   fsync; no link followed below the project or home folder) and read back;
4. on any failure every file of the sync is put back as it was;
5. the ledger records what the sync added and drops the pending mark.
A sync killed between 1 and 5 leaves each file whole (old or new); the next sync or unsync finds
the pending mark and puts every file of it back first, so nothing is half applied.

`unsync` takes back exactly what syncs added: memloci's block (with the line breaks it added
around it) out of a person's file, which is then byte for byte what it was; the files sync
created are removed, with the folders it made for them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memloci.core import confine, diffs
from memloci.core.errors import ConflictError, MemlociError, ValidationError
from memloci.workspace.agents import AGENTS, home
from memloci.workspace.merge import merge, scan
from memloci.workspace.model import Rule, Skill, Workspace
from memloci.workspace.read import block_span
from memloci.workspace.write import Output, outputs

LEDGER = "rules-ledger.json"
KILL_AFTER = "MEMLOCI_RULES_KILL_AFTER"  # tests: SIGKILL this process after that many file writes (0: before any)


def sha(data: str | None) -> str | None:
    return None if data is None else hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass
class Change:
    """One file of a plan: where it is (a root and a path below it), its text before and after."""

    agent: str
    root: Path
    rel: str
    before: str | None
    after: str | None
    whole: bool  # memloci's own file (else its block in a person's file)
    what: list[str] = field(default_factory=list)
    sep: str = ""  # the line breaks added before a new block
    tail: str = ""  # the line break added after it

    @property
    def path(self) -> Path:
        return self.root / self.rel

    def diff(self) -> str:
        return diffs.unified(str(self.path), self.before, self.after)


@dataclass
class Plan:
    project: Path
    changes: list[Change]
    skipped: list[str]  # what was not written, and why (a conflict, a name taken, ...)
    workspace: Workspace | None = None

    def diff(self) -> str:
        return "".join(c.diff() for c in self.changes)

    def to_data(self) -> dict[str, Any]:
        return {"project": str(self.project),
                "files": [{"agent": c.agent, "path": str(c.path), "action": _action(c), "diff": c.diff()}
                          for c in self.changes],
                "skipped": self.skipped}


def _action(c: Change) -> str:
    return "create" if c.before is None else "remove" if c.after is None else "update"


# --- the ledger ----------------------------------------------------------------------------

class Ledger:
    """What syncs added where, and the sync under way (pending), in memloci's data folder."""

    def __init__(self, state: Path):
        self.path = state / LEDGER
        self.files: dict[str, dict[str, Any]] = {}
        self.pending: list[dict[str, Any]] = []
        self.links: dict[str, dict[str, list[str]]] = {}  # project -> target agent -> source agents
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text("utf-8"))
                self.files = dict(data.get("files", {}))
                self.pending = list(data.get("pending", []))
                self.links = dict(data.get("links", {}))
            except (ValueError, AttributeError):
                raise ValidationError(f"{self.path} does not parse; move it away to start a new ledger") from None

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps({"files": self.files, "pending": self.pending, "links": self.links}, indent=1).encode("utf-8")
        confine.atomic_write(self.path, data, 0o600)


@contextmanager
def locked(state: Path) -> Iterator[Ledger]:
    """The ledger under an exclusive lock, so two syncs at once never interleave."""
    import fcntl

    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state / "rules-ledger.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield Ledger(state)
    finally:
        os.close(fd)


# --- reading and writing one file, confined -----------------------------------------------------

def _read(root: Path, rel: str) -> str | None:
    try:
        data = confine.read_bytes(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{root / rel}: not UTF-8 text (byte {exc.start}); it was left untouched") from None


def _missing_dirs(root: Path, rel: str) -> list[str]:
    """The folders on the way to `rel` that are not there yet (outermost first)."""
    parts = rel.split("/")[:-1]
    missing = []
    for i in range(len(parts)):
        sub = "/".join(parts[: i + 1])
        if not confine.exists(root, sub):
            missing.append(sub)
    return missing


def _put(root: Path, rel: str, text: str | None) -> None:
    if text is None:
        confine.unlink(root, rel)
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        with confine.dir_fd(root, confine.parts(folder) if folder else []) as d:
            try:
                os.fsync(d)
            except OSError:
                pass
    else:
        confine.write_atomic(root, rel, text.encode("utf-8"), mode=0o644)


def _remove_dirs(root: Path, dirs: list[str]) -> None:
    for d in sorted(dirs, key=len, reverse=True):
        try:
            os.rmdir(confine.check(root, d))
        except OSError:
            pass


# Tests: SIGKILL this process after that many file writes. The command line sets it from its
# settings (KILL_AFTER in the environment), so the variable is read where every variable is.
kill_after_writes: int | None = None


def _kill_point(count: int) -> None:
    if kill_after_writes is not None and count >= kill_after_writes:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _backup_name(root: Path, rel: str) -> str:
    name = confine.free_backup_name(root, rel)
    if name is not None:
        return name
    raise ValidationError(f"{root / rel}: no free name for a backup (.bak to .bak.99 are taken)")


def recover(ledger: Ledger) -> list[str]:
    """Put back every file of a sync that stopped half way (killed): each file holding that
    sync's new bytes gets its old ones again; the backups and folders it made go. What a file
    holds that is neither is left alone and named."""
    notes: list[str] = []
    if not ledger.pending:
        return notes
    written = 0
    for item in reversed(ledger.pending):
        root, rel = Path(item["root"]), item["rel"]
        for name in confine.names_in(root, rel.rsplit("/", 1)[0] if "/" in rel else ""):
            if confine.is_stray_temp(name):
                confine.unlink(root, (rel.rsplit("/", 1)[0] + "/" if "/" in rel else "") + name)
        current = _read(root, rel)
        if sha(current) == item["sha_after"] and item["sha_after"] != item["sha_before"]:
            _put(root, rel, item["before"])
            written += 1
            _kill_point(written)  # a recovery killed half way is taken up again by the next command
        elif sha(current) != item["sha_before"]:
            notes.append(f"{root / rel}: changed since the interrupted sync; left as it is")
        if item.get("bak") and _read(root, item["bak"]) == item["before"]:
            confine.unlink(root, item["bak"])
            written += 1
            _kill_point(written)
        _remove_dirs(root, item.get("created_dirs", []))
    ledger.pending = []
    ledger.save()
    return notes


def _commit(changes: list[Change], ledger: Ledger, record: Any, *, backup: bool = True) -> None:
    """Write every change (pending first, backups next), read each back, roll all back on failure."""
    pending: list[dict[str, Any]] = []
    for c in changes:
        entry = ledger.files.get(str(c.path))
        bak = None
        if backup and c.before is not None and not c.whole and (entry is None or not entry.get("bak")):
            bak = _backup_name(c.root, c.rel)
        pending.append({"root": str(c.root), "rel": c.rel, "before": c.before, "sha_before": sha(c.before),
                        "sha_after": sha(c.after), "bak": bak,
                        "created_dirs": _missing_dirs(c.root, c.rel) if c.after is not None else []})
    ledger.pending = pending
    ledger.save()
    written = 0
    _kill_point(written)  # killed with the pending mark saved and nothing written yet
    try:
        for c, item in zip(changes, pending, strict=True):
            if _read(c.root, c.rel) != c.before:
                raise ConflictError(f"{c.path} changed while memloci was working on it",
                                    hint="nothing was changed; run the command again")
            if item["bak"]:
                confine.write_atomic(c.root, item["bak"], (c.before or "").encode("utf-8"), mode=0o600)
                written += 1
                _kill_point(written)
            _put(c.root, c.rel, c.after)
            written += 1
            _kill_point(written)
            if _read(c.root, c.rel) != c.after:
                raise ConflictError(f"{c.path}: what was read back is not what was written",
                                    hint="every file of the sync was put back as it was")
    except BaseException as exc:
        recover(ledger)
        if isinstance(exc, MemlociError):
            raise
        if isinstance(exc, OSError):
            raise ValidationError(f"{exc.filename or 'a rule file'}: {exc.strerror or exc}; "
                                  "every file of the sync was put back as it was") from None
        raise
    for c, item in zip(changes, pending, strict=True):
        record(c, item)
    ledger.pending = []
    ledger.save()


# --- sync -----------------------------------------------------------------------------------

def _splice(before: str | None, new_block: str, where: str) -> tuple[str | None, str, str]:
    """The file with memloci's block put in (or replaced, or taken out when `new_block` is
    empty): (text, the line breaks put before a new block, the one after it)."""
    text = before or ""
    if text.count("\r\n") and text.count("\r\n") == text.count("\n"):  # a CRLF file gets a CRLF block
        new_block = new_block.replace("\n", "\r\n")
    span = block_span(text, where)
    if span is not None:
        if not new_block:
            return text[:span[0]] + text[span[1]:], "", ""
        return text[:span[0]] + new_block + text[span[1]:], "", ""
    if not new_block:
        return before, "", ""
    nl = "\r\n" if "\r\n" in new_block else "\n"
    sep = "" if not text or text.endswith(nl * 2) else nl if text.endswith(nl) else nl * 2
    return text + sep + new_block + nl, sep, nl


def _unsplice(text: str, entry: dict[str, Any], where: str) -> str:
    """The file without memloci's block and the line breaks sync put around it."""
    span = block_span(text, where)
    if span is None:
        return text
    start, end = span
    sep, tail = entry.get("sep", ""), entry.get("tail", "")
    if sep and text[start - len(sep):start] == sep:
        start -= len(sep)
    if tail and text[end:end + len(tail)] == tail:
        end += len(tail)
    return text[:start] + text[end:]


_EDITED = ("{where}: memloci's block was edited by hand since memloci wrote it; left as it is (move the "
           "edits out of the block, or delete the block, then run the command again)")


def _block_text(text: str | None, where: str) -> str | None:
    span = block_span(text or "", where)
    return None if span is None else (text or "")[span[0]:span[1]]


def _block_edited(text: str | None, entry: dict[str, Any] | None, where: str) -> bool:
    """Whether a person changed memloci's block since memloci last wrote it (the ledger keeps
    the block's hash): replacing or removing it then would lose their words, so it is left."""
    if entry is None or not entry.get("block_sha"):
        return False
    block = _block_text(text, where)
    return block is not None and sha(block) != entry["block_sha"]


def _sources(ws: Workspace, sources: set[str], skipped: list[str]) -> tuple[list[Rule], list[Skill]]:
    """The rules and skills of `sources` a sync copies: project and path rules (a user-wide rule
    stays user-wide), none in conflict (listed in `skipped` instead), each text once."""
    in_conflict = {r.id for c in ws.conflicts for r in c.rules}
    rules: list[Rule] = []
    for rule in ws.rules:
        if rule.agent not in sources or rule.scope == "global":
            continue
        if rule.id in in_conflict:
            note = (f"{rule.id}: in conflict with a rule of the same scope and title (memloci rules list); "
                    "not copied until a person decides")
            if note not in skipped:
                skipped.append(note)
            continue
        rules.append(rule)
    # a duplicate's kept copy may be another agent's: the source's own copy stands for it then
    for dup in ws.duplicates:
        if dup.kept.agent not in sources and dup.kept.scope != "global" and dup.kept.id not in in_conflict:
            mine = [r for r in dup.dropped if r.agent in sources]
            if mine:
                rules.append(mine[0])
    return rules, [s for s in ws.skills if s.agent in sources]


def plan_sync(project: Path, sources: list[str], targets: list[str], state: Path,
              user_home: Path | None = None) -> Plan:
    """What a sync from `sources` to `targets` would change, file by file; nothing written.
    A target keeps getting the agents earlier syncs copied into it (the ledger's links), so
    one sync never drops what another put there."""
    project = project.resolve()  # one key in the ledger however the folder is named (.., a link)
    if not project.is_dir():
        raise ValidationError(f"--project: {project} is not a folder")
    problems: list[str] = []
    found = scan(project, user_home or home(), problems)
    ws = merge(found, problems)
    ledger = Ledger(state)
    linked = ledger.links.get(str(project), {})
    clashing = {c.name.casefold() for c in ws.skill_clashes}
    skipped: list[str] = list(problems)
    for clash in ws.skill_clashes:
        skipped.append(f"skill '{clash.name}': {clash.kept.path} kept; also in "
                       + ", ".join(s.path for s in clash.dropped))
    own = [x for x in found if not x.managed]
    changes: list[Change] = []
    for agent in targets:
        if agent in sources:
            skipped.append(f"{agent}: named in both --from and --to; nothing is copied into it")
            continue
        source_rules, source_skills = _sources(ws, (set(sources) | set(linked.get(agent, []))) - {agent}, skipped)
        has_hash = {r.hash for r in own if isinstance(r, Rule) and r.agent == agent}
        has_skill = {s.name.casefold() for s in own if isinstance(s, Skill) and s.agent == agent}
        rules = [r for r in source_rules if r.hash not in has_hash]
        skills = []
        for s in source_skills:
            if s.name.casefold() in has_skill or s.name.casefold() in clashing:
                if s.name.casefold() in has_skill:
                    skipped.append(f"skill '{s.name}' -> {agent}: {agent} has a skill of that name; not replaced")
                continue
            skills.append(s)
        wanted: dict[str, Output] = {}
        for o in outputs(agent, rules, skills):
            if o.rel in wanted:  # two titles or names that make one file name: neither guessed over
                skipped.append(f"{o.what} -> {agent}: {o.rel} is also the file of {wanted[o.rel].what}; "
                               "not written (rename one of them)")
                continue
            wanted[o.rel] = o
        # files earlier syncs made for this agent that nothing asks for now go
        recorded = {e["rel"]: e for e in ledger.files.values()
                    if e["agent"] == agent and e["project"] == str(project) and e["whole"]}
        for rel in sorted(set(recorded) | set(wanted)):
            out = wanted.get(rel)
            where = str(project / rel)
            before = _read(project, rel)
            if out is not None and not out.whole:
                entry = ledger.files.get(where)
                if _block_edited(before, entry, where):
                    skipped.append(_EDITED.format(where=where))
                    continue
                after, sep, tail = _splice(before, out.text, where)
                if entry is not None and after is not None and not out.text:
                    after = _unsplice(before or "", entry, where)
                    if entry.get("created") and after == "":
                        after = None
                if after != before:
                    changes.append(Change(agent, project, rel, before, after, False, [out.what], sep, tail))
                continue
            if out is None:
                if before is not None and sha(before) == recorded[rel].get("sha_after"):
                    changes.append(Change(agent, project, rel, before, None, True, ["no longer synced"]))
                elif before is not None:
                    skipped.append(f"{where}: changed since memloci wrote it; left in place")
                continue
            if before is not None and rel not in recorded:
                skipped.append(f"{out.what} -> {agent}: {where} exists and is not memloci's; not replaced")
                continue
            if before is not None and sha(before) != recorded[rel].get("sha_after"):
                skipped.append(f"{where}: changed since memloci wrote it; left as it is (delete it to have "
                               "it written again)")
                continue
            if before != out.text:
                changes.append(Change(agent, project, rel, before, out.text, True, [out.what]))
    return Plan(project, changes, skipped, ws)


def sync(project: Path, sources: list[str], targets: list[str], state: Path,
         user_home: Path | None = None) -> Plan:
    with locked(state) as ledger:
        notes = recover(ledger)
        plan = plan_sync(project, sources, targets, state, user_home)
        plan.skipped = notes + plan.skipped

        def record(c: Change, item: dict[str, Any]) -> None:
            key = str(c.path)
            entry = ledger.files.get(key)
            if c.after is None or (not c.whole and block_span(c.after, key) is None):  # memloci's part gone
                ledger.files.pop(key, None)
                for bak in {(entry or {}).get("bak"), item["bak"]} - {None}:
                    _drop_backup(c.root, bak, c.after)
                if c.after is None:
                    _remove_dirs(c.root, (entry or {}).get("created_dirs", []))
                return
            if entry is None:
                entry = {"agent": c.agent, "project": str(plan.project), "root": str(c.root), "rel": c.rel,
                         "whole": c.whole, "created": c.before is None, "created_dirs": item["created_dirs"],
                         "sep": c.sep, "tail": c.tail, "bak": item["bak"], "sha_before": sha(c.before)}
                ledger.files[key] = entry
            elif not c.whole and _block_text(c.before, key) is None:
                # a new block (a person deleted the last one by hand): this sync's line breaks
                # around it are the ones unsync takes away, not the earlier ones the person kept
                entry.update(sep=c.sep, tail=c.tail)
            entry["sha_after"] = sha(c.after)
            if not c.whole:
                entry["block_sha"] = sha(_block_text(c.after, key))

        _commit(plan.changes, ledger, record)
        links = ledger.links.setdefault(str(plan.project), {})
        for agent in targets:
            if agent not in sources:
                links[agent] = sorted(set(links.get(agent, [])) | set(sources))
        ledger.save()
        return plan


def _drop_backup(root: Path, bak: str, now: str | None) -> None:
    """An exact undo: the backup holding the very bytes the file holds again goes."""
    if _read(root, bak) == now or now is None:
        confine.unlink(root, bak)


def plan_unsync(project: Path, targets: list[str] | None, state: Path) -> Plan:
    project = project.resolve()
    ledger = Ledger(state)
    changes: list[Change] = []
    skipped: list[str] = []
    for key, entry in sorted(ledger.files.items()):
        if entry["project"] != str(project) or (targets is not None and entry["agent"] not in targets):
            continue
        root, rel = Path(entry["root"]), entry["rel"]
        before = _read(root, rel)
        if before is None:
            continue
        if entry["whole"]:
            if sha(before) != entry.get("sha_after"):
                skipped.append(f"{key}: changed since memloci wrote it; left in place")
                continue
            changes.append(Change(entry["agent"], root, rel, before, None, True, ["remove"]))
            continue
        if _block_edited(before, entry, key):
            skipped.append(_EDITED.format(where=key))
            continue
        after: str | None = _unsplice(before, entry, key)
        if entry.get("created") and after == "":
            after = None
        if after != before:
            changes.append(Change(entry["agent"], root, rel, before, after, False, ["remove memloci's block"]))
    return Plan(project, changes, skipped)


def unsync(project: Path, targets: list[str] | None, state: Path) -> Plan:
    with locked(state) as ledger:
        notes = recover(ledger)
        plan = plan_unsync(project, targets, state)
        plan.skipped = notes + plan.skipped

        def record(c: Change, item: dict[str, Any]) -> None:
            entry = ledger.files.pop(str(c.path), None) or {}
            if entry.get("bak"):
                _drop_backup(c.root, entry["bak"], c.after)
            if c.after is None:
                _remove_dirs(c.root, entry.get("created_dirs", []))

        _commit(plan.changes, ledger, record, backup=False)  # it gives back what the person had
        links = ledger.links.get(str(plan.project), {})
        for agent in list(links):
            if targets is None or agent in targets:
                del links[agent]
        # entries of files already gone (deleted by a person) are forgotten too
        for key, entry in list(ledger.files.items()):
            if entry["project"] == str(plan.project) and (targets is None or entry["agent"] in targets) \
                    and _read(Path(entry["root"]), entry["rel"]) is None:
                del ledger.files[key]
        ledger.save()
        return plan


__all__ = ["AGENTS", "Plan", "Change", "plan_sync", "sync", "plan_unsync", "unsync", "recover"]
