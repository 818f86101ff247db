"""Opens a Markdown library of the older layout (journal.md and memories/ at its root), which
moves them into .memloci/, and SIGKILLs itself at one point of the move, as a crash would:
`layout_killer.py ROOT op N` after the N-th file operation of the move (0: once the intent
record is written, before any), `layout_killer.py ROOT drop` once the move is committed, before
the emptied memories/ folder goes. tests/test_hidden_layout.py reopens the library after it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from memloci.store.markdown import engine, intent
from memloci.store.markdown.engine import MarkdownStore


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    root, where = Path(sys.argv[1]), sys.argv[2]
    if where == "op":
        after = int(sys.argv[3])
        apply_one = intent.FileChange._apply_one
        write_intent = intent.FileChange._write_intent
        done = [0]

        def write_then_maybe_die(self, durable):  # type: ignore[no-untyped-def]
            write_intent(self, durable)
            if after == 0:
                die()

        def apply_then_maybe_die(self, op, s, appended, changed):  # type: ignore[no-untyped-def]
            apply_one(self, op, s, appended, changed)
            done[0] += 1
            if done[0] == after:
                die()

        intent.FileChange._write_intent = write_then_maybe_die  # type: ignore[method-assign]
        intent.FileChange._apply_one = apply_then_maybe_die  # type: ignore[method-assign]
    else:
        engine.drop_old_folder = lambda tx, root: die()  # type: ignore[assignment]
    store = MarkdownStore(root, "old")
    store.open()
    print("opened without a kill", flush=True)
    store.close()


if __name__ == "__main__":
    main()
