"""`memloci maintain ...`: the maintenance tools for a person, each of the same meaning as its
tool; a dry run kept as a preview, `execute ID` applies it, `memloci undo` takes it back."""

from __future__ import annotations

import json

from test_cli import run_cli


def seed(monkeypatch, home) -> None:
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import parse_library_specs
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    service = MemoryService(LibraryRegistry(parse_library_specs(f"default:{home / 'default.db'}")),
                            EmbedderHandle("none"))
    for text, tags in [("Rotate keys monthly.", ["ops"]), ("rotate keys monthly", ["security"]),
                       ("Order pizza on Friday.", ["scratch"])]:
        service.store_memory(text, tags=tags)
    service.close()


def test_preview_execute_undo(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    seed(monkeypatch, home)
    lib = ["--libraries", f"default:{home / 'default.db'}"]
    out = run_cli(monkeypatch, home, "maintain", "duplicates", "--dry-run", *lib)
    assert out.exit_code == 0, out.output
    assert "would be 1 deleted, 1 changed" in out.output and "memloci maintain execute 1" in out.output
    out = run_cli(monkeypatch, home, "maintain", "previews", *lib)
    assert "cleanup_duplicates" in out.output
    out = run_cli(monkeypatch, home, "maintain", "execute", "1", *lib)
    assert out.exit_code == 0 and "1 deleted, 1 changed" in out.output, out.output
    change = out.output.split("memloci undo ")[1].split()[0]
    out = run_cli(monkeypatch, home, "maintain", "tags", *lib)
    assert "security" in out.output and "ops" in out.output
    out = run_cli(monkeypatch, home, "maintain", "export", "json", "--tag", "ops", *lib)
    exported = json.loads(out.output)
    assert [m["tags"] for m in exported] == [["ops", "security"]]
    out = run_cli(monkeypatch, home, "undo", change, *lib)
    assert out.exit_code == 0, out.output
    out = run_cli(monkeypatch, home, "maintain", "analysis", *lib)
    assert json.loads(out.output)["exact_duplicates"] == 1
    out = run_cli(monkeypatch, home, "maintain", "delete-by-tag", "scratch", *lib)
    assert "1 deleted" in out.output


def test_refusals_name_the_option(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    seed(monkeypatch, home)
    lib = ["--libraries", f"default:{home / 'default.db'}"]
    out = run_cli(monkeypatch, home, "maintain", "delete-by-time", "--start", "nope", *lib)
    assert out.exit_code == 1 and "--start:" in out.output
    out = run_cli(monkeypatch, home, "maintain", "metadata", "abc", "--tags", "x", *lib)
    assert out.exit_code == 1 and "NOT_FOUND" in out.output and "HASH:" in out.output
    out = run_cli(monkeypatch, home, "maintain", "execute", "42", *lib)
    assert out.exit_code == 1 and "preview #42" in out.output
    out = run_cli(monkeypatch, home, "maintain", "cleanup", "--older-than", "soon", *lib)
    assert out.exit_code == 1 and "--older-than:" in out.output


def test_gc_relations_lists_then_executes_on_a_markdown_library(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    anna = "---\nrelations:\n  - {type: knows, to: Gone}\n  - {type: knows, to: Bob}\n---\n# Anna\n\nSee [[Gone|him]].\n"
    (notes / "Anna.md").write_text(anna)
    (notes / "Bob.md").write_text("# Bob\n")
    lib = ["--libraries", f"notes:{notes}"]
    out = run_cli(monkeypatch, home, "maintain", "gc-relations", *lib)
    assert out.exit_code == 0, out.output
    assert "front matter relations" in out.output and "(removed)" in out.output and "him" in out.output
    assert "would be 1 changed, 2 links removed" in out.output and "memloci maintain execute 1" in out.output
    assert (notes / "Anna.md").read_text() == anna
    out = run_cli(monkeypatch, home, "maintain", "execute", "1", *lib)
    assert out.exit_code == 0 and "1 changed, 2 links removed" in out.output, out.output
    assert (notes / "Anna.md").read_text() == "---\nrelations:\n  - {type: knows, to: Bob}\n---\n# Anna\n\nSee him.\n"
    change = out.output.split("memloci undo ")[1].split()[0]
    out = run_cli(monkeypatch, home, "undo", change, *lib)
    assert out.exit_code == 0, out.output
    assert (notes / "Anna.md").read_text() == anna
    out = run_cli(monkeypatch, home, "maintain", "gc-relations", "--execute", *lib)
    assert out.exit_code == 0 and "memloci undo" in out.output and "See him." in (notes / "Anna.md").read_text()
