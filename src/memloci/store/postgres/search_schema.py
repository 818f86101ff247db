"""Migrations 2, 4, 6 and 7 of the postgres engine: what its full-text and vector search need
(weighted tsvector, pg_trgm, pgvector), BM25's totals, the passages of note bodies. Run by schema.py, in the library's schema (first on the
search_path), inside the migration transaction. Extensions are database-wide: create them
`SCHEMA public` so every library's schema finds them.

Every index here is kept by PostgreSQL itself (generated columns and triggers), so a row is
indexed the same whichever code path wrote it (a memory, an observation, a migrated row):
- Words are read without accents (memloci_fold: "munchen" finds München), as SQLite reads them.
- memories.search: the memory's words (weight A), its thread neighbours' words (`context`,
  weight C) and its tags and type (weight B), as SQLite's memory_fts weighs them (1, 0.4, 0.5).
  The `english` configuration stems ("deploying" finds "deployed") as SQLite's porter
  tokenizer does, so both engines answer a question alike; tags and type use `simple`.
- memories.grams / entities.grams: the two- and three-character pieces of every run of
  Chinese, Japanese or Korean text (a tsvector of raw lexemes), so 東京 finds 東京の旅行計画:
  full-text parsers keep such a run as one word, and pg_trgm cannot index fewer than three.
- entities.search: name (A), aliases and tags (B), type (C), observations and body (D), computed
  by a trigger whenever an entity row is written; a write that changes observations ends by
  touching its entities once (entities.reindex), not once per observation, which
  would read an entity's every observation again for each one added.
- pg_trgm indexes: substrings of names, types, aliases and observations (ILIKE), and names
  within a few typos (word_similarity on name_key).
- memory_vectors (pgvector): its column is given the model's dimension, and an HNSW index
  (cosine), when the first vectors are saved (vectors.py set_vector_column).
"""

from __future__ import annotations

# The entity trigger's text and its word index, as migration 2 wrote them and migration 7
# writes them again (with the entity's length and label index added).
_SAID = r"""    -- What the entity says, cut to its first 200,000 characters (30,000 for the CJK pieces, each making up to two):
    -- a tsvector holds at most 1 MB, and an entity past it would refuse every later write.
    -- The name, aliases, tags and type always go in whole; the trigram indexes find the rest.
    said text := left(memloci_entity_text(NEW.id) || E'\n' || coalesce(NEW.body, ''), 200000);
"""
_ENTITY_WORDS = r"""    NEW.search := setweight(to_tsvector('english', memloci_fold(NEW.name)), 'A')
               || setweight(to_tsvector('simple', memloci_fold(NEW.aliases::text || ' ' || NEW.tags::text)), 'B')
               || setweight(to_tsvector('english', memloci_fold(NEW.entity_type)), 'C')
               || setweight(to_tsvector('english', memloci_fold(said)), 'D');
    NEW.grams := setweight(memloci_cjk_grams(NEW.name || ' ' || NEW.entity_type || ' ' || NEW.aliases::text
                                             || ' ' || NEW.tags::text), 'A')
              || setweight(memloci_cjk_grams(left(said, 30000)), 'D');
"""

SEARCH_MIGRATION = r"""
CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public;
CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;

CREATE TABLE IF NOT EXISTS library_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO library_meta (key, value) VALUES ('vectors_version', '0') ON CONFLICT (key) DO NOTHING;

-- A text without its accents ("München" -> "Munchen"), as SQLite's tokenizer (remove_diacritics)
-- reads words: "munchen" finds München. Both the indexed text and the query's words go through it.
CREATE FUNCTION memloci_fold(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT normalize(regexp_replace(normalize(coalesce(t, ''), NFD), '[\u0300-\u036f]', '', 'g'), NFC)
$f$;

-- The CJK runs of a text as its two- and three-character pieces (raw lexemes, not parsed).
CREATE FUNCTION memloci_cjk_grams(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT coalesce(array_to_tsvector(array_agg(DISTINCT g)), ''::tsvector)
    FROM (SELECT CASE WHEN length(r[1]) = 1 THEN r[1] ELSE substr(r[1], i, n) END AS g
          FROM regexp_matches(coalesce(t, ''), '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+', 'g') AS r,
               generate_series(2, 3) AS n,
               generate_series(1, greatest(length(r[1]) - n + 1, 1)) AS i
          WHERE length(r[1]) >= n OR length(r[1]) = 1) pieces
$f$;

ALTER TABLE memories ADD COLUMN context text NOT NULL DEFAULT '';  -- the thread neighbours' words
ALTER TABLE memories ADD COLUMN search tsvector GENERATED ALWAYS AS (
       setweight(to_tsvector('english', memloci_fold(content)), 'A')
    || setweight(to_tsvector('simple', memloci_fold(tags::text || ' ' || memory_type)), 'B')
    || setweight(to_tsvector('english', memloci_fold(context)), 'C')) STORED;
ALTER TABLE memories ADD COLUMN grams tsvector GENERATED ALWAYS AS (memloci_cjk_grams(content)) STORED;

CREATE INDEX memories_search ON memories USING gin (search);
CREATE INDEX memories_grams ON memories USING gin (grams);
CREATE INDEX memories_content_trgm ON memories USING gin (content gin_trgm_ops);
CREATE INDEX memories_type_key ON memories (lower(memory_type));

-- The vectors (pgvector): the column gets the model's dimension, and its HNSW index, when the
-- first vectors are saved (vectors.py set_vector_column).
CREATE TABLE memory_vectors (
    memory_id bigint PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
    embedding vector NOT NULL
);

ALTER TABLE entities ADD COLUMN search tsvector NOT NULL DEFAULT ''::tsvector;
ALTER TABLE entities ADD COLUMN grams tsvector NOT NULL DEFAULT ''::tsvector;
-- names, types, aliases and tags as one text, for substring matches
ALTER TABLE entities ADD COLUMN labels text GENERATED ALWAYS AS (
    lower(name || ' ' || entity_type || ' ' || aliases::text || ' ' || tags::text)) STORED;

-- (functions that read tables pin the search_path they were made under: the library's schema)
CREATE FUNCTION memloci_entity_text(entity bigint) RETURNS text
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $f$
    SELECT coalesce(string_agg(content, E'\n' ORDER BY id), '') FROM memories WHERE entity_id = entity
$f$;

CREATE FUNCTION memloci_entity_index() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
DECLARE
""" + _SAID + r"""BEGIN
""" + _ENTITY_WORDS + r"""    RETURN NEW;
END
$f$;
CREATE TRIGGER entities_index BEFORE INSERT OR UPDATE OF name, entity_type, aliases, tags, body ON entities
    FOR EACH ROW EXECUTE FUNCTION memloci_entity_index();

CREATE INDEX entities_search ON entities USING gin (search);
CREATE INDEX entities_grams ON entities USING gin (grams);
CREATE INDEX entities_labels_trgm ON entities USING gin (labels gin_trgm_ops);
CREATE INDEX entities_body_trgm ON entities USING gin (body gin_trgm_ops);
CREATE INDEX entities_name_trgm ON entities USING gin (name_key gin_trgm_ops);
UPDATE entities SET name = name;
"""


def _totals(table: str, totals: str, functions: str) -> str:
    """SQL keeping `totals` (one row: documents, tokens) the count of `table`'s rows and the sum
    of their search_length, by statement triggers (one update per statement, so a COPY of a
    million rows costs one). Writes of a library are already one at a time (its advisory lock),
    so the row adds no waiting. Migration 4 keeps memories' so, migration 7 entities'."""
    return f"""
CREATE TABLE {totals} (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    documents bigint NOT NULL,
    tokens    bigint NOT NULL
);
INSERT INTO {totals} SELECT true, count(*), coalesce(sum(search_length), 0) FROM {table};

CREATE FUNCTION {functions}_added() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
BEGIN
    UPDATE {totals} s SET documents = s.documents + a.n, tokens = s.tokens + a.t
    FROM (SELECT count(*) AS n, coalesce(sum(search_length), 0) AS t FROM added) a WHERE a.n > 0;
    RETURN NULL;
END $f$;
CREATE FUNCTION {functions}_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
BEGIN
    UPDATE {totals} s SET documents = s.documents - r.n, tokens = s.tokens - r.t
    FROM (SELECT count(*) AS n, coalesce(sum(search_length), 0) AS t FROM removed) r WHERE r.n > 0;
    RETURN NULL;
END $f$;
CREATE FUNCTION {functions}_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
BEGIN
    UPDATE {totals} s SET tokens = s.tokens + c.t
    FROM (SELECT coalesce(sum(search_length), 0) - (SELECT coalesce(sum(search_length), 0) FROM removed) AS t
          FROM added) c WHERE c.t <> 0;
    RETURN NULL;
END $f$;
CREATE TRIGGER {table}_totals_added AFTER INSERT ON {table} REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION {functions}_added();
CREATE TRIGGER {table}_totals_removed AFTER DELETE ON {table} REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION {functions}_removed();
CREATE TRIGGER {table}_totals_changed AFTER UPDATE ON {table} REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION {functions}_changed();
"""

# Migration 4: what one BM25 needs (core/bm25.py scores memories alike on every engine).
# A memory's length is counted as SQLite's FTS5 counts it (runs of letters and digits in its
# text, its neighbours' words and its labels: the distinct lower-case tags and type, stop words
# included), in a column PostgreSQL keeps; the library's memories and their tokens in all are
# one row kept by statement triggers (_totals).
BM25_MIGRATION = r"""
-- [[:alnum:]] with Unicode's letters and digits whatever the database's locale: pg_c_utf8 (PostgreSQL 17+)
DO $d$ BEGIN
    EXECUTE format($q$CREATE FUNCTION memloci_token_count(t text) RETURNS integer
                      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $b$
                          SELECT count(*)::integer FROM regexp_matches(coalesce(t, '') %s, '[[:alnum:]]+', 'g')
                      $b$$q$,
                   CASE WHEN getdatabaseencoding() = 'UTF8' AND EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'pg_c_utf8')
                        THEN 'COLLATE pg_catalog.pg_c_utf8' ELSE '' END);
END $d$;

-- What SQLite's memory_fts.labels holds: the distinct lower-case tags and type.
CREATE FUNCTION memloci_labels(tags jsonb, memory_type text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $f$
    SELECT coalesce(string_agg(DISTINCT lower(x), ' '), '')
    FROM (SELECT jsonb_array_elements_text(tags) UNION ALL SELECT memory_type) s(x)
$f$;

ALTER TABLE memories ADD COLUMN search_length integer GENERATED ALWAYS AS (
    memloci_token_count(content) + memloci_token_count(context)
    + memloci_token_count(memloci_labels(tags, memory_type))) STORED;

""" + _totals("memories", "search_totals", "memloci_totals")


# Migration 7: one BM25 for entities too (entity_search.py ranks search_nodes by core/bm25.py's
# formula and weights, as SQLite's FTS5 ranks entity_fts). An entity's length is counted as
# FTS5 counts its seven columns: the tokens of its name, aliases, tags, type and text
# (observations and body, cut where the word index cuts them), plus the CJK two-character
# tokens SQLite's name_grams and text_grams columns hold (core/query_text.py cjk_grams:
# each run of n characters makes n - 1 of them, a lone character one, and the other letters of
# a word that mixes scripts count as their own tokens). The library's entities and their tokens
# in all are one row kept by statement triggers, as search_totals is for memories.
ENTITY_BM25_MIGRATION = r"""
DO $d$ BEGIN
    EXECUTE format($q$CREATE FUNCTION memloci_cjk_token_count(t text) RETURNS integer
                      LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $b$
                          SELECT CASE WHEN coalesce(t, '') !~ %1$s THEN 0 ELSE (
                              SELECT coalesce(sum((SELECT sum(greatest(length(r[1]) - 1, 1)) FROM regexp_matches(w[1], %1$s, 'g') r)
                                                  + memloci_token_count(regexp_replace(w[1], %1$s, ' ', 'g'))), 0)::integer
                              FROM regexp_matches(t %2$s, '[[:alnum:]_]+', 'g') w
                              WHERE w[1] ~ %1$s) END
                      $b$$q$,
                   quote_literal('[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+'),
                   CASE WHEN getdatabaseencoding() = 'UTF8' AND EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'pg_c_utf8')
                        THEN 'COLLATE pg_catalog.pg_c_utf8' ELSE '' END);
END $d$;

ALTER TABLE entities ADD COLUMN search_length integer NOT NULL DEFAULT 0;
-- The words and CJK pieces of the name, aliases, tags and type alone, with an index of their
-- own: whether an entity holds a word there is an index lookup, not a check of each holder's
-- weights (a common word's label holders fill the ranking pool first).
ALTER TABLE entities ADD COLUMN labels_search tsvector NOT NULL DEFAULT ''::tsvector;

CREATE OR REPLACE FUNCTION memloci_entity_index() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
DECLARE
""" + _SAID + r"""    labels text := NEW.name || E'\n' || NEW.aliases::text || E'\n' || NEW.tags::text || E'\n' || NEW.entity_type;
BEGIN
""" + _ENTITY_WORDS + r"""    NEW.labels_search := to_tsvector('english', memloci_fold(NEW.name))
                      || to_tsvector('simple', memloci_fold(NEW.aliases::text || ' ' || NEW.tags::text))
                      || to_tsvector('english', memloci_fold(NEW.entity_type))
                      || memloci_cjk_grams(NEW.name || ' ' || NEW.entity_type || ' ' || NEW.aliases::text
                                           || ' ' || NEW.tags::text);
    NEW.search_length := memloci_token_count(labels) + memloci_token_count(said)
                         + memloci_cjk_token_count(labels) + memloci_cjk_token_count(said);
    RETURN NEW;
END
$f$;
UPDATE entities SET name = name;
CREATE INDEX entities_labels_search ON entities USING gin (labels_search);

""" + _totals("entities", "entity_totals", "memloci_entity_totals")


# Migration 6: passages of note bodies (passages.py says how they are kept). Functions that
# read tables pin the search_path they were made under (the library's schema).
PASSAGES_MIGRATION = r"""
CREATE TABLE passages (
    id        bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    entity_id bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    text      text NOT NULL,
    text_hash text NOT NULL,
    embedding vector                 -- of the library's embedding model; NULL: waiting for the worker
);
CREATE INDEX passages_entity ON passages (entity_id, id);
CREATE INDEX passages_unembedded ON passages (id) WHERE embedding IS NULL;

-- bodies to split again (an entity's row goes with it)
CREATE TABLE passages_stale (entity_id bigint PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE);
INSERT INTO passages_stale SELECT id FROM entities WHERE body <> '';

CREATE FUNCTION memloci_body_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
BEGIN
    INSERT INTO passages_stale VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $f$;
CREATE TRIGGER passages_body_insert AFTER INSERT ON entities
    FOR EACH ROW WHEN (NEW.body <> '') EXECUTE FUNCTION memloci_body_changed();
CREATE TRIGGER passages_body_update AFTER UPDATE OF body ON entities
    FOR EACH ROW WHEN (NEW.body IS DISTINCT FROM OLD.body) EXECUTE FUNCTION memloci_body_changed();

-- Like vectors_version for memories: a process holding passage vectors in memory sees changes.
-- Embedded passages deleted (a body split again, an entity deleted) move it once per statement.
INSERT INTO library_meta (key, value) VALUES ('passages_version', '0') ON CONFLICT (key) DO NOTHING;
CREATE FUNCTION memloci_passages_removed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $f$
BEGIN
    IF EXISTS (SELECT 1 FROM removed WHERE embedding IS NOT NULL) THEN
        UPDATE library_meta SET value = (value::bigint + 1)::text WHERE key = 'passages_version';
    END IF;
    RETURN NULL;
END $f$;
CREATE TRIGGER passages_removed AFTER DELETE ON passages REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION memloci_passages_removed();
"""
