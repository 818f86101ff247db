"""The config file and the command line: unknown keys refused with the closest valid one, the
default library's schema, text printed as written (never read as Rich markup), and libraries
that are mounted but not created yet shown empty."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import server_env


def memloci(home, *args, check=True):
    proc = subprocess.run([sys.executable, "-m", "memloci", *args], env=server_env(home, COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def write(path, text):
    path.write_text(text)
    return str(path)


def entities_file(tmp_path, names):
    return write(tmp_path / "seed.jsonl", "\n".join(
        json.dumps({"type": "entity", "name": n, "entityType": "person", "observations": []}) for n in names) + "\n")


def test_an_unknown_config_key_is_refused_with_the_closest_valid_one(home, tmp_path):
    config = write(tmp_path / "config.toml", '[librarys]\nwork = "work.db"\n')
    proc = memloci(home, "--config", config, "stats", check=False)
    assert proc.returncode == 1
    assert f"config: {config}: librarys: unknown key; did you mean libraries?" in proc.stderr
    assert "Known keys: name, tools, libraries, schemas, oauth, http, lifecycle." in proc.stderr
    config = write(tmp_path / "other.toml", 'tool = "graph"\n')
    assert "tool: unknown key; did you mean tools?" in memloci(home, "--config", config, "stats", check=False).stderr
    config = write(tmp_path / "typed.toml", 'name = 3\n')
    assert "name: must be a string" in memloci(home, "--config", config, "stats", check=False).stderr
    # the same refusal stops the server before it speaks (stdout stays empty: it is the protocol)
    proc = subprocess.run([sys.executable, "-m", "memloci", "--config", str(tmp_path / "config.toml"), "serve"],
                          env=server_env(home), capture_output=True, text=True, timeout=60, input="")
    assert proc.returncode == 1 and proc.stdout == "" and "did you mean libraries?" in proc.stderr


def test_schemas_default_strict_applies_to_the_default_library(home, tmp_path):
    config = write(tmp_path / "config.toml", '[schemas]\ndefault = "strict"\n')
    proc = memloci(home, "--config", config, "import", "jsonl", entities_file(tmp_path, ["Ada Lovelace"]), check=False)
    assert proc.returncode == 1 and "does not match schema 'strict'" in proc.stderr
    memloci(home, "--config", config, "import", "jsonl", entities_file(tmp_path, ["ada-lovelace"]))
    assert "follows schema 'strict': no violations" in memloci(home, "--config", config, "check").stdout
    bad = write(tmp_path / "bad.toml", '[schemas]\nwork = "strict"\n')
    proc = memloci(home, "--config", bad, "stats", check=False)
    assert "[schemas] names libraries that are not mounted: work; mounted: default" in proc.stderr


def test_text_with_brackets_prints_as_written(home, tmp_path):
    memloci(home, "import", "jsonl", entities_file(tmp_path, ["Ada Lovelace", "[draft] notes"]))
    out = memloci(home, "check", "--schema", "strict", check=False).stdout
    assert "rule [a-z][a-z0-9-]*" in out and "[draft] notes" in out
    help_text = memloci(home, "serve", "--help").stdout
    assert "(config [schemas])" in " ".join(help_text.split())
    bad = write(tmp_path / "bad.toml", '[schemas]\nwork = "strict"\n')
    assert "(config" not in memloci(home, "--config", bad, "stats", check=False).stderr.replace("[schemas]", "")
    assert "[schemas] names" in memloci(home, "--config", bad, "stats", check=False).stderr
    assert "[draft] notes" in memloci(home, "search", "draft").stdout


def test_a_mounted_library_not_created_yet_is_shown_empty(home, tmp_path):
    libraries = f"work:{tmp_path / 'work.db'},notes:{tmp_path / 'notes'}"
    for library in ("work", "notes"):
        args = ["--libraries", libraries, "-l", library]
        for command in (["search", "x"], ["history"], ["export", "jsonl"], ["export", "markdown"], ["check"]):
            proc = memloci(home, *command, *args)
            assert f"library '{library}' does not exist yet" in proc.stderr and "empty" in proc.stderr, command
        assert memloci(home, "export", "jsonl", *args).stdout == ""
    out = memloci(home, "stats", "--libraries", libraries).stdout
    assert out.count("not created yet") == 2
    assert not (tmp_path / "work.db").exists() and not (tmp_path / "notes").exists(), "reading creates nothing"


def test_check_says_when_it_stops_listing(home, tmp_path):
    memloci(home, "import", "jsonl", entities_file(tmp_path, [f"Person {i}" for i in range(1100)]))
    proc = memloci(home, "check", "--schema", "strict", check=False)
    assert proc.returncode == 1
    shown, total = map(int, re.search(r"showing (\d+) of (\d+) violations", proc.stdout).groups())
    assert shown == 1000 and total == 1100
    assert sum(1 for line in proc.stdout.splitlines() if "Person " in line) == 1000
