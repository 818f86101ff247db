"""A note's Markdown body as HTML for the dashboard: CommonMark by markdown-it-py with raw HTML
off (`<script>` in a note is shown as text, never run) and links only to http(s), mailto and
in-page anchors (a `javascript:` or `data:` link is dropped, its text kept)."""

from __future__ import annotations

from markdown_it import MarkdownIt

SAFE_SCHEMES = ("http:", "https:", "mailto:")


def _safe_link(url: str) -> bool:
    plain = "".join(url.split()).casefold()  # "java\tscript:" is javascript: to a browser
    return plain.startswith(SAFE_SCHEMES) or plain.startswith(("#", "/")) or ":" not in plain.split("/")[0]


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _safe_link  # type: ignore[method-assign]  # links and images failing it are left as text
    return md


_MD = _renderer()


def body_html(markdown: str) -> str:
    """`markdown` rendered to HTML, safe to put in the page."""
    return _MD.render(markdown)

