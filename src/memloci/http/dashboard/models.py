"""The dashboard API's query strings and request bodies, checked by pydantic (extra="forbid": an
unknown parameter or field is refused, named). openapi.py documents them from these models."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Library = Field(default=None, description="The library; optional when one library is mounted")


class LibraryQuery(Strict):
    library: str | None = Library


class SignIn(Strict):
    token: str = Field(min_length=1, max_length=4096, description="A token of `memloci token create`")


class SearchQuery(Strict):
    q: str = Field(max_length=2000, description="Words to look for")
    kind: Literal["all", "memories", "entities", "notes"] = "all"
    limit: int = Field(default=10, ge=1, le=100)
    library: str | None = Field(default=None, description="A library, or `*` for every library the caller reads")


class MemoriesQuery(Strict):
    library: str | None = Library
    tag: list[str] = Field(default_factory=list, description="Only memories with this tag (repeatable)")
    all_tags: bool = Field(default=False, description="With several tags: every one (default: any)")
    type: str | None = Field(default=None, max_length=64, description="Only memories of this type")
    after: str | None = Field(default=None, description="ISO date: created at or after")
    before: str | None = Field(default=None, description="ISO date: created before")
    time: str | None = Field(default=None, max_length=200, description='A time phrase: "last week", "2026-10"')
    zone: Literal["active", "stale", "archive_candidate"] | None = None
    superseded: bool = Field(default=False, description="Include memories another one replaced")
    archived: bool = Field(default=False, description="Include archived memories")
    sort: Literal["newest", "oldest", "importance", "uses"] = "newest"
    page: int = Field(default=1, ge=1, le=1_000_000)
    page_size: int = Field(default=25, ge=1, le=200)


class NewMemory(Strict):
    library: str | None = Library
    content: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    memory_type: str = "note"
    importance: str | None = None
    metadata: dict[str, Any] | None = None


class MemoryChange(Strict):
    library: str | None = Library
    content: str | None = None
    tags: list[str] | None = None
    importance: str | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="Merged into the metadata")


class EntitiesQuery(Strict):
    library: str | None = Library
    q: str | None = Field(default=None, max_length=2000, description="Words, as search_nodes takes them")
    limit: int = Field(default=50, ge=1, le=1000)


class Observations(Strict):
    library: str | None = Library
    contents: list[str] = Field(min_length=1)


class ObservationFix(Strict):
    library: str | None = Library
    old: str = Field(min_length=1)
    new: str = Field(min_length=1)


class GraphQuery(Strict):
    library: str | None = Library
    name: str = Field(min_length=1)
    depth: int = Field(default=1, ge=1, le=3)
    limit: int = Field(default=200, ge=1, le=2000)


class HistoryQuery(Strict):
    library: str | None = Library
    limit: int = Field(default=50, ge=1, le=1000)


class LibraryBody(Strict):
    library: str | None = Library


Operation = Literal["cleanup_duplicates", "memory_cleanup", "archive", "delete_by_tag", "delete_by_time", "consolidate"]


class NewPreview(Strict):
    library: str | None = Library
    operation: Operation
    arguments: dict[str, Any] = Field(default_factory=dict, description="As the maintenance tool of that name takes")


# -- each operation's arguments, as its maintenance tool takes them -------------------------

class CleanupArgs(Strict):
    similar: bool = False


class MemoryCleanupArgs(Strict):
    older_than: str | None = Field(default=None, description='"6 months", "1 year"')
    similarity_threshold: float | None = Field(default=None, ge=0.5, le=1.0)


class NoArgs(Strict):
    pass


class DeleteByTagArgs(Strict):
    tags: list[str] = Field(min_length=1)
    match_all: bool = False


class DeleteByTimeArgs(Strict):
    start_date: str | None = Field(default=None, description="YYYY-MM-DD (inclusive)")
    end_date: str | None = Field(default=None, description="YYYY-MM-DD (exclusive)")
    tag: str | None = None


class ConsolidateArgs(Strict):
    time_horizon: Literal["daily", "weekly", "monthly", "quarterly", "yearly"] = "weekly"


OPERATION_ARGS: dict[str, type[Strict]] = {
    "cleanup_duplicates": CleanupArgs, "memory_cleanup": MemoryCleanupArgs, "archive": NoArgs,
    "delete_by_tag": DeleteByTagArgs, "delete_by_time": DeleteByTimeArgs, "consolidate": ConsolidateArgs}
