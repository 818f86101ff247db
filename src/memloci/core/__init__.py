"""The ground floor: the concepts as data, errors, validation, settings, and the small
pure helpers every layer above shares (BM25, query words, URL secrets, confined file access)."""
