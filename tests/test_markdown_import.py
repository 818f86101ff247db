"""Importing a graph into a Markdown library: one file write per entity, batches that cross
each other's relations, files that read back as the entities, a person's notes untouched."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys

import pytest
import yaml
from services import service_for

from memloci.core.model import EntityInput, RelationInput, name_key
from memloci.formats.official import read_official
from memloci.markdown.document import EntityDocument, parse_document, render_document
from memloci.markdown.syntax import yaml_scalar
from memloci.service import history as service_module
from memloci.store.markdown.importing import rendered_body


def _graph(n: int, m: int) -> tuple[list[tuple[int, EntityInput]], list[tuple[int, RelationInput]]]:
    entities = [(i + 1, EntityInput(f"Imp {i}", ["person", "project", "tool"][i % 3],
                                    (f"fact {i} one", f"fact {i} two [[Imp {(i + 3) % n}]]" if i % 5 == 0 else f"fact {i} two")))
                for i in range(n)]
    relations = [(n + j + 1, RelationInput(f"Imp {j % n}", ["uses", "knows"][j % 2], f"Imp {(j * 7 + 1) % n}"))
                 for j in range(m)]
    return entities, relations


def _files_read_back(root) -> dict[str, EntityDocument]:
    docs = {}
    for p in root.glob("Imp *.md"):
        doc = parse_document(p.read_text(encoding="utf-8"), fallback_name=p.stem)
        docs[doc.name] = doc
    return docs


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 7 entities, so a 30-entity import crosses batches both ways."""
    monkeypatch.setattr(service_module, "IMPORT_CHUNK", 7)


def test_import_crossing_batches_reads_back_from_the_files(tmp_path, small_batches):
    root = tmp_path / "lib"
    entities, relations = _graph(30, 45)
    relations.append((99, RelationInput("Imp 4", "uses", "Imp 4")))  # to itself
    relations.append((100, RelationInput("Imp 2", "uses", "imp 25")))  # another case than the target's
    s = service_for("markdown", root)
    try:
        report = s.import_graph(entities, relations)
        store = s.store()
        graph = store.export_graph()
        with store._read() as conn:
            pending = conn.execute("SELECT count(*) FROM pending_links").fetchone()[0]
    finally:
        s.close()
    assert (report.entities_created, report.observations_added) == (30, 60)
    wanted = {(r.from_entity, r.relation_type, r.to_entity.replace("imp", "Imp")) for _, r in relations}
    assert report.relations_created == len(wanted)
    assert pending == 0, "every link of an earlier batch found its target"
    links = {(e.name, "links_to", f"Imp {(i + 3) % 30}") for i, (_, e) in enumerate(entities) if i % 5 == 0}
    assert {(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations} == wanted | links
    docs = _files_read_back(root)
    assert set(docs) == {e.name for _, e in entities}
    for _, e in entities:
        doc = docs[e.name]
        assert (doc.entity_type, doc.observations) == (e.entity_type, list(e.observations))
        assert {(rt, name_key(to)) for rt, to in doc.relations} == \
            {(rt, name_key(to)) for f, rt, to in wanted if f == e.name}
    umask = os.umask(0)
    os.umask(umask)
    for p in root.glob("Imp *.md"):  # notes follow the umask, as an editor's files do (test_confinement.py)
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    # The index the import left is the one the files give: rebuilt from them, it is the same.
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".memloci"))
    rebuilt = service_for("markdown", copy)
    try:
        again = rebuilt.store().export_graph()
    finally:
        rebuilt.close()
    key = lambda g: ({(e.name, e.entity_type, tuple(o.content for o in e.observations)) for e in g.entities},
                     {(r.from_entity, r.relation_type, r.to_entity) for r in g.relations})
    assert key(again) == key(graph)


def test_the_scan_after_an_import_reads_no_file_again(tmp_path, small_batches):
    root = tmp_path / "lib"
    s = service_for("markdown", root)
    try:
        s.import_graph(*_graph(20, 20))
        store = s.store()
        report = store.sync()
    finally:
        s.close()
    assert (report.indexed, report.removed) == (0, 0), report


def test_an_import_changes_no_byte_of_the_notes_it_does_not_touch(tmp_path, small_batches):
    root = tmp_path / "lib"
    root.mkdir()
    mine = {
        "Diary.md": "# Diary\r\n\r\nWent *out*.   \r\n",
        "people/Bob.md": "---\ntags:   [ friend ]   # hand-written\nrelations:\n  - {type: knows, to: Alice}\n---\n"
                         "Bob, no title line.\n\n## Observations\n- likes tea\n",
        "Imp 3.md": "---\ntype: tool\ncustom: kept   # as written\n---\n# Imp 3\n\nMy own words.\n\n## Observations\n"
                    "- written by hand\n",
    }
    for rel, text in mine.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode("utf-8"))
    entities, relations = _graph(12, 12)
    relations.append((50, RelationInput("Bob", "knows", "Imp 5")))  # from a person's note: it is edited
    s = service_for("markdown", root)
    try:
        report = s.import_graph(entities, relations)
    finally:
        s.close()
    assert report.entities_merged == 1 and report.entities_created == 11
    assert (root / "Diary.md").read_bytes() == mine["Diary.md"].encode("utf-8")
    merged = (root / "Imp 3.md").read_text(encoding="utf-8")
    assert merged.startswith("---\ntype: tool\ncustom: kept   # as written\n")  # no key added, none reformatted
    assert "My own words.\n" in merged and "- written by hand\n" in merged and "- fact 3 one" in merged
    assert "created:" not in merged and "modified:" not in merged, "no date invented in a person's note"
    bob = (root / "people/Bob.md").read_text(encoding="utf-8")
    assert bob.startswith("---\ntags:   [ friend ]   # hand-written\n") and "Imp 5" in bob
    assert bob.endswith("Bob, no title line.\n\n## Observations\n- likes tea\n")


def test_a_schema_that_relates_existing_entities_only_gets_every_relation(tmp_path, small_batches):
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.core.schema import STRICT
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    s = MemoryService(LibraryRegistry([LibrarySpec("t", tmp_path / "lib", "markdown", STRICT)]), EmbedderHandle("none"))
    entities = [(i, EntityInput(f"imp-{i}", "concept", (f"fact {i}",))) for i in range(15)]
    rank = lambda j: j * 4 % 15  # acyclic (the schema's rule), yet crossing batches both ways
    pairs = [(j, (j * 7 + 1) % 15) for j in range(15)]
    relations = [(100 + j, RelationInput(f"imp-{a}", "uses", f"imp-{b}"))
                 for j, (a, b) in enumerate(pairs) if rank(a) < rank(b)]
    try:
        report = s.import_graph(entities, relations)
        graph = s.store().export_graph()
    finally:
        s.close()
    assert len(relations) > 5 and report.relations_created == len(relations) == len(graph.relations)


def test_the_cli_import_of_a_jsonl_file(tmp_path):
    """`memloci import jsonl` into a Markdown library, as a user runs it."""
    source = tmp_path / "memory.jsonl"
    entities, relations = _graph(40, 40)
    with source.open("w", encoding="utf-8") as f:
        for _, e in entities:
            f.write(json.dumps({"type": "entity", "name": e.name, "entityType": e.entity_type,
                                "observations": list(e.observations)}) + "\n")
        for _, r in relations:
            f.write(json.dumps({"type": "relation", "from": r.from_entity, "to": r.to_entity,
                                "relationType": r.relation_type}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    env.update(MEMLOCI_EMBEDDER="none", MEMLOCI_HOME=str(tmp_path / "home"))
    done = subprocess.run([sys.executable, "-m", "memloci", "import", "jsonl", str(source),
                           "--libraries", f"lib:{tmp_path / 'lib'}"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "40 entities created" in done.stdout
    docs = _files_read_back(tmp_path / "lib")
    assert len(docs) == 40
    assert sum(len(d.relations) for d in docs.values()) == len({(r.from_entity, r.relation_type, r.to_entity)
                                                                  for _, r in read_official(source).relations})


# -- the shortcuts the import takes: each equal to the long way ---------------------------

def test_plain_scalars_render_as_yaml_renders_them():
    rng = random.Random(3)
    alphabet = "aAbyYnNeEsSoOfFtTlLuU0123456789_- .:#,[]{}'\"é"
    values = ["yes", "No", "ON", "off", "null", "y", "N", "true", "nan", ".inf", "1e5", "Kalo 12", "a  b", "x-", "_x"]
    values += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(5000)]
    for v in values:
        out = yaml.safe_dump([v], default_flow_style=True, allow_unicode=True, width=float("inf")).strip()
        if "\n" not in out:
            assert yaml_scalar(v) == out[1:-1], v
        assert yaml.safe_load(f"[{yaml_scalar(v)}]") == [v], v


@pytest.mark.parametrize("name", ["Imp 1", "a  b", "  spaced", "x: y", "Ünïcode 東京", "yes", "# hash", "name"])
@pytest.mark.parametrize("body", ["", "## Notes\n\nfree text\n", "\n\n  \n## Observations\n- kept\n"])
def test_the_body_of_a_rendered_file_is_what_parsing_it_gives(name, body):
    doc = EntityDocument(name=name, entity_type="note", aliases=[], tags=["t"], relations=[("uses", "Other")],
                         observations=["one", "two [[Other]]"], body=body, created="2026-01-01T00:00:00Z",
                         modified="2026-01-01T00:00:00Z", extra=[], links=[])
    text = render_document(doc)
    fast = rendered_body(text)
    if fast is not None:
        assert fast == parse_document(text, fallback_name="x").body


def test_bench_import_times_both_engines_on_the_same_graph(tmp_path):
    out = tmp_path / "import.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLOCI_")}
    done = subprocess.run([sys.executable, "-m", "memloci", "bench", "import", "--entities", "30", "--relations", "45",
                           "--repeat", "1", "--out", str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    for engine in ("sqlite", "markdown"):
        r = report["engines"][engine]
        assert (r["entities"], r["observations"], r["relations"]) == (30, 90, 45)
    assert report["markdown_vs_sqlite_wall"] > 0 and "markdown / sqlite" in done.stdout
