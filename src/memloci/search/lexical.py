"""Query text and content identity, under the names search/ has always given them.

The query-text syntax lives in core/query_text.py and content identity in
core/model.py, so that no engine imports search/; these names are kept for the callers that use them.
"""

from __future__ import annotations

from memloci.core.model import content_hash, normalize_content, owner_key
from memloci.core.query_text import MAX_TERMS, PREFIX_MIN, fts_term, like_pattern, match_all, match_any, query_terms

__all__ = ["MAX_TERMS", "PREFIX_MIN", "content_hash", "fts_term", "like_pattern", "match_all", "match_any",
           "normalize_content", "owner_key", "query_terms"]
