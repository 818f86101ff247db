"""What install and uninstall change in each file, worked out before anything is written."""

from __future__ import annotations

from pathlib import Path

from memloci.core import diffs
from memloci.install import edits
from memloci.install import jsonedit as je
from memloci.install.files import FilePlan, Ledger, check_path, meaning, read, sha, steps_of


def install_plan(path: Path, fmt: str, ops: list[dict], *, force: bool, created_root: dict,
                 project_dir: Path | None, dialect: str = "jsonc", reader: str = "the client") -> FilePlan:
    """The plan that adds `ops` to the file at `path` (created if absent). `dialect` is what
    the client's JSON reader accepts (jsonedit.DIALECTS); `reader` names it in the refusal."""
    check_path(path, project_dir)
    where = str(path)
    before = read(path)
    if fmt == "json" and before and before.strip():
        edits.check_dialect(before, dialect, where, reader)
    plan = FilePlan(path, fmt, before, before)
    plan.expect = meaning(fmt, before, where) or {}
    plan.strict = fmt == "json" and before is not None and je.is_strict_json(before)
    if fmt == "json" and (before is None or not before.strip()):
        # A new (or empty) file: written whole, in the clients' usual two-space layout.
        doc = dict(created_root)
        for op in ops:
            op = dict(op, created=0)
            doc = edits.apply_value(doc, op)
            plan.ops.append(op)
        plan.after = edits.new_json_text(doc)
        plan.steps = [[je.Splice(0, before or "", plan.after)]]
        plan.expect, plan.strict, plan.created_file = doc, True, before is None
        return plan
    text = before or ""
    for op in ops:
        if fmt == "json":
            splices, recorded = edits.json_splices(text, op, where, force)
            if not splices:
                continue
            new = je.apply(text, splices)
            plan.steps.append(splices)
        else:
            new, recorded = edits.toml_text(text, op, where, force)
            if new == text:
                continue
            plan.steps.append([je.Splice(0, text, new)])
        plan.ops.append(recorded)
        plan.expect = edits.apply_value(plan.expect, recorded)
        text = new
    plan.after = text
    plan.created_file = before is None
    return plan


def uninstall_plan(path: Path, fmt: str, entries: list[dict], fallback_ops: list[dict], *,
                   project_dir: Path | None) -> FilePlan:
    """The plan that takes back what the ledger `entries` (newest first) say install added;
    without entries, `fallback_ops` (what install would have added, where it is found)."""
    check_path(path, project_dir)
    where = str(path)
    before = read(path)
    plan = FilePlan(path, fmt, before, before, bak_suffix=".uninstall.bak")  # install's .bak stays
    if before is None:
        return plan
    doc = meaning(fmt, before, where)
    plan.strict = fmt == "json" and je.is_strict_json(before)
    if not entries:
        entries = [{"ops": [op for op in fallback_ops if edits.has(doc, op)], "sha_after": None,
                    "steps": [], "created_file": False}]
    text, exact, undone = before, True, []
    for entry in entries:
        if exact and sha(text) == entry["sha_after"]:
            # Untouched since that install: undo its very splices, giving back the exact bytes.
            for step in reversed(steps_of(entry)):
                text = je.apply(text, je.invert(step))
        else:
            exact = False
            for op in reversed(entry["ops"]):
                if fmt == "json":
                    for step in edits.json_unsplices(text, op, where):
                        text = je.apply(text, step)
                else:
                    text = edits.toml_untext(text, op, where)
        undone += list(reversed(entry["ops"]))
    if not undone:
        return plan
    expect = doc
    for op in undone:
        expect = edits.revert_value(expect, op)
    plan.after, plan.expect, plan.ops = text, expect, undone
    plan.backup = not exact  # an exact undo gives back the original, whose backup install wrote
    first = entries[-1]
    if first["created_file"] and (text == "" or expect in ({}, first.get("created_root"))):
        plan.after, plan.expect, plan.backup = None, None, False  # it held nothing but ours
        plan.created_dirs = list(first.get("created_dirs", []))
    return plan


def diff(plan: FilePlan) -> str:
    """A unified diff of the plan, as `--dry-run` and a refused `--force` show it."""
    return diffs.unified(str(plan.path), plan.before, plan.after)


__all__ = ["install_plan", "uninstall_plan", "diff", "Ledger"]
