"""The hot context of a library as a Markdown file (`context.md`) a person can read in a diff.

```markdown
---
status: IN_PROGRESS
updated_at: 2026-11-21T08:00:00Z
last_commit: 3f2a9c1
---
# Current context

## Active task
Move sessions to Redis

## Reason
Sticky sessions break the autoscaler.

## Next steps
- write the migration
- load-test
```
"""

from __future__ import annotations

from typing import Any

import yaml

_SECTIONS = {"active task": "active_task", "reason": "reason", "next steps": "next_steps"}


def render_context(ctx: dict[str, Any]) -> str:
    head = {k: ctx[k] for k in ("status", "updated_at", "last_commit") if ctx.get(k)}
    front = yaml.safe_dump(head, sort_keys=False, allow_unicode=True, width=1000) if head else ""
    parts = [f"---\n{front}---\n" if front else "", "# Current context\n"]
    if ctx.get("active_task"):
        parts.append(f"\n## Active task\n{ctx['active_task'].strip()}\n")
    if ctx.get("reason"):
        parts.append(f"\n## Reason\n{ctx['reason'].strip()}\n")
    if ctx.get("next_steps") is not None:  # an emptied list keeps its heading, so it reads back [] (not absent)
        parts.append("\n## Next steps\n" + "".join(f"- {s.strip()}\n" for s in ctx["next_steps"]))
    return "".join(parts)


def parse_context(text: str) -> dict[str, Any]:
    """Read back what render_context wrote (and what a person edited); unknown parts are ignored."""
    ctx: dict[str, Any] = {}
    body = text.replace("\r\n", "\n")
    if body.startswith("---\n"):
        end = body.find("\n---\n", 4)
        if end != -1:
            try:
                data = yaml.safe_load(body[4:end + 1]) or {}
            except yaml.YAMLError:
                data = {}
            if isinstance(data, dict):
                ctx.update({k: str(v) for k, v in data.items() if k in ("status", "updated_at", "last_commit") and v})
            body = body[end + 5:]
    section: str | None = None
    lines: list[str] = []

    def close() -> None:
        if section is None:
            return
        if section == "next_steps":
            ctx[section] = [ln[2:].strip() for ln in lines if ln.startswith(("- ", "* ")) and ln[2:].strip()]
        else:
            text_ = "\n".join(lines).strip()
            if text_:
                ctx[section] = text_

    for line in body.split("\n"):
        if line.startswith("## "):
            close()
            section, lines = _SECTIONS.get(line[3:].strip().casefold()), []
        elif section is not None:
            lines.append(line)
    close()
    return ctx
