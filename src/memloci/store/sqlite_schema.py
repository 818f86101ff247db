"""The SQLite schema, as numbered migrations.

`PRAGMA user_version` holds the number of migrations applied. A migration is appended,
never edited once released: a library written by an older memloci is brought forward on
open, and a library written by a newer one is refused rather than misread.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: entities, memories (observations are memories with an entity), relations, journal.
    """
    CREATE TABLE library_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );

    CREATE TABLE entities (
        id          INTEGER PRIMARY KEY,
        name        TEXT NOT NULL,
        name_key    TEXT NOT NULL UNIQUE,       -- casefolded name: names are unique case-insensitively
        entity_type TEXT NOT NULL,
        aliases     TEXT NOT NULL DEFAULT '[]', -- JSON array
        tags        TEXT NOT NULL DEFAULT '[]', -- JSON array
        metadata    TEXT NOT NULL DEFAULT '{}', -- JSON object
        body        TEXT NOT NULL DEFAULT '',
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );

    CREATE TABLE memories (
        id               INTEGER PRIMARY KEY,
        entity_id        INTEGER REFERENCES entities(id) ON DELETE CASCADE,
        content          TEXT NOT NULL,
        content_hash     TEXT NOT NULL,
        memory_type      TEXT NOT NULL,
        tags             TEXT NOT NULL DEFAULT '[]',
        importance       TEXT,
        metadata         TEXT NOT NULL DEFAULT '{}',
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        access_count     INTEGER NOT NULL DEFAULT 0,
        last_accessed_at TEXT
    );
    -- The same text is stored once per owner (an entity, or the free memories).
    CREATE UNIQUE INDEX memories_owner_hash ON memories (ifnull(entity_id, 0), content_hash);
    CREATE INDEX memories_entity ON memories (entity_id, id);

    CREATE TABLE relations (
        from_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        relation_type TEXT NOT NULL,
        to_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        created_at    TEXT NOT NULL,
        PRIMARY KEY (from_id, relation_type, to_id)
    ) WITHOUT ROWID;
    CREATE INDEX relations_to ON relations (to_id);

    CREATE TABLE journal (
        id       INTEGER PRIMARY KEY,
        at       TEXT NOT NULL,
        tool     TEXT NOT NULL,
        action   TEXT NOT NULL,
        entities TEXT NOT NULL DEFAULT '[]',    -- JSON array of entity names
        detail   TEXT                           -- JSON: what changed, removed text for destructive edits
    );

    -- One row per entity (rowid = entities.id), observations joined by newlines.
    -- Porter stemming: "deployed" finds "deployment"; the prefix index serves prefix fallback.
    CREATE VIRTUAL TABLE entity_fts USING fts5 (
        name, entity_type, aliases, observations,
        tokenize = 'porter unicode61 remove_diacritics 2',
        prefix = '3'
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
