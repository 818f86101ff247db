"""`memloci migrate` into a Markdown library keeps a note's body as it was: a body without a
final newline or one ending in blank lines is stored byte for byte, so the migration's own
check passes."""

from __future__ import annotations

import pytest

from memloci.app.registry import LibraryRegistry
from memloci.app.specs import LibrarySpec
from memloci.core.settings import Settings
from memloci.search.embedder import EmbedderHandle
from memloci.service import migrate as mig
from memloci.service.documents import NewEntityDocument
from memloci.service.facade import MemoryService


@pytest.mark.parametrize("content", [
    "body only",  # no final newline
    "Some text.\n\n## Notes\nTrailing spaces here   \n\n\n",  # ends in blank lines
])
def test_sqlite_to_markdown_keeps_the_body_and_passes_its_own_check(tmp_path, content):
    home = tmp_path / "home"
    old = LibrarySpec("old", tmp_path / "old.db")
    service = MemoryService(LibraryRegistry([old]), EmbedderHandle("none"))
    service.add_entities([NewEntityDocument("Note", "note", content=content)])
    service.close()
    settings = Settings.from_env().with_flags(home=str(home))
    source, target = mig.open_pair(old, LibrarySpec("notes", tmp_path / "notes", "markdown"), settings)
    try:
        report = mig.migrate(source, target, embedder_model=None)
    finally:
        source.close()
        target.close()
    assert report.ok, [r for r in report.rows if not r["equal"]]
