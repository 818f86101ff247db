"""Write docs/reference/tools.md from the tool definitions: each group's tools as `tools/list`
sends them (a server built for that group alone on an empty library in a temporary folder), with
each tool's description and its arguments' types, defaults and ranges from the input schema.

`make docs` runs it before building the site; tests/test_docs.py fails when the committed page
differs from what this writes, so the reference cannot drift from the code.

    python docs/gen_tools.py           # write the page
    python docs/gen_tools.py --check   # exit 1 if the page differs
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parent / "reference" / "tools.md"

HEADER = """\
# Tool reference

<!-- Written by docs/gen_tools.py from the tool definitions (`make docs`); do not edit by hand. -->

Every tool of every group, as `tools/list` sends it to a client: the description, and each
argument with its type, default and range from the input schema. `memloci serve --tools GROUPS`
chooses the groups (default `graph,memory,documents,project`; `strict` replaces `graph`).
Two arguments appear below only where they are always advertised: a server advertises `library`
on every tool when several libraries are mounted, and `project_path` on the graph, memory and
document tools when the `project` group is on. `memloci tools` prints what each tool costs a
model's context.
"""


def type_of(prop: dict[str, Any]) -> str:
    """The argument's JSON type(s), `null` left out (optional arguments are advertised nullable)."""
    if "anyOf" in prop:
        kinds = [type_of(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(k for k in kinds if k) or "any"
    kind = prop.get("type")
    kinds = [k for k in (kind if isinstance(kind, list) else [kind]) if k and k != "null"]
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in prop["enum"] if v is not None)
    if kinds == ["array"] and "items" in prop:
        return f"array of {type_of(prop['items'])}"
    if kinds == ["object"] and prop.get("properties"):
        return "object {" + ", ".join(prop["properties"]) + "}"
    return " or ".join(kinds) or "any"


def range_of(prop: dict[str, Any]) -> str:
    for inner in [prop, *prop.get("anyOf", [])]:
        low, high = inner.get("minimum"), inner.get("maximum")
        if low is not None or high is not None:
            return f"{low if low is not None else ''} to {high if high is not None else ''}".strip()
        if inner.get("minLength") or inner.get("maxLength"):
            return f"length {inner.get('minLength', 0)} to {inner.get('maxLength', '')}".strip()
    return ""


def escaped(text: str) -> str:
    """Plain text as Markdown shows it as written: a `*` in a glob is not emphasis, a `<` not HTML."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")


def cell(text: str, *, code: bool = False) -> str:
    """One table cell: one line, `|` escaped; plain text escaped too, code spans kept as they are."""
    flat = " ".join(text.split())
    return (flat if code else escaped(flat)).replace("|", "\\|")


def tool_section(tool: Any) -> list[str]:
    schema = tool.input_schema or {}
    required = set(schema.get("required", []))
    # Each line of the description its own paragraph: an example stays on a line of its own.
    description = [escaped(line.strip()) for line in (tool.description or "").strip().splitlines() if line.strip()]
    lines = [f"### `{tool.name}`", "", "\n\n".join(description), ""]
    properties = schema.get("properties", {})
    if not properties:
        return [*lines, "No arguments.", ""]
    lines += ["| argument | type | required | default | range | description |", "|---|---|---|---|---|---|"]
    for name, prop in properties.items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop and prop["default"] is not None else ""
        lines.append(f"| `{name}` | {cell(type_of(prop), code=True)} | {'yes' if name in required else ''} "
                     f"| {cell(default, code=True)} "
                     f"| {cell(range_of(prop))} | {cell(prop.get('description', ''))} |")
    return [*lines, ""]


def render() -> str:
    import anyio

    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import LibrarySpec
    from memloci.mcp.server import GROUP_TOOLS, GROUPS, build_server
    from memloci.service.facade import MemoryService

    lines = [HEADER]
    with tempfile.TemporaryDirectory() as tmp:
        registry = LibraryRegistry([LibrarySpec("default", Path(tmp) / "default.db")])
        service = MemoryService(registry)
        try:
            for group in GROUPS:
                listed = {t.name: t for t in anyio.run(build_server(service, groups=[group]).list_tools)}
                lines += [f"## The `{group}` group", ""]
                for name in GROUP_TOOLS[group]:
                    if name in listed:
                        lines += tool_section(listed[name])
        finally:
            service.close()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} differs from the tool definitions: run `make docs`", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
