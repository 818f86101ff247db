"""A line-based three-way merge, for the one moment memloci cannot avoid a race with an editor.

memloci puts a note's new bytes in place with an atomic swap and then checks the file it
replaced. When an editor saved just before the swap (its file comes back, the change is
refused) *and* saved again just after it, that second save was made on memloci's bytes: it
holds the refused change and lacks the first save's lines. `merge3(base, ours, theirs)` gives
back the first save with the second save's own edits, so neither of the person's saves is lost.

`base` is the version both sides came from (memloci's bytes), `ours` and `theirs` two edits of
it. Edits to different lines are both kept; the same edit made on both sides is kept once;
insertions at the same point are both kept, `ours` first. Anything else is a conflict: None,
and the caller keeps the newest file as it is.
"""

from __future__ import annotations

from difflib import SequenceMatcher

Hunk = tuple[int, int, list[bytes]]  # base[lo:hi] becomes these lines


def _hunks(base: list[bytes], other: list[bytes]) -> list[Hunk]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [(i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _touch(a: Hunk, b: Hunk) -> bool:
    """The two edits meet: their base ranges overlap, or one inserts at the edge of the other."""
    if a[0] == a[1] or b[0] == b[1]:
        return a[0] <= b[1] and b[0] <= a[1]
    return a[0] < b[1] and b[0] < a[1]


def _apply(base: list[bytes], lo: int, hi: int, hunks: list[Hunk]) -> list[bytes]:
    out: list[bytes] = []
    at = lo
    for h_lo, h_hi, lines in hunks:
        out += base[at:h_lo]
        out += lines
        at = h_hi
    return out + base[at:hi]


def merge3(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """`base` with both sides' edits, or None when they edit the same lines differently."""
    b = base.splitlines(keepends=True)
    mine, yours = _hunks(b, ours.splitlines(keepends=True)), _hunks(b, theirs.splitlines(keepends=True))
    out: list[bytes] = []
    at = 0
    i = j = 0
    while i < len(mine) or j < len(yours):
        # the next group: one edit and every edit (from either side) it meets, transitively
        if j >= len(yours) or (i < len(mine) and mine[i][0] <= yours[j][0]):
            group_m, group_y = [mine[i]], []
            i += 1
        else:
            group_m, group_y = [], [yours[j]]
            j += 1
        lo = min(h[0] for h in group_m + group_y)
        hi = max(h[1] for h in group_m + group_y)
        grown = True
        while grown:
            grown = False
            if i < len(mine) and any(_touch(mine[i], h) for h in group_m + group_y):
                group_m.append(mine[i])
                i += 1
                grown = True
            if j < len(yours) and any(_touch(yours[j], h) for h in group_m + group_y):
                group_y.append(yours[j])
                j += 1
                grown = True
            lo = min(h[0] for h in group_m + group_y)
            hi = max(h[1] for h in group_m + group_y)
        out += b[at:lo]
        if not group_y:
            out += _apply(b, lo, hi, group_m)
        elif not group_m:
            out += _apply(b, lo, hi, group_y)
        else:
            side_m, side_y = _apply(b, lo, hi, group_m), _apply(b, lo, hi, group_y)
            if side_m == side_y:
                out += side_m
            elif lo == hi:  # both only insert, at the same point: keep both
                out += side_m + side_y
            else:
                return None
        at = hi
    return b"".join(out + b[at:])
