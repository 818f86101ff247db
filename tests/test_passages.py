"""Note bodies carry meaning: passages cut from each body, kept in step with every way a body
changes, embedded by the background worker, and found by search_nodes (real SQLite files,
the real default embedder, a real server over stdio with the embedder off)."""

from __future__ import annotations

import sqlite3

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.model import EntityInput
from memloci.rules.passages import PASSAGE_WORDS, size, split_passages
from memloci.search.embedder import EmbedderHandle
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService

PUPPIES = "She adopted two puppies from the animal shelter last weekend."
OTHERS = {
    "Budget": "Quarterly revenue grew twelve percent, driven by enterprise subscriptions.",
    "Infra": "## Database\n\nThe staging server runs PostgreSQL 16 with nightly backups.",
    "Garden": "Tomatoes and basil were planted along the south fence in May.",
}


def _service(tmp_path, embedder: str = "none", kind: str = "sqlite") -> MemoryService:
    where = tmp_path / ("lib" if kind == "markdown" else "lib.db")
    return MemoryService(LibraryRegistry([LibrarySpec("lib", where, kind)]), EmbedderHandle(embedder))


def _vectors(service: MemoryService, name: str) -> dict[str, bytes | None]:
    with sqlite3.connect(service.store().path) as conn:
        return dict(conn.execute("SELECT p.text, p.vector FROM passages p JOIN entities e ON e.id = p.entity_id "
                                 "WHERE e.name = ?", (name,)).fetchall())


# -- cutting a body --------------------------------------------------------------------

def test_a_body_is_cut_into_bounded_passages_that_keep_their_heading():
    long_section = " ".join(f"word{i}." for i in range(450))
    body = (f"# Plan\n\nShort intro.\n\nA second paragraph.\n\n## Risks\n\n{long_section}\n\n"
            "```\ncode block\n\nstays whole\n```\n\n## Empty\n")
    passages = split_passages(body)
    assert passages[0].startswith("# Plan\n\nShort intro.\n\nA second paragraph.")  # small paragraphs merged
    assert all(size(p) <= PASSAGE_WORDS + 3 for p in passages)  # a heading may ride along
    risks = [p for p in passages if "word" in p]
    assert len(risks) >= 3 and all(p.startswith("## Risks\n\n") for p in risks)  # every part says its section
    assert sum(p.count("word") for p in risks) == 450  # nothing lost, nothing doubled
    assert any("code block\n\nstays whole" in p for p in passages)
    assert not any(p.strip() == "## Empty" for p in passages)  # a heading alone is no passage
    assert split_passages("") == [] and split_passages("\n\n") == []
    # Observations are memories with vectors of their own: their list (as a Markdown library's
    # body holds it, dated in comments) is no passage; prose in that section is.
    assert split_passages("## Observations\n- uses FastAPI <!-- 2026-11-21T04:50:00Z -->\n- runs on k8s\n") == []
    assert split_passages("## Observations\nWhy we chose it.\n\n- uses FastAPI\n\n## Notes\n- a list <!-- x -->") == [
        "## Observations\n\nWhy we chose it.\n\n## Notes\n\n- a list"]
    cjk = split_passages("東京の旅行計画。" * 60)
    assert len(cjk) >= 2 and all(size(p) <= PASSAGE_WORDS for p in cjk)  # unspaced text is bounded too


# -- keeping passages in step (no embedder needed: the store splits) ------------------------

def test_passages_follow_every_change_to_a_body(tmp_path):
    service = _service(tmp_path)
    store = service.store()
    try:
        service.add_entities([NewEntityDocument("Pets", content=f"{PUPPIES}\n\n## Vet\n\n" + "Checkups are due. " * 60)])
        service.create_entities([EntityInput("Bare", "note")])  # no body: nothing to split
        assert store.passage_pending_count() == 1  # one body waits to be split; a write never does it
        assert store.refresh_passages() == 1 and store.refresh_passages() == 0
        before = store.passages_of("Pets")
        assert len(before) == 2 and PUPPIES in before[0] and before[1].startswith("## Vet")
        assert store.passages_of("Bare") == []

        # A vector saved for each passage, then one paragraph edited by a tool: only that passage changes.
        store.save_passage_vectors([(pid, thash, [1.0, 0.0]) for pid, _, thash, _ in store.pending_passages(10)], "m")
        service.replace_entity_content("Pets", "two puppies", "three kittens")
        store.refresh_passages()
        after = _vectors(service, "Pets")
        assert [t for t in after if "kittens" in t] and not [t for t in after if "puppies" in t]
        assert after[before[1]] is not None  # the untouched passage keeps its vector
        assert [t for t, v in after.items() if v is None] == [t for t in after if "kittens" in t]

        service.rename_entity("Pets", "Animals")
        assert store.passages_of("Animals") == list(after)  # a rename keeps them
        service.add_entities([NewEntityDocument("Zoo", content="Lions sleep most of the day.")])
        service.merge_entities(["Animals"], "Zoo")
        store.refresh_passages()
        assert store.passages_of("Animals") == []
        merged = " ".join(store.passages_of("Zoo"))
        assert "Lions" in merged and "kittens" in merged  # the merged body is split again
        service.delete_entities(["Zoo"])
        with sqlite3.connect(store.path) as conn:
            assert conn.execute("SELECT count(*) FROM passages").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM passages_stale").fetchone()[0] == 0
    finally:
        service.close()


def test_a_note_edited_on_disk_is_split_again_after_the_scan(tmp_path):
    service = _service(tmp_path, kind="markdown")
    store = service.store()
    try:
        service.add_entities([NewEntityDocument("Pets", content=PUPPIES)])
        store.refresh_passages()
        assert any(PUPPIES in p for p in store.passages_of("Pets"))
        path = tmp_path / "lib" / "Pets.md"
        path.write_text(path.read_text().replace("two puppies", "a parrot"))
        assert any(PUPPIES in p for p in store.passages_of("Pets"))  # not scanned yet
        store.sync()
        store.refresh_passages()
        assert any("a parrot" in p for p in store.passages_of("Pets"))
        assert not any("puppies" in p for p in store.passages_of("Pets"))
    finally:
        service.close()


# -- meaning, with the real default embedder ------------------------------------------------

def test_search_nodes_finds_a_note_whose_body_says_it_in_other_words(tmp_path):
    service = _service(tmp_path, "minilm")
    try:
        service.add_entities([NewEntityDocument("Pets", content=PUPPIES)]
                             + [NewEntityDocument(n, content=t) for n, t in OTHERS.items()])
        assert service.flush_embeddings(timeout=300)
        health = service.health()
        assert health["embedder"]["pending"] == 0 and not health["problems"]
        found = service.search_nodes("getting new dogs")
        assert found.hits, "no word of the query is in any note: only meaning can find it"
        assert found.hits[0].entity.name == "Pets"
        assert "body means it" in found.hits[0].why
        # Words fill the page (limit 1), and the body's meaning still ranks with them.
        found = service.search_nodes("who adopted puppies from the shelter", limit=1)
        assert found.hits[0].entity.name == "Pets" and "body means it" in found.hits[0].why

        # The body changes: the old meaning goes with it.
        service.replace_entity_content("Pets", PUPPIES, "The boiler was serviced and the radiators bled.")
        assert service.flush_embeddings(timeout=300)
        assert "Pets" not in [h.entity.name for h in service.search_nodes("getting new dogs").hits]

        # A new model (reindex) re-embeds passages too.
        with sqlite3.connect(service.store().path) as conn:
            passages = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
        done = service.reindex()
        assert done >= passages and service.health()["embedder"]["pending"] == 0
        assert all(v is not None for v in _vectors(service, "Pets").values())
    finally:
        service.close()


def test_without_an_embedder_notes_are_found_by_words_over_mcp(tmp_path):
    from conftest import run_session

    async def body(client):
        await client.ok("add_entities", entities=[{"name": "Pets", "content": PUPPIES}])
        structured, _ = await client.ok("search_nodes", query="puppies shelter")
        assert [e["name"] for e in structured["entities"]] == ["Pets"]
        assert "body means it" not in structured["why"]["Pets"]
        structured, _ = await client.ok("search_nodes", query="getting new dogs")
        assert structured["entities"] == []
        health, _ = await client.ok("check_database_health")
        assert health["embedder"]["search"] == "lexical" and health["status"] == "healthy"

    run_session(tmp_path, body, MEMLOCI_EMBEDDER="none")


# -- the benchmark ---------------------------------------------------------------------------

def test_bench_notes_reads_cranfield_files_and_scores_rankings(tmp_path):
    """Through `memloci bench notes`: the Cranfield files read (query numbers with gaps, counted
    1, 2, ... by cranqrel; grade -1 is not relevant), and its BM25 (stemmed, stop words out)
    ranking each question's one relevant abstract first."""
    import json
    import subprocess
    import sys

    folder = tmp_path / "cran"
    folder.mkdir()
    (folder / "cran.all.1400").write_text(
        ".I 1\n.T\nflow past wings\n.A\nsomeone\n.B\nj. ae. 1\n.W\nflow past swept wings at supersonic speed .\n"
        ".I 2\n.T\nheat transfer\n.A\nother\n.B\nj. ae. 2\n.W\nheat transfer in a boundary layer of a plate .\n")
    # cran.qry numbers its queries with gaps; cranqrel counts them 1, 2, ... in file order
    (folder / "cran.qry").write_text(".I 001\n.W\nwhat is the flow past a swept wing ?\n"
                                     ".I 004\n.W\nhow is heat carried through boundary layers ?\n")
    (folder / "cranqrel").write_text("1 1 2\n1 2 -1\n2 2 1\n")
    out = tmp_path / "cran.json"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--data", str(folder),
                           "--embedder", "none", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["notes"] == 2 and report["questions"] == 2
    # each question's one relevant abstract first ("wings" and "wing" are one stem; the -1 of
    # abstract 2 for question 1 is no relevance, else its recall would be a half)
    assert report["systems"]["BM25"] == {"ndcg@10": 1.0, "recall@10": 1.0}
    assert report["systems"]["search_nodes"] == {"ndcg@10": 1.0, "recall@10": 1.0}


def test_bench_notes_runs_through_the_server(tmp_path):
    import json
    import subprocess
    import sys

    data = tmp_path / "notes.json"
    data.write_text(json.dumps({
        "notes": [{"id": "pets", "text": PUPPIES}, *({"id": n, "text": t} for n, t in OTHERS.items())],
        "questions": [{"id": "q1", "text": "who adopted puppies?", "relevant": {"pets": 2}},
                      {"id": "q2", "text": "did revenue grow this quarter", "relevant": {"Budget": 1}}]}))
    out = tmp_path / "notes-result.json"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--data", str(data),
                           "--embedder", "none", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["notes"] == 4 and report["questions"] == 2
    assert report["systems"]["search_nodes"] == {"ndcg@10": 1.0, "recall@10": 1.0}
    assert report["systems"]["BM25"]["ndcg@10"] == 1.0 and "meaning alone" not in report["systems"]


def test_bench_notes_runs_on_postgres(tmp_path, pg_url):
    import json
    import subprocess
    import sys

    data = tmp_path / "notes.json"
    data.write_text(json.dumps({
        "notes": [{"id": "pets", "text": PUPPIES}, *({"id": n, "text": t} for n, t in OTHERS.items())],
        "questions": [{"id": "q1", "text": "who adopted puppies?", "relevant": {"pets": 2}}]}))
    out = tmp_path / "notes-result.json"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--data", str(data), "--embedder", "none",
                           "--engine", "postgres", "--url", pg_url, "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["engine"] == "postgres" and report["notes"] == 4
    assert report["systems"]["search_nodes"] == {"ndcg@10": 1.0, "recall@10": 1.0}
    refused = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--data", str(data), "--embedder", "none",
                              "--url", pg_url], env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "--url: only with --engine postgres" in refused.stderr


def test_the_passage_index_appends_and_reloads_when_others_write(tmp_path):
    import numpy as np

    from memloci.search.vectors import PassageIndex

    service = _service(tmp_path)
    store = service.store()
    try:
        service.add_entities([NewEntityDocument(f"n{i}", content=f"note number {i} says something.") for i in range(3)])
        store.refresh_passages()
        index = PassageIndex(store, "m")
        assert index.best_entities(np.array([1.0, 0.0], dtype=np.float32)) == {}  # nothing embedded yet
        pending = store.pending_passages(10)
        vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
        for row, (pid, _, thash, owner) in enumerate(pending[:2]):  # saved one at a time, as batches arrive
            saved, version = store.save_passage_vectors([(pid, thash, vectors[row])], "m")
            index.add(saved, [owner], vectors[row:row + 1], version)
        assert len(index) == 2
        best = index.best_entities(np.array([0.0, 1.0], dtype=np.float32))
        assert best[pending[1].entity_id] == pytest.approx(1.0) and best[pending[0].entity_id] == pytest.approx(0.0)
        # Another writer (here: the store directly) saves the third; the index sees it on the next search.
        pid, _, thash, owner = pending[2]
        store.save_passage_vectors([(pid, thash, vectors[2])], "m")
        assert index.best_entities(np.array([0.6, 0.8], dtype=np.float32))[owner] == pytest.approx(1.0)
        assert len(index) == 3
        service.delete_entities(["n0", "n1", "n2"])
        assert index.best_entities(np.array([0.6, 0.8], dtype=np.float32)) == {} and len(index) == 0
    finally:
        service.close()


def test_a_running_server_embeds_a_note_a_person_edited_without_being_told(tmp_path):
    """The watcher picks the edit up, and the idle worker finds the changed body on its own
    (no tool call pokes it)."""
    import time

    service = _service(tmp_path, "minilm", kind="markdown")
    service.store()  # opened (and scanned) before the watcher starts
    try:
        service.watch_libraries()
        service.add_entities([NewEntityDocument("Pets", content=PUPPIES)])
        assert service.flush_embeddings(timeout=300)
        path = tmp_path / "lib" / "Pets.md"
        path.write_text(path.read_text().replace(PUPPIES, "The boiler was serviced and the radiators bled."))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            vectors = _vectors(service, "Pets")
            if any("boiler" in t for t in vectors) and all(v is not None for v in vectors.values()):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the edited body was not embedded: {_vectors(service, 'Pets')}")
        assert not any("puppies" in t for t in vectors)
    finally:
        service.close()


# -- PostgreSQL: a library made before passages ----------------------------------------------

def test_a_postgres_library_made_before_passages_splits_its_bodies_once_migrated(pg_library):
    """Migration 6 marks every body already stored, so notes written before it gain meaning too."""
    import psycopg

    from memloci.store.postgres.connection import quoted, schema_for
    from memloci.store.postgres.engine import PostgresStore
    from memloci.store.postgres.schema import SCHEMA_VERSION

    service = MemoryService(LibraryRegistry([pg_library.spec]), EmbedderHandle("none"))
    try:
        service.add_entities([NewEntityDocument("Pets", content=PUPPIES)])
    finally:
        service.close()
    # Back to the schema as version 5 left it: no passage tables, no triggers (and none of
    # migration 7's entity totals).
    q = quoted(schema_for(pg_library.name))
    with psycopg.connect(pg_library.url, autocommit=True) as conn:
        for trigger in ("added", "removed", "changed"):
            conn.execute(f"DROP TRIGGER entities_totals_{trigger} ON {q}.entities")
            conn.execute(f"DROP FUNCTION {q}.memloci_entity_totals_{trigger}()")
        conn.execute(f"DROP TABLE {q}.entity_totals")
        conn.execute(f"DROP FUNCTION {q}.memloci_cjk_token_count(text)")
        conn.execute(f"ALTER TABLE {q}.entities DROP COLUMN search_length, DROP COLUMN labels_search")
        conn.execute(f"DROP TRIGGER passages_body_insert ON {q}.entities")
        conn.execute(f"DROP TRIGGER passages_body_update ON {q}.entities")
        conn.execute(f"DROP TABLE {q}.passages, {q}.passages_stale")
        conn.execute(f"DROP FUNCTION {q}.memloci_body_changed(), {q}.memloci_passages_removed()")
        conn.execute(f"DELETE FROM {q}.library_meta WHERE key = 'passages_version'")
        conn.execute(f"UPDATE {q}.meta SET value = '5' WHERE key = 'schema_version'")
    store = PostgresStore(pg_library.url, pg_library.name)
    store.open()
    try:
        assert store.stats().schema_version == SCHEMA_VERSION
        assert store.passage_pending_count() == 1 and store.refresh_passages() == 1
        assert store.passages_of("Pets") == [PUPPIES] and store.passages_version() == 0
    finally:
        store.close()


def test_a_library_opened_again_fuses_its_notes_meaning_from_the_first_search(tmp_path):
    service = _service(tmp_path, "minilm")
    try:
        service.add_entities([NewEntityDocument("Pets", content=PUPPIES)]
                             + [NewEntityDocument(n, content=t) for n, t in OTHERS.items()])
        assert service.flush_embeddings(timeout=300)
    finally:
        service.close()
    # A new process on the same file, no write: words fill the page (limit 1), and the body's
    # meaning ranks with them from the first question on.
    service = _service(tmp_path, "minilm")
    try:
        assert service.embedder.get(timeout=300) is not None
        found = service.search_nodes("who adopted puppies from the shelter", limit=1)
        assert found.hits[0].entity.name == "Pets" and "body means it" in found.hits[0].why
    finally:
        service.close()


@pytest.mark.full  # a real server takes a few hundred notes
def test_bench_notes_reads_this_pythons_docstrings(tmp_path):
    """`--docstrings`: technical notes from the standard library's docstrings, each first line a
    question whose one relevant note is the rest of its docstring; neither source, or both, is refused."""
    import json
    import subprocess
    import sys

    out = tmp_path / "docstrings.json"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MEMLOCI_")}
    env["MEMLOCI_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--docstrings", "--embedder", "none",
                           "--questions", "20", "--out", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["corpus"].startswith("Python ") and report["data"] == "docstrings"
    assert report["notes"] >= 150 and report["questions"] == 20
    assert report["systems"]["BM25"]["ndcg@10"] > 0.3 and report["systems"]["search_nodes"]["ndcg@10"] > 0.3
    for args in ([], ["--docstrings", "--data", str(out)]):
        refused = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", *args], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1 and "give --data PATH or --docstrings" in refused.stderr
    refused = subprocess.run([sys.executable, "-m", "memloci", "bench", "notes", "--folds", "--docstrings"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "--folds: give --data with a LoCoMo JSON" in refused.stderr
