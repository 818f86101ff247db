"""What extraction adds to store time (`memloci bench lifecycle --parts extraction`; "on by
default only where it is cheap: measure what it adds to store time").

Two SQLite libraries of the same ENTITIES entities (CamelCase names, as memorix's patterns find
them), one served with extraction on, one with it off (MemoryService's `extract=`, what
`[lifecycle] extract` and MEMLOCI_EXTRACT=0 set), no embedder (its cost is not the question).
The same calls go to both, in turns: store_memory and add_observations with texts of three
kinds: ones that mention existing entities (a causal phrase and two names: relations or links
are made), ones that mention names no entity has (suggestions only), and plain ones that
mention nothing. Each call is timed through the service; the table gives the medians.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memloci.bench.lifecycle_library import open_service, vocabulary
from memloci.core.model import EntityInput, ObservationBatch
from memloci.core.settings import Settings

KINDS = ("existing", "unknown", "plain")


def _entity(i: int, words: list[str]) -> str:
    return f"{words[i % len(words)].title()}{words[(i * 7 + 3) % len(words)].title()}Service"


def _text(kind: str, i: int, rng: random.Random, words: list[str], entities: int) -> str:
    filler = " ".join(rng.choice(words) for _ in range(rng.randint(6, 12)))
    if kind == "existing":
        a, b = rng.sample(range(entities), 2)
        return f"{_entity(a, words)} failed because {_entity(b, words)} timed out; {filler} (case {i})."
    if kind == "unknown":
        return f"{filler.title().replace(' ', '')}Client broke the {rng.choice(words)} step; {filler} (case {i})."
    return f"The {filler} step went fine (case {i})."


def run_extraction(entities: int, calls: int, settings: Settings | None) -> dict[str, Any]:
    """Median ms of store_memory and add_observations, extraction on and off, per kind of text."""
    rng = random.Random(11)
    words = vocabulary(3000, random.Random(7))
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="memloci-life-extract-") as tmp:
        services = {}
        for switch in ("on", "off"):
            service = open_service(f"x{switch}:{Path(tmp) / f'{switch}.db'}", settings, extract=switch == "on")
            for start in range(0, entities, 500):
                service.create_entities([EntityInput(_entity(i, words), "service", (f"Runs the {words[i]} jobs.",))
                                         for i in range(start, min(entities, start + 500))])
            services[switch] = service
        try:
            for i in range(calls):
                for kind in KINDS:
                    text = _text(kind, i, rng, words, entities)
                    target = _entity(rng.randrange(entities), words)
                    for switch in (("on", "off") if i % 2 == 0 else ("off", "on")):  # turns: neither goes first always
                        service = services[switch]
                        t0 = time.perf_counter()
                        service.store_memory(text, tags=["bench"])
                        t1 = time.perf_counter()
                        service.add_observations([ObservationBatch(target, (text,))])
                        t2 = time.perf_counter()
                        times.setdefault(f"store_memory {kind} {switch}", []).append((t1 - t0) * 1000)
                        times.setdefault(f"add_observations {kind} {switch}", []).append((t2 - t1) * 1000)
            relations = {s: service.stats().relations for s, service in services.items()}
        finally:
            for service in services.values():
                service.close()
    rows = []
    for call in ("store_memory", "add_observations"):
        for kind in KINDS:
            on = statistics.median(times[f"{call} {kind} on"])
            off = statistics.median(times[f"{call} {kind} off"])
            rows.append({"call": call, "text": kind, "on_ms": round(on, 2), "off_ms": round(off, 2),
                         "added_ms": round(on - off, 2)})
    return {"entities": entities, "calls": calls, "rows": rows, "relations_made": relations}
