"""A library spec that is a URL is either served or refused with a clear error, never mounted
as a Markdown folder and never a crash."""

from __future__ import annotations

import pytest

from memloci.app.specs import parse_library_specs
from memloci.core.errors import MemlociError


@pytest.mark.parametrize("spec", ["postgresql://u@host/db", "postgres://u@/postgres?host=/tmp/x", "mysql://x/y",
                                  "http://x"])
def test_a_url_without_a_library_name_is_refused_not_a_markdown_folder(spec):
    # `postgresql` would be the name and `//u@host/db` a folder at the filesystem's root
    with pytest.raises(MemlociError) as caught:
        parse_library_specs(spec)
    assert caught.value.code == "VALIDATION_ERROR"


@pytest.mark.parametrize("spec", ["team:postgresql://[bad", "team:postgresql://u@[::1/db"])
def test_a_malformed_postgresql_url_is_a_validation_error_not_a_traceback(spec):
    with pytest.raises(MemlociError) as caught:
        parse_library_specs(spec)
    assert caught.value.code == "VALIDATION_ERROR"
    assert "libraries[0]" in caught.value.message


def test_stats_never_prints_the_password_of_a_postgresql_library_not_created_yet(pg_library, tmp_path):
    import os
    import subprocess
    import sys

    # the session's server trusts local logins, so the password is accepted and ignored
    url = pg_library.url.replace("postgres:@", "postgres:hunter2@", 1)
    assert "hunter2" in url
    env = {**os.environ, "MEMLOCI_HOME": str(tmp_path / "home"), "MEMLOCI_LIBRARIES": f"{pg_library.name}:{url}",
           "COLUMNS": "400"}
    shown = subprocess.run([sys.executable, "-m", "memloci", "stats"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert pg_library.name in shown.stdout, shown.stderr
    assert "hunter2" not in shown.stdout + shown.stderr
