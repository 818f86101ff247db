"""The shared engine: a library kept in PostgreSQL, for teams (facade: engine.py)."""
