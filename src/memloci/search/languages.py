"""Fusion across languages: with a multilingual model, a memory in another language than the
query that is nearer in meaning than any memory in the query's language ranks first.

Words cannot match across languages: an English question about a Japanese memory shares no
word with it (at most a name or "API"), and a Japanese question shares kanji with Chinese text
by accident more than by meaning. Fusion (search/hybrid.py) averages the word signal, scaled so
that the best word match scores 1, with the meaning signal; a memory the words cannot reach then
scores at most half, and a weak word match in the query's language (one shared word) buries the
best meaning match of another language. So, when the model's meaning holds across languages
(`Embedder.multilingual`), the candidates are read in order of meaning: those of another
language group met before the first one of the query's group (nearer in meaning than anything
the query's words could have matched, and not a guess: meaning at least hybrid.WEAK_MEANING) rank
above every other candidate, in order of meaning. Everything else keeps its fused score: the
query's own language is ranked by words and meaning as ever, and so is a library whose
candidates are all in other languages (none then has words to miss). An English-only model's
ranking is never touched.

The language group of a text is read from its letters, not guessed from its words: Japanese
(any kana among mostly CJK letters), Chinese (CJK without kana; a few characters alone may be
either, and count as both), Korean (mostly Hangul), or the
script most of its other letters are in (Latin, Cyrillic, Greek, Arabic, ...). Languages that
share a script (English and French) are one group: their words can match, and do.
"""

from __future__ import annotations

import re
from collections.abc import Callable

CJK_SHARE = 0.3  # above this share of CJK letters a text is in a CJK group (search/embedder.py's threshold)
HAN_ALONE = 5  # fewer Chinese characters than this, with no kana, do not tell Japanese from Chinese
LOOKED_AT = 2000  # a long memory's group is read from its first characters: enough letters to tell
BATCH = 8  # candidates read at a time, best meaning first, until one is in the query's language

_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
# Scripts whose words can only match words of the same script (the rest, with no letter in these:
# "latin", the group of plain ASCII text too).
_SCRIPTS = (("cyrillic", re.compile(r"[\u0400-\u052f]")), ("greek", re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")),
            ("arabic", re.compile(r"[\u0600-\u06ff\u0750-\u077f]")), ("hebrew", re.compile(r"[\u0590-\u05ff]")),
            ("devanagari", re.compile(r"[\u0900-\u097f]")), ("thai", re.compile(r"[\u0e00-\u0e7f]")))
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")


def language_group(text: str) -> str:
    """'ja', 'zh', 'ko', or the script of most of the text's other letters ('latin', 'cyrillic',
    'greek', 'arabic', 'hebrew', 'devanagari', 'thai'); 'latin' for a text without letters.
    'han' for a few Chinese characters without kana ("証明書", "北京出張"): Japanese or Chinese."""
    if text.isascii():  # (most texts: no letter to look at one by one)
        return "latin"
    text = text[:LOOKED_AT]
    kana, han, hangul = len(_KANA.findall(text)), len(_HAN.findall(text)), len(_HANGUL.findall(text))
    cjk = kana + han + hangul
    letters = sum(c.isalpha() for c in text)
    if cjk and cjk > CJK_SHARE * letters:
        if hangul > kana + han:
            return "ko"
        return "ja" if kana else "zh" if han >= HAN_ALONE else "han"
    counts = [(len(pattern.findall(text)), name) for name, pattern in _SCRIPTS]
    best, name = max(counts)
    return name if best > len(_LATIN.findall(text)) else "latin"


def same_language(group: str, other: str) -> bool:
    """Whether texts of these two groups can share words ('han' may be Japanese or Chinese)."""
    return group == other or "han" in (group, other) and {group, other} <= {"han", "ja", "zh"}


def meaning_across(fused: dict[int, float], meaning: dict[int, float], query: str,
                   texts: Callable[[list[int]], dict[int, str]], keep: int,
                   least: float = 0.0) -> tuple[dict[int, float], set[int]]:
    """`fused` with the memories of other language groups than `query`'s that are nearer in
    meaning than any memory of the query's group ranked first, in order of meaning, and their
    ids. `meaning` is the meaning signal on fusion's scale (0..1), `least` the meaning below which
    a memory is not lifted (a guess, not a match); `texts` gives the texts of the ids it is asked
    for. The candidates are read best meaning first, a few at a time, up to the first one in the
    query's group; when none of the best `keep` is, every candidate is in another language
    alike, and fusion already compares them fairly."""
    order = sorted(meaning, key=lambda i: (-meaning[i], i))[:keep]
    group = language_group(query)
    ahead: dict[int, None] = {}  # other-language memories nearer than any of the query's language
    own = None  # the meaning of the nearest memory in the query's language
    for start in range(0, len(order), BATCH):
        batch = order[start:start + BATCH]
        found = texts(batch)
        for i in batch:
            if i not in found:
                continue
            if same_language(language_group(found[i]), group):
                own = meaning[i]
                break
            if meaning[i] >= least:
                ahead[i] = None
        if own is not None:
            break
    if own is None or not ahead:
        return fused, set()
    rest = max((v for i, v in fused.items() if i not in ahead), default=0.0)
    # above every other candidate, by how much nearer each is than the query's language's nearest
    lifted = {i: max(fused.get(i, 0.0), rest + meaning[i] - own) for i in ahead}
    return {**fused, **lifted}, set(lifted)
