"""Error codes fit the cause: a full disk is STORAGE_FULL, a read-only folder PERMISSION_DENIED
(never INTERNAL_ERROR), and health says `degraded` with the reason while writes fail.

Real file systems: a small tmpfs mounted in a private mount namespace (`unshare -rm`), so the
disk really fills up and the folder is really read-only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_stdio import RawServer, call

MEMLOCI = str(Path(sys.executable).with_name("memloci"))


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(),
                                reason="needs `unshare -rm` and tmpfs mounts (user and mount namespaces)")


def serve_on_tmpfs(home: Path, tmp_path: Path, size: str, *, libraries: str = "", read_only_after: str = "") -> RawServer:
    """`memloci serve` with its data on a fresh tmpfs of `size`; `read_only_after` runs first, then
    the tmpfs is remounted read-only."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = f"mount -t tmpfs -o size={size} tmpfs {disk} && export MEMLOCI_HOME={disk}/home && "
    if libraries:
        script += f"export MEMLOCI_LIBRARIES={libraries.format(disk=disk)} && "
    if read_only_after:
        script += f"{read_only_after.format(memloci=MEMLOCI, disk=disk)} >&2 && mount -o remount,ro {disk} && "
    script += f"exec {MEMLOCI} serve"
    return RawServer(home, command=["unshare", "-rm", "sh", "-c", script]).start()


def tool(server: RawServer, request_id: int, name: str, **arguments) -> tuple[bool, dict]:
    server.send(call(request_id, name, **arguments))
    result = server.until(request_id)[-1]["result"]
    return result.get("isError", False), json.loads(result["content"][0]["text"])


def fill_until_refused(server: RawServer, tool_name: str = "create_entities") -> dict:
    for n in range(200):
        failed, body = tool(server, 100 + n, tool_name, entities=[
            {"name": f"E{n}-{k}", "entityType": "t", "observations": [f"{n} {k} " + "y" * 4000]} for k in range(10)])
        if failed:
            return body["error"]
    raise AssertionError("the disk never filled up")


@pytest.mark.parametrize("kind", ["sqlite", "markdown"])
def test_a_full_disk_is_storage_full_and_health_says_why(home, tmp_path, kind):
    libraries = "main:{disk}/lib" + (".db" if kind == "sqlite" else "")
    server = serve_on_tmpfs(home, tmp_path, "2m", libraries=libraries)
    try:
        error = fill_until_refused(server)
        assert error["code"] == "STORAGE_FULL", error
        assert "disk is full" in error["message"] and "nothing was changed" in error["hint"]
        failed, health = tool(server, 2, "check_database_health")
        assert not failed and health["status"] == "degraded"
        assert any(p.startswith("writes fail: the disk is full") for p in health["problems"]), health
        assert "pending" not in health["embedder"], "MEMLOCI_EMBEDDER=none: nothing would ever drain it"
    finally:
        server.close()


def test_a_read_only_folder_is_permission_denied_and_reads_still_work(home, tmp_path):
    entity = json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["wrote notes"]})
    seed = tmp_path / "seed.jsonl"
    seed.write_text(entity + "\n")
    server = serve_on_tmpfs(home, tmp_path, "4m", read_only_after="{memloci} import jsonl " + str(seed))
    try:
        failed, body = tool(server, 2, "create_entities", entities=[{"name": "Bob", "entityType": "person"}])
        assert failed and body["error"]["code"] == "PERMISSION_DENIED", body
        assert "read-only" in body["error"]["message"] and "writable" in body["error"]["hint"]
        failed, graph = tool(server, 3, "read_graph")
        assert not failed and [e["name"] for e in graph["entities"]] == ["Ada"], graph
        failed, health = tool(server, 4, "check_database_health")
        assert health["status"] == "degraded"
        assert any("read-only" in p for p in health["problems"]), health["problems"]
    finally:
        server.close()


def test_a_library_that_cannot_be_created_on_a_read_only_disk_is_permission_denied(home, tmp_path):
    server = serve_on_tmpfs(home, tmp_path, "1m", read_only_after="true")
    try:
        failed, body = tool(server, 2, "create_entities", entities=[{"name": "Bob", "entityType": "person"}])
        assert failed and body["error"]["code"] == "PERMISSION_DENIED", body
        assert "Read-only file system" in body["error"]["message"]
    finally:
        server.close()


def test_a_markdown_library_on_a_read_only_mount_is_permission_denied_not_internal(home, tmp_path):
    server = serve_on_tmpfs(home, tmp_path, "4m", libraries="notes:{disk}/notes",
                            read_only_after="mkdir {disk}/notes && printf '# Ada\\n' > {disk}/notes/Ada.md")
    try:
        failed, body = tool(server, 2, "create_entities", entities=[{"name": "Bob", "entityType": "person"}])
        assert failed and body["error"]["code"] == "PERMISSION_DENIED", body
        assert "Read-only file system" in body["error"]["message"] or "read-only" in body["error"]["message"]
        # reading needs the index, which cannot be built in a read-only folder: said so, not a crash
        failed, body = tool(server, 3, "read_graph")
        assert failed and body["error"]["code"] == "PERMISSION_DENIED", body
        assert ".memloci: Read-only file system" in body["error"]["message"]
    finally:
        server.close()
