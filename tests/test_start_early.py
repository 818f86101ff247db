"""`memloci serve` answers `initialize` and `tools/list` from the replies the SDK gave at an earlier
start with the same configuration, before it imports the SDK (mcp/early.py).

The replies a client gets must be the SDK's own bytes whatever the tool set, the id's kind, or
what the client sends after them; a request that differs from the recorded one, or a malformed
line, goes to the SDK as it would with no record. Every server here is a real process started
twice (or more) on one home and one cache folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import environment_now, server_env

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test-start-early", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
READ_GRAPH = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}}
HEAVY = ("mcp", "mcp_types", "pydantic", "memloci.cli.main", "memloci.service.facade")


def _line(message: dict | str) -> bytes:
    return (message if isinstance(message, str) else json.dumps(message)).encode() + b"\n"


def serve(tmp_path: Path, lines: list[dict | str], *args: str, importtime: bool = False) -> tuple[list[bytes], str]:
    """A `memloci serve` process given `lines` on stdin, then end of input: its stdout lines, and
    its stderr. `importtime`: stderr into the same pipe as stdout (so the order in which replies
    and imports happened is kept), with `python -X importtime`."""
    env = server_env(tmp_path / "home", XDG_CACHE_HOME=str(tmp_path / "cache"))
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "memloci", "serve", *args]
    done = subprocess.run(command, input=b"".join(_line(m) for m in lines), capture_output=not importtime,
                          stdout=subprocess.PIPE if importtime else None,
                          stderr=subprocess.STDOUT if importtime else None, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines(keepends=True)
    if importtime:
        return out, ""
    return out, done.stderr.decode(errors="replace")


def handshake(tmp_path: Path, *args: str) -> list[bytes]:
    replies, _ = serve(tmp_path, [INITIALIZE, INITIALIZED, TOOLS_LIST, READ_GRAPH], *args)
    return replies


@pytest.mark.parametrize("tools", [None, "graph", "strict,memory,documents,project", "n2n", "maintenance,memory"])
def test_a_second_start_sends_the_same_bytes_for_every_tool_set(tmp_path, tools):
    args = ("--tools", tools) if tools else ()
    first = handshake(tmp_path, *args)
    assert [json.loads(r)["id"] for r in first] == [1, 2, 3]
    assert list((tmp_path / "cache" / "memloci" / "handshake").glob("*.json")), "the first start recorded nothing"
    for _ in range(2):  # answered early, then checked against the SDK's own replies: the same
        assert handshake(tmp_path, *args) == first


def test_the_early_replies_come_before_the_sdk_is_imported(tmp_path):
    handshake(tmp_path)
    out, _ = serve(tmp_path, [INITIALIZE, INITIALIZED, TOOLS_LIST, READ_GRAPH], importtime=True)
    replies = [i for i, line in enumerate(out) if line.startswith(b'{"jsonrpc"')]
    assert len(replies) == 3
    imported = {line.rsplit(b"|", 1)[1].strip().decode(): i for i, line in enumerate(out)
                if line.startswith(b"import time:") and b"[us]" not in line}
    assert all(name in imported for name in HEAVY)  # the server was built (after the replies)
    early = {name: i for name, i in imported.items() if name in HEAVY and i < replies[1]}
    assert not early, f"imported before the tools/list reply: {sorted(early)}"


def test_another_configuration_or_request_is_answered_by_the_sdk(tmp_path):
    first = handshake(tmp_path)
    # another name: another configuration, nothing recorded for it yet
    named = handshake(tmp_path, "--name", "other")
    assert b'"name":"other"' in named[0] and named[1] == first[1]
    # another protocol version and client; a string id; spacing that differs
    other = {**INITIALIZE, "id": "a-1", "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
    for _ in range(2):
        replies, _ = serve(tmp_path, [other, INITIALIZED, {**TOOLS_LIST, "id": "a-2"}])
        assert json.loads(replies[0])["id"] == "a-1" and json.loads(replies[0])["result"]["protocolVersion"] == "2025-03-26"
        assert json.loads(replies[1])["id"] == "a-2" and json.loads(replies[1])["result"] == json.loads(first[1])["result"]
    spaced = json.dumps(INITIALIZE, indent=1).replace("\n", " ")
    assert handshake(tmp_path)[:2] == first[:2]  # recorded again for this request
    replies, _ = serve(tmp_path, [spaced, INITIALIZED, TOOLS_LIST, READ_GRAPH])
    assert replies == first


def test_lines_after_the_early_replies_reach_the_sdk_in_order(tmp_path):
    handshake(tmp_path)
    clean, _ = serve(tmp_path / "clean", [INITIALIZE, INITIALIZED, TOOLS_LIST, "{nope", READ_GRAPH,
                                          {**READ_GRAPH, "id": 1, "params": 5}])
    early, stderr = serve(tmp_path, [INITIALIZE, INITIALIZED, TOOLS_LIST, "{nope", READ_GRAPH,
                                     {**READ_GRAPH, "id": 1, "params": 5}])
    # a refusal, a call, an id used again after its reply (the reader's refusals and the server's
    # replies are written as each is ready, in either order)
    assert sorted(early) == sorted(clean), stderr
    codes = sorted(json.loads(r).get("error", {}).get("code", 0) for r in early)
    assert codes == [-32700, -32602, 0, 0, 0]
    # a malformed line where tools/list was expected: the SDK answers it, and everything after
    clean, _ = serve(tmp_path / "clean2", [INITIALIZE, INITIALIZED, '{"jsonrpc":"2.0","id":2,"method":"tools/list",'
                                          '"params":[]}', TOOLS_LIST])
    early, _ = serve(tmp_path, [INITIALIZE, INITIALIZED, '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":[]}',
                                TOOLS_LIST])
    assert sorted(early) == sorted(clean)
    assert [json.loads(r).get("error", {}).get("code") for r in early].count(-32602) == 1


def test_only_serve_over_stdio_answers_early(tmp_path):
    from memloci.mcp.early import serve_arguments

    assert serve_arguments(["serve"]) == (None, None)
    assert serve_arguments(["--home", "h", "--config=c", "serve", "--tools", "graph"]) == ("h", "c")
    assert serve_arguments(["serve", "--transport", "stdio"]) == (None, None)
    for args in (["serve", "--transport", "http"], ["serve", "--transport=http"], ["serve", "--help"],
                 ["serve", "--transport"], ["tools"], ["--home", "a", "--home", "b", "serve"], ["--home=", "serve"],
                 ["--verbose", "serve"], ["--home"]):
        assert serve_arguments(args) is None, args


def test_an_id_used_again_after_its_early_reply_gets_its_own_reply(tmp_path):
    """The client has the tools/list reply before the SDK answers that request again, so it may use
    its id again at once: that call gets its reply, and the SDK's second tools/list reply is not sent."""
    first = handshake(tmp_path)
    replies, stderr = serve(tmp_path, [INITIALIZE, INITIALIZED, TOOLS_LIST, {**READ_GRAPH, "id": 2}])
    assert replies[:2] == first[:2], stderr
    assert len(replies) == 3 and replies[2] == first[2].replace(b'"id":3', b'"id":2', 1), stderr


def test_the_servers_of_the_tests_keep_their_replies_out_of_the_users_cache(tmp_path):
    """A test's server records its start replies in this run's cache folder, not the user's."""
    from memloci.core.settings import Settings

    user = Settings.from_env({k: v for k, v in environment_now().items() if not k.startswith("MEMLOCI_")})
    ours = Settings.from_env(server_env(tmp_path / "home"))
    assert ours.cache_for("handshake") != user.cache_for("handshake")
    assert ours.model_cache.resolve() == user.model_cache.resolve()


@pytest.mark.parametrize("change", ["edited", "truncated", "no newline", "another configuration", "old format",
                                    "writable by others", "a link"])
def test_a_cache_file_changed_since_it_was_written_is_never_sent(tmp_path, change):
    """A start sends only what a start of this configuration recorded: a file edited by hand,
    cut short, or copied from another configuration's name is the SDK's to answer (and written anew)."""
    from memloci.core.handshake import seal

    first = handshake(tmp_path)
    [path] = (tmp_path / "cache" / "memloci" / "handshake").glob("*.json")
    record = json.loads(path.read_bytes())
    replies = record["replies"]
    written = json.loads(json.dumps(record))
    if change == "edited":
        replies["tools/list"]["reply"] = replies["tools/list"]["reply"].replace('"description":"', '"description":"X', 1)
    elif change == "no newline":
        replies["tools/list"]["reply"] = replies["tools/list"]["reply"].rstrip("\n")
    elif change == "another configuration":
        record["configuration"] = "0" * 64
    if change == "writable by others":  # a cache folder others can write (as /tmp) holds anyone's files
        replies["tools/list"]["reply"] = replies["tools/list"]["reply"].replace('"tools":[', '"tools":[{"name":"x"},', 1)
        path.write_text(json.dumps({**record, "sha256": seal(record["configuration"], replies)}))
        path.chmod(0o666)
    elif change == "a link":
        replies["tools/list"]["reply"] = replies["tools/list"]["reply"].replace('"tools":[', '"tools":[{"name":"x"},', 1)
        (tmp_path / "elsewhere.json").write_text(json.dumps({**record, "sha256": seal(record["configuration"], replies)}))
        path.unlink()
        path.symlink_to(tmp_path / "elsewhere.json")
    elif change == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    elif change == "old format":
        path.write_text(json.dumps({m: {**r, "reply": r["reply"].replace('"tools":[', '"tools":[{"name":"x"},', 1)}
                                    for m, r in replies.items()}))
    else:
        path.write_text(json.dumps(record))
    assert handshake(tmp_path) == first
    if change != "a link":  # a link is neither followed nor replaced (core/confine.py)
        assert json.loads(path.read_bytes()) == written  # written anew
    assert handshake(tmp_path) == first


def test_a_package_installed_again_under_the_same_name_is_another_configuration(tmp_path):
    """A package installed again beside the SDK with the same name and version (its dist-info
    folder made anew) may change the replies: the start's fingerprint changes with it."""
    import os

    import mcp

    site = tmp_path / "site"
    (site / "other-1.0.dist-info").mkdir(parents=True)
    (site / "mcp").symlink_to(Path(mcp.__file__).parent, target_is_directory=True)
    env = server_env(tmp_path / "home", PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    probe = [sys.executable, "-c", "from memloci.mcp.early import fingerprint; print(fingerprint(['serve'], None, None)[1])"]

    def digest() -> str:
        return subprocess.run(probe, capture_output=True, env=env, check=True, timeout=60).stdout.decode()

    before = digest()
    assert digest() == before
    os.utime(site / "other-1.0.dist-info", ns=(1, 1))
    assert digest() != before
