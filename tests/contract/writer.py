"""A writer process for test_concurrency_contract.py, like one server among several on one
library: `writer.py SPEC TAG N` mounts the library of SPEC (`name:path-or-URL`) and makes N
rounds of calls, each call its own write:
- create_entities: its own entity, and a name every writer creates too (`shared-<i % 25>`),
  each with an observation of its own;
- every fifth round, add_observations to `hub`, one entity every writer appends to.
A CONFLICT (a Markdown file changed under the call by another process) is retried, as a client
would; any other error ends the process with a non-zero status."""

from __future__ import annotations

import sys
import time

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import parse_library_specs
from memloci.core.errors import ConflictError
from memloci.core.model import EntityInput, ObservationBatch
from memloci.search.embedder import EmbedderHandle
from memloci.service.facade import MemoryService


def retried(call) -> None:
    for _ in range(100):
        try:
            call()
            return
        except ConflictError:
            time.sleep(0.02)
    raise RuntimeError("still in conflict after 100 tries")


def main() -> None:
    spec, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    service = MemoryService(LibraryRegistry(parse_library_specs(spec)), EmbedderHandle("none"))
    try:
        for i in range(n):
            retried(lambda i=i: service.create_entities([
                EntityInput(f"{tag}-{i}", "t", (f"{tag} obs {i}",)),
                EntityInput(f"shared-{i % 25}", "t", (f"{tag} says {i}",))]))
            if i % 5 == 0:
                retried(lambda i=i: service.add_observations([ObservationBatch("hub", (f"{tag} hub {i}",))]))
    finally:
        service.close()


if __name__ == "__main__":
    main()
