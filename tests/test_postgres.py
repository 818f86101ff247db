"""The postgres engine on a real PostgreSQL (tests/pg.py): library URLs, the official graph
tools' semantics through the service, writes from several processes at once, and another
server's writes seen through LISTEN/NOTIFY."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memloci.errors import AlreadyExistsError, InvalidRelationError, NotFoundError, ValidationError
from memloci.libraries import LibraryRegistry, load_config, masked_url, parse_library_specs
from memloci.model import EntityInput, ObservationBatch, RelationInput
from memloci.schema import schema_from_config
from memloci.service import MemoryService

ROOT = Path(__file__).resolve().parents[1]


# -- library specs -------------------------------------------------------------------------

def test_a_postgresql_url_selects_the_postgres_engine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    specs = parse_library_specs("team:postgresql://me@db.example/memory?sslmode=require,"
                                "ops:postgres://me@db.example/memory,local:notes.db")
    assert [(s.name, s.kind) for s in specs] == [("team", "postgres"), ("ops", "postgres"), ("local", "sqlite")]
    # the URL is kept as given (a Path would fold `//`), and nothing is made on disk
    assert specs[0].path == "postgresql://me@db.example/memory?sslmode=require"
    assert specs[1].path == "postgres://me@db.example/memory"
    assert list(tmp_path.iterdir()) == []
    # a socket URL, as libpq takes it
    (sock,) = parse_library_specs("team:postgresql://postgres:@/postgres?host=/tmp/pg")
    assert sock.kind == "postgres" and sock.path == "postgresql://postgres:@/postgres?host=/tmp/pg"


@pytest.mark.parametrize("url", ["http://x", "https://host/db", "mysql://me@host/db", "file:///tmp/x.db",
                                 "sqlite://x.db"])
def test_a_url_of_a_scheme_not_served_is_refused(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValidationError) as err:
        parse_library_specs(f"team:{url}")
    message = str(err.value)
    scheme = url.partition(":")[0]
    assert f"libraries[0] path '{url}'" in message and f"scheme '{scheme}' is not served" in message
    assert "postgresql://" in message
    assert list(tmp_path.iterdir()) == []  # no folder named `http:` or anything else


def test_config_file_libraries_take_urls(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[libraries]\nteam = "postgresql://me:s3cret@db.example/memory"\nnotes = "notes"\n')
    specs = load_config(config)["libraries"]
    assert [(s.name, s.kind, str(s.path)) for s in specs] == [
        ("team", "postgres", "postgresql://me:s3cret@db.example/memory"),  # not made relative to the file
        ("notes", "markdown", str(tmp_path / "notes"))]
    config.write_text('[libraries]\nteam = "ftp://me:s3cret@db.example/memory"\n')
    with pytest.raises(ValidationError) as err:
        load_config(config)
    assert "config [libraries] team path" in str(err.value) and "scheme 'ftp' is not served" in str(err.value)
    assert "s3cret" not in str(err.value)


def test_passwords_are_masked():
    assert masked_url("postgresql://me:s3cret@db.example:5432/memory") == "postgresql://me:***@db.example:5432/memory"
    assert "s3cret" not in masked_url("postgresql://me@db/memory?password=s3cret&sslmode=require")
    assert masked_url("postgresql://me@db/memory?password=s3cret&sslmode=require").endswith("sslmode=require")
    assert masked_url("postgresql://me@db/memory") == "postgresql://me@db/memory"
    with pytest.raises(ValidationError) as err:
        parse_library_specs("team:postgresql://me:s3cret@db:notaport/memory")
    assert "s3cret" not in str(err.value) and "port" in str(err.value)


def test_an_unreachable_server_is_reported_without_its_password(tmp_path):
    registry = LibraryRegistry(parse_library_specs(
        f"team:postgresql://me:s3cret@/memory?host={tmp_path}/nowhere&connect_timeout=2"))
    try:
        with pytest.raises(Exception) as err:
            MemoryService(registry).read_graph(library="team")
        assert "cannot reach PostgreSQL" in str(err.value) and "s3cret" not in str(err.value)
        assert "team" in str(err.value)
    finally:
        registry.close()
