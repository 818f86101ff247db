"""A search across several libraries (`library: "*"` or a list on search_nodes and
retrieve_memory): each library is searched as alone, then the rankings are merged into one.

The merge is reciprocal rank fusion. A library's scores are not comparable with another's:
entity scores are BM25 over the best hit of that library, memory scores min-max scale each
signal over that library's candidates, and BM25's word weights come from each library's own
corpus, so a 0.9 in one library and a 0.9 in another say nothing about each other. A hit's rank
in its library is what is comparable, so a hit scores 1 / (RRF_K + rank) (the usual constant of
Cormack et al.); hits of equal rank in several libraries are ordered by their own score, then by
the order the libraries were named (mounted). The order within each library is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from memloci.core.errors import MemlociError, NotFoundError, ValidationError
from memloci.core.model import Relation, SearchHit
from memloci.rules.graph import MISSING_ENTITY

RRF_K = 60
EVERY_LIBRARY = "*"  # a search's `library` naming every mounted library
Hit = TypeVar("Hit")


@dataclass(frozen=True, slots=True)
class AcrossSearch:
    """One page of search_nodes over several libraries: every hit names its library
    (`SearchHit.library`), every relation too ((library, relation))."""

    hits: tuple[SearchHit, ...]
    relations: tuple[tuple[str, Relation], ...]
    is_truncated: bool
    total_count: int
    offset: int
    libraries: tuple[str, ...]


def fuse(ranked: Sequence[tuple[str, Sequence[Hit]]], score: Callable[[Hit], float]) -> list[tuple[str, Hit]]:
    """The hits of every library's ranking, best first, as (library, hit): by reciprocal rank,
    then the hit's own score, then the libraries' order."""
    fused = [(1.0 / (RRF_K + rank), score(hit), -order, library, hit)
             for order, (library, hits) in enumerate(ranked) for rank, hit in enumerate(hits, start=1)]
    fused.sort(key=lambda item: item[:3], reverse=True)
    return [(library, hit) for *_, library, hit in fused]


def naming(library: str, exc: MemlociError) -> None:
    """Name the library in `exc`, raised by the search of one of several libraries. A wrong
    argument is wrong in every library: its message stays as it is; an alias several entities of
    one library list (rules/graph.py `named`, its details hold the `candidates`) is that library's."""
    if isinstance(exc, ValidationError) and "candidates" not in exc.details:
        return
    if f"'{library}'" not in exc.message:
        exc.message = f"library '{library}': {exc.message}"
        exc.args = (exc.message,)
    exc.details = {**exc.details, "library": library}


def lacks_entity(exc: MemlociError, entity: str | None) -> bool:
    """Whether `exc` says only that its library has no entity `entity` (the memories' owner,
    rules/graph.py `memory_owner_missing`): that library has none of the memories filtered on."""
    return entity is not None and isinstance(exc, NotFoundError) and MISSING_ENTITY in exc.details


def asks_every(asked: str | Sequence[object]) -> bool:
    """Whether a search's `library` names every library: `"*"`, alone or in a list."""
    return asked == EVERY_LIBRARY or (not isinstance(asked, str) and EVERY_LIBRARY in asked)


def selection(asked: str | Sequence[str], mounted: Sequence[str]) -> list[str]:
    """The libraries a search of several names, the one rule for every layer: `"*"` (alone or in
    a list) is every mounted library; a list is those it names, each once and spelled as mounted
    (names match case-insensitively; one not mounted is kept, for the search to refuse); an
    empty list is refused."""
    if asks_every(asked):
        return list(mounted)
    if isinstance(asked, str):  # one name
        asked = [asked]
    if not asked:
        raise ValidationError("library: an empty list names no library",
                              hint=f'Name one or more libraries, or "{EVERY_LIBRARY}" for every library.')
    spelled = {m.casefold(): m for m in mounted}
    seen: dict[str, str] = {}
    for name in asked:
        seen.setdefault(name.casefold(), spelled.get(name.casefold(), name))
    return list(seen.values())
