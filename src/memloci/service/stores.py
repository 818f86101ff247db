"""The stores the service's parts work on, and the one post-write hook.

A call names a mounted library (or none, when one is mounted) or a project's root
(ProjectRef); `store` gives its store, opening a project's library the first time (and then
`on_project_opened` carries its n2n-memory files over). Every write goes through `writing`,
whose exit is the post-write hook (`written`): what follows a write, once, for every path that
can add text to embed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memloci.app.projects import ProjectRef
from memloci.app.registry import LibraryRegistry
from memloci.service.vectors import LibraryVectors
from memloci.store.protocols import Store


class Stores:
    """The registry's stores as the service reaches them, with the post-write hook."""

    def __init__(self, registry: LibraryRegistry, vectors: LibraryVectors,
                 on_project_opened: Callable[[Store, Path, ProjectRef], None]):
        """`on_project_opened(store, folder, project)` runs when a project's library opens for the
        first time in this process (the project part carries n2n-memory's files over)."""
        self.registry = registry
        self.vectors = vectors
        self.on_project_opened = on_project_opened

    def store(self, library: str | ProjectRef | None = None) -> Store:
        """The store a call names; a project's library opens (and is carried over) on first use."""
        if isinstance(library, ProjectRef):
            store, first_open = self.registry.project(library)
            if first_open is not None:
                try:
                    self.on_project_opened(store, first_open, library)
                except BaseException:
                    self.registry.forget_project(store)
                    raise
            return store
        return self.registry.get(library)

    @contextmanager
    def writing(self, library: str | ProjectRef | None = None, *, new_text: bool = True) -> Iterator[Store]:
        """The store to write to; after the block has written (and not raised), the post-write hook.
        `new_text=False` for a write that can add no text to embed (a deletion, a relation, the
        context, the manual): the embedding worker has nothing new to read then."""
        store = self.store(library)
        yield store
        if new_text:
            self.written(store)

    def written(self, store: Store) -> None:
        """The post-write hook: new memories, observations and note bodies wait for their vectors,
        so the library's embedding worker is woken (started, on a library's first write)."""
        self.vectors.written(store)
