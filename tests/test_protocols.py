"""The Store protocols are the whole contract between the service and an engine.

Read from the code itself, so the contract cannot drift from what is used: every member the
service, the registry, backups, search and the adapters use on a store is declared in a
protocol; the engines implement each protocol they claim with the same parameters; nothing
tests an engine's abilities by attribute name; and store methods answer with the frozen
dataclasses of core/model.py, on real SQLite and Markdown libraries.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest

import memloci
from memloci.core.model import (
    DocumentEdit,
    EntityInput,
    GraphBatch,
    ImportedMemories,
    ListedEntity,
    MemoryFilter,
    MemoryInput,
    MemoryPage,
    MemoryVectors,
    NameChanges,
    NamedEntity,
    PassageVectors,
    PendingMemory,
    PendingPassage,
    RelationInput,
    SavedVectors,
    StoredMemory,
)
from memloci.search.vectors import VectorSearch
from memloci.store import protocols as protocols
from memloci.store.markdown.engine import MarkdownStore
from memloci.store.sqlite.engine import SQLiteStore

SRC = Path(memloci.__file__).parent
# The code that uses stores: the service, the registry, backups, migration, search, the adapters.
USERS = sorted([*SRC.glob("service/*.py"), *SRC.glob("app/*.py"), SRC / "cli/library.py", *SRC.glob("search/*.py"),
                *SRC.glob("mcp/*.py")])
STORE = frozenset({"store"})
STORE_NAMES = {"migrate.py": frozenset({"store", "source", "target"})}  # elsewhere they are paths
# Optional abilities, tested with isinstance; VectorSearch sits beside the vector index it replaces.
CAPABILITIES = (protocols.Undoable, protocols.Passages, protocols.GraphBatches, protocols.Portable,
                protocols.Migratable, protocols.FolderLibrary, protocols.ServerEngine, protocols.WordScores,
                protocols.WordStatistics, protocols.ChangeNotices, protocols.MemoryCopies, VectorSearch)
NARROW = (protocols.GraphStore, protocols.MemoryStore, protocols.VectorStore, protocols.DocumentStore,
          protocols.ContextStore, protocols.Maintenance)


def members(proto: type) -> set[str]:
    """The public members a protocol declares, its bases' included (methods and attributes)."""
    names: set[str] = set()
    for klass in proto.__mro__:
        if klass.__module__ not in (protocols.__name__, proto.__module__):  # Protocol, Generic, object
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= {n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")}
    return names


def _is_store(node: ast.AST, names: frozenset[str] = STORE) -> bool:
    """An expression that is a store: a name `store` (or one of `names`), `self.store` (the vector
    index and worker keep theirs there), or a call `<anything>.store(...)` (the service's accessor)."""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        return node.attr == "store" and isinstance(node.value, ast.Name) and node.value.id == "self"
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "store"
    return False


def used_members() -> dict[str, list[str]]:
    """member -> where it is used on a store, over every module that uses stores."""
    used: dict[str, list[str]] = {}
    for path in USERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _is_store(node.value, STORE_NAMES.get(path.name, STORE)):
                used.setdefault(node.attr, []).append(f"{path.relative_to(SRC)}:{node.lineno}")
    return used


def test_every_member_used_on_a_store_is_declared_in_a_protocol():
    used = used_members()
    # The scan must see the calls it guards, or it would pass on nothing.
    assert {"create_entities", "store_memory", "list_memories", "load_vectors", "undo_change",
            "entity_listing", "note_backup", "schema", "restore_memory_state"} <= set(used), sorted(used)
    declared = members(protocols.Store).union(*(members(c) for c in CAPABILITIES))
    undeclared = {name: where for name, where in used.items() if name not in declared}
    assert not undeclared, f"used on a store but declared in no protocol of memloci.store.protocols: {undeclared}"


def test_every_declared_method_has_a_docstring():
    for proto in (protocols.Store, *CAPABILITIES):
        for name in members(proto):
            value = inspect.getattr_static(proto, name, None)
            if callable(value):
                assert (value.__doc__ or "").strip(), f"{proto.__name__}.{name} has no docstring"


def test_store_is_the_union_of_the_narrow_protocols():
    assert members(protocols.Store) == set().union(*(members(p) for p in NARROW))
    assert {"name", "kind", "path", "schema", "open", "close"} <= members(protocols.StoreBase)


def _signature_problems(cls: type, proto: type) -> list[str]:
    """How `cls` fails to implement `proto`: members missing, or methods whose parameters differ
    in name, order, kind or in having a default (what a caller relies on)."""
    found = []
    for name in sorted(members(proto)):
        declared = inspect.getattr_static(proto, name, None)
        if not callable(declared):
            continue  # attributes are set per instance; the isinstance tests cover them
        given = getattr(cls, name, None)
        if given is None:
            found.append(f"{name}: missing")
            continue

        def shape(fn):
            return [(p.name, p.kind, p.default is inspect.Parameter.empty)
                    for p in inspect.signature(fn).parameters.values()]

        if shape(declared) != shape(given):
            found.append(f"{name}: declared {inspect.signature(declared)}, implemented {inspect.signature(given)}")
    return found


CLAIMS = {
    SQLiteStore: (protocols.Store, protocols.Undoable, protocols.Passages, protocols.Portable, protocols.Migratable),
    MarkdownStore: (protocols.Store, protocols.Undoable, protocols.Passages, protocols.Portable,
                    protocols.Migratable, protocols.GraphBatches, protocols.FolderLibrary),
}


@pytest.mark.parametrize("cls", list(CLAIMS), ids=lambda c: c.__name__)
def test_the_engines_implement_what_they_claim_with_the_declared_parameters(cls):
    for proto in CLAIMS[cls]:
        assert not _signature_problems(cls, proto), (proto.__name__, _signature_problems(cls, proto))


def test_the_postgres_engine_implements_the_protocols_it_serves():
    postgres = pytest.importorskip("memloci.store.postgres.engine")
    cls = postgres.PostgresStore
    # Documents are refused on postgres for now (by methods taking anything): present, not compared.
    assert not [m for m in members(protocols.DocumentStore) if not hasattr(cls, m) and m not in
                {"name", "kind", "path", "schema"}]
    for proto in (protocols.GraphStore, protocols.MemoryStore, protocols.VectorStore, protocols.ContextStore,
                  protocols.Maintenance, protocols.ServerEngine, VectorSearch, protocols.Portable,
                  protocols.Migratable, protocols.Passages):
        assert not _signature_problems(cls, proto), (proto.__name__, _signature_problems(cls, proto))


@pytest.fixture(params=["sqlite", "markdown"])
def store(request, tmp_path):
    s = SQLiteStore(tmp_path / "lib.db", "lib") if request.param == "sqlite" else MarkdownStore(tmp_path / "lib", "lib")
    s.open()
    yield s
    s.close()


def test_capabilities_are_told_by_isinstance(store):
    for proto in (protocols.Undoable, protocols.Passages, protocols.Portable, protocols.Migratable):
        assert isinstance(store, proto), proto.__name__
    folder = store.kind == "markdown"
    assert isinstance(store, protocols.FolderLibrary) is folder
    assert isinstance(store, protocols.GraphBatches) is folder
    assert not isinstance(store, protocols.ServerEngine)
    assert not isinstance(store, VectorSearch)  # searched by the in-process index
    assert not isinstance(object(), protocols.Undoable)


def _is_frozen_record(value) -> bool:
    return dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen


def test_store_methods_answer_with_frozen_dataclasses(store):
    store.create_entities([EntityInput("Alice", "person", ("likes tea",))], origin="test")
    stored = store.store_memory(MemoryInput("deploys run on Fridays", ("ops",)), origin="test")
    assert isinstance(stored, StoredMemory) and stored.created and stored.memory.content == "deploys run on Fridays"
    again = store.store_memory(MemoryInput("deploys run on Fridays", ("release",)), origin="test")
    assert not again.created and again.memory.id == stored.memory.id and again.memory.tags == ("ops", "release")
    memory, created = again  # still unpacks as the tuple it replaced
    assert memory == again.memory and created is False

    page = store.list_memories(offset=0, limit=10, filters=MemoryFilter(tags=("ops",)))
    assert isinstance(page, MemoryPage) and page.total == 1 and [m.id for m in page.memories] == [stored.memory.id]
    assert isinstance(page.memories, tuple)

    changes = store.name_changes(-1)
    assert isinstance(changes, NameChanges) and changes.complete
    assert [(e.name, e.entity_type) for e in changes.names] == [("Alice", "person")]
    assert all(isinstance(e, NamedEntity) for e in changes.names)
    assert store.name_changes(changes.position).names == ()

    pending = store.pending_embeddings(10)
    assert pending and all(isinstance(p, PendingMemory) for p in pending)
    assert {p.content for p in pending} == {"likes tea", "deploys run on Fridays"}
    saved = store.save_vectors([(p.id, p.content_hash, np.array([1.0, 0.0], dtype=np.float32)) for p in pending], "m")
    assert isinstance(saved, SavedVectors) and set(saved.ids) == {p.id for p in pending}
    loaded = store.load_vectors()
    assert isinstance(loaded, MemoryVectors) and loaded.version == saved.version and loaded.model == "m"
    assert list(loaded.ids) == sorted(saved.ids) and loaded.matrix.shape == (2, 2)

    imported = store.import_memories([_MemoryLine("an imported one")], origin="test")
    assert isinstance(imported, ImportedMemories) and (imported.added, imported.existing) == (1, 0)

    edit = store.edit_document("Alice", lambda text: text + "\nShe also likes coffee.\n", origin="test", detail={})
    assert isinstance(edit, DocumentEdit) and edit.name == "Alice" and edit.changed
    listed = store.list_entities("al*")
    assert listed == [ListedEntity("Alice", "person")]
    if isinstance(store, protocols.FolderLibrary):
        assert [(e.name, e.path) for e in store.entity_listing()] == [("Alice", "Alice.md")]

    assert isinstance(store, protocols.Passages)
    store.refresh_passages()
    passages = store.pending_passages(10)
    assert all(isinstance(p, PendingPassage) for p in passages)
    for value in (stored, page, changes, saved, loaded, imported, edit, *passages, *pending):
        assert _is_frozen_record(value), type(value).__name__
    if passages:
        store.save_passage_vectors([(p.id, p.text_hash, np.array([0.0, 1.0], dtype=np.float32)) for p in passages], "m")
    vectors = store.load_passage_vectors()
    assert isinstance(vectors, PassageVectors) and len(vectors.ids) == len(passages) == len(vectors.owners)

    if isinstance(store, protocols.GraphBatches):
        batch = store.create_graph([EntityInput("Bob", "person")], [RelationInput("Bob", "knows", "Carol")], origin="test")
        assert isinstance(batch, GraphBatch) and _is_frozen_record(batch)
        assert [e.name for e in batch.entities] == ["Bob"]
        # Carol comes in a later batch: the relation waits as a pending link, counted as made
        assert [r.to_entity for r in batch.created] == ["Carol"] and not batch.existing and not batch.deferred


@dataclasses.dataclass
class _MemoryLine:
    """What an importer hands import_memories (interop.MemoryLine's fields)."""

    content: str
    tags: tuple[str, ...] = ()
    memory_type: str = "note"
    importance: str = "medium"
    metadata: dict = dataclasses.field(default_factory=dict)
    created_at: str = "2024-01-02T03:04:05Z"
    updated_at: str = "2024-01-02T03:04:05Z"


def test_no_service_or_adapter_code_tests_a_store_by_attribute_name():
    found = []
    for path in USERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("hasattr", "getattr") and node.args
                    and _is_store(node.args[0], STORE_NAMES.get(path.name, STORE))):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, f"test capabilities with isinstance on a protocol of memloci.store.protocols: {found}"


def test_capability_protocols_are_runtime_checkable():
    for proto in CAPABILITIES:
        assert getattr(proto, "_is_runtime_protocol", False), proto.__name__
