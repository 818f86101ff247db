"""The conformance table: for every tool of every tool group, calls that must succeed and calls
that must fail, run in order against one server per scenario by each client under test.

Strings in arguments may name places made for the run: `{repo}` (a git repository without
project memory yet), `{notes}` (a Markdown library folder), `{tmp}`. They are filled in by
`fill()`. A step expects either "ok" (no client exception, isError false) or "error" (no
client exception, isError true, a JSON text naming an error code; `code` when given must
match). Steps depend on earlier ones (an entity made in one is read by the next), so a
scenario's steps always run in order on one connection.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

MAIN = {"library": "main"}  # the SQLite library
NOTES = {"library": "notes"}  # the Markdown library


@dataclass(frozen=True)
class Step:
    tool: str
    args: dict[str, Any]
    expect: str  # "ok" or "error"
    code: str | None = None  # the error code an "error" step must name, when it matters
    why: str = ""
    says: tuple[str, ...] = ()  # the reply's text must contain each (a field named, a hit found)
    never: tuple[str, ...] = ()  # ... and none of these (what a refused call carried, another set's fields)

    @property
    def label(self) -> str:
        return f"{self.tool}-{self.expect}" + (f"-{self.why}" if self.why else "")


@dataclass(frozen=True)
class Scenario:
    name: str
    tools: str  # the --tools value
    steps: tuple[Step, ...] = field(default_factory=tuple)
    clients: tuple[str, ...] | None = None  # which clients run it (None: every one)
    schema: str = "default"  # the --schema value: the rules of the libraries
    # "sqlite": `main` is a SQLite file and `notes` a Markdown folder. "postgres": both are
    # libraries (schemas) of a PostgreSQL database made for the run, whose URL is places["pg"].
    engine: str = "sqlite"

    def serve_args(self, places: dict[str, Path]) -> list[str]:
        if self.engine == "postgres":
            libraries = f"main:{places['pg']},notes:{places['pg']}"
        else:
            libraries = f"main:{places['tmp']}/main.db,notes:{places['notes']}"
        return ["serve", "--tools", self.tools, "--schema", self.schema, "--libraries", libraries]


def ok(tool: str, why: str = "", says: tuple[str, ...] = (), never: tuple[str, ...] = (), **args: Any) -> Step:
    return Step(tool, args, "ok", why=why, says=says, never=never)


def err(tool: str, code: str | None, why: str, says: tuple[str, ...] = (), never: tuple[str, ...] = (),
        **args: Any) -> Step:
    return Step(tool, args, "error", code, why, says, never)


def memory_hash(content: str) -> str:
    """The MCP Memory Service's content_hash: sha256 of the trimmed, single-spaced text."""
    return hashlib.sha256(" ".join(content.split()).encode("utf-8")).hexdigest()


REMEMBERED = "We chose PostgreSQL for the billing service"
FORGOTTEN = "A memory stored only to be deleted"


def graph_steps() -> list[Step]:
    """The official memory server's nine tools, in its argument shapes."""
    return [
        ok("create_entities", entities=[
            {"name": "Alice", "entityType": "person", "observations": ["Works at Acme"]},
            {"name": "Acme", "entityType": "company", "observations": ["Runs the payment platform"]},
            {"name": "Temp", "entityType": "note", "observations": ["to be deleted"]}], **MAIN),
        err("create_entities", "VALIDATION_ERROR", "unknown-field", ("observation", "observations"),
            entities=[{"name": "Bob", "entityType": "person", "observation": ["typo for observations"]}], **MAIN),
        err("create_entities", "VALIDATION_ERROR", "every-bad-item-named", ("entities[0]", "entities[2]"), entities=[
            {"name": "Bob", "entityType": "person", "observation": ["x"]},
            {"name": "Carol", "entityType": "person"},
            {"name": "Dave", "entityType": 7}], **MAIN),
        ok("create_relations", relations=[{"from": "Alice", "to": "Acme", "relationType": "works_at"}], **MAIN),
        err("create_relations", None, "missing-entity",
            relations=[{"from": "Alice", "to": "Nobody", "relationType": "knows"}], **MAIN),
        ok("add_observations", observations=[{"entityName": "Alice", "contents": ["Likes tea"]}], **MAIN),
        # extraction: @acme names an existing entity (a relation), PaymentGateway none (offered)
        ok("add_observations", "auto-relations", ("relations_added", "entities_suggested", "PaymentGateway"),
           observations=[{"entityName": "Alice", "contents": ["Pays through @acme; PaymentGateway is next"]}], **MAIN),
        err("add_observations", "NOT_FOUND", "missing-entity",
            observations=[{"entityName": "Ghost", "contents": ["x"]}], **MAIN),
        ok("read_graph", "refused-not-stored", never=("Bob", "Carol", "Dave", "Nobody", "Ghost"), **MAIN),
        err("read_graph", "VALIDATION_ERROR", "bad-type", ("limit",), limit="3", **MAIN),
        err("read_graph", None, "no-library-named"),  # two libraries mounted: which one?
        ok("search_nodes", "substring", ("Acme",), query="ment", **MAIN),  # inside "payment"
        ok("search_nodes", "empty-query", ("Alice", "Acme"), query="", **MAIN),  # lists the graph
        err("search_nodes", "VALIDATION_ERROR", "unknown-arg", ("limt", "limit"), query="Alice", limt=3, **MAIN),
        ok("open_nodes", names=["Alice", "Acme"], **MAIN),
        # a reply fitted to a token budget, and a compact one, still match the output schema
        ok("read_graph", "token-budget", ("truncated_to_tokens", "omitted"), max_tokens=100, **MAIN),
        ok("search_nodes", "compact", ("details",), query="", compact=True, **MAIN),
        ok("open_nodes", "token-budget", ("truncated_to_tokens",), names=["Alice", "Acme"], max_tokens=100, **MAIN),
        err("search_nodes", "VALIDATION_ERROR", "budget-too-small", ("max_tokens",), query="a", max_tokens=5, **MAIN),
        err("open_nodes", "VALIDATION_ERROR", "bad-type", names="Alice", **MAIN),
        ok("delete_observations", deletions=[{"entityName": "Alice", "observations": ["Likes tea"]}], **MAIN),
        err("delete_observations", "VALIDATION_ERROR", "bad-type",
            deletions=[{"entityName": "Alice", "observations": "Likes tea"}], **MAIN),
        ok("delete_relations", relations=[{"from": "Alice", "to": "Acme", "relationType": "works_at"}], **MAIN),
        err("delete_relations", "VALIDATION_ERROR", "missing-field", relations=[{"from": "Alice", "to": "Acme"}],
            **MAIN),
        ok("delete_entities", entityNames=["Temp"], **MAIN),
        err("delete_entities", "VALIDATION_ERROR", "bad-type", entityNames=[42], **MAIN),
    ]


def strict_steps() -> list[Step]:
    """The strict-validation server's tools, in its argument and reply shapes."""
    return [
        ok("create_entities", entities=[
            {"name": "alice", "entityType": "person", "observations": ["works at acme"]},
            {"name": "acme", "entityType": "organization"},
            {"name": "temp", "entityType": "concept"}], **MAIN),
        err("create_entities", "VALIDATION_ERROR", "missing-field", entities=[{"name": "bob"}], **MAIN),
        ok("get_entity", entity_name="alice", **MAIN),
        err("get_entity", "NOT_FOUND", "missing-entity", entity_name="ghost", **MAIN),
        ok("get_graph", **MAIN),
        err("get_graph", "VALIDATION_ERROR", "unknown-arg", limit=3, **MAIN),
        ok("add_observation", entity="alice", observation="likes tea", **MAIN),
        err("add_observation", "NOT_FOUND", "missing-entity", ("ghost",), ("entityName",), entity="ghost",
            observation="x", **MAIN),
        err("create_entities", "VALIDATION_ERROR", "strict-name-rule", ("Bad Name",),
            entities=[{"name": "Bad Name", "entityType": "person"}], **MAIN),
        ok("create_relation", from_entity="alice", to_entity="acme", relation_type="belongs-to", **MAIN),
        err("create_relation", None, "strict-relation-type", ("works_at",), ("relationType",),
            from_entity="alice", to_entity="acme", relation_type="works_at", **MAIN),
        err("create_relation", None, "missing-entity", ("ghost",), ("relationType", "entityName"),
            from_entity="alice", to_entity="ghost", relation_type="knows", **MAIN),
        err("create_relation", "VALIDATION_ERROR", "missing-arg", ("relation_type",), ("relationType",),
            from_entity="alice", to_entity="acme", **MAIN),
        ok("search_memory", query="alice", **MAIN),
        ok("search_memory", "compact", ("details",), query="alice", compact=True, max_tokens=200, **MAIN),
        err("search_memory", "VALIDATION_ERROR", "bad-type", query=7, **MAIN),
        ok("delete_relation", from_entity="alice", to_entity="acme", **MAIN),
        err("delete_relation", "NOT_FOUND", "missing-relation", from_entity="alice", to_entity="acme", **MAIN),
        ok("delete_entities", names=["temp"], **MAIN),
        err("delete_entities", "NOT_FOUND", "missing-entity", names=["ghost"], **MAIN),
        err("flush_memory", "VALIDATION_ERROR", "unknown-arg", force=True, **MAIN),
        ok("flush_memory", **MAIN),
    ]


def memory_steps() -> list[Step]:
    """The MCP Memory Service's tools (free memories with tags)."""
    return [
        ok("store_memory", content=REMEMBERED, tags=["billing", "decision"], memory_type="decision", **MAIN),
        ok("store_memory", "to-delete", content=FORGOTTEN, importance="LOW", **MAIN),
        ok("store_memory", "client-hostname", content="Stored from a laptop", client_hostname="laptop", **MAIN),
        err("store_memory", "VALIDATION_ERROR", "unknown-arg", ("tag", "tags"), content="tagged wrongly", tag=["x"],
            **MAIN),
        err("store_memory", "VALIDATION_ERROR", "bad-type", content=["not", "a", "string"], **MAIN),
        ok("retrieve_memory", query="PostgreSQL billing", **MAIN),
        # nothing matches within the range: the range's newest memories, and a note saying so
        ok("retrieve_memory", "time-range-newest", ("\"note\"", "in range, newest"), query="zzqx vvbn", time="today",
           **MAIN),
        err("retrieve_memory", "VALIDATION_ERROR", "bad-type", ("n_results",), query="billing", n_results=True,
            **MAIN),
        err("retrieve_memory", "VALIDATION_ERROR", "out-of-range", ("min_similarity",), query="billing",
            min_similarity=5, **MAIN),
        err("retrieve_memory", "VALIDATION_ERROR", "out-of-range", ("min_similarity",), query="billing",
            min_similarity=-1, **MAIN),
        ok("search_by_tag", tags=["billing"], **MAIN),
        # labels compare case-insensitively; a memory's type is a word its queries find
        ok("search_by_tag", "any-case", (REMEMBERED,), tags=["Billing"], **MAIN),
        ok("retrieve_memory", "type-as-word", (REMEMBERED,), query="decision", memory_type="DECISION", **MAIN),
        err("search_by_tag", "VALIDATION_ERROR", "bad-type", tags="billing", **MAIN),
        ok("update_memory", content_hash=memory_hash(REMEMBERED), tags=["billing", "decision", "db"], **MAIN),
        err("update_memory", "NOT_FOUND", "missing-memory", content_hash="0" * 64, tags=["x"], **MAIN),
        ok("retrieve_memory", "token-budget", ("truncated_to_tokens",), query="PostgreSQL billing", max_tokens=100,
           **MAIN),
        ok("search_by_tag", "compact", ("details",), tags=["billing"], compact=True, max_tokens=100, **MAIN),
        ok("list_memories", "compact", ("details",), compact=True, **MAIN),
        ok("list_memories", "by-hash", (REMEMBERED, "missing"), content_hashes=[memory_hash(REMEMBERED), "0" * 64],
           **MAIN),
        err("list_memories", "VALIDATION_ERROR", "hashes-and-filters", ("content_hashes",),
            content_hashes=[memory_hash(REMEMBERED)], tags=["billing"], **MAIN),
        ok("list_memories", "refused-not-stored", ("Stored from a laptop",), ("tagged wrongly",), **MAIN),
        err("list_memories", "VALIDATION_ERROR", "bad-type", page="2", **MAIN),
        # list_memories reads `time` as retrieve_memory does; an empty `time` names no time
        ok("list_memories", "time", ("Stored from a laptop",), time="today", **MAIN),
        # "" is "not given" (what a strict-mode model sends); blank text names no time
        err("retrieve_memory", "VALIDATION_ERROR", "blank-time", ("time",), query="billing", time="  ", **MAIN),
        # a filter is never emptied by words that match nothing: its newest, with a note
        ok("retrieve_memory", "filter-newest", ("\"note\"", REMEMBERED), query="zzqx vvbn", tags=["decision"], **MAIN),
        ok("delete_memory", content_hash=memory_hash(FORGOTTEN), **MAIN),
        # A hash that matches nothing is {success: false} without isError, as the MCP Memory Service answers.
        err("delete_memory", "VALIDATION_ERROR", "bad-type", content_hash=12345, **MAIN),
        ok("check_database_health", **MAIN),
        err("check_database_health", "NOT_FOUND", "missing-library", library="nowhere"),
    ]


def document_steps(kind: str = "component", part_of: str = "part_of") -> list[Step]:
    """The Markdown-library tools (and list_libraries, of the same group), on the Markdown library `notes`."""
    body = "## Overview\nA small web service.\n\n## Notes\nFirst note.\n"
    return [
        ok("list_libraries"),
        err("list_libraries", "VALIDATION_ERROR", "unknown-arg", verbose=True),
        ok("add_entities", entities=[
            {"name": "webapp", "entityType": "project", "content": body},
            {"name": "api", "entityType": kind, "content": "## Notes\nREST endpoints.\n",
             "relations": [{"relationType": part_of, "to": "webapp"}]},
            {"name": "old-api", "entityType": kind, "content": "## Notes\nThe first API.\n"}], **NOTES),
        err("add_entities", "VALIDATION_ERROR", "bad-type", entities=[{"name": "x", "aliases": "not-a-list"}], **NOTES),
        ok("list_entities", entity_glob="*api*", **NOTES),
        err("list_entities", "VALIDATION_ERROR", "bad-type", entity_glob=["*"], **NOTES),
        ok("read_entities", entity_names=["webapp"], **NOTES),
        err("read_entities", "NOT_FOUND", "missing-entity", entity_names=["ghost"], **NOTES),
        ok("get_entities_toc", entity_names=["webapp"], **NOTES),
        err("get_entities_toc", "NOT_FOUND", "missing-entity", entity_names=["ghost"], **NOTES),
        ok("read_entities_sections", entity_names=["webapp"], section_globs=["Over*"], **NOTES),
        err("read_entities_sections", "VALIDATION_ERROR", "missing-arg", entity_names=["webapp"], **NOTES),
        ok("add_entity_content", entity_name="webapp", in_section="Notes", new_content="Second note.", **NOTES),
        err("add_entity_content", "NOT_FOUND", "missing-entity", entity_name="ghost", in_section="Notes",
            new_content="x", **NOTES),
        ok("replace_entity_content", entity_name="webapp", old_content="Second note.",
           new_content="Second note, revised.", **NOTES),
        err("replace_entity_content", None, "text-not-found", entity_name="webapp", old_content="no such text",
            new_content="x", **NOTES),
        ok("delete_entity_content", entity_name="webapp", content_to_delete="Second note, revised.", **NOTES),
        err("delete_entity_content", None, "text-not-found", entity_name="webapp", content_to_delete="no such text",
            **NOTES),
        ok("replace_entity_section", entity_name="webapp", old_heading="Overview", new_heading="Summary",
           new_body_content="A small web service with an API.", **NOTES),
        err("replace_entity_section", None, "missing-section", entity_name="webapp", old_heading="No Such Heading",
            new_heading="x", new_body_content="x", **NOTES),
        ok("find_relations", to_entity="webapp", **NOTES),
        err("find_relations", "VALIDATION_ERROR", "unknown-arg", to="webapp", **NOTES),
        ok("rename_entity", old_name="api", new_name="rest-api", **NOTES),
        err("rename_entity", "NOT_FOUND", "missing-entity", old_name="ghost", new_name="spirit", **NOTES),
        ok("merge_entities", source_names=["old-api"], target_name="rest-api", **NOTES),
        err("merge_entities", "NOT_FOUND", "missing-entity", source_names=["ghost"], target_name="rest-api", **NOTES),
        ok("add_manual_section", toc="Conventions", new_content="Names are lowercase.", **NOTES),
        err("add_manual_section", "VALIDATION_ERROR", "missing-arg", toc="Conventions", **NOTES),
        ok("read_manual", **NOTES),
        err("read_manual", "NOT_FOUND", "missing-library", library="nowhere"),
        ok("update_manual_section", toc="Conventions", old_content="Names are lowercase.",
           new_content="Names are lowercase with hyphens.", **NOTES),
        err("update_manual_section", None, "text-not-found", toc="Conventions", old_content="no such text",
            new_content="x", **NOTES),
        ok("delete_manual_section", toc="Conventions", deleting_content="Names are lowercase with hyphens.", **NOTES),
        err("delete_manual_section", None, "missing-section", toc="No Such Section", deleting_content="x", **NOTES),
    ]


def project_steps(create: str, kind: str = "component") -> list[Step]:
    """Project memory in a real git repository: the AWAITING_CONFIRMATION handshake, the confirm
    step (through `create`, the entity-making tool of the exposed set), then the project tools."""
    repo = {"project_path": "{repo}"}
    entity = {"name": "auth", "entityType": kind, "observations": ["uses JWT"]}
    return [
        err(create, "AWAITING_CONFIRMATION", "unconfirmed-root", entities=[entity], **repo),
        err("update_context", "AWAITING_CONFIRMATION", "unconfirmed-root", active_task="x", **repo),
        ok(create, "confirm-root", entities=[entity], confirm_new_project_root="{repo}", **repo),
        ok("update_context", active_task="Rotate JWT keys", status="IN_PROGRESS", next_steps=["add key id"],
           last_commit="abc123", **repo),
        err("update_context", "VALIDATION_ERROR", "bad-enum", status="DONE", **repo),
        ok("get_graph_summary", **repo),
        err("get_graph_summary", "VALIDATION_ERROR", "bad-type", limit="10", **repo),
        ok("export_markdown", **repo),
        err("export_markdown", None, "path-escapes-root", output_path="../outside.md", **repo),
        err("get_graph_summary", None, "relative-project-path", project_path="relative/path"),
    ]


def n2n_steps() -> list[Step]:
    """n2n-memory's twelve tools in its argument names (`--tools n2n`), in a real git repository:
    the handshake (its `detectedRoot` key beside our error), then each tool's success and refusal."""
    repo = {"projectPath": "{repo}"}
    auth = {"name": "auth", "entityType": "module", "observations": ["uses JWT"]}
    api = {"name": "api", "entityType": "module", "observations": ["REST"]}
    uses = {"from": "api", "to": "auth", "relationType": "uses"}
    return [
        err("n2n_read_graph", "AWAITING_CONFIRMATION", "unconfirmed-root", says=("detectedRoot", "confirmNewProjectRoot"),
            never=("confirm_new_project_root",), **repo),
        ok("n2n_add_entities", "confirm-root", says=("success", "_protocol"), entities=[auth, api],
           confirmNewProjectRoot="{repo}", **repo),
        err("n2n_add_entities", "VALIDATION_ERROR", "bad-type", says=("entities[0].entityType",),
            entities=[{"name": "x", "entityType": 3}], **repo),
        ok("n2n_add_observations", "missing-entity-skipped", says=("ghost",),
           observations=[{"entityName": "auth", "contents": ["keys rotate daily"]},
                         {"entityName": "ghost", "contents": ["x"]}], **repo),
        err("n2n_add_observations", "VALIDATION_ERROR", "unknown-field", says=("entityName",),
            observations=[{"entity_name": "auth", "contents": ["x"]}], **repo),
        ok("n2n_create_relations", relations=[uses], **repo),
        err("n2n_create_relations", "INVALID_RELATION", "missing-endpoint",
            relations=[{"from": "api", "to": "nowhere", "relationType": "uses"}], **repo),
        ok("n2n_read_graph", "summary-page", says=("totalEntityCount", "isTruncated", "_protocol"), summaryMode=True,
           limit=1, **repo),
        err("n2n_read_graph", "VALIDATION_ERROR", "bad-type", says=("limit",), limit="10", **repo),
        ok("n2n_get_graph_summary", says=("relationCount",), **repo),
        err("n2n_get_graph_summary", "VALIDATION_ERROR", "relative-project-path", says=("projectPath",),
            never=("project_path",), projectPath="relative/path"),
        ok("n2n_search", says=("totalResults", "auth"), query="JWT", **repo),
        err("n2n_search", "VALIDATION_ERROR", "out-of-range", says=("minScore",), query="JWT", minScore=2, **repo),
        ok("n2n_open_nodes", names=["auth"], **repo),
        err("n2n_open_nodes", "VALIDATION_ERROR", "missing-names", says=("names",), **repo),
        ok("n2n_update_context", activeTask="Rotate JWT keys", status="IN_PROGRESS", nextSteps=["add key id"],
           lastCommit="abc123", **repo),
        err("n2n_update_context", "VALIDATION_ERROR", "bad-enum", status="DONE", **repo),
        ok("n2n_export_markdown", outputPath="KNOWLEDGE_GRAPH.md", **repo),
        err("n2n_export_markdown", None, "path-escapes-root", says=("outputPath",), outputPath="../outside.md", **repo),
        ok("n2n_delete_observations", deletions=[{"entityName": "auth", "observations": ["keys rotate daily"]}], **repo),
        err("n2n_delete_observations", "VALIDATION_ERROR", "bad-type", deletions="auth", **repo),
        ok("n2n_delete_relations", relations=[uses], **repo),
        err("n2n_delete_relations", "VALIDATION_ERROR", "missing-type", relations=[{"from": "api", "to": "auth"}], **repo),
        ok("n2n_delete_entities", entityNames=["api"], **repo),
        err("n2n_delete_entities", "VALIDATION_ERROR", "bad-type", entityNames="api", **repo),
    ]


def maintenance_steps() -> list[Step]:
    """The maintenance group: the MCP Memory Service's maintenance tools and the lifecycle's own,
    on the SQLite library and the Markdown one."""
    steps = []
    for where in (MAIN, NOTES):
        steps += [
            ok("store_memory", "dup-a", content="Backups run at 02:00 UTC.", tags=["ops", "scratch"], **where),
            ok("store_memory", "dup-b", content="backups run at 02:00 utc", tags=["cron"], **where),
            ok("list_tags", says=('"scratch"',), **where),
            err("list_tags", "VALIDATION_ERROR", "unknown-arg", ("library",), libary="main"),
            ok("knowledge_analysis", says=('"exact_duplicates": 1',), **where),
            err("knowledge_analysis", "VALIDATION_ERROR", "bad-time", ("time",), time_range="whenever", **where),
            ok("knowledge_export", says=("Backups run",), format="text", filters='{"tags": ["ops"]}', **where),
            err("knowledge_export", "VALIDATION_ERROR", "bad-format", ("format",), format="yaml", **where),
            err("knowledge_export", "VALIDATION_ERROR", "bad-filter", ("filters",), filters='{"colour": 1}', **where),
            ok("cleanup_duplicates", "preview", ('"dry_run": true', '"deleted": 1'), dry_run=True, **where),
            err("cleanup_duplicates", "VALIDATION_ERROR", "bad-type", ("similar",), similar="yes", **where),
            ok("list_previews", says=("cleanup_duplicates",), **where),
            err("list_previews", "VALIDATION_ERROR", "bad-type", ("pending",), pending="maybe", **where),
            ok("memory_cleanup", says=('"preview_id"',), older_than="1 year", **where),
            err("memory_cleanup", "VALIDATION_ERROR", "bad-age", ("older_than",), older_than="soon", **where),
            ok("update_memory_metadata", says=('"changed": 1',), content_hash=memory_hash("Backups run at 02:00 UTC."),
               updates='{"memory_type": "fact"}', **where),
            err("update_memory_metadata", "VALIDATION_ERROR", "bad-key", ("updates",),
                content_hash=memory_hash("Backups run at 02:00 UTC."), updates='{"colour": "red"}', **where),
            err("update_memory_metadata", "NOT_FOUND", "missing", content_hash="0" * 64, updates='{"tags": []}', **where),
            # the preview named the memory as it was before the metadata changed: refused, naming it
            err("execute_preview", "CONFLICT", "stale", ("changed since the preview",), preview_id=1, **where),
            ok("delete_by_tag", "dry", ('"deleted": 1',), tags="scratch", dry_run=True, **where),
            ok("execute_preview", "applies", ('"deleted": 1', "change #"), preview_id=3, **where),
            ok("unarchive_memories", "not-archived", ('"changed": 0',),
               content_hashes=[memory_hash("backups run at 02:00 utc")], **where),
            err("delete_by_tag", "VALIDATION_ERROR", "bad-type", tags=5, **where),
            ok("delete_before_date", says=("nothing to change",), before_date="2000-01-01", **where),
            err("delete_before_date", "VALIDATION_ERROR", "bad-date", ("before_date",), before_date="someday", **where),
            ok("delete_by_timeframe", says=('"deleted": 1',), start_date="2000-01-01", tag="cron", **where),
            err("delete_by_timeframe", "VALIDATION_ERROR", "bad-date", ("start_date",), start_date="May", **where),
            # links to entities that no longer exist: a listing by default (memories hold none here)
            ok("garbage_collect_relations", "preview", ('"dry_run": true', "nothing to change"), **where),
            ok("garbage_collect_relations", "execute", ('"dry_run": false', "nothing to change"), dry_run=False, **where),
            err("garbage_collect_relations", "VALIDATION_ERROR", "bad-type", ("dry_run",), dry_run="maybe", **where),
            err("unarchive_memories", "NOT_FOUND", "missing", content_hashes=["0" * 64], **where),
            ok("archive_memories", "preview", ('"dry_run": true', "nothing to change"), **where),
            ok("consolidate", "preview", ('"dry_run": true', '"report"'), time_horizon="monthly", **where),
            err("consolidate", "VALIDATION_ERROR", "bad-horizon", ("time_horizon",), time_horizon="hourly", **where),
            err("archive_memories", "VALIDATION_ERROR", "bad-type", ("dry_run",), dry_run="soon", **where),
            err("execute_preview", "NOT_FOUND", "missing", preview_id=999, **where),
            # supersession: the older memory stays, out of search unless asked
            ok("store_memory", "superseded", content="The staging port is 5432.", **where),
            ok("store_memory", "supersedes", content="The staging port is 6543.",
               supersedes=memory_hash("The staging port is 5432."), **where),
            ok("retrieve_memory", "no-superseded", ("6543",), ("5432",), query="staging port", **where),
            ok("retrieve_memory", "with-superseded", ('"superseded_by"', "5432"), query="staging port",
               include_superseded=True, **where),
            err("store_memory", "NOT_FOUND", "supersedes-missing", ("supersedes",), content="x",
                supersedes="0" * 64, **where),
        ]
    steps.append(err("unarchive_memories", "VALIDATION_ERROR", "empty", ("content_hashes",), content_hashes=[],
                     **MAIN))
    steps.append(ok("garbage_collect_relations", "library-name", ('"library": "notes"',), library_name="notes"))
    return steps


def workspace_steps() -> list[Step]:
    """The workspace group on `{rules}`, a project whose CLAUDE.md and Cursor rule say one thing
    alike and whose CLAUDE.md and AGENTS.md disagree (test_conformance.make_places)."""
    rules = {"project": "{rules}"}
    sync = {"from_agents": "windsurf", "to_agents": "gemini", **rules}
    return [
        ok("list_rules", says=("Package manager", '"conflicts"', "Generated client"), **rules),
        err("list_rules", "VALIDATION_ERROR", "not-a-folder", ("is not a folder",), project="{tmp}/nowhere"),
        ok("list_rules", "one-agent", ("AGENTS.md",), ("style.md",), agents="codex", **rules),
        err("list_rules", "VALIDATION_ERROR", "unknown-agent", ("vim",), agents="vim", **rules),
        ok("preview_rules_sync", says=('"dry_run": true', "+## Style"), **sync),
        err("preview_rules_sync", "VALIDATION_ERROR", "unknown-agent", ("vim",), from_agents="vim", to_agents="gemini",
            **rules),
        ok("sync_rules", says=('"dry_run": false', "GEMINI.md"), **sync),
        err("sync_rules", "VALIDATION_ERROR", "missing-to", ("to_agents",), from_agents="windsurf", **rules),
        err("sync_rules", "VALIDATION_ERROR", "unknown-arg", ("dry_run", "unknown argument"), dry_run=True, **sync),
        err("sync_rules", "VALIDATION_ERROR", "list-for-text", ("from_agents",), from_agents=["windsurf"],
            to_agents="gemini", **rules),
        err("list_rules", "VALIDATION_ERROR", "number-for-project", ("project",), project=5),
        err("preview_rules_sync", "VALIDATION_ERROR", "unknown-agent-named", ("to_agents", "claude"),
            from_agents="windsurf", to_agents="claude", **rules),
        ok("remember_rules", says=('"already_stored": []',), library="main", **rules),
        ok("remember_rules", "again", ('"stored": []',), library="main", **rules),
        err("remember_rules", "VALIDATION_ERROR", "not-a-folder", ("is not a folder",), project="{tmp}/nowhere",
            library="main"),
        ok("retrieve_memory", "a-rule", ("Use pnpm",), query="package manager pnpm", memory_type="rule", library="main"),
    ]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("graph", "graph,memory,documents,project",
             tuple(graph_steps() + memory_steps() + document_steps() + project_steps("create_entities"))),
    # The strict-validation server's tool set with its rules (names, types, relation types).
    Scenario("strict", "strict,memory,documents,project",
             tuple(strict_steps() + memory_steps() + document_steps("tool", "belongs-to")
                   + project_steps("create_entities", "tool")), schema="strict"),
    # One group alone, as a drop-in for the server it stands in for: hints and instructions must
    # then name only that group's tools.
    Scenario("official", "graph", tuple(graph_steps()), clients=("typescript",)),
    Scenario("memory", "memory", tuple(memory_steps()), clients=("typescript",)),
    Scenario("n2n", "n2n", tuple(n2n_steps())),  # the n2n-memory drop-in, by every client
    Scenario("maintenance", "memory,maintenance", tuple(memory_steps() + maintenance_steps())),
    Scenario("workspace", "memory,workspace", tuple(memory_steps() + workspace_steps())),
)
# The same tables with `main` and `notes` in PostgreSQL. (n2n keeps its memory in the project's
# own SQLite file whatever the libraries are, so it has no PostgreSQL twin.)
SCENARIOS += tuple(replace(s, name=f"pg-{s.name}", engine="postgres") for s in SCENARIOS if s.name != "n2n")

# How the postgres engine refused what it did not store yet (notes with bodies, the manual,
# rename and merge): it stores them all now, so no reply on a pg- scenario may say this.
PG_REFUSAL = "(postgres) does not support"


def fill(value: Any, places: dict[str, Path]) -> Any:
    """Arguments with `{repo}`, `{notes}`, `{rules}` and `{tmp}` replaced by the run's paths."""
    if isinstance(value, str):
        for key, path in places.items():
            value = value.replace("{" + key + "}", str(path))
        return value
    if isinstance(value, list):
        return [fill(v, places) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, places) for k, v in value.items()}
    return value
