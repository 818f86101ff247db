"""A service on one library, as the tests open it beside a server: no embedder, nothing else mounted."""

from __future__ import annotations

from pathlib import Path

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec, parse_library_specs
from memloci.search.embedder import EmbedderHandle
from memloci.service.facade import MemoryService


def service_for(engine: str, path: Path | str) -> MemoryService:
    """A service on the library: a file or folder, or for postgres a spec `name:postgresql://...`."""
    spec = parse_library_specs(str(path))[0] if engine == "postgres" else LibrarySpec("crash", Path(path), engine)
    return MemoryService(LibraryRegistry([spec]), EmbedderHandle("none"))
