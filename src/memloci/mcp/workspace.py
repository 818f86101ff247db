"""The workspace tool group (`--tools ...,workspace`; not in the default surface): the rules,
workflows and skills of the coding agents of a project, their duplicates and conflicts, a sync's
preview and its execution, and each rule stored as a memory.

Each tool reads (and sync_rules writes) files in a folder on the server's own disk, so over
HTTP every one of them needs `*:admin` (mcp/access.py: PROJECT_ONLY_TOOLS); sync_rules is an
admin tool besides."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, Field

from memloci.mcp.arguments import Library, LibraryName, selected, tool_annotations
from memloci.mcp.replies import reply
from memloci.service import workspace as ws
from memloci.service.facade import MemoryService

TOOLS = ("list_rules", "preview_rules_sync", "sync_rules", "remember_rules")
TOOL_FLAGS = ("from_agents", "to_agents")  # named in an error about an unknown agent

Project = Annotated[str | None, Field(description="The project's root folder on the server (default: the "
                                                  "server's working folder)")]
FromAgents = Annotated[str, Field(description="Agent(s) whose rules are copied, comma-separated: claude-code, codex, "
                                              "cursor, windsurf, copilot, gemini")]
ToAgents = Annotated[str, Field(description="Agents that get them, comma-separated")]


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


def register(server: Any, service: MemoryService) -> None:
    def state() -> Path:  # the ledger lives in memloci's data folder, never in the project
        return service.libraries.settings.home

    def list_rules(project: Project = None, agents: Annotated[str | None, Field(
            description="Only these agents' rules, comma-separated (default: every agent)")] = None,
                   ) -> Annotated[CallToolResult, Out]:
        return reply(ws.list_rules(project, agents))

    def preview_rules_sync(from_agents: FromAgents, to_agents: ToAgents,
                           project: Project = None) -> Annotated[CallToolResult, Out]:
        return reply(ws.preview_sync(project, from_agents, to_agents, state(), TOOL_FLAGS))

    def sync_rules(from_agents: FromAgents, to_agents: ToAgents,
                   project: Project = None) -> Annotated[CallToolResult, Out]:
        return reply(ws.run_sync(project, from_agents, to_agents, state(), TOOL_FLAGS))

    def remember_rules(project: Project = None, library: Library = None,
                       library_name: LibraryName = None) -> Annotated[CallToolResult, Out]:
        return reply(ws.remember_rules(service, project, selected(library, library_name)))

    server.add_tool(list_rules, title="List Rules",
                    annotations=tool_annotations("List Rules", read_only=True, idempotent=True),
                    description="Every coding agent's rules and skills in the project (CLAUDE.md, AGENTS.md, "
                                ".cursor/rules, .windsurf, .github, GEMINI.md ...): scope, globs, hash; "
                                "duplicates and conflicts.")
    server.add_tool(preview_rules_sync, title="Preview Rules Sync",
                    annotations=tool_annotations("Preview Rules Sync", read_only=True, idempotent=True),
                    description="The diff of copying from_agents' rules and workflows into to_agents' own "
                                "formats; changes nothing.")
    server.add_tool(sync_rules, title="Sync Rules",
                    annotations=tool_annotations("Sync Rules", idempotent=True),
                    description="Copy from_agents' rules and workflows into to_agents' own formats (only "
                                "memloci's block of a person's file; `memloci rules unsync` takes it back).")
    server.add_tool(remember_rules, title="Remember Rules",
                    annotations=tool_annotations("Remember Rules", idempotent=True),
                    description="Store each rule of the project as a memory (type rule), so retrieve_memory "
                                "finds it; a rule already stored is not stored again, and a rule whose text "
                                "changed supersedes its earlier memory.")
