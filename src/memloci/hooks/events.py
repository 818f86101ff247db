"""What each agent sends a hook on stdin, read into one `HookEvent`.

Where each shape comes from (read 2026-11; third-party pages are named where the shape was
taken from them rather than from the vendor's own page):
- Claude Code, https://code.claude.com/docs/en/hooks ("common input fields", "PostToolUse
  input"): every event carries `session_id`, `transcript_path`, `cwd`, `hook_event_name`;
  `PostToolUse` adds `tool_name`, `tool_input` (Edit: file_path/old_string/new_string;
  MultiEdit: edits; Write: file_path/content; Bash: command) and `tool_response` (Bash:
  stdout/stderr); `PreCompact` adds `trigger` (manual|auto) and `custom_instructions`;
  `SessionEnd` adds `reason`. Exit 0 with nothing on stdout lets the agent go on.
- Cursor, https://cursor.com/docs/agent/hooks, as summarised field by field in
  https://cupcake.eqtylab.io/reference/harnesses/cursor: `hook_event_name`, `conversation_id`,
  `generation_id`, `workspace_roots`; `afterFileEdit` adds `file_path` and `edits`
  [{old_string, new_string}]; `afterShellExecution` adds `command`, `output`, `cwd`. After-hooks
  are fire-and-forget.
- Windsurf, https://docs.windsurf.com/windsurf/cascade/hooks, with the payload types of
  CorridorSecurity/hookshot (docs/reference-cascade.md): `agent_action_name`, `trajectory_id`,
  `execution_id`, `timestamp`, and `tool_info`; for `post_write_code` tool_info is
  {file_path, edits: [{old_string, new_string}]}, for `post_run_command` {command_line, cwd}.
  Post-hooks cannot block; nothing is read from stdout.
- Gemini CLI, https://geminicli.com/docs/hooks/reference: `session_id`, `transcript_path`,
  `cwd`, `hook_event_name`, `timestamp`; `AfterTool` adds `tool_name` (run_shell_command,
  write_file, replace, ...), `tool_input`, `tool_response` ({llmContent, returnDisplay, error});
  `PreCompress` adds `trigger`, `SessionEnd` adds `reason`. On exit 0 stdout is parsed as
  JSON and must hold nothing else, so the neutral reply is `{}`.
- Codex, https://developers.openai.com/codex/hooks (lifecycle hooks, on by default since
  2026-05): the common fields `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
  `model`; `PostToolUse` for Bash, apply_patch and MCP tools; `PreCompact`. Its older `notify`
  program (docs/config.md of openai/codex, "Notify") gets one JSON argument, not stdin:
  {type: "agent-turn-complete", thread-id, turn-id, cwd, input-messages,
  last-assistant-message}.
- VS Code agent hooks (Preview), https://code.visualstudio.com/docs/agent-customization/hooks:
  Claude-Code-compatible `PostToolUse`/`PreCompact` payloads; the Copilot CLI's camelCase
  form (`toolName`, `toolArgs` as JSON text, `toolResult.textResultForLlm`, `cwd`;
  https://docs.github.com/en/copilot/reference/hooks-configuration) is read too.
- Claude Desktop has no hooks.

At session start two of them take context back on stdout (exit 0), which is how a hook reminds
the agent of the project's rules (remind.py):
- Claude Code, https://code.claude.com/docs/en/hooks ("SessionStart", "SessionStart decision
  control"): the input adds `source` (startup|resume|clear|compact, also its matcher values);
  `{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "..."}}` on
  stdout adds that text to the session's context.
- Gemini CLI, https://geminicli.com/docs/hooks/reference ("SessionStart"): the input adds
  `source` (startup|resume|clear); `hookSpecificOutput.additionalContext` is injected as the
  first turn of the history (prepended to the prompt when not interactive). Startup is never
  blocked by it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TRANSCRIPT_TAIL = 256 * 1024  # bytes read from the end of a transcript: the last exchanges


class EventError(Exception):
    """A payload that is not what the agent sends (wrong shape or type): logged, nothing stored."""


class Unsupported(Exception):
    """An event this agent sends that memloci does not capture (say, PreToolUse)."""


@dataclass(frozen=True, slots=True)
class HookEvent:
    agent: str
    event: str  # the agent's own name for it: PostToolUse, afterFileEdit, ...
    kind: str  # "code" (a file edit), "command" (a shell command), "text", "lifecycle", "start" (never stored)
    body: str  # what would be remembered, before the header and the cut
    tool: str | None = None
    command: str | None = None  # the shell command, for the noise rules
    file_path: str | None = None  # as the agent gave it (absolute, or relative to cwd)
    cwd: str | None = None
    session_id: str | None = None
    detail: str | None = None  # trigger or reason of a lifecycle event
    full_chars: int | None = None  # the body's true length when `body` holds only its start

    @property
    def lifecycle(self) -> bool:
        """Before compaction and at session end: always kept (no cooldown)."""
        return self.kind == "lifecycle"


# -- small readers that refuse wrong types ------------------------------------------------

def _opt_str(payload: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = payload.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise EventError(f"{key}: must be a string, got {type(value).__name__}")
        return value
    return None


def _obj(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    if value is None:
        return {}
    if isinstance(value, str):  # the Copilot CLI sends toolArgs as JSON text
        try:
            value = json.loads(value)
        except ValueError:
            return {"value": value}
    if not isinstance(value, dict):
        raise EventError(f"{key}: must be an object, got {type(value).__name__}")
    return value


def texts(value: Any, limit: int = 16_000) -> str:
    """Every string inside a tool response, in order, joined by newlines (up to `limit` chars)."""
    return texts_sized(value, limit)[0]


def texts_sized(value: Any, limit: int = 16_000) -> tuple[str, int]:
    """texts(), and the length all of it would have had (what a cut memory reports)."""
    out: list[str] = []
    size = 0
    total = -1  # n strings joined by n - 1 newlines

    def walk(v: Any) -> None:
        nonlocal size, total
        if isinstance(v, str):
            if v.strip():
                total += len(v) + 1
                if size < limit:
                    out.append(v)
                    size += len(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return "\n".join(out)[:limit], max(0, total)


def _edits_text(edits: Any, field: str) -> str:
    if not isinstance(edits, list):
        raise EventError(f"{field}: must be a list of {{old_string, new_string}}")
    parts = []
    for i, edit in enumerate(edits):
        if not isinstance(edit, dict):
            raise EventError(f"{field}[{i}]: must be an object")
        new = edit.get("new_string", edit.get("newString", ""))
        if not isinstance(new, str):
            raise EventError(f"{field}[{i}].new_string: must be a string")
        parts.append(new)
    return "\n".join(p for p in parts if p.strip())


# -- tool calls, the same for every agent that reports them ---------------------------------

FILE_KEYS = ("file_path", "filePath", "path", "notebook_path")
SHELL_TOOLS = {"bash", "run_shell_command", "shell", "runinterminal", "run_in_terminal", "exec_command"}


def tool_event(agent: str, event: str, tool: str | None, tool_input: dict[str, Any], response: Any,
               cwd: str | None, session_id: str | None) -> HookEvent:
    """A finished tool call: a file edit (code), a shell command with its output, or other text."""
    file_path = next((v for k in FILE_KEYS if isinstance(v := tool_input.get(k), str) and v), None)
    for key in ("new_string", "newString", "content", "new_source", "newSource"):
        if isinstance(tool_input.get(key), str):
            return HookEvent(agent, event, "code", tool_input[key], tool, None, file_path, cwd, session_id)
    if "edits" in tool_input:
        return HookEvent(agent, event, "code", _edits_text(tool_input["edits"], "tool_input.edits"), tool, None,
                         file_path, cwd, session_id)
    if (tool or "").lower() == "apply_patch":
        return HookEvent(agent, event, "code", texts(tool_input), tool, None, file_path, cwd, session_id)
    command = tool_input.get("command", tool_input.get("command_line"))
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = " ".join(command)
    body, full = texts_sized(response)
    if isinstance(command, str) and ((tool or "").lower() in SHELL_TOOLS or not tool):
        return HookEvent(agent, event, "command", body, tool, command, file_path, cwd, session_id, full_chars=full)
    return HookEvent(agent, event, "text", body, tool, None, file_path, cwd, session_id, full_chars=full)


def _tool_payload(agent: str, event: str, p: dict[str, Any]) -> HookEvent:
    tool = _opt_str(p, "tool_name", "toolName")
    tool_input = _obj(p, "tool_input") if "tool_input" in p else _obj(p, "toolArgs")
    response = p.get("tool_response", p.get("toolResult", p.get("result_json")))
    return tool_event(agent, event, tool, tool_input, response, _opt_str(p, "cwd"),
                      _opt_str(p, "session_id", "sessionId"))


def _lifecycle(agent: str, event: str, p: dict[str, Any]) -> HookEvent:
    detail = _opt_str(p, "trigger", "reason", "source")
    body = transcript_tail(_opt_str(p, "transcript_path", "transcriptPath"))
    instructions = _opt_str(p, "custom_instructions")
    if instructions:
        body = f"Instructions: {instructions}\n{body}"
    return HookEvent(agent, event, "lifecycle", body, None, None, None, _opt_str(p, "cwd"),
                     _opt_str(p, "session_id", "sessionId"), detail)


# -- per agent ------------------------------------------------------------------------------

def _claude_like(agent: str, tool_events: set[str], lifecycle: set[str]) -> Callable[[dict[str, Any]], HookEvent]:
    def parse(p: dict[str, Any]) -> HookEvent:
        event = _opt_str(p, "hook_event_name", "hookEventName")
        if event is None:
            raise EventError("hook_event_name: missing")
        if event in tool_events:
            return _tool_payload(agent, event, p)
        if event in lifecycle:
            return _lifecycle(agent, event, p)
        raise Unsupported(event)
    return parse


def _codex(p: dict[str, Any]) -> HookEvent:
    if p.get("type") == "agent-turn-complete":  # the `notify` program's payload
        answer = _opt_str(p, "last-assistant-message") or ""
        asked = p.get("input-messages")
        if isinstance(asked, list) and asked and all(isinstance(m, str) for m in asked):
            answer = f"Asked: {asked[-1]}\n{answer}"
        return HookEvent("codex", "agent-turn-complete", "text", answer, None, None, None, _opt_str(p, "cwd"),
                         _opt_str(p, "thread-id"))
    if "type" in p and "hook_event_name" not in p:
        raise Unsupported(str(p.get("type")))
    return _claude_like("codex", {"PostToolUse"}, {"PreCompact"})(p)


def _cursor(p: dict[str, Any]) -> HookEvent:
    event = _opt_str(p, "hook_event_name")
    roots = p.get("workspace_roots")
    root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    session = _opt_str(p, "conversation_id")
    if event == "afterFileEdit":
        file_path = _opt_str(p, "file_path")
        if file_path is None:
            raise EventError("file_path: missing")
        return HookEvent("cursor", event, "code", _edits_text(p.get("edits", []), "edits"), "edit", None,
                         file_path, root, session)
    if event == "afterShellExecution":
        command = _opt_str(p, "command") or ""
        return HookEvent("cursor", event, "command", _opt_str(p, "output") or "", "shell", command, None,
                         _opt_str(p, "cwd") or root, session)
    if event is None:
        raise EventError("hook_event_name: missing")
    raise Unsupported(event)


def _windsurf(p: dict[str, Any]) -> HookEvent:
    event = _opt_str(p, "agent_action_name")
    info = _obj(p, "tool_info")
    session = _opt_str(p, "trajectory_id")
    if event == "post_write_code":
        file_path = _opt_str(info, "file_path")
        if file_path is None:
            raise EventError("tool_info.file_path: missing")
        return HookEvent("windsurf", event, "code", _edits_text(info.get("edits", []), "tool_info.edits"),
                         "write_code", None, file_path, None, session)
    if event == "post_run_command":
        # Windsurf's documented payload has the command line and cwd, no output: the command line
        # itself is what is kept (when long enough and not noise, as for any command).
        command = _opt_str(info, "command_line") or ""
        output = texts(info.get("output", ""))
        return HookEvent("windsurf", event, "command", output if output.strip() else command, "run_command",
                         command, None, _opt_str(info, "cwd"), session)
    if event is None:
        raise EventError("agent_action_name: missing")
    raise Unsupported(event)


def _vscode(p: dict[str, Any]) -> HookEvent:
    if "toolName" in p and "hook_event_name" not in p:  # the Copilot CLI's postToolUse
        return _tool_payload("vscode", "postToolUse", p)
    return _claude_like("vscode", {"PostToolUse"}, {"PreCompact"})(p)


# Every name `memloci install` takes; None: the agent has no hooks.
PARSERS: dict[str, Callable[[dict[str, Any]], HookEvent] | None] = {
    "claude-code": _claude_like("claude-code", {"PostToolUse"}, {"PreCompact", "SessionEnd"}),
    "cursor": _cursor,
    "windsurf": _windsurf,
    "codex": _codex,
    "gemini": _claude_like("gemini", {"AfterTool"}, {"PreCompress", "SessionEnd"}),
    "vscode": _vscode,
    "claude-desktop": None,
}
# What the agent reads on stdout after exit 0: Gemini CLI parses stdout as JSON.
NEUTRAL_REPLY = {"gemini": "{}"}
# The agents whose session-start reply adds context, and their name for that event.
SESSION_START = {"claude-code": "SessionStart", "gemini": "SessionStart"}


def session_start(agent: str, payload: Any) -> HookEvent | None:
    """The event when `payload` is the start of a session of an agent that takes context back
    then (SESSION_START), else None. Its `detail` is the `source` (startup, resume, ...)."""
    if SESSION_START.get(agent) is None or not isinstance(payload, dict):
        return None
    event = _opt_str(payload, "hook_event_name", "hookEventName")
    if event != SESSION_START[agent]:
        return None
    return HookEvent(agent, event, "start", "", None, None, None, _opt_str(payload, "cwd"),
                     _opt_str(payload, "session_id", "sessionId"), _opt_str(payload, "source"))


def context_reply(event: HookEvent, context: str) -> str:
    """The reply that adds `context` to the session (the same shape for both agents)."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event.event, "additionalContext": context}})


def parse_event(agent: str, payload: Any) -> HookEvent:
    parser = PARSERS[agent]
    if parser is None:
        raise Unsupported(f"{agent} has no hooks")
    if not isinstance(payload, dict):
        raise EventError(f"the event must be a JSON object, got {type(payload).__name__}")
    return parser(payload)


# -- transcripts ----------------------------------------------------------------------------

def _assistant_texts(obj: Any, out: list[str]) -> None:
    """Assistant message texts in a transcript line (Claude Code, Codex and Gemini shapes)."""
    if isinstance(obj, dict):
        role = obj.get("role", obj.get("type"))
        if role in ("assistant", "model", "gemini"):
            content = obj.get("content", obj.get("text", obj.get("parts")))
            if isinstance(content, str):
                out.append(content)
                return
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and isinstance(block.get("text"), str) \
                            and block.get("type", "text") in ("text", "output_text"):
                        out.append(block["text"])
                return
        for value in obj.values():
            if isinstance(value, (dict, list)):
                _assistant_texts(value, out)
    elif isinstance(obj, list):
        for value in obj:
            _assistant_texts(value, out)


def transcript_tail(path: str | None, most: int = 8) -> str:
    """The last assistant messages of a session transcript (JSONL, or one JSON document), or ''.
    Read without following a link in its last component, and only a regular file."""
    if not path or "\x00" in path or not os.path.isabs(path):
        return ""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        start = max(0, st.st_size - TRANSCRIPT_TAIL)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, TRANSCRIPT_TAIL).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
    found: list[str] = []
    lines = data.splitlines()[1 if start else 0:]  # the first line of a tail may be cut
    for line in lines:
        try:
            _assistant_texts(json.loads(line), found)
        except ValueError:
            continue
    if not found and start == 0:
        try:
            _assistant_texts(json.loads(data), found)
        except ValueError:
            pass
    return "\n\n".join(t.strip() for t in found[-most:] if t.strip())
