"""What a question tells about its answer (search/cues.py), and retrieve_memory using it:
a "when" question finds the statement that says when, a date finds the memories of that
date, a named person finds that person's statements. Real SQLite files, the real embedder,
the real server over MCP stdio; and leave-one-conversation-out of `memloci bench locomo` on
a small conversation written here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import run_session

from memloci.search import cues


def test_when_questions():
    assert cues.is_when_question("When did Caroline go to the support group?")
    assert cues.is_when_question("How long has Nate had his turtles?")
    assert cues.is_when_question("In what year did Tim visit London?")
    assert cues.is_when_question("What year did Tim visit London?")
    assert not cues.is_when_question("What did Caroline paint?")


@pytest.mark.parametrize("text", [
    "Caroline: I went to a support group yesterday.", "I got mentored by this business dude last Friday",
    "We moved here 3 years ago", "I've had them for 3 years now", "Back in 2019 we met",
    "I'll come over tomorrow", "It happened in June", "a few weeks ago I started", "since last summer",
])
def test_statements_that_say_when(text):
    assert cues.says_when(text)


@pytest.mark.parametrize("text", [
    "I may go there", "We love painting together", "The march was long", "Thanks for the book!",
])
def test_statements_that_do_not_say_when(text):
    assert not cues.says_when(text)


def day(y, m, d):
    return datetime(y, m, d, tzinfo=UTC)


def test_question_dates():
    assert cues.question_dates("What movie did Joanna watch on 1 May, 2022?") == (day(2022, 5, 1), day(2022, 5, 2))
    assert cues.question_dates("What painting did Melanie show on October 13, 2023?") == (day(2023, 10, 13), day(2023, 10, 14))
    assert cues.question_dates("What setback did Melanie face in October 2023?") == (day(2023, 10, 1), day(2023, 11, 1))
    assert cues.question_dates("How many times has she gone to the beach in 2023?") == (day(2023, 1, 1), day(2024, 1, 1))
    assert cues.question_dates("When did Melanie go camping in June?") == (0, 6)
    start, end = cues.question_dates("What did John do the week before August 3, 2023?")
    assert start <= day(2023, 7, 27) and end == day(2023, 8, 4)
    assert cues.question_dates("What may Caroline do next?") is None  # "may" the verb is no month
    assert cues.question_dates("What happened on 31 February, 2023?") is None


@pytest.mark.parametrize("text", [
    "1:56 pm on 8 May, 2023", "8 May 2023", "May 8, 2023", "2023-05-08", "2023-05-08T10:00:00Z",
    "2023-05-08T13:56:00.123456+02:00", "2023-05-08 23:30:00", "2023-05-08T23:30:00-05:00",  # the date as written
])
def test_memory_dates(text):
    assert cues.parse_date(text) == day(2023, 5, 8)


@pytest.mark.parametrize("text", ["sometime", "", "2023-13-08", "2023-05-32", "2023-05-081", "31 February, 2023"])
def test_not_memory_dates(text):
    assert cues.parse_date(text) is None


def test_memory_dates_and_slack():
    may_1 = (day(2022, 5, 1), day(2022, 5, 2))
    assert cues.dated_within(day(2022, 5, 1), may_1)
    assert cues.dated_within(day(2022, 5, 6), may_1)  # told of a few days later ("last Sunday")
    assert not cues.dated_within(day(2022, 5, 20), may_1)
    assert not cues.dated_within(day(2022, 4, 30), may_1)
    assert cues.dated_within(day(2021, 6, 3), (0, 6))
    assert not cues.dated_within(None, may_1)


def test_speakers():
    assert cues.speaker("Caroline: I went there") == "Caroline"
    assert cues.speaker("note: buy milk") is None  # a lowercase label is no person
    assert cues.named_in("Caroline", "When did Caroline go?")
    assert not cues.named_in("Mel", "When did Melanie go?")


def test_iso_metadata_dates_lift_memories_of_the_date_asked(service):
    """metadata.date as an ISO date or timestamp (what a user would write) works as LoCoMo's
    written dates do: the memory of the date asked about comes first, and says why."""
    service.store_memory("Painted a sunset over the lake", metadata={"date": "2023-06-09T19:55:00+02:00"})
    service.store_memory("Painted a sunset with the kids", metadata={"date": "2023-05-08"})
    service.store_memory("Painted a sunset at the beach", metadata={"date": "1:56 pm on 20 July, 2023"})
    for question, right, date in [
        ("What sunset was painted on 8 May, 2023?", "Painted a sunset with the kids", "2023-05-08"),
        ("What sunset was painted on June 9, 2023?", "Painted a sunset over the lake", "2023-06-09T19:55:00+02:00"),
        ("What sunset was painted in July 2023?", "Painted a sunset at the beach", "1:56 pm on 20 July, 2023"),
    ]:
        hits = service.retrieve_memory(question, n_results=3).hits
        assert hits[0].memory.content == right, [(h.memory.content, h.why) for h in hits]
        assert f"dated {date}" in hits[0].why
        assert all("dated" not in h.why for h in hits[1:])


# A conversation in three sessions: each question has one right turn and near misses that share
# its words but not its cue (no time reference, another date, the other speaker).
SESSIONS = [
    ("1:56 pm on 8 May, 2023", [
        ("Caroline", "The support group is such a big help, going to the support group keeps me going."),
        ("Melanie", "I painted a sunset with the kids, it was lovely."),
        ("Caroline", "I went to the support group yesterday."),
        ("Melanie", "I'd love to go to a support group like that with you, Caroline."),
    ]),
    ("7:55 pm on 9 June, 2023", [
        ("Caroline", "I painted a sunset over the lake too, after our talk."),
        ("Melanie", "Painting a sunset over the lake is what I painted most this year, Caroline!"),
        ("Caroline", "Pottery class sounds fun, I made a bowl for my mom once."),
    ]),
    ("4:33 pm on 12 July, 2023", [
        ("Melanie", "Camping with the family was the best part of my summer."),
        ("Caroline", "I love camping with my friends by the river."),
        ("Melanie", "Camping by the river is what I love most about camping, Caroline."),
    ]),
]
QUESTIONS = [  # (question, the right turn's dia id, the cue that should lift it)
    ("When did Caroline go to the support group?", "D1:3", "says when"),
    ("What did Melanie paint on 8 May, 2023?", "D1:2", "dated"),
    ("What does Caroline love about camping by the river?", "D3:2", "by Caroline"),
]


def sample() -> dict:
    conversation = {"speaker_a": "Caroline", "speaker_b": "Melanie"}
    for s, (date, turns) in enumerate(SESSIONS, 1):
        conversation[f"session_{s}_date_time"] = date
        conversation[f"session_{s}"] = [{"speaker": who, "dia_id": f"D{s}:{t}", "text": text}
                                        for t, (who, text) in enumerate(turns, 1)]
    return {"sample_id": "conv-test", "conversation": conversation,
            "qa": [{"question": q, "evidence": [e], "category": 2} for q, e, _ in QUESTIONS]}


def test_retrieve_memory_follows_the_cues_over_mcp(home: Path):
    async def body(c):
        for s, (date, turns) in enumerate(SESSIONS, 1):  # stored as `memloci bench locomo` stores a turn
            for t, (who, text) in enumerate(turns, 1):
                await c.ok("store_memory", content=f"{who}: {text}", tags=[f"dia:D{s}:{t}"], memory_type="dialogue",
                           metadata={"dia_id": f"D{s}:{t}", "session": s, "date": date})
        for question, right, cue in QUESTIONS:
            found, _ = await c.ok("retrieve_memory", query=question, n_results=3)
            top = [next(t[4:] for t in m["tags"] if t.startswith("dia:")) for m in found["memories"]]
            why = [m.get("why", "") for m in found["memories"]]
            assert top[0] == right and cue in why[0], f"{question}: {top} ({why})"

    run_session(home, body, MEMLOCI_EMBEDDER="minilm")


def test_lab_cache_is_per_user(tmp_path: Path):
    """The folder `memloci bench locomo --folds` gives the lab: the settings' per-user cache."""
    from memloci.core.settings import Settings

    assert Settings.from_env({"XDG_CACHE_HOME": str(tmp_path / "xdg")}).cache_for("locomo-lab") == \
        tmp_path / "xdg" / "memloci" / "locomo-lab"
    assert Settings.from_env({"XDG_CACHE_HOME": str(tmp_path / "xdg"), "MEMLOCI_CACHE": str(tmp_path / "mine")}
                             ).cache_for("locomo-lab") == tmp_path / "mine" / "locomo-lab"


def _folds(tmp_path: Path, data: Path, out: Path, src: Path | None = None) -> subprocess.CompletedProcess:
    """`memloci bench locomo --folds --k 1`, its lab cache under tmp_path/cache (XDG_CACHE_HOME);
    with `src`, memloci's code is read from there."""
    env = {k: v for k, v in os.environ.items() if k != "MEMLOCI_CACHE"} | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "locomo", "--data", str(data), "--folds",
                           "--k", "1", "--out", str(out)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr
    return done


def test_bench_locomo_folds_command(tmp_path: Path):
    """`memloci bench locomo --folds` prints the shipped and leave-one-out figures and writes them:
    each fold chooses the weights that score best on the other conversation, and the figures are
    those of the setting it chose. Its libraries are built once and reused, and are keyed by the
    code: a library built by other indexing code (other store/ or embedding source) is never reused,
    while a change to code that only ranks (search/hybrid.py) reuses them."""
    import memloci

    data = tmp_path / "locomo.json"
    one = sample()
    data.write_text(json.dumps([one, json.loads(json.dumps(one).replace("conv-test", "conv-other"))]))
    out = tmp_path / "folds.json"
    done = _folds(tmp_path, data, out)
    lab = tmp_path / "cache" / "memloci" / "locomo-lab"
    built = sorted(p.name.split("-")[:2] for p in lab.glob("*.db"))
    assert built == [["conv", "other"], ["conv", "test"]]
    assert "leave-one-out" in done.stdout and "chosen without conv-test" in done.stdout
    report = json.loads(out.read_text())
    assert report["bench"] == "locomo-folds" and report["k"] == 1
    assert len(report["settings"]) == 16 and set(report["chosen"]) == {"conv-test", "conv-other"}
    assert set(report["shipped"]) == {"SESSION_WEIGHT", "FEEDBACK_WEIGHT", "EXPANSION_WEIGHT"}
    by_setting = {json.dumps(s["weights"], sort_keys=True): s["recall"] for s in report["settings"]}
    assert report["plain"]["overall"] == by_setting[json.dumps(report["shipped"], sort_keys=True)]
    # the two conversations are alike, so both folds choose the setting that is best overall
    best = max(by_setting, key=by_setting.get)
    assert all(json.dumps(w, sort_keys=True) == best for w in report["chosen"].values())
    assert report["leave_one_out"]["overall"] == by_setting[best]

    libraries = {p.name: p.stat().st_mtime_ns for p in lab.glob("*.db")}
    _folds(tmp_path, data, tmp_path / "again.json")  # the same code: the same libraries, not built again
    assert {p.name: p.stat().st_mtime_ns for p in lab.glob("*.db")} == libraries
    src = tmp_path / "src"
    shutil.copytree(Path(memloci.__file__).parent, src / "memloci", ignore=shutil.ignore_patterns("__pycache__"))
    with (src / "memloci" / "search" / "hybrid.py").open("a", encoding="utf-8") as f:
        f.write("\n# other ranking code\n")
    _folds(tmp_path, data, tmp_path / "ranked.json", src)  # only ranking changed: the same libraries
    assert {p.name: p.stat().st_mtime_ns for p in lab.glob("*.db")} == libraries
    with (src / "memloci" / "store" / "sqlite" / "memory_rows.py").open("a", encoding="utf-8") as f:
        f.write("\n# other indexing code\n")
    _folds(tmp_path, data, tmp_path / "changed.json", src)
    rebuilt = set(p.name for p in lab.glob("*.db")) - set(libraries)
    assert sorted(name.split("-")[:2] for name in rebuilt) == [["conv", "other"], ["conv", "test"]]
