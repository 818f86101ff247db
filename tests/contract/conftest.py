"""The `engine` fixture: every test of the contract suite runs once per engine, each time on a
fresh library behind a real MemoryService — a SQLite file in tmp_path, a Markdown folder in
tmp_path, or a PostgreSQL schema (a fresh library name) on the session's server (`pg_url`,
tests/conftest.py). A new engine is done when this suite passes on it.

Tests are written once, against the service (the API every adapter calls), and assert the same
answers on every engine: the expected values are the same for all, so an engine that answers
differently fails.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from pathlib import Path

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import parse_library_specs
from memloci.core.schema import LibrarySchema
from memloci.search.embedder import EmbedderHandle
from memloci.service.facade import MemoryService

ENGINES = ("sqlite", "markdown", "postgres")


class Engine:
    """One engine under test: makes fresh libraries of it, each behind its own service."""

    def __init__(self, name: str, folder: Path, pg_url: str | None):
        self.name = name
        self._folder = folder
        self.pg_url = pg_url
        self._count = itertools.count()
        self._services: list[MemoryService] = []
        self._default: MemoryService | None = None

    def spec_text(self) -> str:
        """A library spec (`name:path-or-URL`) of a fresh library, as `--libraries` takes it, so
        another process can mount the same library."""
        i = next(self._count)
        if self.name == "postgres":
            # the library name chooses the schema: unique per test, so tests never share data
            return f"c{uuid.uuid4().hex[:12]}:{self.pg_url}"
        if self.name == "sqlite":
            return f"lib{i}:{self._folder / f'lib{i}.db'}"
        return f"lib{i}:{self._folder / f'lib{i}'}"

    def open(self, spec_text: str, schema: LibrarySchema | None = None, embedder: str = "none") -> MemoryService:
        """A service on the library of `spec_text` (closed at the end of the test). `embedder`:
        "none" (words only, no model loaded) or a model such as "minilm"."""
        (spec,) = parse_library_specs(spec_text)
        assert spec.kind == self.name, f"{spec_text} mounted as {spec.kind}, not {self.name}"
        if schema is not None:
            spec = dataclasses.replace(spec, schema=schema)
        service = MemoryService(LibraryRegistry([spec]), EmbedderHandle(embedder))
        self._services.append(service)
        return service

    def library(self, schema: LibrarySchema | None = None, embedder: str = "none") -> MemoryService:
        """A fresh library with these rules (default: the default schema)."""
        return self.open(self.spec_text(), schema, embedder)

    @property
    def service(self) -> MemoryService:
        """The test's library with the default schema."""
        if self._default is None:
            self._default = self.library()
        return self._default

    def close(self) -> None:
        for service in self._services:
            service.close()


@pytest.fixture(params=ENGINES)
def engine(request, tmp_path) -> Engine:
    pg_url = None
    if request.param == "postgres":
        pg_url = request.getfixturevalue("pg_url")  # skips (fails under CI=true) if PostgreSQL cannot start
    e = Engine(request.param, tmp_path, pg_url)
    yield e
    e.close()


@pytest.fixture
def engines(request, tmp_path):
    """A reference SQLite engine and the engine compared with it (`other`, the test's parameter)."""
    other = request.node.callspec.params["other"]
    pg_url = request.getfixturevalue("pg_url") if other == "postgres" else None  # only postgres needs the server
    opened = {name: Engine(name, tmp_path / name, pg_url) for name in ("sqlite", other)}
    for name in opened:
        (tmp_path / name).mkdir()
    yield opened
    for e in opened.values():
        e.close()
