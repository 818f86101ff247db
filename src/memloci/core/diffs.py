"""A unified diff of a file's text before and after a change, as dry runs show it."""

from __future__ import annotations

import difflib


def unified(label: str, before: str | None, after: str | None) -> str:
    """`before`/`after` None: the file is absent (shown as /dev/null); a last line without a
    line break is marked as `diff` marks it."""
    old = (before or "").splitlines(keepends=True)
    new = (after or "").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, fromfile=label if before is not None else "/dev/null",
                                 tofile=label if after is not None else "/dev/null")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
