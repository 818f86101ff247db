"""The three-way merge that keeps both of an editor's saves when they race a refused change."""

from memloci.markdown.merge3 import merge3

BASE = b"# a\n- first\n- second\n\n## Hand\nold\n"


def test_edits_to_different_lines_are_both_kept():
    ours = BASE.replace(b"- second\n", b"")  # the refused change taken out again
    theirs = BASE.replace(b"## Hand\n", b"## Hand\nnew line\n")
    assert merge3(BASE, ours, theirs) == b"# a\n- first\n\n## Hand\nnew line\nold\n"


def test_the_same_edit_on_both_sides_is_kept_once():
    edit = BASE.replace(b"old\n", b"older\n")
    assert merge3(BASE, edit, edit) == edit


def test_insertions_at_the_same_point_are_both_kept_ours_first():
    ours = BASE.replace(b"## Hand\n", b"## Hand\none\n")
    theirs = BASE.replace(b"## Hand\n", b"## Hand\ntwo\n")
    assert merge3(BASE, ours, theirs) == BASE.replace(b"## Hand\n", b"## Hand\none\ntwo\n")


def test_different_edits_of_the_same_line_are_a_conflict():
    assert merge3(BASE, BASE.replace(b"old", b"one"), BASE.replace(b"old", b"two")) is None


def test_one_side_unchanged_gives_the_other():
    theirs = BASE + b"tail\n"
    assert merge3(BASE, BASE, theirs) == theirs
    assert merge3(BASE, theirs, BASE) == theirs


def test_bytes_without_a_final_newline_and_empty_files_are_exact():
    assert merge3(b"", b"a", b"") == b"a"
    assert merge3(b"x\ny", b"x\ny", b"w\nx\ny") == b"w\nx\ny"
    assert merge3(b"x\r\ny\r\n", b"x\r\nz\r\ny\r\n", b"x\r\ny\r\n") == b"x\r\nz\r\ny\r\n"


# -- the merged file on disk -------------------------------------------------------------------
# An editor saves a note just before memloci's swap (the change is refused, the save comes back)
# and again just after it, on memloci's bytes: the rollback writes the merge of both saves. That
# write must be as durable as every other (fsynced before it replaces the note, the note's
# folder fsynced after) and whole under SIGKILL, as tests/test_crash.py checks the others: in a
# real process, killed at the worst moment, then the library opened again.

import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from services import service_for  # noqa: E402

from memloci.core.model import EntityInput  # noqa: E402

RACE = r"""
import os, signal, sys
from pathlib import Path
from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.errors import ConflictError
from memloci.core.model import ObservationBatch
from memloci.search.embedder import EmbedderHandle
from memloci.service.facade import MemoryService
from memloci.store.markdown import intent as markdown_intent

root, kill = Path(sys.argv[1]), sys.argv[2] == "kill"
path = root / "a.md"
real = markdown_intent._exchange
calls = []

def save(old, new):  # an editor's save by rename
    tmp = path.with_name(".a.md.swp")
    tmp.write_bytes(path.read_bytes().replace(old, new, 1))
    os.replace(tmp, path)

def racing_editor(src_dir, src, dst_dir, dst):
    calls.append(src)
    if len(calls) == 1:
        save(b"## Hand\n", b"## Hand\nhand line 1\n")
    done = real(src_dir, src, dst_dir, dst)
    if len(calls) == 1:
        save(b"## Hand\n", b"## Hand\nhand line 2\n")
    if kill and src.endswith(".m"):  # the merged file is in place: killed before anything else
        os.kill(os.getpid(), signal.SIGKILL)
    return done

markdown_intent._exchange = racing_editor
service = MemoryService(LibraryRegistry([LibrarySpec("crash", root, "markdown")]), EmbedderHandle("none"))
try:
    service.add_observations([ObservationBatch("a", ("refused",))])
except ConflictError:
    print("refused", flush=True)
service.close()
print("exchange works" if markdown_intent._exchange_works else "no exchange", flush=True)
"""


def _library(tmp_path) -> Path:
    root = tmp_path / "lib"
    service = service_for("markdown", root)
    service.create_entities([EntityInput("a", "note", ("first",))])
    service.close()
    (root / "a.md").write_bytes((root / "a.md").read_bytes() + b"\n## Hand\n")
    return root


def _race(root: Path, mode: str, prefix: list[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", RACE, str(root), mode],
                          capture_output=True, text=True, timeout=300)


def _merged(root: Path) -> None:
    final = (root / "a.md").read_bytes()
    assert b"hand line 1\n" in final and b"hand line 2\n" in final, final
    assert b"refused" not in final


def test_the_merged_file_is_fsynced_before_it_replaces_the_note_and_its_folder_after(tmp_path):
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed: the system calls cannot be watched")
    root = _library(tmp_path)
    trace = tmp_path / "trace"
    run = _race(root, "run", [strace, "-f", "-y", "-qq", "-o", str(trace),
                              "-e", "trace=fsync,fdatasync,rename,renameat,renameat2"])
    if run.returncode and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr.strip()[:200]}")
    assert run.returncode == 0, run.stderr
    if "no exchange" in run.stdout:
        pytest.skip("renameat2 RENAME_EXCHANGE is not available on this file system")
    assert "refused" in run.stdout
    _merged(root)
    calls = [re.sub(r"^(\[pid +)?\d+\]? +", "", line) for line in trace.read_text().splitlines()]
    # the swap that put the merged file (staging/<change>.b<n>.m) in place of the note
    (swap,) = [i for i, c in enumerate(calls) if c.startswith("renameat2(") and '.m", ' in c and '"a.md"' in c]
    merged_name = re.search(r'"([^"]+\.m)"', calls[swap]).group(1)
    # it got its name by a rename from a temp file that was fsynced first
    (named,) = [i for i, c in enumerate(calls[:swap]) if c.startswith("rename") and f'"{merged_name}"' in c]
    temp = re.search(r'"([^"]+)"', calls[named]).group(1)
    assert any(c.startswith("fsync(") and c.split(">")[0].endswith("/" + temp) for c in calls[:named]), \
        "the merged bytes were not fsynced before they replaced the note"
    assert any(c.startswith("fsync(") and c.split(">")[0].endswith("/staging") for c in calls[named:swap])
    folder = re.escape(os.path.realpath(root))
    assert any(re.match(rf"fsync\(\d+<{folder}>\)", c) for c in calls[swap:]), \
        "the note's folder was not fsynced after the swap"


@pytest.mark.full  # SIGKILL
def test_a_kill_right_after_the_merged_file_is_in_place_loses_neither_save(tmp_path):
    root = _library(tmp_path)
    run = _race(root, "kill")
    if "no exchange" in run.stdout:
        pytest.skip("renameat2 RENAME_EXCHANGE is not available on this file system")
    assert run.returncode == -signal.SIGKILL, (run.returncode, run.stderr)
    _merged(root)  # as the kill left it
    service = service_for("markdown", root)  # opening rolls the interrupted change back
    try:
        _merged(root)
        assert [o.content for o in service.open_nodes(["a"]).entities[0].observations] == ["first"]
    finally:
        service.close()
    staging = root / ".memloci" / "staging"
    assert not staging.exists() or not os.listdir(staging), "no temp or kept file is left behind"
