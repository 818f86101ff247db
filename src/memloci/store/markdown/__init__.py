"""The Markdown engine: a folder of notes that are the truth, with a SQLite index beside them."""
