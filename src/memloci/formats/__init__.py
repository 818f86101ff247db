"""Other servers' data: readers and writers of their files (official JSONL, n2n, MMS,
memorix, basic-memory). No store and no service here: rows in, model objects out."""
