"""Several libraries in one server, Markdown libraries on disk, and the document tools, all
through the real MCP client against `memloci serve` over stdio."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import Client, process_session, run_session, server_env


def _libs(tmp_path: Path) -> str:
    return f"work:{tmp_path / 'work'},personal:{tmp_path / 'personal.db'}"


def _wait_for(predicate, timeout: float = 2.0):
    """Poll an async predicate until it is true; the elapsed seconds (fails after `timeout`)."""

    async def poll():
        started = time.monotonic()
        while True:
            if await predicate():
                return time.monotonic() - started
            assert time.monotonic() - started < timeout, "not reflected in time"
            await anyio.sleep(0.1)

    return poll()


def test_two_libraries_mounted_side_by_side(tmp_path, home):
    work = tmp_path / "work"

    async def body(c: Client):
        libs, _ = await c.ok("list_libraries")
        kinds = {lib["name"]: lib["kind"] for lib in libs["libraries"]}
        assert kinds == {"work": "markdown", "personal": "sqlite"}
        err = await c.error("create_entities", entities=[{"name": "x", "entityType": "t", "observations": []}])
        assert err["code"] == "VALIDATION_ERROR" and "work" in err["message"] and "personal" in err["message"]
        await c.ok("create_entities", library="work", entities=[
            {"name": "python-project", "entityType": "project", "observations": ["Started development on 2024-01-29"]},
            {"name": "fastapi", "entityType": "tool", "observations": []}])
        await c.ok("create_relations", library_name="work",
                   relations=[{"from": "python-project", "relationType": "uses", "to": "fastapi"}])
        await c.ok("create_entities", library="personal", entities=[{"name": "garden", "entityType": "place",
                                                                     "observations": ["tomatoes in May"]}])
        mine, _ = await c.ok("list_entities", library="personal")
        assert [e["name"] for e in mine["entities"]] == ["garden"]
        found, _ = await c.ok("list_entities", library="work", entity_glob="PYTHON-*")
        assert [(e["name"], e["path"]) for e in found["entities"]] == [("python-project", "python-project.md")]

    run_session(home, body, "--libraries", _libs(tmp_path), "--name", "brain")
    text = (work / "python-project.md").read_text()
    assert text.startswith("---\ntype: project\n")
    assert "relations:\n  - {type: uses, to: fastapi}\n" in text
    # memloci dates the observation lines it writes, in a comment a reader does not see
    assert "# python-project\n\n## Observations\n- Started development on 2024-01-29 <!-- 20" in text
    # the index stays out of git; the journal and free memories beside it are kept
    assert "*\n!journal.md\n!memories/\n!memories/*.md\n" in (work / ".memloci" / ".gitignore").read_text()
    assert not (tmp_path / "personal").exists() and (tmp_path / "personal.db").is_file()


def test_bad_library_specs_are_refused_clearly(tmp_path, home):
    for spec, words in [("work", "NAME:PATH"), (f"a:{tmp_path}/x,A:{tmp_path}/y", "unique"),
                        ("bad name:/tmp/x", "letters")]:
        out = subprocess.run([sys.executable, "-m", "memloci", "serve", "--libraries", spec],
                             env=server_env(home), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert out.returncode != 0 and words in out.stderr, out.stderr
    (tmp_path / "plain.txt").write_text("x")
    out = subprocess.run([sys.executable, "-m", "memloci", "serve", "--libraries", f"w:{tmp_path / 'plain.txt'}"],
                         env=server_env(home), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "not a folder" in out.stderr


def test_config_file_mounts_libraries(tmp_path, home):
    config = tmp_path / "memloci.toml"
    config.write_text(f'name = "from-config"\n[libraries]\nnotes = "{tmp_path / "notes"}"\n')

    async def body(c: Client):
        libs, _ = await c.ok("list_libraries")
        assert [(lib["name"], lib["kind"]) for lib in libs["libraries"]] == [("notes", "markdown")]

    run_session(home, body, MEMLOCI_CONFIG=str(config))


def test_document_tools_read_by_section_and_edit_by_context(tmp_path, home):
    work = tmp_path / "work"

    async def body(c: Client):
        await c.ok("add_entities", library="work", entities=[{
            "name": "deploy-guide", "entity_type": "document", "aliases": ["dg"],
            "relations": [{"relation_type": "part_of", "to": "handbook"}],
            "content": "How we ship.\n\n## Steps\n1. build\n2. push\n\n### Rollback\nRevert the tag.\n\n"
                       "## Notes\nSee [[python-project]].\n"}])
        err = await c.error("add_entities", library="work", entities=[{"name": "Deploy-Guide", "content": "x"}])
        assert err["code"] == "ALREADY_EXISTS"
        toc, _ = await c.ok("get_entities_toc", library="work", entity_names=["deploy-guide"])
        assert toc["entities"][0]["toc"] == [
            {"heading": "frontmatter", "level": 0}, {"heading": "deploy-guide", "level": 1},
            {"heading": "Steps", "level": 2}, {"heading": "Rollback", "level": 3}, {"heading": "Notes", "level": 2}]
        sections, _ = await c.ok("read_entities_sections", library="work", entity_names=["deploy-guide"],
                                 section_globs=["step*", "frontmatter"])
        got = {s["heading"]: s["content"] for s in sections["entities"][0]["sections"]}
        assert "### Rollback\nRevert the tag." in got["Steps"] and "See [[" not in got["Steps"]
        assert "aliases: [dg]" in got["frontmatter"]

        path = work / "deploy-guide.md"
        before = path.read_bytes()
        err = await c.error("replace_entity_content", library="work", entity_name="deploy-guide",
                            old_content="2", new_content="3")  # in "2. push" and in the dates: ambiguous
        assert err["code"] == "VALIDATION_ERROR" and "old_content" in err["message"]
        err = await c.error("delete_entity_content", library="work", entity_name="deploy-guide",
                            content_to_delete="no such text")
        assert err["code"] == "NOT_FOUND" and "content_to_delete" in err["message"]
        assert path.read_bytes() == before  # refused edits leave the file byte-identical

        await c.ok("replace_entity_content", library="work", entity_name="deploy-guide",
                   old_content="2. push", new_content="2. push\n3. tag")
        await c.ok("add_entity_content", library="work", entity_name="deploy-guide", in_section="## NOTES",
                   new_content="Ask #ops first.")
        await c.ok("add_entity_content", library="work", entity_name="deploy-guide", in_section="Owners",
                   new_content="Ana")
        await c.ok("replace_entity_section", library="work", entity_name="deploy-guide", old_heading="rollback",
                   new_heading="Rolling back", new_body_content="Revert the tag, then redeploy.")
        await c.ok("delete_entity_content", library="work", entity_name="deploy-guide", content_to_delete="How we ship.\n")
        read, _ = await c.ok("read_entities", library="work", entity_names=["deploy-guide", "ghost"])
        assert read["missing"] == ["ghost"]
        content = read["entities"][0]["content"]
        assert content == path.read_text()
        assert "3. tag" in content and "### Rolling back\nRevert the tag, then redeploy." in content
        assert content.index("Ask #ops first.") < content.index("## Owners\n\nAna")
        assert "How we ship." not in content
        rels, _ = await c.ok("find_relations", library="work", from_entity="deploy-guide")
        assert rels["total"] == 0  # handbook and python-project do not exist yet: links wait
        await c.ok("create_entities", library="work", entities=[{"name": "python-project", "entityType": "project",
                                                                 "observations": []}])
        rels, _ = await c.ok("find_relations", library="work", to_entity="python-project")
        assert rels["relations"] == [{"from": "deploy-guide", "relationType": "links_to", "to": "python-project"}]

        # The same tools on a SQLite library: the body lives in the database.
        await c.ok("add_entities", library="personal", entities=[{"name": "recipes", "content": "## Soup\nleek\n"}])
        await c.ok("add_entity_content", library="personal", entity_name="recipes", in_section="soup",
                   new_content="potato")
        sec, _ = await c.ok("read_entities_sections", library="personal", entity_names=["recipes"], section_globs=["soup"])
        assert sec["entities"][0]["sections"][0]["content"].split() == ["##", "Soup", "leek", "potato"]

    run_session(home, body, "--libraries", _libs(tmp_path))


def test_outside_edits_show_up_and_broken_files_are_reported(tmp_path, home):
    work = tmp_path / "work"
    work.mkdir()
    (work / "team").mkdir()
    (work / "team" / "ana.md").write_text("---\ntype: person\nfavourite_color: teal  # kept\nnested:\n  a: 1\n---\n"
                                          "# Ana\n\n## Observations\n- leads the platform team\n")

    async def body(c: Client):
        found, _ = await c.ok("search_nodes", query="platform", library="work")
        assert [e["name"] for e in found["entities"]] == ["Ana"]
        (work / "notes.md").write_text("# Zebra notes\n\nThe okapi is a relative of the giraffe.\n")

        async def okapi():
            hit, _ = await c.ok("search_nodes", query="okapi", library="work")
            return [e["name"] for e in hit["entities"]] == ["Zebra notes"]

        await _wait_for(okapi)
        ana = work / "team" / "ana.md"
        ana.write_text(ana.read_text().replace("platform team", "storage team"))

        async def storage():
            hit, _ = await c.ok("search_nodes", query="storage", library="work")
            return [e["name"] for e in hit["entities"]] == ["Ana"]

        await _wait_for(storage)
        await c.ok("add_observations", library="work", observations=[{"entityName": "ana", "contents": ["likes tea"]}])
        text = ana.read_text()
        assert "favourite_color: teal  # kept\nnested:\n  a: 1\n" in text and "- likes tea" in text
        (work / "notes.md").unlink()

        async def gone():
            listed, _ = await c.ok("list_entities", library="work")
            return [e["name"] for e in listed["entities"]] == ["Ana"]

        await _wait_for(gone)
        broken = work / "broken.md"
        broken.write_bytes(b"---\ntype: [unclosed\n---\n# Broken\n")
        original = broken.read_bytes()

        async def reported():
            libs, _ = await c.ok("list_libraries")
            return "broken.md" in libs["libraries"][0].get("unparsed_files", {})

        await _wait_for(reported)
        assert broken.read_bytes() == original

    run_session(home, body, "--libraries", f"work:{work}")
    # Edits while no server runs are picked up at the next start; a lost index is rebuilt.
    (work / "team" / "ana.md").write_text((work / "team" / "ana.md").read_text().replace("likes tea", "likes coffee"))
    import shutil

    shutil.rmtree(work / ".memloci")

    async def again(c: Client):
        hit, _ = await c.ok("open_nodes", names=["Ana"], library="work")
        assert hit["entities"][0]["observations"] == ["storage team lead" if False else "leads the storage team",
                                                      "likes coffee"]

    run_session(home, again, "--libraries", f"work:{work}")


def test_rename_and_merge_repair_every_link(tmp_path, home):
    work = tmp_path / "work"

    async def body(c: Client):
        await c.ok("add_entities", library="work", entities=[
            {"name": "auth-service", "entity_type": "service", "content": "## Notes\nTalks to [[user-db]].\n"},
            {"name": "user-db", "entity_type": "database", "content": "## Notes\nUsed by [[auth-service|auth]].\n"},
            {"name": "login-api", "entity_type": "service", "relations": [{"relation_type": "calls", "to": "auth-service"}],
             "content": "See [[auth-service#Notes]]."},
            {"name": "authn", "entity_type": "service", "aliases": ["sso"], "content": "## Notes\nSAML too.\n"},
            {"name": "auth-svc", "entity_type": "service", "content": "Old name of [[user-db]] client."}])
        await c.ok("add_observations", library="work", observations=[
            {"entityName": "user-db", "contents": ["replicated for [[auth-service]]"]}])
        err = await c.error("rename_entity", library="work", old_name="auth-service", new_name="USER-DB")
        assert err["code"] == "ALREADY_EXISTS"
        await c.ok("rename_entity", library="work", old_name="auth-service", new_name="identity")
        assert not (work / "auth-service.md").exists() and (work / "identity.md").is_file()
        stale = subprocess.run(["grep", "-rl", "auth-service", str(work), "--include=*.md",
                                "--exclude-dir=.memloci"], capture_output=True, text=True)
        assert stale.stdout == ""
        assert "[[identity|auth]]" in (work / "user-db.md").read_text()
        assert "- replicated for [[identity]]" in (work / "user-db.md").read_text()
        assert "[[identity#Notes]]" in (work / "login-api.md").read_text()
        assert "{type: calls, to: identity}" in (work / "login-api.md").read_text()

        err = await c.error("merge_entities", library="work", source_names=["authn", "nobody"], target_name="identity")
        assert err["code"] == "NOT_FOUND" and "nobody" in err["message"]
        await c.ok("add_observations", library="work", observations=[{"entityName": "authn", "contents": ["uses SAML"]}])
        merged, _ = await c.ok("merge_entities", library="work", source_names=["authn", "auth-svc"], target_name="identity")
        assert merged["merged"] == ["authn", "auth-svc"]
        assert not (work / "authn.md").exists() and not (work / "auth-svc.md").exists()
        text = (work / "identity.md").read_text()
        assert "aliases: [authn, sso, auth-svc]" in text
        assert "## Merged from authn\n\n### Notes\nSAML too.\n\n---\n" in text and "## Merged from auth-svc" in text
        assert "- uses SAML" in text
        rels, _ = await c.ok("find_relations", library="work", from_entity="identity")
        assert {r["to"] for r in rels["relations"]} == {"user-db"}
        history = (work / ".memloci" / "journal.md").read_text()
        assert "merge_entities · identity, authn, auth-svc" in history and "SAML too." in history

    run_session(home, body, "--libraries", f"work:{work}")


def test_manual_sections(tmp_path, home):
    work = tmp_path / "work"

    async def body(c: Client):
        manual, _ = await c.ok("read_manual", library="work")
        assert manual["exists"] is False
        await c.ok("add_manual_section", library="work", toc="Conventions", new_content="- names are kebab-case")
        await c.ok("add_manual_section", library="work", toc="Scope", new_content="Work notes only.")
        await c.ok("update_manual_section", library="work", toc="conventions", old_content="kebab-case",
                   new_content="kebab-case, lowercase")
        err = await c.error("update_manual_section", library="work", toc="Scope", old_content="kebab", new_content="x")
        assert err["code"] == "NOT_FOUND"  # the text is in another section
        await c.ok("delete_manual_section", library="work", toc="Scope", deleting_content="Work notes only.")
        manual, _ = await c.ok("read_manual", library="work")
        assert "## Scope" not in manual["content"] and "- names are kebab-case, lowercase" in manual["content"]
        assert manual["content"] == (work / "meta.md").read_text()

    run_session(home, body, "--libraries", f"work:{work}")


@pytest.mark.full  # two server processes
def test_two_processes_edit_one_markdown_library(tmp_path, home):
    work = tmp_path / "work"
    n = 200

    async def writer(tag: str, results: list):
        async with process_session(home, "--libraries", f"work:{work}") as session:
            c = Client(session)
            for i in range(n):
                if i % 4 == 0:
                    await c.ok("add_observations", observations=[{"entityName": "shared", "contents": [f"{tag} obs {i}"]}])
                elif i % 4 == 1:
                    await c.ok("add_entity_content", entity_name="shared", in_section="Log", new_content=f"- {tag} line {i}")
                elif i % 4 == 2:
                    await c.ok("create_entities", entities=[{"name": f"{tag}-{i}", "entityType": "note", "observations": []}])
                else:
                    await c.ok("store_memory", content=f"{tag} memory {i}")
            results.append(tag)

    async def main():
        async with process_session(home, "--libraries", f"work:{work}") as session:
            await Client(session).ok("create_entities", entities=[{"name": "shared", "entityType": "note", "observations": []}])
        results: list = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, "a", results)
            tg.start_soon(writer, "b", results)
        assert sorted(results) == ["a", "b"]

    anyio.run(main)
    shared = (work / "shared.md").read_text()
    memories = "".join(p.read_text() for p in (work / ".memloci" / "memories").glob("*.md"))
    for tag in "ab":
        for i in range(n):
            if i % 4 == 0:
                assert f"- {tag} obs {i} <!-- " in shared  # dated by memloci
            elif i % 4 == 1:
                assert f"- {tag} line {i}\n" in shared
            elif i % 4 == 2:
                assert (work / f"{tag}-{i}.md").is_file()
            else:
                assert f"\n{tag} memory {i}\n" in memories


def test_reindex_rebuilds_a_markdown_index_from_its_files(tmp_path, home):
    work = tmp_path / "work"

    async def body(c: Client):
        await c.ok("create_entities", entities=[{"name": "kept", "entityType": "note", "observations": ["stays"]}])
        await c.ok("store_memory", content="a free memory in a day file", tags=["x"])

    run_session(home, body, "--libraries", f"work:{work}")
    # Damage the index behind memloci's back: an entity no file holds.
    import sqlite3

    db = sqlite3.connect(work / ".memloci" / "index.db")
    db.execute("INSERT INTO entities (name, name_key, entity_type, created_at, updated_at) "
               "VALUES ('ghost', 'ghost', 'note', 'x', 'x')")
    db.commit()
    db.close()
    out = subprocess.run([sys.executable, "-m", "memloci", "reindex", "--libraries", f"work:{work}"],
                         env=server_env(home), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr

    async def check(c: Client):
        names, _ = await c.ok("list_entities")
        assert [e["name"] for e in names["entities"]] == ["kept"]
        tagged, _ = await c.ok("search_by_tag", tags=["x"])
        assert [m["content"] for m in tagged["memories"]] == ["a free memory in a day file"]
        history = subprocess.run([sys.executable, "-m", "memloci", "history", "--libraries", f"work:{work}"],
                                 env=server_env(home), capture_output=True, text=True, timeout=120)
        assert "create_entities" in history.stdout and "store_memory" in history.stdout

    run_session(home, check, "--libraries", f"work:{work}")


@pytest.mark.parametrize("spec, says", [
    ("team:postgresql://postgres@localhost,127.0.0.1:55433/postgres", "ends at a comma before its database"),
    ("t:postgresql:/postgres", "a library URL starts with postgresql://"),
    ("t:postgresql://u:secret@h/db?bogus=1", 'invalid URI query parameter: "bogus"'),
    ("t:postgresql://u@h:notaport/db", "port 'notaport' is not a number"),
])
def test_a_library_url_libpq_would_refuse_is_refused_at_start(spec, says):
    """Refused when the server starts, naming the spec, never a folder made of its pieces and
    never the password shown."""
    from memloci.app.specs import parse_library_specs
    from memloci.core.errors import ValidationError

    with pytest.raises(ValidationError, match="libraries\\[0\\]") as err:
        parse_library_specs(spec)
    assert says in str(err.value) and "secret" not in str(err.value)


def test_a_library_url_keeps_its_hosts_and_a_lower_case_scheme(tmp_path):
    from memloci.app.config import load_config
    from memloci.app.specs import parse_library_specs

    spec = parse_library_specs("t:POSTGRESQL://u@h/db,notes:" + str(tmp_path / "n"))
    assert [(s.name, s.path, s.kind) for s in spec][0] == ("t", "postgresql://u@h/db", "postgres")
    config = tmp_path / "c.toml"
    config.write_text('[libraries]\nteam = "postgresql://u:pw@127.0.0.1:1,127.0.0.1:55433/postgres"\n')
    (lib,) = load_config(config)["libraries"]
    assert lib.kind == "postgres" and lib.path == "postgresql://u:pw@127.0.0.1:1,127.0.0.1:55433/postgres"


def test_search_across_libraries_ranks_the_hits_together_and_names_each_library(tmp_path, home):
    """`library: "*"` or a list on search_nodes, retrieve_memory and search_memory: a Markdown and
    a SQLite library searched at once; one ranking, limits over it, every hit naming its library."""

    async def body(c: Client):
        await c.ok("create_entities", library="work", entities=[
            {"name": "deploy-pipeline", "entityType": "project", "observations": ["deploy runs on Fridays"]},
            {"name": "deploy-docs", "entityType": "doc", "observations": ["how the deploy works"]}])
        await c.ok("create_entities", library="personal", entities=[
            {"name": "garden", "entityType": "place", "observations": ["deploy the tomato seedlings in May"]}])
        await c.ok("create_relations", library="work",
                   relations=[{"from": "deploy-docs", "relationType": "describes", "to": "deploy-pipeline"}])
        await c.ok("store_memory", library="work", content="the deploy pipeline needs a green build")
        await c.ok("store_memory", library="personal", content="deploy the hammock before summer")
        await c.ok("store_memory", library="personal", content="buy tomato seeds")

        every, text = await c.ok("search_nodes", query="deploy", library="*")
        assert sorted((e["library"], e["name"]) for e in every["entities"]) == [
            ("personal", "garden"), ("work", "deploy-docs"), ("work", "deploy-pipeline")]
        assert every["total_count"] == 3 and every["libraries"] == ["work", "personal"]
        assert every["entities"] == text["entities"]  # the text says the same
        assert [(r["library"], r["from"]) for r in every["relations"]] == [("work", "deploy-docs")]
        assert all(e["why"] for e in every["entities"])
        # each library's best first: its ranks interleave, its own order is kept
        firsts = {e["library"] for e in every["entities"][:2]}
        assert firsts == {"work", "personal"}
        page, _ = await c.ok("search_nodes", query="deploy", library=["personal", "WORK"], limit=2)
        assert len(page["entities"]) == 2 and page["is_truncated"] and page["next_offset"] == 2
        rest, _ = await c.ok("search_nodes", query="deploy", library=["personal", "WORK"], limit=2, offset=2)
        assert {(e["library"], e["name"]) for e in page["entities"] + rest["entities"]} == {
            (e["library"], e["name"]) for e in every["entities"]} and not rest["is_truncated"]
        alone, _ = await c.ok("search_nodes", query="deploy", library="personal")
        assert "library" not in alone["entities"][0]  # one library: the reply as before

        memories, text = await c.ok("retrieve_memory", query="deploy", library="*", n_results=10)
        assert sorted((m["library"], m["content"]) for m in memories["memories"]) == [  # observations are memories too
            ("personal", "deploy the hammock before summer"), ("personal", "deploy the tomato seedlings in May"),
            ("work", "deploy runs on Fridays"), ("work", "how the deploy works"),
            ("work", "the deploy pipeline needs a green build")]
        assert {m["library"] for m in memories["memories"][:2]} == {"work", "personal"}
        assert memories["memories"] == text["memories"]
        one, _ = await c.ok("retrieve_memory", query="deploy", library=["work", "personal"], n_results=1)
        assert len(one["memories"]) == 1 and one["total_results"] == 1

        newest, _ = await c.ok("retrieve_memory", query="latest", library="*", n_results=10)  # a listing: by date
        dates = [m["created_at"] for m in newest["memories"]]
        assert len(dates) == 6 and dates == sorted(dates, reverse=True)
        assert {m["library"] for m in newest["memories"]} == {"work", "personal"}
        only, _ = await c.ok("retrieve_memory", query="deploy", library="*", entity="garden")  # in one library
        assert [(m["library"], m["content"]) for m in only["memories"]] == [
            ("personal", "deploy the tomato seedlings in May")]
        nobody = await c.error("retrieve_memory", query="deploy", library="*", entity="nobody")
        assert nobody["code"] == "NOT_FOUND" and "libraries 'work', 'personal'" in nobody["message"]
        missing = await c.error("search_nodes", query="deploy", library=["work", "nope"])
        assert missing["code"] == "NOT_FOUND" and "'nope'" in missing["message"]
        empty = await c.error("retrieve_memory", query="deploy", library=[])
        assert empty["code"] == "VALIDATION_ERROR" and empty["message"].startswith("library:")
        both = await c.error("search_nodes", query="deploy", library="*", library_name="work")
        assert both["code"] == "VALIDATION_ERROR" and "library_name" in both["message"]

    async def strict(c: Client):  # the strict set's search
        found, _ = await c.ok("search_memory", query="deploy", library="*")
        assert {(r["library"], r["name"]) for r in found["data"]["results"]} == {
            ("personal", "garden"), ("work", "deploy-docs"), ("work", "deploy-pipeline")}

    run_session(home, body, "--libraries", _libs(tmp_path))
    run_session(home, strict, "--libraries", _libs(tmp_path), "--tools", "strict")
