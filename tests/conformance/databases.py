"""A PostgreSQL database of its own for each conformance run, on the session's server (the
`pg_url` fixture, tests/pg.py).

A run's libraries keep the names the call table uses (`main`, `notes`), and the postgres engine
puts a library in the schema its name chooses; a database per run keeps two runs' `main` apart.
The session's server, with its data folder, goes when the session ends.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit


def fresh_database(pg_url: str) -> str:
    """Create an empty database on the server at `pg_url`; its libpq URL (same login and host)."""
    import psycopg

    name = "conformance_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_url, autocommit=True) as conn:  # CREATE DATABASE refuses a transaction
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(pg_url)._replace(path="/" + name))
