"""Retrieval: query parsing, lexical ranking helpers (and later vectors, fusion, decay)."""
