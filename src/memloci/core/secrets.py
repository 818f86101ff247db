"""Secrets inside library URLs: found, and masked wherever a URL is shown (errors, stats, health)."""

from __future__ import annotations

import re
import urllib.parse

_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&#]*)")


def _netloc(url: str) -> str:
    """The host part of `url` as urlsplit reads it; "" when urlsplit refuses the URL (an
    unclosed `[` of an IPv6 host raises ValueError): masking must work on any text, above all
    on the malformed URL an error message is about, so a refusal means "in doubt"."""
    try:
        return urllib.parse.urlsplit(url).netloc
    except ValueError:
        return ""


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """(what precedes, the user part, what follows) of a URL with a user part, else None. A
    password holding an unencoded `/`, `?` or `#` ends the host part early for urlsplit (the
    `@` then seems to lie in the path or query): in doubt, the user part runs from `://` to the
    last `@`, so more is hidden rather than less."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    netloc = _netloc(url)
    if "@" in netloc:  # the ordinary case; the password may still hold an unencoded `@`
        at = netloc.rfind("@")
    elif "@" in rest:
        at = rest.rfind("@")
    else:
        return None
    return scheme + sep, rest[:at], rest[at:]


def url_secrets(url: str) -> list[str]:
    """The password of `url` (its user part's and any `password=` parameter's), as written and
    percent-decoded: what must never be shown."""
    found: list[str] = []
    parts = _userinfo(url)
    if parts is not None and ":" in parts[1]:
        found.append(parts[1].partition(":")[2])
    found += [m.group(2) for m in _QUERY_PASSWORD.finditer(url)]
    return list(dict.fromkeys(x for s in found if s for x in (s, urllib.parse.unquote(s))))


def masked_url(url: str) -> str:
    """`url` with its password (in the user part or a `password=` parameter) replaced by `***`:
    what errors, stats and health may show. Everything else is kept as written."""
    parts = _userinfo(url)
    if parts is not None:
        head, userinfo, tail = parts
        user, colon, password = userinfo.partition(":")
        if "@" not in _netloc(url):  # in doubt (see _userinfo): hide the whole user part
            url = head + "***" + tail
        elif colon and password:  # an empty one (`user:@host`) hides nothing
            url = head + user + ":***" + tail
    return _QUERY_PASSWORD.sub(lambda m: m.group(1) + "***", url)


def masked_specs(spec: str) -> str:
    """A `--libraries` text (`name:path,name:url`) with the password of each URL masked."""
    return ",".join(name + sep + masked_url(path) for name, sep, path in (p.partition(":") for p in spec.split(",")))
