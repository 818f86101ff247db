"""Note bodies cut into passages, so a note's own words carry meaning: the splitting rule,
the same on every engine (store/sqlite/passages.py, store/postgres/passages.py keep the
passages and their vectors).

An entity's Markdown body is cut into passages (paragraphs, merged or split to at most
PASSAGE_WORDS words, each carrying the heading it sits under); the background worker embeds
each one as it embeds memories. Observations are memories with vectors of their own, so their
list is no passage. When a body changes, only passages whose text changed lose their vector
(plan_passages): editing one paragraph of a long note re-embeds one passage.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from memloci.markdown.document import normalize_heading

PASSAGE_WORDS = 180  # the default model reads 256 word pieces; ~180 English words fill them
MIN_WORDS = 40  # a passage this short takes in the next section rather than standing alone
# A body of fewer words than this ("Dmitri.") says nothing its note's name does not: it gets no
# passage, since its vector would sit near everything (0.3-0.4 for "music", "alpha" ...).
# Headings are not counted; Chinese/Japanese characters count half a word each.
MEANING_WORDS = 4
SHORT_CHARS = 160  # a passage at least this long has MEANING_WORDS (checked when vectors load)

_HEADING = re.compile(r"^#{1,6}\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"\w+")


def size(text: str) -> int:
    """Words, counting each Chinese/Japanese/Korean character as one (they are written unspaced)."""
    return len(_CJK_CHAR.sub(" ", text).split()) + len(_CJK_CHAR.findall(text))


def says_something(passage: str) -> bool:
    """Whether a passage has words enough to carry meaning beyond its note's name (MEANING_WORDS)."""
    text = _CJK_CHAR.sub(" ", "\n".join(line for line in passage.splitlines() if not _HEADING.match(line)))
    cjk = len(_CJK_CHAR.findall(passage)) - sum(len(_CJK_CHAR.findall(line)) for line in passage.splitlines()
                                                 if _HEADING.match(line))
    return len(_WORD.findall(text)) + cjk / 2 >= MEANING_WORDS


def _blocks(body: str) -> list[tuple[str, str]]:
    """(heading, block) for each paragraph, list or code block, with the heading it sits under.
    The list of the `## Observations` section is left out: each observation is a memory with a
    vector of its own (a Markdown library keeps them in the body too). HTML comments (the
    dates of observations) carry no meaning and are dropped."""
    blocks: list[tuple[str, str]] = []
    heading, lines, fenced = "", list[str](), False
    observations = False

    def close() -> None:
        text = _COMMENT.sub("", "\n".join(lines)).strip()
        if text and not (observations and text[:2] in ("- ", "* ")):
            blocks.append((heading, text))
        lines.clear()

    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(line)
            continue
        if fenced:
            lines.append(line)
        elif _HEADING.match(line):
            close()
            heading = line.strip()
            level, title = len(heading) - len(heading.lstrip("#")), heading.lstrip("#")
            observations = level >= 2 and normalize_heading(title) == "observations"
        elif not line.strip():
            close()
        else:
            lines.append(line)
    close()
    return blocks


def _pieces(text: str, most: int) -> list[str]:
    """A block cut at sentence ends (at words inside a sentence too long) into runs of <= most words."""
    if size(text) <= most:
        return [text]
    units: list[str] = []
    for sentence in (s for s in _SENTENCE_END.split(text) if s.strip()):
        if size(sentence) <= most:
            units.append(sentence)
        elif sentence.split() and len(sentence.split()) > 1:
            words = sentence.split()
            units += [" ".join(words[i:i + most]) for i in range(0, len(words), most)]
        else:  # unspaced CJK text
            units += [sentence[i:i + most] for i in range(0, len(sentence), most)]
    out: list[str] = []
    run: list[str] = []
    for unit in units:
        if run and size(" ".join(run + [unit])) > most:
            out.append(" ".join(run))
            run = []
        run.append(unit)
    if run:
        out.append(" ".join(run))
    return out


def split_passages(body: str, most: int = PASSAGE_WORDS) -> list[str]:
    """A note body as passages of at most `most` words: paragraphs merged while they fit,
    long ones cut at sentences; a passage that starts inside a section repeats its heading,
    so "## Risks" still says what the paragraph under it is about. Headings alone are no passage,
    nor is a body too short to say anything (says_something)."""
    passages: list[str] = []
    current: list[str] = []
    words = 0
    current_heading = ""
    for heading, block in _blocks(body):
        for piece in _pieces(block, most):
            n = size(piece)
            starts_section = heading != current_heading
            if current and (words + n > most or (starts_section and words >= MIN_WORDS)):
                passages.append("\n\n".join(current))
                current, words = [], 0
            if heading and (not current or starts_section):
                current.append(heading)  # leads the passage, or opens its section inside it
            current.append(piece)
            words += n
            current_heading = heading
    if current:
        passages.append("\n\n".join(current))
    return [p for p in passages if says_something(p)]


def text_hash(text: str) -> str:
    """What a passage's vector was computed from (saved only if the passage still has it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def plan_passages(existing: Iterable[tuple[int, str]], texts: list[str]) -> tuple[list[tuple[str, str]], list[int]]:
    """How to make an entity's passages `texts` from the (id, text hash) rows it has: the
    (text, hash) rows to add, and the ids to delete. A row whose text is still there is kept,
    with its vector; a text present twice keeps two rows."""
    kept: dict[str, list[int]] = {}
    for passage_id, old_hash in existing:
        kept.setdefault(old_hash, []).append(passage_id)
    added: list[tuple[str, str]] = []
    for text in texts:
        digest = text_hash(text)
        if kept.get(digest):
            kept[digest].pop(0)
        else:
            added.append((text, digest))
    return added, [i for ids in kept.values() for i in ids]


def still_says_something(short_text: str | None) -> bool:
    """Whether a stored passage is still one (vectors stored before short bodies got no
    passage are left out until the body is split again). `short_text` is its text when it is
    shorter than SHORT_CHARS, else None (long passages always say something)."""
    return short_text is None or says_something(short_text)
