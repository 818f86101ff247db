"""MCP prompts for the moments an agent needs its memory (`prompts/list`, `prompts/get`):

- `session_start`: the hot context and the most relevant memories and entities of a library or
  project, within a token budget (`token_budget`, default DEFAULT_BUDGET tokens, counted as
  CHARS_PER_TOKEN characters per token: the usual rule of thumb for English text and code in
  GPT and Claude tokenizers; it errs high for CJK text, where a character is nearer one token);
- `before_compaction`: what to save before the conversation is compacted, and with which tools;
- `task_end`: record the hot context with update_context (and what was learned).

Prompt arguments are strings (the protocol says so). They are checked strictly: an unknown
argument is refused with the closest valid name, `token_budget` must be a whole number in
range, and a bad library or project is refused, each as JSON-RPC -32602 naming the argument.
A prompt names only tools this server exposes, and is listed only when the tools it asks
the model to call are exposed.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import Any, cast

import anyio
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from memloci.app.projects import ProjectRef
from memloci.core.errors import AwaitingConfirmationError, MemlociError, NotFoundError, ValidationError
from memloci.service.facade import MemoryService

DEFAULT_BUDGET = 2_000
BUDGET_MIN, BUDGET_MAX = 200, 32_000
CHARS_PER_TOKEN = 4
ITEM_CHARS = 600  # one memory or entity at most, so one long note cannot take the whole budget
QUERY_MAX = 1_000
MEMORY_CANDIDATES = 20
ENTITY_CANDIDATES = 10

WRITE_TOOLS = ("store_memory", "add_observations", "create_entities", "add_observation", "n2n_add_observations")


def tokens(text: str) -> int:
    """The approximate token count of `text` (CHARS_PER_TOKEN characters a token, rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


class StrictPrompt(Prompt):
    """A prompt whose arguments are checked before it renders, and whose failures reach the
    client as JSON-RPC errors with our code and hint (never the SDK's generic wrapper)."""

    n2n: bool = False  # --tools n2n: advice names n2n_ tools and their camelCase arguments

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> list[Any]:
        given = dict(arguments or {})
        accepted = [a.name for a in self.arguments or []]
        for name, value in given.items():
            if name not in accepted:
                close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.5)
                raise MCPError(INVALID_PARAMS, f"prompt {self.name}: unknown argument '{name}'"
                               + (f"; did you mean '{close[0]}'?" if close else "")
                               + f" Accepted: {', '.join(accepted) or '(none)'}.")
            if not isinstance(value, str):
                raise MCPError(INVALID_PARAMS, f"prompt {self.name}: argument '{name}' must be a string "
                                               f"(prompt arguments are text), got {type(value).__name__}")
        try:
            text = await anyio.to_thread.run_sync(functools.partial(self.fn, **given))
        except AwaitingConfirmationError as exc:
            # A prompt takes no confirmation argument (it never creates memory): the advice is
            # to create the project's memory through a tool first, then ask again.
            root = exc.details.get("detected_root")
            how = (f'n2n_update_context with projectPath and confirmNewProjectRoot="{root}"' if self.n2n else
                   f'a project tool (update_context or store_memory) with project_path and '
                   f'confirm_new_project_root="{root}"')
            raise MCPError(INVALID_PARAMS, f"prompt {self.name}: {exc.code}: {exc.message} (a prompt never "
                                           f"creates a project's memory: call {how} first, then ask for "
                                           f"this prompt again)", {"code": exc.code}) from exc
        except MemlociError as exc:
            message = f"{exc.code}: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
            bad_input = isinstance(exc, (ValidationError, NotFoundError, AwaitingConfirmationError))
            raise MCPError(INVALID_PARAMS if bad_input else INTERNAL_ERROR, f"prompt {self.name}: {message}",
                           {"code": exc.code}) from exc
        return [UserMessage(cast(str, text))]  # our prompt functions return their text


def _where(library: str | None, project_path: str | None) -> str | ProjectRef | None:
    if library is not None and project_path is not None:
        raise ValidationError("project_path: give a library or a project_path, not both")
    if project_path is not None:  # a prompt never creates a project's memory
        return ProjectRef(project_path, None, may_create=False)
    return library or None


def _refusal(server: Any, where: str | ProjectRef | None) -> None:
    """Over HTTP with a token: reading a library needs its read scope; a project, `*:admin`
    (as for tools, see access.py). With no caller to check nothing applies."""
    caller = server.callers.current()
    if caller is None:
        return
    if isinstance(where, ProjectRef):
        library, level = "*", "admin"
    else:
        mounted = server.library_names()
        library, level = (where or (mounted[0] if len(mounted) == 1 else "*")), "read"
    if not caller.grants(library, level):
        raise MCPError(INVALID_PARAMS, f"PERMISSION_DENIED: this prompt needs scope {library}:{level}",
                       {"code": "PERMISSION_DENIED"})


def _budget(value: str | None) -> int:
    if value is None or value.strip() == "":
        return DEFAULT_BUDGET
    text = value.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 6):  # "²" is a digit to isdigit, not to int
        raise ValidationError(f"token_budget: must be a whole number of tokens from {BUDGET_MIN} to {BUDGET_MAX} "
                              f"written as text, e.g. \"2000\"; got {value!r}")
    budget = int(text)
    if not BUDGET_MIN <= budget <= BUDGET_MAX:
        raise ValidationError(f"token_budget: {budget} is outside {BUDGET_MIN}..{BUDGET_MAX}")
    return budget


def _one_line(text: str, most: int = ITEM_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[:most - 1] + "…"


def _context_lines(ctx: dict[str, Any]) -> list[str]:
    lines = []
    for key in ("active_task", "status", "reason", "next_steps", "last_commit", "updated_at"):
        value = ctx.get(key)
        if value in (None, "", []):
            continue
        shown = "; ".join(value) if isinstance(value, list) else str(value)
        lines.append(f"- {key.replace('_', ' ')}: {_one_line(shown)}")
    return lines


class Budget:
    """Lines added while they fit in `chars`."""

    def __init__(self, chars: int):
        self.chars = chars
        self.lines: list[str] = []
        self.used = 0

    def add(self, line: str) -> bool:
        if self.used + len(line) + 1 > self.chars:
            return False
        self.lines.append(line)
        self.used += len(line) + 1
        return True


def register(server: Any, service: MemoryService) -> None:
    """Add the prompts whose tools this server exposes (call after the tool groups registered)."""
    exposed = server.exposed_tools()
    args_where: list[PromptArgument] = []
    if "library" not in server.hidden:
        args_where.append(PromptArgument(name="library", description="The library (several are mounted)"))
    n2n = "n2n_update_context" in exposed  # --tools n2n: n2n-memory's names and camelCase arguments
    if "project_path" not in server.hidden or n2n:
        args_where.append(PromptArgument(name="project_path",
                                         description="Absolute root of a project that has memory (.mcp/)"))

    def tools_named(*names: str) -> list[str]:
        return [n for n in names if n in exposed]

    def pass_along(library: str | None, project_path: str | None) -> str:
        if project_path:
            said = f' Pass project_path="{project_path}" to every call.' if "project_path" not in server.hidden else ""
            return said + (f' Pass projectPath="{project_path}" to every n2n_ tool.' if n2n else "")
        if library:
            return f' Pass library="{library}" to every call.'
        if n2n:  # n2n_ tools need projectPath unless the client shares MCP roots
            return " Pass projectPath, the project's absolute root, to every n2n_ tool."
        return ""

    def session_start(library: str | None = None, project_path: str | None = None, query: str | None = None,
                      token_budget: str | None = None) -> str:
        budget = _budget(token_budget)
        if query is not None and len(query) > QUERY_MAX:
            raise ValidationError(f"query: at most {QUERY_MAX} characters")
        where = _where(library, project_path)
        _refusal(server, where)
        ctx = service.read_context(library=where)
        name = f"project {project_path}" if project_path else f"library {library or service.store(where).name}"
        chars = budget * CHARS_PER_TOKEN
        recall = tools_named("retrieve_memory", "search_nodes", "search_memory", "open_nodes", "get_entity",
                             "n2n_search", "n2n_open_nodes")
        hint = f"\nTo recall more, use {', '.join(recall)}.{pass_along(library, project_path)}" if recall else ""
        if len(hint) > chars // 4:  # a very long project path: the hint without it
            hint = f"\nTo recall more, use {', '.join(recall)}."
        tally = "({} memories, {} entities; about {} of {} tokens)"
        # The hint and the tally always fit: the rest fills what they leave.
        out = Budget(chars - len(hint) - len(tally) - 2 * 12 - 2)
        out.add(f"Memory for this session ({_one_line(name, 300)}).")
        lines = _context_lines(ctx)
        if lines:
            out.add("\n## Hot context")
            for line in lines:
                out.add(line)
        topic = (query or "").strip() or " ".join(
            [str(ctx.get("active_task") or ""), *[str(s) for s in ctx.get("next_steps") or []]]).strip()
        if topic:
            memories = [h.memory for h in service.retrieve_memory(topic[:QUERY_MAX], n_results=MEMORY_CANDIDATES,
                                                                  library=where).hits]
        else:  # nothing to look for: the newest memories
            memories, _ = service.list_memories(page=1, page_size=MEMORY_CANDIDATES, library=where)
        entities = [h.entity for h in service.search_nodes(topic[:QUERY_MAX], limit=ENTITY_CANDIDATES,
                                                           library=where).hits] if topic else \
            list(service.read_graph(limit=ENTITY_CANDIDATES, library=where).entities)
        entity_lines = [_one_line(f"- {e.name} ({e.entity_type})" + (": " + "; ".join(o.content for o in e.observations[:3])
                                                                     if e.observations else "")) for e in entities]
        # Memories may not take the room the entities need, up to a quarter of the budget.
        keep_for_entities = min(sum(len(line) + 1 for line in entity_lines) + 14, out.chars // 4) if entities else 0
        shown_memories = shown_entities = 0
        if memories and out.add("\n## Relevant memories" if topic else "\n## Latest memories"):
            for m in memories:
                line = f"- [{m.memory_type}, {m.created_at[:10]}] {_one_line(m.content)}"
                if out.used + len(line) + 1 > out.chars - keep_for_entities or not out.add(line):
                    break
                shown_memories += 1
        if entity_lines and out.add("\n## Entities"):
            for line in entity_lines:
                if not out.add(line):
                    break
                shown_entities += 1
        if not lines and not shown_memories and not shown_entities:
            out.add("Nothing is stored here yet.")
        text = "\n".join(out.lines) + hint
        return text + "\n" + tally.format(shown_memories, shown_entities, tokens(text) + 12, budget)

    def before_compaction(library: str | None = None, project_path: str | None = None) -> str:
        where = _where(library, project_path)
        _refusal(server, where)
        if project_path:
            service.read_context(library=where)  # a bad path fails here, before any advice
        steps = []
        if "store_memory" in exposed:
            steps.append("- Each decision (and why), each problem solved (symptom, cause, fix), each gotcha and "
                         "trade-off: store_memory, one fact per call, with memory_type decision, problem-solution, "
                         "gotcha or trade-off and a few tags.")
        if "create_entities" in exposed and "add_observations" in exposed:
            steps.append("- People, components and services that matter: create_entities, then add_observations "
                         "with dated facts; link them with create_relations.")
        elif "create_entities" in exposed and "add_observation" in exposed:
            steps.append("- People, components and services that matter: create_entities, then add_observation "
                         "for each dated fact; link them with create_relation.")
        if "n2n_add_observations" in exposed:
            steps.append("- Components, people and decisions that matter: n2n_add_entities, then "
                         "n2n_add_observations with dated facts; link them with n2n_create_relations.")
        if "update_context" in exposed:
            steps.append("- Where the work stands: update_context with active_task, status, next_steps and "
                         "last_commit.")
        elif n2n:
            steps.append("- Where the work stands: n2n_update_context with activeTask, status, nextSteps and "
                         "lastCommit.")
        return ("The conversation is about to be compacted: what is not saved now is lost. Before it is, save "
                "what a later session would need and could not find in the code or git history:\n"
                + "\n".join(steps)
                + "\nSkip what is already stored, file contents and command output; keep each item short and "
                  "self-contained." + pass_along(library, project_path))

    def task_end(library: str | None = None, project_path: str | None = None) -> str:
        where = _where(library, project_path)
        _refusal(server, where)
        lines = _context_lines(service.read_context(library=where))
        current = "\n".join(lines) if lines else "(no context recorded yet)"
        store = (" Then store what this task taught (a decision, a fix, a gotcha) with store_memory, one fact "
                 "per call." if "store_memory" in exposed else "")
        record = ("update_context: active_task, status (COMPLETED, IN_PROGRESS, BLOCKED or PLANNING), reason, "
                  "next_steps (in order) and last_commit" if "update_context" in exposed else
                  "n2n_update_context: activeTask, status (COMPLETED, IN_PROGRESS, BLOCKED or PLANNING), reason, "
                  "nextSteps (in order) and lastCommit")
        return (f"The task is finished or paused. Record where it stands with {record}, so the next session "
                "starts from here." + store + pass_along(library, project_path)
                + "\n\nThe context recorded now:\n" + current)

    where_args = args_where
    specs: list[tuple[str, str, Callable[..., str], list[PromptArgument], bool]] = [
        ("session_start", "Start of a session: the hot context and the most relevant memories and entities, "
                          "within a token budget.", session_start,
         [*where_args, PromptArgument(name="query", description="What the session is about (default: the active "
                                                                "task and next steps)"),
          PromptArgument(name="token_budget", description=f"Tokens to fill at most, {BUDGET_MIN}-{BUDGET_MAX} "
                                                          f"(default {DEFAULT_BUDGET}; 4 characters a token)")],
         True),
        ("before_compaction", "Before the conversation is compacted: what to save, and with which tools.",
         before_compaction, where_args, any(t in exposed for t in WRITE_TOOLS)),
        ("task_end", "End of a task: record where the work stands in the hot context.", task_end, where_args,
         "update_context" in exposed or n2n),
    ]
    for name, description, fn, arguments, wanted in specs:
        if wanted:
            server.add_prompt(StrictPrompt(name=name, description=description, arguments=arguments, fn=fn, n2n=n2n))
    listed = [name for name, *_, wanted in specs if wanted]
    sdk_get_prompt = server.get_prompt

    async def get_prompt(name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        # The SDK answers an unknown name with a bare ValueError (code 0, a traceback in the log).
        if name not in listed:
            close = difflib.get_close_matches(name, listed, n=1, cutoff=0.5)
            raise MCPError(INVALID_PARAMS, f"name: no prompt named '{name}'" + (f"; did you mean '{close[0]}'?" if close
                                                                                 else "")
                           + f" Prompts: {', '.join(listed) or '(none)'} (prompts/list lists them).")
        return await sdk_get_prompt(name, arguments, context)

    server.get_prompt = get_prompt  # this server's prompts/get handler calls self.get_prompt
