"""A search of several libraries on every engine: a library of the engine under test and a
SQLite library mounted side by side, searched at once through the service. One ranking (each
library's best first, its own order kept), every hit naming its library, limits over the merged
list, and an error of one library naming it."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import parse_library_specs
from memloci.core.errors import NotFoundError, ValidationError
from memloci.core.model import EntityInput
from memloci.search.embedder import EmbedderHandle
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService


@pytest.fixture
def two(engine, tmp_path):
    """A service with the engine's library (named as engine.spec_text names it) and `side`, a SQLite library."""
    spec = engine.spec_text()
    service = MemoryService(LibraryRegistry(parse_library_specs(f"{spec},side:{tmp_path / 'side.db'}")),
                            EmbedderHandle("none"))
    yield service, spec.split(":", 1)[0]
    service.close()


def test_search_nodes_and_retrieve_memory_across_two_libraries(two):
    s, lib = two
    s.create_entities([EntityInput("kiln", "tool", ("fires pottery at night",)),
                       EntityInput("glaze", "recipe", ("pottery glaze, blue",))], library=lib)
    s.create_entities([EntityInput("wheel", "tool", ("throws pottery",))], library="side")
    s.store_memory("pottery class on Tuesday", library=lib)
    s.store_memory("sell pottery at the market", library="side")

    found = s.search_nodes_across("pottery", libraries=[lib, "SIDE", lib])  # each once, as mounted
    assert found.libraries == (lib, "side") and found.total_count == 3
    assert sorted((h.library, h.entity.name) for h in found.hits) == sorted(
        [(lib, "kiln"), (lib, "glaze"), ("side", "wheel")])
    assert {found.hits[0].library, found.hits[1].library} == {lib, "side"}  # each library's best first
    alone = [h.entity.name for h in s.search_nodes("pottery", library=lib).hits]
    assert [h.entity.name for h in found.hits if h.library == lib] == alone  # its own order kept
    page = s.search_nodes_across("pottery", libraries=[lib, "side"], limit=2)
    assert len(page.hits) == 2 and page.is_truncated
    rest = s.search_nodes_across("pottery", libraries=[lib, "side"], limit=2, offset=2)
    assert [h.entity.name for h in page.hits + rest.hits] == [h.entity.name for h in found.hits]

    recalled = s.retrieve_memory_across("pottery", libraries=[lib, "side"], n_results=3)
    assert len(recalled.hits) == 3 and {h.library for h in recalled.hits} == {lib, "side"}
    everything = s.retrieve_memory_across("pottery", libraries=[lib, "side"], n_results=10)
    assert sorted((h.library, h.memory.content) for h in everything.hits) == sorted([
        (lib, "fires pottery at night"), (lib, "pottery glaze, blue"), (lib, "pottery class on Tuesday"),
        ("side", "throws pottery"), ("side", "sell pottery at the market")])

    kiln = s.retrieve_memory_across("pottery", libraries=[lib, "side"], entity="kiln")  # only in one library
    assert [(h.library, h.memory.content) for h in kiln.hits] == [(lib, "fires pottery at night")]
    with pytest.raises(NotFoundError, match="library 'nope'"):
        s.search_nodes_across("pottery", libraries=[lib, "nope"])


def test_an_entity_filter_across_libraries_tells_a_missing_entity_by_its_detail_and_names_an_ambiguous_alias(two):
    """A library without the entity filtered on has none of its memories (its NOT_FOUND says so
    in `details["missing_entity"]`, not only in words); an alias two entities of one library list
    is that library's error, named in the message and the details; a wrong argument names none."""
    s, lib = two
    s.add_entities([NewEntityDocument("Anna Smith", "person", aliases=("Boss",)),
                    NewEntityDocument("Bob", "person", aliases=("Boss",))], library="side")
    s.store_memory("likes tea", entity="Bob", library="side")
    with pytest.raises(NotFoundError) as alone:
        s.retrieve_memory("tea", entity="Bob", library=lib)
    assert alone.value.details == {"missing_entity": "Bob"}
    found = s.retrieve_memory_across("tea", libraries=[lib, "side"], entity="Bob")
    assert [(h.library, h.memory.content) for h in found.hits] == [("side", "likes tea")]
    with pytest.raises(NotFoundError, match="does not exist in any of the libraries"):
        s.retrieve_memory_across("tea", libraries=[lib, "side"], entity="Nobody")

    with pytest.raises(ValidationError) as ambiguous:
        s.retrieve_memory_across("tea", libraries=[lib, "side"], entity="Boss")
    assert ambiguous.value.message.startswith("library 'side': entity: 'Boss' is an alias of 2 entities")
    assert ambiguous.value.details["library"] == "side"
    assert sorted(ambiguous.value.details["candidates"]) == ["Anna Smith", "Bob"]
    with pytest.raises(ValidationError) as wrong:
        s.retrieve_memory_across("tea", libraries=[lib, "side"], after="not a date")
    assert "library" not in wrong.value.message and "library" not in wrong.value.details
    with pytest.raises(ValidationError, match="an empty list names no library"):
        s.search_nodes_across("tea", libraries=[])
