"""The layers of ARCHITECTURE.md, enforced on the source tree.

Every import counts, wherever it is written: at the top of a module, inside a function, or under
`if TYPE_CHECKING:` (a cycle hidden in a function is still a cycle). The rules:

- layers: a module imports only its own package and the packages below it (LAYERS, lowest
  first; packages on one rank are siblings and do not import each other);
- no cycle among modules;
- no module imports another module's `_name`, by `from m import _name` or as `m._name`;
- no engine package under store/ imports another (the Markdown engine may use the SQLite
  package's public names: it has a SQLite index);
- `Settings.from_env()` is called only at the entry points (ENTRY_POINTS);
- no `type: ignore[attr-defined]`, no thread-local state, no class in store/ with more than three
  classes of its own in its MRO (protocols and `object` aside);
- bench/ is a leaf: only cli/ imports it, and no test does (a test drives a bench through
  `memloci bench ...`).

Each test names every finding it makes, so a failure says which import or class to change.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Protocol

import memloci

SRC = Path(memloci.__file__).parent

# Lowest first. A tuple is one rank of siblings.
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("markdown",),
    ("formats", "rules"),
    ("store",),
    ("search",),
    ("app", "workspace"),
    ("service",),
    ("mcp",),
    ("http",),
    ("hooks", "install"),
    ("bench",),
    ("cli",),
    ("__init__", "__main__"),
]
RANK = {pkg: rank for rank, names in enumerate(LAYERS) for pkg in names}
ENGINES = ("store.sqlite", "store.markdown", "store.postgres")
# The Markdown engine has a SQLite index: it may use the SQLite package (its public names).
ENGINE_USES = {("store.markdown", "store.sqlite")}
# Where the process starts and reads its environment once (DESIGN.md §2).
ENTRY_POINTS = {"cli.main", "hooks.capture", "mcp.early"}  # mcp.early: serve's first replies, before the command line


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = ["memloci", *module.split(".")] if is_package and module != "__init__" else ["memloci", *module.split(".")[:-1]]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _local(name: str) -> str | None:
    """memloci.a.b -> a.b (the longest prefix that is a module), or None outside memloci."""
    if name != "memloci" and not name.startswith("memloci."):
        return None
    parts = name.split(".")[1:]
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts) if parts else "__init__"


class Imports:
    """Every import of memloci's modules, with the private names each one takes."""

    def __init__(self) -> None:
        self.edges: dict[str, set[str]] = {m: set() for m in MODULES}
        self.privates: list[str] = []
        self.trees: dict[str, ast.Module] = {}
        for module, (path, is_package) in MODULES.items():
            self.scan(module, is_package, ast.parse(path.read_text(encoding="utf-8")))

    def scan(self, module: str, is_package: bool, tree: ast.Module) -> None:
        self.trees[module] = tree
        if True:
            aliases: dict[str, str] = {}  # a local name bound to a memloci module
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        target = _local(a.name)
                        if target is not None:
                            self._edge(module, target)
                            if a.asname:
                                aliases[a.asname] = target
                elif isinstance(node, ast.ImportFrom):
                    base = _absolute(module, is_package, node)
                    target = _local(base)
                    if target is None:
                        continue
                    for a in node.names:
                        sub = _local(f"{base}.{a.name}")
                        if sub is not None and sub != target:  # a submodule
                            self._edge(module, sub)
                            aliases[a.asname or a.name] = sub
                        else:
                            self._edge(module, target)
                            if a.name.startswith("_") and not a.name.startswith("__"):
                                self.privates.append(f"private: {module} imports {a.name} from {target}")
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id in aliases and node.attr.startswith("_")
                        and not node.attr.startswith("__")):
                    self.privates.append(f"private: {module} uses {aliases[node.value.id]}.{node.attr}")

    def _edge(self, source: str, target: str) -> None:
        if target != source:
            self.edges[source].add(target)


IMPORTS = Imports()


def _package(module: str) -> str:
    return module.split(".")[0]


def _engine(module: str) -> str | None:
    return next((e for e in ENGINES if module == e or module.startswith(e + ".")), None)


def layer_findings() -> list[str]:
    found = []
    for source, targets in IMPORTS.edges.items():
        for target in targets:
            a, b = _package(source), _package(target)
            if a == b or target == "__init__":  # the package's own `__version__` is everyone's
                continue
            if RANK[b] > RANK[a] or (RANK[b] == RANK[a]):
                found.append(f"layer: {source} -> {target}")
    return found


def engine_findings() -> list[str]:
    found = []
    for source, targets in IMPORTS.edges.items():
        mine = _engine(source)
        for target in targets:
            theirs = _engine(target)
            if mine and theirs and mine != theirs and (mine, theirs) not in ENGINE_USES:
                found.append(f"engine: {source} -> {target}")
            if mine is None and source.startswith("store.") and theirs:
                found.append(f"engine: {source} (shared by the engines) -> {target}")
    return found


def cycles() -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for root in IMPORTS.edges:
        if root in index:
            continue
        work = [(root, iter(sorted(IMPORTS.edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(IMPORTS.edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def settings_findings() -> list[str]:
    found = []
    for module, tree in IMPORTS.trees.items():
        if module in ENTRY_POINTS:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "from_env"):
                found.append(f"settings: {module} calls from_env()")
    return sorted(set(found))


def source_findings() -> list[str]:
    found = []
    for module, (path, _) in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if "type: ignore[attr-defined]" in text:
            found.append(f"ignore: {module} has type: ignore[attr-defined]")
        if re.search(r"\bthreading\.local\b|\blocal\(\)", text):
            found.append(f"thread-local: {module}")
        for match in re.finditer(r"^class (\w+Host)\b", text, re.M):
            found.append(f"host: {module}.{match.group(1)}")
    return found


def mro_findings() -> list[str]:
    found = []
    for module in MODULES:
        if not module.startswith("store."):
            continue
        loaded = importlib.import_module(f"memloci.{module}")
        for name, cls in vars(loaded).items():
            if not inspect.isclass(cls) or cls.__module__ != loaded.__name__:
                continue
            own = [c for c in cls.__mro__[1:]
                   if c is not object and not getattr(c, "_is_protocol", False) and c is not Protocol
                   and c.__module__ not in ("typing", "abc", "builtins")]
            if len(own) > 3:
                found.append(f"mro: {module}.{name} has {len(own)} classes")
    return found


def _check(kind: str, findings: list[str]) -> None:
    assert not findings, f"{len(findings)} {kind} finding(s) (see ARCHITECTURE.md):\n" + "\n".join(sorted(findings))


def test_imports_follow_the_layers():
    _check("layer", layer_findings())


def test_engines_do_not_import_each_other():
    _check("engine", engine_findings())


def test_no_private_names_across_modules():
    _check("private", sorted(set(IMPORTS.privates)))


def test_settings_are_read_at_the_entry_points_only():
    _check("settings", settings_findings())


def test_no_type_ignores_thread_locals_or_host_classes():
    findings = source_findings()
    for kind in ("ignore", "thread-local", "host"):
        _check(kind, [f for f in findings if f.startswith(kind + ":")])


def test_store_classes_compose_instead_of_inherit():
    _check("mro", mro_findings())


def test_no_import_cycles():
    found = [" ".join(sorted(c)) for c in cycles()]
    assert not found, "import cycles (imports inside functions count):\n" + "\n".join(found)


TESTS = Path(__file__).parent
# an import of the benches, also in code a test hands to a subprocess (`python -c`, `-m memloci.bench...`)
BENCH_IN_TEXT = re.compile(r"(?:\bfrom\s+memloci\.bench\b|\bimport\s+memloci\.bench\b|\bfrom\s+memloci\s+import\s+bench\b"
                           r"|^memloci\.bench\b)", re.M)


def bench_imports_in(text: str, name: str) -> list[str]:
    """The imports of memloci.bench in one test file: import statements, and strings that hold one."""
    found = []
    for node in ast.walk(ast.parse(text)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and BENCH_IN_TEXT.search(node.value):
            names = ["memloci.bench"]
        if any(n == "memloci.bench" or n.startswith("memloci.bench.") for n in names):
            found.append(f"{name}:{node.lineno}")
    return sorted(set(found), key=lambda hit: int(hit.rsplit(":", 1)[1]))


def test_only_the_cli_imports_the_benches():
    """bench/ is a leaf (ARCHITECTURE.md): `memloci bench ...` runs it, and nothing else imports it.
    A test checks a bench by running the command (its JSON), and test infrastructure the benches
    also use (a loopback HTTP server, say) lives below them, in the product's layers."""
    in_src = sorted(f"{source} -> {target}" for source, targets in IMPORTS.edges.items() for target in targets
                    if _package(target) == "bench" and _package(source) not in ("bench", "cli"))
    assert not in_src, "only cli/ imports bench/:\n" + "\n".join(in_src)
    here = Path(__file__).resolve()  # this file names what it looks for
    in_tests = [hit for path in sorted(TESTS.rglob("*.py")) if "node_modules" not in path.parts and path.resolve() != here
                for hit in bench_imports_in(path.read_text(encoding="utf-8"), path.relative_to(TESTS).as_posix())]
    assert not in_tests, "tests import memloci.bench (drive `memloci bench ...` instead):\n" + "\n".join(in_tests)


def test_the_rules_find_what_they_look_for():
    """The checks above are not vacuous: a made-up upward import, cycle and private import are found."""
    IMPORTS.edges.setdefault("core.model", set())
    saved = set(IMPORTS.edges["core.model"])
    try:
        IMPORTS.edges["core.model"].add("service.facade")
        assert "layer: core.model -> service.facade" in layer_findings()
        assert any("core.model" in c for c in cycles())
    finally:
        IMPORTS.edges["core.model"] = saved
    probe = Imports.__new__(Imports)
    probe.edges, probe.privates, probe.trees = {m: set() for m in MODULES}, [], {}
    probe.scan("search.hybrid", False, ast.parse(
        "def f():\n    from ..core.model import _secret\n    from memloci.core import model\n    return model._x\n"))
    assert probe.privates == ["private: search.hybrid imports _secret from core.model",
                              "private: search.hybrid uses core.model._x"]
    assert probe.edges["search.hybrid"] == {"core.model"}
    made_up = ('import memloci.bench.graph\nfrom memloci import bench\nRUN = ["-m", "memloci.bench.crash"]\n'
               'CODE = "from memloci.bench import crash"\nDOC = "memloci bench crash, memloci.bench.crash"\n')
    assert bench_imports_in(made_up, "t.py") == ["t.py:1", "t.py:2", "t.py:3", "t.py:4"]


ROOT = SRC.parent.parent


def test_the_map_matches_the_tree():
    """ARCHITECTURE.md names every package in its code map, in the order LAYERS holds, and every
    module path it names exists (a path is relative to src/memloci/, to its package's row, or to
    the project)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_/]+)/`(?:, `([a-z_]+)/`)? \|", text, re.M)
    mapped = [name for row in rows for name in row if name]
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists())
    assert sorted(n for n in mapped if "/" not in n) == packages
    order = [n for n in mapped if "/" not in n]
    assert order == [p for rank in LAYERS for p in rank if p in packages]
    missing = []
    for row in text.splitlines():
        package = re.match(r"^\| `([a-z_/]+)/`", row)
        for path in re.findall(r"`([\w/]+\.py)`", row):
            places = [SRC / path, ROOT / path, *([SRC / package.group(1) / path] if package else [])]
            if not any(p.exists() for p in places) and not list(SRC.rglob(path)):
                missing.append(path)
    assert not missing, f"ARCHITECTURE.md names modules that do not exist: {missing}"
