"""Entity names as every tool takes them: one resolution path (rules/graph.py `named`).

A tool that takes an entity's name (graph writes, documents, a memory's `entity`, the
`entity` filter of retrieval) passes it through here first: the entity's own name wins, an
alias reaches the one entity listing it, and an alias several entities list is refused
naming them. What the store then sees is always a stored name, so a write through an alias
changes that entity (its file in a Markdown library) and never makes one called like the alias.
The names are read just before the write's transaction: should another writer rename that
entity in between, the write finds no entity of the name read and says so (NOT_FOUND, or
nothing to do where a tool ignores missing names; create_entities makes an entity of that name),
as it would for a name typed before a rename.
"""

from __future__ import annotations

from collections.abc import Sequence

from memloci.rules.graph import named
from memloci.store.protocols import Store


def entity_names(store: Store, names: Sequence[str], field: str | Sequence[str]) -> list[str]:
    """`names`, each as the stored name of the entity it names (kept as given when it names none);
    `field`: the field they came in, or one field per name (`observations[2].entityName`)."""
    names = list(names)
    fields = [f"{field}[{i}]" for i in range(len(names))] if isinstance(field, str) else list(field)
    return named(names, store.entity_names(names), fields) if names else names


def entity_name(store: Store, name: str, field: str) -> str:
    """One name, as `entity_names` gives it."""
    return entity_names(store, [name], [field])[0]
