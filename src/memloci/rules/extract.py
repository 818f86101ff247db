"""Extraction: the entities a text mentions and whether it speaks of causes, by memorix's
patterns (its entity-extractor and auto-relations), with no language model.

`extract(text)` finds file paths (a path separator, `./`, or one known extension:
`src/auth/jwt.ts`, `./config.json`; never a property chain such as `config.llm.apiKey` or
`process.env.FOO`), module paths (`@orama/orama`, `memcp.core.graph`), URLs, @mentions,
CamelCase identifiers (`JwtVerifier`), CJK terms in 「」『』【】 or backticks (「认证模块」), and
causal words in English and Chinese (because, due to, 因为, 导致, ...). `candidates` turns
them into the names to look up among existing entities, and `relation_type` types a relation
as memorix does (causes, fixes, decides, modifies, warns_about, references).

Where memorix's JavaScript misses a path by a detail of the regex (a path in backticks, at the
end of a sentence, or right after CJK text), these patterns take it: same kinds, same filters.
Pure functions over text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# CJK ideographs: the unified block and extension A, as memorix matches them.
CJK = "\u4e00-\u9fff\u3400-\u4dbf"
# A path starts at the text's start, after a space, quote, bracket or backtick, or after any
# non-ASCII character (CJK text, full-width punctuation) ...
_OPENS = r"""(?:^|(?<=[\s"'(`\[<])|(?<=[^\x00-\x7f]))"""
# ... and ends before the same, after at most some sentence punctuation.
_CLOSES = r"""(?=[.,;:!?]*(?:[\s"'`)\]>]|[^\x00-\x7f]|$))"""
FILE = re.compile(_OPENS + r"([.\w/\\-]+\.\w{1,10})" + _CLOSES, re.ASCII)
MODULE = re.compile(r"""(?:^|(?<=[\s"'(,`]))(@[\w-]+/[\w.-]+)|\b([a-zA-Z_]\w*(?:\.[a-zA-Z_]\w*){2,})\b""", re.ASCII)
URL = re.compile(r"""https?://[^\s"'<>)`]+""")
MENTION = re.compile(r"(?<![\w.])@([a-zA-Z_]\w+)", re.ASCII)  # not an e-mail address's domain
CAMEL = re.compile(r"\b([A-Z][a-z]+(?:[A-Z][a-z]+)+)\b", re.ASCII)
BRACKETED = re.compile(rf"[「『【]([{CJK}]{{2,}}(?:[{CJK}a-zA-Z0-9_-]*[{CJK}])?)[」』】]")
BACKTICKED = re.compile(rf"`([{CJK}]{{2,}}[{CJK}a-zA-Z0-9_-]*)`")
CAUSAL = re.compile(
    r"\b(?:because|therefore|due to|caused by|as a result|decided to|chosen because|so that|in order to|"
    r"leads to|results in|fixed by|resolved by)\b|(?:因为|所以|由于|导致|造成|结果|因此|为了|解决|修复|修正|决定|选择|采用)",
    re.IGNORECASE)

FILE_EXTENSIONS = frozenset({
    "ts", "js", "tsx", "jsx", "mts", "mjs", "cjs", "json", "yaml", "yml", "toml", "xml", "csv",
    "py", "rb", "go", "rs", "java", "kt", "swift", "c", "cpp", "h", "html", "css", "scss", "less", "vue", "svelte",
    "sh", "bash", "zsh", "ps1", "cmd", "bat", "md", "txt", "rst", "log", "sql", "graphql", "prisma",
    "env", "gitignore", "dockerignore", "dockerfile", "lock", "config"})
PROPERTY_CHAIN = re.compile(r"^(?:process\.env|config\.|options\.|params\.|props\.|this\.|self\.|module\.|exports\.|"
                            r"require\.|import\.)", re.IGNORECASE)

# memory_type -> the relation an observation of it makes (memorix's inferRelationType, with
# the spellings memloci's own types and the MCP Memory Service use).
RELATION_BY_TYPE = {"problem-solution": "fixes", "fix": "fixes", "bugfix": "fixes",
                    "decision": "decides", "trade-off": "decides",
                    "what-changed": "modifies", "change": "modifies",
                    "gotcha": "warns_about", "warning": "warns_about"}
CAUSES, REFERENCES = "causes", "references"
RELATION_TYPES = (CAUSES, "fixes", "decides", "modifies", "warns_about", REFERENCES)


@dataclass(frozen=True, slots=True)
class Extracted:
    """What one text mentions, each kind in order of first appearance, without repeats (any case)."""

    files: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    urls: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()  # without the @
    identifiers: tuple[str, ...] = ()  # CamelCase
    terms: tuple[str, ...] = ()  # CJK terms in 「」『』【】 or backticks
    causal: bool = False  # the text speaks of a cause (because, due to, 因为, 导致, ...)


def has_cjk(text: str) -> bool:
    return re.search(f"[{CJK}]", text) is not None


def is_file_path(candidate: str) -> bool:
    """A file path rather than a property chain: a separator or `./`, else one dot before a known extension."""
    if "/" in candidate or "\\" in candidate:
        return True
    if PROPERTY_CHAIN.match(candidate) or candidate.count(".") >= 2:
        return False
    return candidate.rsplit(".", 1)[-1].lower() in FILE_EXTENSIONS


def _distinct(found: list[str], least: int = 3) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for item in found:
        if len(item) >= least:
            seen.setdefault(item.casefold(), item)
    return tuple(seen.values())


def extract(text: str) -> Extracted:
    """The files, modules, URLs, mentions, identifiers and CJK terms `text` mentions, and whether it is causal."""
    files = [m.group(1) for m in FILE.finditer(text) if len(m.group(1)) >= 5 and is_file_path(m.group(1))]
    modules = [m.group(1) or m.group(2) for m in MODULE.finditer(text)]
    urls = [m.group(0).rstrip(".,;:!?") for m in URL.finditer(text)]
    terms = [m.group(1) for m in BRACKETED.finditer(text)] + [m.group(1) for m in BACKTICKED.finditer(text)]
    return Extracted(files=_distinct(files, 5), modules=_distinct(modules), urls=_distinct(urls),
                     mentions=_distinct([m.group(1) for m in MENTION.finditer(text)]),
                     identifiers=_distinct([m.group(1) for m in CAMEL.finditer(text)]),
                     terms=_distinct(terms, 2), causal=CAUSAL.search(text) is not None)


def file_stem(path: str) -> str:
    """`src/auth/jwt.ts` -> `jwt`, `./config.json` -> `config`: the last part, without its extension."""
    last = re.split(r"[/\\]", path)[-1]
    return re.sub(r"\.\w+$", "", last)


def module_tail(module: str) -> str:
    """`@orama/orama` -> `orama`, `memcp.core.graph` -> `graph`."""
    return re.split(r"[./]", module)[-1]


def candidates(found: Extracted) -> list[str]:
    """The names to look up among existing entities: identifiers, file stems, module tails,
    mentions and CJK terms, at least 3 characters long (2 for a CJK term), each once (any case)."""
    names = [*found.identifiers, *(file_stem(f) for f in found.files), *(module_tail(m) for m in found.modules),
             *found.mentions, *found.terms]
    seen: dict[str, str] = {}
    for name in names:
        if len(name) >= (2 if has_cjk(name) else 3):
            seen.setdefault(name.casefold(), name)
    return list(seen.values())


def relation_type(memory_type: str | None, causal: bool) -> str:
    """The relation a text of `memory_type` makes to an entity it mentions: `causes` when it is
    causal, else by its type (problem-solution/fix/bugfix: fixes; decision/trade-off: decides;
    what-changed/change: modifies; gotcha/warning: warns_about), else `references`."""
    if causal:
        return CAUSES
    return RELATION_BY_TYPE.get((memory_type or "").strip().lower(), REFERENCES)
