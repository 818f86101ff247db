"""What a client sees of a tool and how its arguments are checked.

Every tool goes through `MemlociServer.add_tool`, which calls `harden` here once: the SDK's
argument model is made strict (no coercion: `true` is not a number, `"3"` not an integer)
and closed (an unknown argument is an error, never silently dropped), and the advertised
schemas are made small and self-contained (no `$ref`, no titles), since every character of
`tools/list` costs the model context and some clients do not resolve `$ref`. Arguments
accepted but not advertised (`library_name`, peers' extra names) stay in the argument model
and leave only the advertised schema.

The schemas are also made to survive the agent frameworks that convert them (see
tests/test_frameworks.py). Strict function calling (OpenAI strict mode, openai-agents,
LangChain `strict=True`, pydantic-ai) makes every property required, so the model sends
every argument: every optional argument is advertised nullable (`"type": ["integer", "null"]`,
or `anyOf` with `null` for an enum, since google-genai's enums hold strings only), and `null`,
or `""` for an optional text argument, means "not given" (its default applies). Whole-number
floats (5.0) are taken as integers, as JSON Schema counts them. No schema says
`additionalProperties` (google-genai reads a boolean there as a nested schema and fails; the
server refuses unknown arguments all the same), and every tool advertises at least one
property (strict converters refuse an object with none that is not closed).
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Set as AbstractSet
from functools import cache
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, model_validator

from memloci.core.errors import ValidationError

MAX_PROBLEMS = 20  # a batch with many bad items names this many, then "and N more"


class Args(BaseModel):
    # Base of nested argument objects: unknown keys refused, no type coercion but `relaxed`'s.
    # (No docstrings on argument models: pydantic would send them as schema descriptions.)

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _relaxed(cls, data: Any) -> Any:
        return relaxed(cls, data)


@cache
def _input_kinds(model: type[BaseModel]) -> dict[str, tuple[bool, frozenset[type]]]:
    """Each name an argument may be sent under: whether it is optional, and the plain types
    its annotation allows (`str | None` -> {str, NoneType})."""
    kinds: dict[str, tuple[bool, frozenset[type]]] = {}
    for name, field in model.model_fields.items():
        allowed: set[type] = set()
        todo: list[Any] = [field.annotation]
        while todo:
            node = todo.pop()
            if typing.get_origin(node) in (typing.Union, types.UnionType, typing.Annotated):
                todo.extend(typing.get_args(node)[:1] if typing.get_origin(node) is typing.Annotated
                            else typing.get_args(node))
            elif isinstance(node, type):
                allowed.add(node)
        names = {name, field.alias}
        choices = field.validation_alias
        names |= set(getattr(choices, "choices", [choices]))
        for key in names:
            if isinstance(key, str):
                kinds[key] = (not field.is_required(), frozenset(allowed))
    return kinds


def relaxed(model: type[BaseModel], data: Any) -> Any:
    """The arguments as a strict-mode model may send them, made plain: `null`, or `""` for an
    optional text argument, is "not given" (the key is dropped, so its default applies), and a
    whole-number float is the integer it counts as in JSON Schema (5.0 -> 5; 5.5 stays and is
    refused). Unknown keys pass through, for the model to refuse."""
    if not isinstance(data, dict):
        return data
    kinds = _input_kinds(model)
    out = {}
    for key, value in data.items():
        optional, allowed = kinds.get(key, (False, frozenset()))
        if optional and (value is None or (value == "" and str in allowed)):
            continue
        if int in allowed and float not in allowed and isinstance(value, float) and value.is_integer():
            value = int(value)
        out[key] = value
    return out


def _relax_arguments(cls: type[BaseModel], data: Any) -> Any:
    # (pydantic makes a validator a classmethod when its first parameter is named `cls`)
    return relaxed(cls, data)


def hide(schema: dict[str, Any], *names: str, require: str | None = None) -> None:
    """`json_schema_extra` of a nested argument model: leave accepted alternative names out of the
    advertised schema, and advertise `require` as required (a model check enforces one of them)."""
    for name in names:
        schema.get("properties", {}).pop(name, None)
    if require:
        schema["required"] = [*schema.get("required", []), require]


def harden(tool: Any, hidden: set[str]) -> None:
    """Make `tool` (the SDK's registered Tool) strict and closed, and slim what it advertises."""
    base = tool.fn_metadata.arg_model
    # Built on the tool's first call (defer_build), not at the server's start: tools/list needs
    # only its schema, which is the SDK's schema of `base`, closed.
    strict_model: Any = type(base.__name__, (base,), {
        "model_config": {**base.model_config, "extra": "forbid", "strict": True, "defer_build": True},
        "_relaxed": model_validator(mode="before")(_relax_arguments)})
    tool.fn_metadata.arg_model = strict_model
    full = _inline(_closed(tool.parameters))
    if "library" in full.get("properties", {}) and not set(full["properties"]) - hidden:
        hidden = hidden - {"library"}  # a tool advertises one property at least (see the module's docstring)
    tool.parameters = slim(full, drop=hidden)
    if tool.fn_metadata.output_schema is not None:
        out = shallow(slim(_inline(tool.fn_metadata.output_schema), output=True))
        # An open object (`extra="allow"`, no fields) constrains nothing: not worth its characters.
        tool.fn_metadata.output_schema = out if out["properties"] else None
        tool.__dict__.pop("output_schema", None)  # a cached_property of the SDK's Tool
    if tool.annotations is not None:
        tool.annotations = lean_annotations(tool.annotations)


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """An argument model's JSON schema as pydantic writes it with `extra="forbid"`: the same,
    with `additionalProperties: false` after the properties and required (the title last)."""
    closed = {k: v for k, v in schema.items() if k != "title"}
    closed["additionalProperties"] = False
    if "title" in schema:
        closed["title"] = schema["title"]
    return closed


def shallow(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema that names the reply's top-level fields and their JSON types only.
    Replies are still validated against the full model before they are sent; a client needs
    no more than this to accept them, and the rest is context spent on every tools/list."""
    def top(node: dict[str, Any]) -> dict[str, Any]:
        if "type" in node:
            return {"type": node["type"]}
        types = sorted({b.get("type") for b in node.get("anyOf", ()) if isinstance(b.get("type"), str)})
        return {"type": types} if types and len(types) == len(node.get("anyOf", ())) else {}
    out: dict[str, Any] = {"type": "object", "properties": {k: top(v) for k, v in schema.get("properties", {}).items()}}
    if schema.get("required"):
        out["required"] = schema["required"]
    return out


def lean_annotations(annotations: Any) -> Any:
    """Annotations without the title (the tool's own title says it), readOnlyHint and
    idempotentHint only when true (false is their default), destructiveHint only on writes
    (meaningless on reads)."""
    data = annotations.model_dump(exclude_none=True)
    data.pop("title", None)
    if data.get("read_only_hint"):
        data.pop("destructive_hint", None)
    for hint in ("read_only_hint", "idempotent_hint"):
        if not data.get(hint):
            data.pop(hint, None)
    return type(annotations)(**data)


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace every `$ref` by the definition it names (our models are not recursive)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = walk(defs[node["$ref"].rsplit("/", 1)[-1]])
                return {**target, **{k: walk(v) for k, v in node.items() if k != "$ref"}}
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def slim(schema: dict[str, Any], *, drop: AbstractSet[str] = frozenset(), output: bool = False) -> dict[str, Any]:
    """Drop what a client does not need: titles, `default: null`, `additionalProperties`.
    Every optional input property is nullable (`null` is "not given"), in one form: a type
    list, or `anyOf` with `null` for an enum. Output schemas keep their `null` branches (as a
    type list), since replies do carry nulls."""

    def walk(node: Any, top: bool = False) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "default" and value is None:
                continue
            if key == "properties":
                out[key] = {name: walk(v) for name, v in value.items() if not (top and name in drop)}
            elif key == "required" and top:
                out[key] = [r for r in value if r not in drop]
            else:
                out[key] = walk(value)
        if "anyOf" in out:
            branches = out["anyOf"]
            rest = [b for b in branches if b != {"type": "null"}]
            if len(rest) == 1 and len(rest) < len(branches):
                merged = {k: v for k, v in out.items() if k != "anyOf"}
                single = rest[0]
                if output and set(single) <= {"type"} and isinstance(single.get("type"), str):
                    merged["type"] = [single["type"], "null"]
                    out = merged
                elif not output:
                    out = {**single, **merged}
        if not output:
            out.pop("additionalProperties", None)
            if isinstance(out.get("properties"), dict):
                required = set(out.get("required", ()))
                out["properties"] = {name: prop if name in required else nullable(prop)
                                     for name, prop in out["properties"].items()}
        if out.get("required") == []:
            del out["required"]
        return out

    return walk(schema, top=True)


def nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` accepting `null` too: `["integer", "null"]`; `anyOf` for an enum (google-genai
    keeps an enum's values as strings, so `null` cannot join them)."""
    kind = prop.get("type")
    if "enum" in prop and kind is not None:
        rest = {k: v for k, v in prop.items() if k not in ("type", "enum")}
        return {"anyOf": [{"type": kind, "enum": prop["enum"]}, {"type": "null"}], **rest}
    if isinstance(kind, str) and kind != "null":
        return {**prop, "type": [kind, "null"]}
    if isinstance(kind, list) and "null" not in kind:
        return {**prop, "type": [*kind, "null"]}
    if "anyOf" in prop:
        branches = prop["anyOf"]
        kinds = [b.get("type") for b in branches]
        keys = [(k, repr(v)) for b in branches for k, v in b.items() if k != "type"]
        # Branches of distinct plain types (`library`: a name or a list of names) as one type list:
        # google-genai marks only that form nullable (an `anyOf` null branch it keeps as a branch).
        if all(isinstance(k, str) for k in kinds) and len(set(kinds)) == len(kinds) \
                and not any(k in ("enum", "anyOf") for k, _ in keys) and len({k for k, _ in keys}) == len(keys):
            merged = {k: v for b in branches for k, v in b.items() if k != "type"}
            rest = {k: v for k, v in prop.items() if k != "anyOf"}
            return {**rest, **merged, "type": [*(k for k in kinds if k != "null"), "null"]}
        if {"type": "null"} not in branches:
            return {**prop, "anyOf": [*branches, {"type": "null"}]}
    return prop


def json_object(value: Any) -> Any:
    """A free-form JSON object argument (`metadata`) sent as an object or as its JSON text:
    strict converters close every object schema, so a strict model can only send the text.
    `""` is "not given", like `null`."""
    parsed = value
    if isinstance(value, str):  # (the SDK may have parsed the text already)
        if not value.strip():
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError('must be a JSON object, or its JSON text (\'{"key": "value"}\'); '
                             "got text that is not JSON") from None
    if parsed is not None and not isinstance(parsed, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        raise ValueError(f"must be a JSON object, or its JSON text; got {kind.get(type(parsed), 'another value')}")
    return parsed


def tool_size(tool: Any) -> int:
    """Characters one tool costs in `tools/list`, as sent (by alias, without nulls)."""
    return len(json.dumps(tool.model_dump(by_alias=True, exclude_none=True, mode="json")))


# -- errors ------------------------------------------------------------------------------


def _path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _names_at(schema: dict[str, Any] | None, loc: tuple[Any, ...]) -> list[str]:
    """The argument names the advertised schema allows at `loc` (an object inside the arguments)."""
    node: Any = schema or {}
    for part in loc:
        node = _object_branch(node)
        node = node.get("items", {}) if isinstance(part, int) else node.get("properties", {}).get(part, {})
    return list(_object_branch(node).get("properties", {}))


def _bounds_at(schema: dict[str, Any] | None, loc: tuple[Any, ...]) -> tuple[Any, Any] | None:
    """The `minimum` and `maximum` the schema states for the argument at `loc`, if it states both."""
    node: Any = schema or {}
    for part in loc:
        node = _object_branch(node)
        node = node.get("items", {}) if isinstance(part, int) else node.get("properties", {}).get(part, {})
    for branch in [node, *node.get("anyOf", ())]:
        if "minimum" in branch and "maximum" in branch:
            return branch["minimum"], branch["maximum"]
    return None


def _object_branch(node: dict[str, Any]) -> dict[str, Any]:
    for branch in node.get("anyOf", ()):
        if branch.get("type") in ("object", "array"):
            return branch
    return node


_VALUE_ERROR = re.compile(r"^(Value|Assertion) error, ")


def accepted_schema(tool: Any) -> dict[str, Any]:
    """Every argument the tool takes, advertised or not (`library` with one library mounted,
    `library_name`, ...): the names a typo is matched against."""
    return _inline(tool.fn_metadata.arg_model.model_json_schema(by_alias=True))


def describe_validation_error(exc: pydantic.ValidationError, schema: dict[str, Any] | None = None,
                              accepted: dict[str, Any] | None = None) -> ValidationError:
    """Turn an argument validation failure into one VALIDATION_ERROR naming every bad field
    (up to MAX_PROBLEMS) and, for an unknown argument, the closest name the tool accepts
    (`accepted`, default `schema`), else the advertised ones (`schema`)."""
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = _path(loc) or "arguments"
        if err["type"] == "extra_forbidden":
            valid = _names_at(schema, loc[:-1])
            every = _names_at(accepted, loc[:-1]) if accepted is not None else valid
            # An advertised name first; a name accepted but not advertised (`library_name`, a peer's
            # spelling) only for a near miss, so `entity_name` is not steered to `library_name`.
            close = (difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.6)
                     or difflib.get_close_matches(str(loc[-1]), every, n=1, cutoff=0.85))
            what = "unknown argument" if len(loc) == 1 else "unknown field"
            problems.append(f"{path}: {what}" + (f"; did you mean {close[0]}?" if close else
                                                  f"; valid: {', '.join(valid)}" if valid else ""))
        elif err["type"] == "missing":
            problems.append(f"{path}: Field required")
        elif err["type"] in ("greater_than_equal", "less_than_equal") and (bounds := _bounds_at(accepted or schema, loc)):
            problems.append(f"{path}: must be between {bounds[0]} and {bounds[1]}, got {err['input']}")
        else:
            message = _VALUE_ERROR.sub("", err["msg"])
            field = re.match(r"^(\w+): (.*)", message)  # a model's own check naming one of its fields
            if field and err["type"] == "value_error":
                path, message = f"{path}.{field.group(1)}", field.group(2)
            problems.append(f"{path}: {message}")
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"and {len(problems) - MAX_PROBLEMS} more"]
    return ValidationError("; ".join(problems),
                           hint="Fix the named arguments to match the tool's input schema; nothing was changed.")


# -- hints name only tools that exist ----------------------------------------------------

# A tool of another set and the exposed tool that does the same job.
EQUIVALENT = {"search_nodes": "search_memory", "read_graph": "get_graph", "open_nodes": "get_entity",
              "add_observations": "add_observation", "create_relations": "create_relation",
              "list_entities": "search_nodes", "get_entity": "open_nodes", "get_graph": "read_graph",
              "search_memory": "search_nodes"}
_TOOL_WORD = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def fit_hint(hint: str, exposed: set[str], known: set[str]) -> str:
    """Rewrite a hint so every tool it names is exposed: swap in the equivalent tool, or drop
    the sentence (a hint that names a missing tool sends the model on a useless call)."""
    if not hint or not exposed:
        return hint
    kept = []
    for sentence in re.split(r"(?<=[.;])\s+", hint):
        def swap(m: re.Match[str]) -> str:
            word = m.group(0)
            if word in known and word not in exposed and EQUIVALENT.get(word) in exposed:
                return EQUIVALENT[word]
            return word
        sentence = _TOOL_WORD.sub(swap, sentence)
        if any(w in known and w not in exposed for w in _TOOL_WORD.findall(sentence)):
            continue
        kept.append(sentence)
    return " ".join(kept) or "Fix the call and send it again."
