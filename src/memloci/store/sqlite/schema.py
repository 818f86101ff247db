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
    # 2: free memories: tags, vectors, threads (neighbouring memories), full text with context.
    """
    ALTER TABLE memories ADD COLUMN thread TEXT NOT NULL DEFAULT '';
    ALTER TABLE memories ADD COLUMN embedded INTEGER NOT NULL DEFAULT 0;  -- 1 once its vector is stored
    CREATE INDEX memories_unembedded ON memories (id) WHERE embedded = 0;
    CREATE INDEX memories_thread ON memories (thread, id);
    CREATE INDEX memories_created ON memories (created_at);
    CREATE INDEX memories_hash ON memories (content_hash);

    CREATE TABLE memory_tags (
        tag       TEXT NOT NULL,
        memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        PRIMARY KEY (tag, memory_id)
    ) WITHOUT ROWID;
    CREATE INDEX memory_tags_memory ON memory_tags (memory_id);

    -- float32 unit vectors of the library's embedding model (library_meta embedding_model)
    CREATE TABLE memory_vectors (
        memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        vector    BLOB NOT NULL
    );

    -- rowid = memories.id; `context` holds the neighbouring memories of the same thread, so a
    -- turn of a conversation is found by words its neighbours use ("yes, that one!").
    CREATE VIRTUAL TABLE memory_fts USING fts5 (
        content, context,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    -- trigrams find substrings: Chinese and Japanese words, parts of identifiers
    CREATE VIRTUAL TABLE memory_grams USING fts5 (content, tokenize = 'trigram');
    INSERT INTO memory_fts (rowid, content, context) SELECT id, content, '' FROM memories;
    INSERT INTO memory_grams (rowid, content) SELECT id, content FROM memories;

    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        DELETE FROM memory_fts WHERE rowid = old.id;
        DELETE FROM memory_grams WHERE rowid = old.id;
    END;

    -- Every change to the vectors bumps a counter, so a process holding them in memory
    -- knows when another process changed them.
    INSERT OR IGNORE INTO library_meta VALUES ('vectors_version', '0');
    CREATE TRIGGER memory_vectors_insert AFTER INSERT ON memory_vectors BEGIN
        UPDATE library_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_version';
    END;
    CREATE TRIGGER memory_vectors_delete AFTER DELETE ON memory_vectors BEGIN
        UPDATE library_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_version';
    END;
    """,
    # 3: entity documents: links whose target does not exist yet, and the bookkeeping of
    # Markdown libraries (which file holds which entity, what changed since the last flush).
    """
    CREATE TABLE pending_links (
        from_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        relation_type TEXT NOT NULL,
        target_key    TEXT NOT NULL,
        target        TEXT NOT NULL,
        PRIMARY KEY (from_id, relation_type, target_key)
    ) WITHOUT ROWID;
    CREATE INDEX pending_links_target ON pending_links (target_key);

    CREATE TABLE md_files (
        path      TEXT PRIMARY KEY,           -- relative to the library folder, '/' separated
        entity_id INTEGER UNIQUE,             -- NULL for a file of free memories
        name_key  TEXT NOT NULL DEFAULT '',   -- the name the file was written under
        mtime_ns  INTEGER NOT NULL,
        size      INTEGER NOT NULL,
        sha256    TEXT NOT NULL
    );
    CREATE TABLE md_broken (path TEXT PRIMARY KEY, error TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL);
    CREATE TABLE md_dirty (entity_id INTEGER PRIMARY KEY);
    CREATE TABLE md_dirty_days (day TEXT PRIMARY KEY);
    CREATE TABLE md_new_memories (memory_id INTEGER PRIMARY KEY);
    """,
    # 4: an observation's content_hash covers its entity's name (NFC, case-folded), no longer
    # its row id, so a memory keeps its hash in a fresh clone and after a reindex. Free
    # memories keep theirs. Should two memories now share a hash (entities whose names differ
    # only in Unicode form), the earliest (created_at, then id) keeps it and each later one
    # hashes its text followed by its created_at: every hash still names one memory.
    # (memloci_content_hash is lexical.content_hash, registered on every connection.)
    """
    UPDATE memories SET content_hash = memloci_content_hash(content,
        (SELECT name FROM entities WHERE entities.id = memories.entity_id));
    UPDATE memories SET content_hash = memloci_content_hash(content || ' ' || created_at,
        (SELECT name FROM entities WHERE entities.id = memories.entity_id))
    WHERE EXISTS (SELECT 1 FROM memories o WHERE o.content_hash = memories.content_hash AND o.id != memories.id
                  AND (o.created_at < memories.created_at OR (o.created_at = memories.created_at AND o.id < memories.id)));
    """,
    # 5: names compare in NFC as well as case-folded (model.name_key), so a name stored
    # decomposed (`résumé` from a macOS file name) answers to the composed one. Two entities
    # whose names differ only in Unicode form keep their old keys (OR IGNORE) rather than clash.
    """
    UPDATE OR IGNORE entities SET name_key = memloci_name_key(name) WHERE name_key != memloci_name_key(name);
    UPDATE OR IGNORE pending_links SET target_key = memloci_name_key(target) WHERE target_key != memloci_name_key(target);
    UPDATE md_files SET name_key = memloci_name_key(name_key) WHERE name_key != memloci_name_key(name_key);
    """,
    # 6: memories are found by their tags and type words too, and by two-character Chinese and
    # Japanese words; tags and types compare case-insensitively.
    # memory_fts gains a `labels` column (tags and type, lower-cased; FTS5 tables cannot add a
    # column, so it is rebuilt, neighbours' words included), kept current by a trigger when tags
    # or type change; memory_tags holds each tag's key (model.name_key) instead of its text.
    # Safe to run again on a library whose user_version was set back: what it creates is
    # dropped first (IF EXISTS) and its contents rebuilt from the memories.
    """
    DROP TRIGGER IF EXISTS memories_labels_update;
    DROP TABLE IF EXISTS memory_fts;
    CREATE VIRTUAL TABLE memory_fts USING fts5 (
        content, context, labels,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO memory_fts (rowid, content, context, labels)
    SELECT id, content,
           CASE WHEN thread = '' THEN '' WHEN prev IS NULL THEN ifnull(next, '') WHEN next IS NULL THEN prev
                ELSE prev || char(10) || next END,
           (SELECT ifnull(group_concat(v, ' '), '') FROM (SELECT lower(value) AS v FROM json_each(tags)
                                                       UNION SELECT lower(memory_type)))
    FROM (SELECT id, content, thread, tags, memory_type,
                 lag(content) OVER w AS prev, lead(content) OVER w AS next
          FROM memories WINDOW w AS (PARTITION BY thread ORDER BY id));
    CREATE TRIGGER memories_labels_update AFTER UPDATE OF tags, memory_type ON memories BEGIN
        UPDATE memory_fts SET labels = (SELECT ifnull(group_concat(v, ' '), '') FROM (
            SELECT lower(value) AS v FROM json_each(new.tags) UNION SELECT lower(new.memory_type)))
        WHERE rowid = new.id;
    END;
    DELETE FROM memory_tags;
    INSERT OR IGNORE INTO memory_tags (tag, memory_id)
    SELECT memloci_name_key(j.value), m.id FROM memories m, json_each(m.tags) j;
    -- Chinese/Japanese runs as two-character tokens, for the memories that have any
    -- (memloci_cjk_grams is sqlite_search.cjk_grams; no trigger calls it).
    DROP TRIGGER IF EXISTS memory_pairs_delete;
    DROP TABLE IF EXISTS memory_pairs;
    CREATE VIRTUAL TABLE memory_pairs USING fts5 (content, tokenize = 'unicode61 remove_diacritics 2');
    INSERT INTO memory_pairs (rowid, content)
    SELECT id, g FROM (SELECT id, memloci_cjk_grams(content) AS g FROM memories) WHERE g != '';
    CREATE TRIGGER memory_pairs_delete AFTER DELETE ON memories BEGIN
        DELETE FROM memory_pairs WHERE rowid = old.id;
    END;
    """,
    # 7: entities are found by every word and substring they carry: tags and aliases as words,
    # CJK runs as two-character tokens (a two-character word is below the trigram's reach), and
    # substrings of names, types, aliases, tags and note bodies through trigrams. New names, types
    # and aliases are logged, so a process holding their words in memory reads only what changed.
    # (memloci_cjk_grams is sqlite_search.cjk_grams, registered on every connection; used by
    # no trigger, so another tool can still write the file.) Safe to run again on a library
    # whose user_version was set back: the search tables and triggers are dropped (IF EXISTS)
    # and rebuilt; the name log is kept (IF NOT EXISTS), so a reader's position in it holds.
    """
    DROP TRIGGER IF EXISTS entity_grams_delete;
    DROP TRIGGER IF EXISTS entity_names_insert;
    DROP TRIGGER IF EXISTS entity_names_update;
    DROP TRIGGER IF EXISTS entity_name_log_trim;
    DROP TABLE IF EXISTS entity_grams;
    DROP TABLE IF EXISTS entity_fts;
    CREATE VIRTUAL TABLE entity_fts USING fts5 (
        name, aliases, tags, entity_type, text, name_grams, text_grams,
        tokenize = 'porter unicode61 remove_diacritics 2',
        prefix = '3'
    );
    CREATE VIRTUAL TABLE entity_grams USING fts5 (label, body, tokenize = 'trigram');
    INSERT INTO entity_fts (rowid, name, aliases, tags, entity_type, text, name_grams, text_grams)
        SELECT id, name, aliases, tags, entity_type, text,
               memloci_cjk_grams(name || char(10) || aliases || char(10) || tags || char(10) || entity_type),
               memloci_cjk_grams(text)
        FROM (SELECT e.*, ifnull((SELECT group_concat(m.content, char(10)) FROM memories m
                                  WHERE m.entity_id = e.id), '') || char(10) || e.body AS text
              FROM entities e);
    INSERT INTO entity_grams (rowid, label, body)
        SELECT id, name || char(10) || entity_type || char(10) || aliases || char(10) || tags, body FROM entities;
    CREATE TRIGGER entity_grams_delete AFTER DELETE ON entities BEGIN
        DELETE FROM entity_grams WHERE rowid = old.id;
    END;
    -- the entities named or renamed lately, newest last (the last 1,000 to 2,000 are kept)
    CREATE TABLE IF NOT EXISTS entity_name_log (seq INTEGER PRIMARY KEY, entity_id INTEGER NOT NULL);
    CREATE TRIGGER entity_names_insert AFTER INSERT ON entities BEGIN
        INSERT INTO entity_name_log (entity_id) VALUES (new.id);
    END;
    CREATE TRIGGER entity_names_update AFTER UPDATE OF name, entity_type, aliases ON entities BEGIN
        INSERT INTO entity_name_log (entity_id) VALUES (new.id);
    END;
    CREATE TRIGGER entity_name_log_trim AFTER INSERT ON entity_name_log WHEN new.seq % 1000 = 0 BEGIN
        DELETE FROM entity_name_log WHERE seq <= new.seq - 1000;
    END;
    """,
    # 8: note bodies carry meaning: their passages are embedded like memories.
    # Triggers only mark an entity whose body changed (plain SQL, so any tool may still write
    # the file); the embedding worker re-splits marked bodies (passages.py) before it
    # embeds, keeping the vector of every passage whose text did not change. Safe to run again
    # (IF NOT EXISTS) on a library whose user_version was set back.
    """
    CREATE TABLE IF NOT EXISTS passages (
        id        INTEGER PRIMARY KEY,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        text      TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vector    BLOB                        -- float32, the library's embedding model; NULL: waiting
    );
    CREATE INDEX IF NOT EXISTS passages_entity ON passages (entity_id);
    CREATE INDEX IF NOT EXISTS passages_unembedded ON passages (id) WHERE vector IS NULL;
    CREATE TABLE IF NOT EXISTS passages_stale (entity_id INTEGER PRIMARY KEY);  -- bodies to split again
    INSERT OR IGNORE INTO passages_stale SELECT id FROM entities WHERE body != '';

    CREATE TRIGGER IF NOT EXISTS passages_body_insert AFTER INSERT ON entities WHEN new.body != '' BEGIN
        INSERT OR IGNORE INTO passages_stale VALUES (new.id);
    END;
    CREATE TRIGGER IF NOT EXISTS passages_body_update AFTER UPDATE OF body ON entities WHEN new.body IS NOT old.body BEGIN
        INSERT OR IGNORE INTO passages_stale VALUES (new.id);
    END;
    CREATE TRIGGER IF NOT EXISTS passages_entity_delete AFTER DELETE ON entities BEGIN
        DELETE FROM passages_stale WHERE entity_id = old.id;
        DELETE FROM passages WHERE entity_id = old.id;
    END;

    -- Like vectors_version for memories: a process holding passage vectors in memory sees changes.
    INSERT OR IGNORE INTO library_meta VALUES ('passages_version', '0');
    CREATE TRIGGER IF NOT EXISTS passages_vector_update AFTER UPDATE OF vector ON passages BEGIN
        UPDATE library_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'passages_version';
    END;
    CREATE TRIGGER IF NOT EXISTS passages_vector_delete AFTER DELETE ON passages WHEN old.vector IS NOT NULL BEGIN
        UPDATE library_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'passages_version';
    END;
    """,
    # 9: the memory lifecycle. A memory another one replaced keeps its row (`superseded_by`:
    # the content_hash of the newer one), a forgotten one too (`archived_at`); search leaves
    # both out unless asked. `links`: what a memory is linked to (entities it mentions, memories
    # consolidation associated with it), as JSON. `previews`: what a lifecycle preview would
    # change, kept until it is executed (lifecycle previews are executed by id).
    """
    ALTER TABLE memories ADD COLUMN superseded_by TEXT;
    ALTER TABLE memories ADD COLUMN archived_at TEXT;
    ALTER TABLE memories ADD COLUMN links TEXT NOT NULL DEFAULT '[]';
    CREATE INDEX IF NOT EXISTS memories_retired ON memories (id) WHERE superseded_by IS NOT NULL OR archived_at IS NOT NULL;
    CREATE TABLE IF NOT EXISTS previews (
        id          INTEGER PRIMARY KEY,
        kind        TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        plan        TEXT NOT NULL,        -- JSON: the arguments, the items and what each expects
        executed_at TEXT,
        change_id   INTEGER               -- the journal entry of its execution
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)
