"""The two changes install makes to a config file, and their inverses, on JSON text and on TOML.

An op is a small JSON-serialisable dict, kept in the ledger so uninstall knows what was added:
  {"op": "set", "path": [...keys], "value": v, "created": i, "old": v0?}
      put `value` at `path`; keys from path[i] on did not exist before (so uninstall removes
      them again when they are left empty); "old" is a value --force replaced.
  {"op": "append", "path": [...keys], "value": v, "created": i}
      append `value` to the list at `path` (hook groups).
The same op is applied to the parsed document (what the result must mean) and to the text
(how it is written), and the written file is checked against the former.
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError as TomlParseError

from memloci.core.errors import ConflictError
from memloci.install import jsonedit as je
from memloci.install.clients import InstallError

# --- meaning ---------------------------------------------------------------------------------

def _wrap(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def apply_value(doc: dict, op: dict) -> dict:
    """What `doc` means after `op` (a copy)."""
    doc = copy.deepcopy(doc)
    path, node = op["path"], doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if op["op"] == "set":
        node[path[-1]] = copy.deepcopy(op["value"])
    else:
        node.setdefault(path[-1], []).append(copy.deepcopy(op["value"]))
    return doc


def _prune_value(doc: dict, path: list[str], created: int) -> None:
    for depth in range(len(path) - 1, created - 1, -1):
        parent = doc
        for key in path[:depth]:
            parent = parent[key]
        if parent.get(path[depth]) in ({}, []):
            del parent[path[depth]]


def revert_value(doc: dict, op: dict) -> dict:
    """What `doc` means once `op` is taken back out."""
    doc = copy.deepcopy(doc)
    path, node = op["path"], doc
    for key in path[:-1]:
        node = node.get(key, {})
    if op["op"] == "set":
        if "old" in op:
            node[path[-1]] = copy.deepcopy(op["old"])
            return doc
        node.pop(path[-1], None)
    else:
        items = node.get(path[-1], [])
        for i in range(len(items) - 1, -1, -1):
            if items[i] == op["value"]:
                del items[i]
                break
    _prune_value(doc, path, op["created"])
    return doc


def has(doc: dict, op: dict) -> bool:
    node: Any = doc
    for key in op["path"]:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return node == op["value"] if op["op"] == "set" else op["value"] in (node or [])


# --- JSON text -------------------------------------------------------------------------------

def parse_json(text: str, where: str) -> tuple[je.Node, dict]:
    try:
        root = je.parse(text)
    except je.JsonSyntaxError as exc:
        raise InstallError(f"{where} does not parse ({exc}); it was left untouched",
                           hint="fix the file by hand, or point --config at another file") from None
    return root, je.to_py(root)


def check_dialect(text: str, dialect: str, where: str, reader: str) -> None:
    """Refuse a file the client itself could not read (a comment or a trailing comma where
    its reader takes strict JSON): adding to it would report success for a broken config."""
    if dialect == "jsonc":
        return
    try:
        je.parse(text)
    except je.JsonSyntaxError:
        return  # not even JSONC: parse_json refuses it as a file that does not parse
    try:
        je.parse(text, dialect)
    except je.JsonSyntaxError as exc:
        raise InstallError(f"{where} is not JSON {reader} can read ({exc}); it was left untouched",
                           hint="take the comment or trailing comma out by hand, "
                                "or point --config at another file") from None


def new_json_text(doc: dict, newline: str = "\n") -> str:
    return je.render(doc, je.Style(newline), "") + newline


def _walk(text: str, root: je.Node, keys: list[str], where: str):
    """The object node at `keys`, its owner's start, and how many keys exist (stops early)."""
    node, owner = root, root.start
    for depth, key in enumerate(keys):
        child = je.member(node, key)
        if child is None:
            return node, owner, depth
        if child.value.kind != "object":
            raise InstallError(f"{where}: {'.'.join(keys[:depth + 1])} is not an object; left untouched")
        node, owner = child.value, child.start
    return node, owner, len(keys)


def json_splices(text: str, op: dict, where: str, force: bool) -> tuple[list[je.Splice], dict]:
    """Splices that apply `op` to `text`, and the op as recorded (with created/old filled in).
    No splices means it is already there."""
    root, _ = parse_json(text, where)
    style = je.style_of(text, root)
    path = op["path"]
    node, owner, depth = _walk(text, root, path[:-1], where)
    op = dict(op)
    if depth < len(path) - 1:  # a container is missing: add it with the value inside
        rest = path[depth + 1:]
        inner = op["value"] if op["op"] == "set" else [op["value"]]
        op["created"] = depth
        return je.insert_child(text, node, owner, path[depth], _wrap(rest, inner), style), op
    last = je.member(node, path[-1])
    if op["op"] == "set":
        op["created"] = len(path) - 1
        if last is None:
            return je.insert_child(text, node, owner, path[-1], op["value"], style), op
        current = je.to_py(last.value)
        if current == op["value"]:
            return [], op
        if not force:
            raise ConflictError(f"{where}: {'.'.join(path)} exists with other settings",
                                hint="pass --force to replace it (the diff above shows how)",
                                details={"current": current})
        op["old"] = current
        return je.replace_value(text, last, op["value"], style), op
    if last is None:
        op["created"] = len(path) - 1
        return je.insert_child(text, node, owner, path[-1], [op["value"]], style), op
    if last.value.kind != "array":
        raise InstallError(f"{where}: {'.'.join(path)} is not a list; left untouched")
    op["created"] = len(path)
    if any(je.to_py(c.value) == op["value"] for c in last.value.children):
        return [], op
    return je.insert_child(text, last.value, last.start, None, op["value"], style), op


def json_unsplices(text: str, op: dict, where: str) -> list[list[je.Splice]]:
    """Steps (each a list of splices on the text the previous step left) that take `op` out
    of `text` wherever it now sits: the structural inverse of `json_splices`."""
    steps: list[list[je.Splice]] = []
    root, _ = parse_json(text, where)
    path = op["path"]
    node, owner, depth = _walk(text, root, path[:-1], where)
    if depth < len(path) - 1:
        return steps
    last = je.member(node, path[-1])
    if last is None:
        return steps
    if op["op"] == "set":
        if "old" in op:
            return [je.replace_value(text, last, op["old"], je.style_of(text, root))]
        index = node.children.index(last)
        steps.append(je.remove_child(text, node, index))
    else:
        if last.value.kind != "array":
            return steps
        hits = [i for i, c in enumerate(last.value.children) if je.to_py(c.value) == op["value"]]
        if not hits:
            return steps
        steps.append(je.remove_child(text, last.value, hits[-1]))
    text = je.apply(text, steps[-1])
    # Containers install created and nothing else now uses go too, innermost first.
    innermost = len(path) - 2 if op["op"] == "set" else len(path) - 1
    for depth in range(innermost, op["created"] - 1, -1):
        root = je.parse(text)
        parent, _, found = _walk(text, root, path[:depth], where)
        if found < depth:
            break
        child = je.member(parent, path[depth])
        if child is None or child.value.children or child.value.kind not in ("object", "array"):
            break
        steps.append(je.remove_child(text, parent, parent.children.index(child)))
        text = je.apply(text, steps[-1])
    return steps


# --- TOML text (Codex) -----------------------------------------------------------------------

def parse_toml(text: str, where: str) -> dict:
    try:
        tomlkit.parse(text)
        return tomllib.loads(text)
    except TomlParseError as exc:
        raise InstallError(f"{where} does not parse (line {exc.line}, column {exc.col}: "
                              f"{str(exc).split(' at line')[0]}); it was left untouched") from None
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{where} does not parse ({exc}); it was left untouched") from None


def _toml_table(value: dict) -> Any:
    table = tomlkit.table()
    for key, item in value.items():
        if isinstance(item, dict):
            inline = tomlkit.inline_table()
            inline.update(item)
            table.add(key, inline)
        else:
            table.add(key, item)
    return table


def toml_text(text: str, op: dict, where: str, force: bool) -> tuple[str, dict]:
    """The new TOML text for a "set" of [<servers>.<name>], and the op as recorded."""
    doc = parse_toml(text, where)
    path, op = op["path"], dict(op)
    servers = doc.get(path[0])
    if servers is not None and not isinstance(servers, dict):
        raise InstallError(f"{where}: {path[0]} is not a table; left untouched")
    op["created"] = 0 if servers is None else 1
    current = (servers or {}).get(path[1])
    if current == op["value"]:
        return text, op
    newline = "\r\n" if "\r\n" in text else "\n"
    if current is not None:
        if not force:
            raise ConflictError(f"{where}: [{'.'.join(path)}] exists with other settings",
                                hint="pass --force to replace it (the diff above shows how)")
        op["old"] = current
        tdoc = tomlkit.parse(text)
        tdoc[path[0]][path[1]] = _toml_table(op["value"])
        return tomlkit.dumps(tdoc), op
    block = tomlkit.document()
    outer = tomlkit.table(is_super_table=True)
    outer.add(path[1], _toml_table(op["value"]))
    block.add(path[0], outer)
    body = tomlkit.dumps(block).replace("\n", newline)
    sep = "" if not text.strip() else (newline if text.endswith(newline) else newline * 2)
    if text.strip() and text.endswith(newline * 2):
        sep = ""
    op["sep"] = sep
    return text + sep + body, op


def toml_untext(text: str, op: dict, where: str) -> str:
    parse_toml(text, where)
    tdoc = tomlkit.parse(text)
    path = op["path"]
    servers = tdoc.get(path[0])
    if servers is None or path[1] not in servers:
        return text
    if "old" in op:
        servers[path[1]] = _toml_table(op["old"])
    else:
        del servers[path[1]]
        if op["created"] == 0 and len(servers) == 0:
            del tdoc[path[0]]
    out = tomlkit.dumps(tdoc)
    # The blank line install put before its table stays behind when the table was last.
    sep, newline = op.get("sep", ""), "\r\n" if "\r\n" in text else "\n"
    if sep and out.endswith(newline + sep):
        out = out[:-len(sep)]
    return out
