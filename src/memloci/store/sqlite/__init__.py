"""The embedded engine: one SQLite file per library."""
