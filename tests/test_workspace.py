"""One workspace across coding agents (`memloci rules`): reading every agent's files into one
model, duplicates and conflicts, sync in each target's own format, unsync byte for byte, a
Windsurf workflow as a Claude Code skill and a Cursor rule, links and outside paths refused."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from workspace_fixture import check_instructions, check_mdc, check_skill, check_windsurf, front, make, tree

from memloci.core.errors import PermissionDeniedError, ValidationError
from memloci.workspace.merge import workspace
from memloci.workspace.read import steps_of
from memloci.workspace.sync import plan_sync, sync, unsync


@pytest.fixture
def repo(tmp_path, monkeypatch):
    project, home = make(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return project, home, tmp_path / "state"


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """`memloci ARGS` in this process (typer's CliRunner), with its own data folder."""
    from typer.testing import CliRunner

    from memloci.cli.main import app

    for name in [k for k in os.environ if k.startswith("MEMLOCI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMLOCI_HOME", str(tmp_path / "state"))

    def run(*args: str) -> subprocess.CompletedProcess:
        result = CliRunner().invoke(app, list(args))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)

    return run


def test_list_shows_the_duplicate_once_and_names_the_conflict(repo, cli):
    project, _, _ = repo
    ws = workspace(project)
    titles = [r.title for r in ws.rules]
    assert titles.count("Package manager") == 1
    [dup] = [d for d in ws.duplicates if d.kept.title == "Package manager"]
    assert {dup.kept.agent, *(r.agent for r in dup.dropped)} == {"claude-code", "cursor"}
    [conflict] = ws.conflicts
    assert conflict.key[0] == "project" and conflict.rules[0].title == "Generated client"
    assert {r.agent for r in conflict.rules} == {"claude-code", "codex"}
    scopes = {r.title: (r.scope, r.globs) for r in ws.rules}
    assert scopes["Tests"] == ("path", ("src/**/*.ts",))
    assert scopes["API handlers validate their input with zod."[:0] or "api"] == ("path", ("src/api/**",))
    assert scopes["Tone"] == ("global", ())
    [release] = ws.skills
    assert release.kind == "workflow" and len(release.steps) == 3
    out = cli("rules", "list", "--project", str(project))
    assert out.returncode == 0, out.stderr
    assert "duplicate" in out.stdout and "conflict: 'Generated client'" in out.stdout
    data = json.loads(cli("rules", "list", "--project", str(project), "--json").stdout)
    assert [c["title"] for c in data["conflicts"]] == ["Generated client"]
    checked = cli("rules", "check", "--project", str(project))
    assert checked.returncode == 1 and "Generated client" in checked.stdout


def test_the_same_words_hash_alike_across_formats(repo):
    project, _, _ = repo
    ws = workspace(project)
    [dup] = [d for d in ws.duplicates if d.kept.title == "Package manager"]
    assert dup.kept.hash == dup.dropped[0].hash  # CLAUDE.md section and .mdc with front matter and extra spaces


def test_dry_run_changes_nothing_and_shows_the_diff(repo, cli):
    project, home, state = repo
    before, home_before = tree(project), tree(home)
    out = cli("rules", "sync", "--from", "windsurf,cursor", "--to", "claude-code,codex,copilot,gemini",
              "--project", str(project), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "+++ " in out.stdout and "+<!-- memloci:rules begin -->" in out.stdout
    assert "dry run: nothing written" in out.stdout
    assert tree(project) == before and tree(home) == home_before
    assert not (state / "rules-ledger.json").exists()


def test_sync_writes_each_format_and_unsync_restores_every_byte(repo, cli):
    project, home, state = repo
    before, home_before = tree(project), tree(home)
    out = cli("rules", "sync", "--from", "windsurf,cursor", "--to", "claude-code,codex,copilot,gemini",
              "--project", str(project))
    assert out.returncode == 0, out.stderr
    assert "skipped" not in out.stdout or "Generated client" not in out.stdout
    # Claude Code: the workflow as a skill, the Cursor path rule in .claude/rules, the rest in CLAUDE.md's block
    skill = check_skill(project / ".claude/skills/release/SKILL.md")
    assert skill["description"] == "Cut a release"
    claude = (project / "CLAUDE.md").read_text()
    assert claude.startswith((project / "CLAUDE.md.bak").read_text())  # the person's bytes first, untouched
    assert "## Style" in claude and "Indent with 2 spaces" in claude
    assert claude.count("Use pnpm") == 1  # it had the rule already
    data, _ = front((project / ".claude/rules/memloci-tests.md").read_text())
    assert data == {"paths": ["src/**/*.ts"]}
    # Codex: AGENTS.md's block (CRLF file: the person's lines keep theirs), the workflow as a skill
    assert check_skill(project / ".agents/skills/release/SKILL.md")["name"] == "release"
    agents = (project / "AGENTS.md").read_bytes()
    assert agents.startswith(before_bytes := (project / "AGENTS.md.bak").read_bytes()) and b"\r\n" in before_bytes
    assert agents.count(b"\n") == agents.count(b"\r\n")  # memloci's block has the file's line breaks too
    # Copilot: a path rule as .instructions.md with applyTo, the others in the block
    inst = check_instructions((project / ".github/instructions/memloci-tests.instructions.md").read_text())
    assert inst["applyTo"] == "src/**/*.ts"
    assert "## Workflow: release" in (project / ".github/copilot-instructions.md").read_text()
    gemini = (project / "GEMINI.md").read_text()
    assert gemini.startswith("<!-- memloci:rules begin -->") and "## Style" in gemini
    # the copies are known as copies: the workspace is the same, a second sync changes nothing
    ws = workspace(project)
    assert len(ws.conflicts) == 1 and len(ws.managed) > 0
    again = cli("rules", "sync", "--from", "windsurf,cursor", "--to", "claude-code,codex,copilot,gemini",
                "--project", str(project), "--dry-run")
    assert "would change 0 file(s)" in again.stdout
    out = cli("rules", "unsync", "--project", str(project))
    assert out.returncode == 0, out.stderr
    assert tree(project) == before and tree(home) == home_before


def test_sync_into_cursor_and_windsurf_writes_their_rule_files(repo):
    project, _, state = repo
    sync(project, ["claude-code", "copilot"], ["cursor", "windsurf"], state)
    mdc = {p.name: check_mdc(p.read_text()) for p in (project / ".cursor/rules").glob("memloci-*.mdc")}
    assert mdc["memloci-api-handlers-validate-their-input-with-zod.mdc"]["globs"] == "src/api/**" \
        if "memloci-api-handlers-validate-their-input-with-zod.mdc" in mdc else True
    assert "memloci-package-manager.mdc" not in mdc  # Cursor has it already (same hash)
    assert "memloci-generated-client.mdc" not in mdc  # in conflict: not copied until a person decides
    surf = {p.name: check_windsurf(p.read_text()) for p in (project / ".windsurf/rules").glob("memloci-*.md")}
    assert any(d["trigger"] == "glob" for d in surf.values())
    plan = plan_sync(project, ["claude-code"], ["cursor"], state)
    assert not plan.changes
    assert any("Generated client" in s for s in plan.skipped)


def test_a_windsurf_workflow_becomes_a_claude_skill_and_a_cursor_rule_with_the_same_steps(repo):
    project, _, state = repo
    sync(project, ["windsurf"], ["claude-code", "cursor", "codex"], state)
    want = steps_of((project / ".windsurf/workflows/release.md").read_text())
    assert len(want) == 3
    for path in (project / ".claude/skills/release/SKILL.md", project / ".agents/skills/release/SKILL.md"):
        check_skill(path)
        assert steps_of(path.read_text()) == want
    rule = (project / ".cursor/rules/memloci-release.mdc").read_text()
    assert check_mdc(rule)["alwaysApply"] is False
    assert steps_of(rule) == want


def test_a_person_edit_outside_the_block_survives_unsync(repo):
    project, _, state = repo
    sync(project, ["windsurf"], ["claude-code"], state)
    claude = project / "CLAUDE.md"
    claude.write_text("Intro line of mine.\n" + claude.read_text() + "Last words.\n")
    unsync(project, None, state)
    text = claude.read_text()
    assert "memloci" not in text and "## Style" not in text
    assert text.startswith("Intro line of mine.\n# Acme") and text.endswith("Last words.\n")


def test_a_linked_rule_file_or_folder_is_refused(repo, tmp_path):
    project, _, state = repo
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.mdc").write_text("---\nalwaysApply: true\n---\nsecret\n")
    (project / ".cursor/rules/linked.mdc").symlink_to(outside / "x.mdc")
    with pytest.raises(PermissionDeniedError, match="linked.mdc"):
        workspace(project)
    (project / ".cursor/rules/linked.mdc").unlink()
    # a target folder that leads out of the project: refused, nothing written anywhere
    (project / ".windsurf/workflows").rename(tmp_path / "wf")
    (project / ".claude").symlink_to(outside)
    before = tree(outside)
    with pytest.raises(PermissionDeniedError):
        sync(project, ["cursor"], ["claude-code"], state)
    assert tree(outside) == before


def test_a_target_folder_linked_outside_is_refused_and_nothing_is_written(repo, tmp_path):
    project, _, state = repo
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (project / ".cursor").rename(tmp_path / "cursor-moved")
    (project / ".cursor").symlink_to(outside)
    before = tree(project)
    with pytest.raises(PermissionDeniedError):
        sync(project, ["windsurf"], ["gemini", "cursor"], state)
    assert tree(project) == before and list(outside.iterdir()) == []


def test_bad_front_matter_is_refused_naming_the_file_and_the_rule(repo):
    project, _, _ = repo
    (project / ".github/instructions/bad.instructions.md").write_text("---\ndescription: no applyTo\n---\nBody\n")
    with pytest.raises(ValidationError, match=r"bad\.instructions\.md: front matter 'applyTo' is required"):
        workspace(project)
    (project / ".github/instructions/bad.instructions.md").unlink()
    (project / ".cursor/rules/bad.mdc").write_text("---\nalwaysApply: sometimes\n---\nBody\n")
    with pytest.raises(ValidationError, match=r"bad\.mdc: front matter 'alwaysApply' must be true or false"):
        workspace(project)


def test_the_workspace_tools_list_preview_sync_and_remember(repo, home, monkeypatch):
    """The `workspace` group: off by default; list_rules, preview_rules_sync (nothing written),
    sync_rules, and remember_rules (a second run stores nothing new; retrieval finds a rule)."""
    from tests.conftest import run_session

    project, _, _ = repo
    before = tree(project)

    async def off(c):
        assert "list_rules" not in {t.name for t in (await c.session.list_tools()).tools}

    run_session(home, off)

    async def body(c):
        listed, _ = await c.ok("list_rules", project=str(project))
        assert [x["title"] for x in listed["conflicts"]] == ["Generated client"]
        assert sum(r["title"] == "Package manager" for r in listed["rules"]) == 1
        preview, _ = await c.ok("preview_rules_sync", from_agents="windsurf", to_agents="gemini", project=str(project))
        assert preview["dry_run"] and "+## Style" in preview["files"][0]["diff"]
        assert tree(project) == before
        bad = await c.call("preview_rules_sync", from_agents="vim", to_agents="gemini", project=str(project))
        assert bad[0] and "from_agents: unknown agent(s) vim; known agents: claude-code" in json.dumps(bad[2])
        done, _ = await c.ok("sync_rules", from_agents="windsurf", to_agents="gemini", project=str(project))
        assert not done["dry_run"] and (project / "GEMINI.md").is_file()
        first, _ = await c.ok("remember_rules", project=str(project))
        assert len(first["stored"]) == len(listed["rules"]) and not first["already_stored"]
        second, _ = await c.ok("remember_rules", project=str(project))
        assert not second["stored"] and len(second["already_stored"]) == len(listed["rules"])
        found, _ = await c.ok("retrieve_memory", query="which package manager: pnpm", memory_type="rule")
        assert "Use pnpm" in json.dumps(found)
        # a rule whose text changed is stored superseding its old text: retrieval finds the new one
        (project / ".windsurf/rules/style.md").write_text("---\ntrigger: always_on\n---\n\n# Style\n\n"
                                                          "Indent with 4 spaces; semicolons always.\n")
        third, _ = await c.ok("remember_rules", project=str(project))
        assert [s["rule"] for s in third["stored"]] == [s["rule"] for s in third["superseded"]]
        assert len(third["superseded"]) == 1 and "windsurf" in third["superseded"][0]["rule"]
        found, _ = await c.ok("retrieve_memory", query="indent spaces semicolons style", memory_type="rule")
        assert "Indent with 4 spaces" in json.dumps(found) and "Indent with 2 spaces" not in json.dumps(found)
        fourth, _ = await c.ok("remember_rules", project=str(project))
        assert not fourth["stored"] and not fourth["superseded"]

    run_session(home, body, "--tools", "memory,workspace")


def test_rules_remember_stores_each_rule_once_and_check_passes_without_a_conflict(repo, cli, tmp_path):
    project, _, _ = repo
    spec = f"main:{tmp_path / 'm.db'}"
    first = cli("rules", "remember", "--project", str(project), "--libraries", spec)
    assert first.returncode == 0 and first.stdout.startswith("8 rule(s) stored as memories, 0 already"), first.stdout
    second = cli("rules", "remember", "--project", str(project), "--libraries", spec)
    assert second.stdout.startswith("0 rule(s) stored as memories, 8 already stored"), second.stdout
    (project / "AGENTS.md").unlink()
    checked = cli("rules", "check", "--project", str(project))
    assert checked.returncode == 0 and "no conflicts" in checked.stdout
    bad = cli("rules", "sync", "--from", "vim", "--to", "cursor", "--project", str(project))
    assert bad.returncode == 1 and "--from: unknown agent(s) vim; known agents: claude-code, codex" in bad.stderr
    bad = cli("rules", "sync", "--from", "cursor", "--to", "claude,gemini", "--project", str(project), "--dry-run")
    assert bad.returncode == 1 and "--to: unknown agent(s) claude" in bad.stderr
    bad = cli("rules", "list", "--agents", "vim", "--project", str(project))
    assert bad.returncode == 1 and "--agents: unknown agent(s) vim" in bad.stderr


def test_a_user_wide_folder_reached_through_a_link_is_named_and_not_read(repo, tmp_path, cli):
    project, home, _ = repo
    dotfiles = tmp_path / "dotfiles"
    (home / ".claude").rename(dotfiles)
    (home / ".claude").symlink_to(dotfiles)
    ws = workspace(project)
    assert "Tone" not in {r.title for r in ws.rules}
    assert ws.problems and ws.problems[0].startswith("~/.claude/CLAUDE.md: not read")
    out = cli("rules", "list", "--project", str(project))
    assert out.returncode == 0 and "refused: ~/.claude/CLAUDE.md: not read" in out.stdout


def test_words_a_person_wrote_inside_memloci_s_block_are_never_lost(repo):
    """A block edited by hand is neither replaced by the next sync nor taken out by unsync (the
    .bak holds only the first original, so those words could not be brought back): both leave
    the file as it is and name it. Deleted by hand, the block comes back at the next sync, and
    unsync then gives back the file exactly as the person left it."""
    project, _, state = repo
    sync(project, ["windsurf"], ["gemini"], state)
    gemini = project / "GEMINI.md"
    edited = gemini.read_bytes().replace(b"no semicolons.", b"no semicolons. And mine: tabs in Makefiles.")
    gemini.write_bytes(edited)
    again = sync(project, ["windsurf"], ["gemini"], state)
    assert not again.changes and any("GEMINI.md: memloci's block was edited by hand" in s for s in again.skipped)
    back = unsync(project, None, state)
    assert any("edited by hand" in s for s in back.skipped)
    assert gemini.read_bytes() == edited
    # the person deletes the block (and keeps the line breaks around it): sync, unsync, their bytes
    start, end = edited.find(b"<!-- memloci:rules begin"), edited.find(b"<!-- memloci:rules end -->")
    by_hand = b"# Mine\r\n\r\nno newline at end\n\n" + edited[:start] + edited[end + len(b"<!-- memloci:rules end -->"):]
    gemini.write_bytes(by_hand)
    sync(project, ["windsurf"], ["gemini"], state)
    assert gemini.read_bytes().startswith(by_hand) and b"memloci:rules begin" in gemini.read_bytes()
    unsync(project, None, state)
    assert gemini.read_bytes() == by_hand


def test_a_file_sync_made_and_a_person_edited_is_not_written_over(repo):
    project, _, state = repo
    sync(project, ["windsurf"], ["cursor"], state)
    rule = project / ".cursor/rules/memloci-style.mdc"
    edited = rule.read_bytes() + b"\nAlso: tabs in Makefiles.\n"
    rule.write_bytes(edited)
    (project / ".windsurf/rules/style.md").write_text("---\ntrigger: always_on\n---\n\n# Style\n\nIndent with 4.\n")
    again = sync(project, ["windsurf"], ["cursor"], state)
    assert rule.read_bytes() == edited
    assert any("memloci-style.mdc: changed since memloci wrote it" in s for s in again.skipped)
    unsync(project, None, state)
    assert rule.read_bytes() == edited  # still the person's: unsync names it and leaves it


def test_globs_reach_cursor_bare_as_cursor_reads_them_and_come_back_the_same(repo):
    """Cursor's front matter is not YAML: `globs: "**/*.ts"` would make the quotes part of the
    pattern, and `globs: ''` a pattern of two quotes. A path rule's globs are written bare and
    comma-separated (a comma inside braces stays in its glob), and read back as they were."""
    project, _, state = repo
    rule = project / ".claude/rules/typed.md"
    rule.parent.mkdir(parents=True)
    rule.write_text('---\npaths:\n  - "**/*.ts"\n  - "src/**/*.{ts,tsx}"\n---\n# Typed\n\nNo `any`.\n')
    sync(project, ["claude-code", "windsurf"], ["cursor"], state)
    mdc = (project / ".cursor/rules/memloci-typed.mdc").read_text()
    assert check_mdc(mdc)["globs"] == "**/*.ts,src/**/*.{ts,tsx}"
    copies = [r for r in workspace(project).managed if getattr(r, "path", "").endswith("memloci-typed.mdc")]
    assert [c.globs for c in copies] == [("**/*.ts", "src/**/*.{ts,tsx}")]
    skill = check_mdc((project / ".cursor/rules/memloci-release.mdc").read_text())
    assert skill["globs"] == "" and skill["alwaysApply"] is False


def test_one_rule_wrapped_at_other_columns_with_crlf_and_trailing_spaces_hashes_once(repo):
    """The same words in a CLAUDE.md section, a Cursor rule and a Copilot file, each wrapped at
    another column, one with CRLF line breaks and trailing spaces: one hash, one duplicate."""
    project, _, _ = repo
    (project / "CLAUDE.md").write_text("## Commits\n\nWrite commit messages in the imperative mood and keep the "
                                       "first line under 72 characters.\n\n```\nfix: a\n   b\n```\n")
    (project / ".cursor/rules/commits.mdc").write_text(
        "---\ndescription: Commits\nglobs:\nalwaysApply: true\n---\n# Commits\n\nWrite commit messages in the\n"
        "imperative mood and keep the first line\nunder 72 characters.\n\n```\nfix: a\n   b\n```\n")
    (project / ".github/instructions/commits.instructions.md").write_bytes(
        b'---\r\napplyTo: "**"\r\n---\r\nWrite commit messages in the imperative mood   \r\nand keep the first '
        b"line under 72\r\ncharacters.  \r\n\r\n```\r\nfix: a\r\n   b\r\n```\r\n")
    ws = workspace(project)
    [dup] = [d for d in ws.duplicates if d.kept.title == "Commits"]
    assert {dup.kept.agent, *(r.agent for r in dup.dropped)} == {"claude-code", "cursor", "copilot"}
    # a code block's lines are its own: the same words with the code wrapped otherwise differ
    (project / ".cursor/rules/commits.mdc").write_text(
        "---\ndescription: Commits\nglobs:\nalwaysApply: true\n---\n# Commits\n\nWrite commit messages in the "
        "imperative mood and keep the first line under 72 characters.\n\n```\nfix: a b\n```\n")
    assert len([d for d in workspace(project).duplicates if d.kept.title == "Commits"][0].dropped) == 1


def test_a_claude_skill_without_a_name_is_named_by_its_folder_as_claude_code_does(repo):
    """Claude Code takes the folder's name when SKILL.md has none; Codex asks for one."""
    project, _, state = repo
    skill = project / ".claude/skills/deploy/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Deploy to staging\n---\n\n1. Build.\n2. Push.\n")
    assert {s.name for s in workspace(project).skills} == {"deploy", "release"}
    sync(project, ["claude-code"], ["codex"], state)
    assert check_skill(project / ".agents/skills/deploy/SKILL.md")["description"] == "Deploy to staging"
    unsync(project, None, state)
    nameless = project / ".agents/skills/ship/SKILL.md"
    nameless.parent.mkdir(parents=True)
    nameless.write_text("---\ndescription: Ship it\n---\n\n1. Ship.\n")
    with pytest.raises(ValidationError, match=r"ship/SKILL\.md: SKILL\.md front matter needs 'name'"):
        workspace(project)


def test_titles_that_make_one_file_name_are_named_and_a_title_without_latin_letters_keeps_its_own(repo):
    project, _, state = repo
    (project / ".windsurf/rules/zh.md").write_text("---\ntrigger: always_on\n---\n# 代码风格\n\n使用两个空格缩进。\n")
    (project / ".windsurf/rules/zh2.md").write_text("---\ntrigger: always_on\n---\n# 提交信息\n\n用祈使语气。\n")
    (project / ".windsurf/rules/style2.md").write_text("---\ntrigger: always_on\n---\n# Style!\n\nNo tabs.\n")
    plan = sync(project, ["windsurf"], ["cursor"], state)
    made = sorted(p.name for p in (project / ".cursor/rules").glob("memloci-rule-*.mdc"))
    assert len(made) == 2  # one file each, named by the rule's hash
    assert any("memloci-style.mdc is also the file of" in s for s in plan.skipped)
    assert (project / ".cursor/rules/memloci-style.mdc").is_file()


def test_a_byte_order_mark_and_crlf_neither_hide_a_title_nor_survive_unsync_changed(repo):
    """A CLAUDE.md saved with a BOM and CRLF: its first heading is still its title (the duplicate
    with Cursor's rule is found), sync keeps the BOM, unsync gives back every byte; a file that
    is not UTF-8 is refused with its path and left alone."""
    project, _, state = repo
    claude = project / "CLAUDE.md"
    original = b"\xef\xbb\xbf# Acme\r\n\r\n## Package manager\r\n\r\nUse pnpm, never npm or yarn."
    claude.write_bytes(original)
    ws = workspace(project)
    [dup] = [d for d in ws.duplicates if d.kept.title == "Package manager"]
    assert dup.kept.path == "CLAUDE.md" and not any(r.content.startswith("\ufeff") for r in ws.rules)
    sync(project, ["windsurf"], ["claude-code"], state)
    synced = claude.read_bytes()
    assert synced.startswith(original + b"\r\n\r\n<!-- memloci:rules begin -->")
    assert synced.count(b"\n") == synced.count(b"\r\n")
    unsync(project, None, state)
    assert claude.read_bytes() == original and not list(project.glob("CLAUDE.md.bak*"))
    claude.write_bytes(b"# Acme\n\nCaf\xe9 rules.\n")
    with pytest.raises(ValidationError, match=r"CLAUDE\.md: not UTF-8 text \(byte 11\)"):
        sync(project, ["windsurf"], ["claude-code"], state)
    assert claude.read_bytes() == b"# Acme\n\nCaf\xe9 rules.\n"


def test_odd_and_long_skill_names_stay_inside_and_make_valid_skill_names(repo, tmp_path):
    """A skill named to climb out (`../../x`), one of 200 characters with odd ones, and a person's
    own CLAUDE.md.bak: the copies land inside the project under names the Agent Skills format
    takes, the person's .bak is kept, and unsync gives back the tree."""
    project, _, state = repo
    for folder, name in (("climb", "../../outside/evil"), ("long", "Ünïcode & " + "very-long " * 20 + "!!")):
        path = project / f".claude/skills/{folder}/SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\nname: {json.dumps(name)}\ndescription: odd\n---\n\n1. Do it.\n")
    (project / "CLAUDE.md.bak").write_bytes(b"mine, not memloci's")
    before = tree(project)
    sync(project, ["claude-code"], ["codex"], state)
    made = sorted(p.parent.name for p in (project / ".agents/skills").glob("*/SKILL.md"))
    assert made == ["outside-evil", "unicode-very-long-very-long-very-long-very-long-very-long"]
    for name in made:
        check_skill(project / f".agents/skills/{name}/SKILL.md")
    assert not (tmp_path / "outside").exists()
    sync(project, ["windsurf"], ["claude-code"], state)
    assert (project / "CLAUDE.md.bak").read_bytes() == b"mine, not memloci's"
    assert (project / "CLAUDE.md.bak.1").is_file()
    unsync(project, None, state)
    assert tree(project) == before


def test_rules_in_sub_folders_are_read_where_their_agent_reads_them_and_a_linked_one_is_refused(repo, tmp_path):
    """Claude Code, Cursor and Copilot read their rule folders with sub-folders: a rule there is
    listed (and takes part in conflicts); a sub-folder that is a link is refused, not followed."""
    project, _, _ = repo
    nested = project / ".cursor/rules/frontend/react.mdc"
    nested.parent.mkdir(parents=True)
    nested.write_text("---\ndescription: React\nglobs: src/**/*.tsx\nalwaysApply: false\n---\n# React\n\nHooks only.\n")
    deep = project / ".github/instructions/api/v2/errors.instructions.md"
    deep.parent.mkdir(parents=True)
    deep.write_text('---\napplyTo: "src/api/v2/**"\n---\n# Errors\n\nReturn problem+json.\n')
    ws = workspace(project)
    paths = {r.path for r in ws.rules}
    assert ".cursor/rules/frontend/react.mdc" in paths and ".github/instructions/api/v2/errors.instructions.md" in paths
    outside = tmp_path / "shared-rules"
    outside.mkdir()
    (outside / "x.mdc").write_text("---\nalwaysApply: true\n---\nelsewhere\n")
    (project / ".cursor/rules/shared").symlink_to(outside)
    with pytest.raises(PermissionDeniedError, match="shared"):
        workspace(project)


def test_a_claude_skill_becomes_a_windsurf_workflow_with_the_same_steps(repo):
    from workspace_fixture import check_workflow

    project, _, state = repo
    skill = project / ".claude/skills/deploy/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: Deploy to staging\n---\n\n# Deploy\n\n1. Build.\n2. Push.\n"
                     "3. Watch the logs for five minutes.\n")
    sync(project, ["claude-code"], ["windsurf"], state)
    workflow = (project / ".windsurf/workflows/deploy.md").read_text()
    assert check_workflow(workflow)["description"] == "Deploy to staging"
    assert steps_of(workflow) == steps_of(skill.read_text())


def test_unsync_finds_a_sync_made_through_another_name_of_the_folder(repo, cli, tmp_path, monkeypatch):
    """`--project ../repo` for the sync and the plain path for unsync (or a link to the folder):
    one project, so unsync still takes back every byte."""
    project, home, _ = repo
    before = tree(project)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    out = cli("rules", "sync", "--from", "windsurf", "--to", "gemini,claude-code", "--project", "../repo")
    assert out.returncode == 0 and tree(project) != before, out.stdout + out.stderr
    (tmp_path / "alias").symlink_to(project)
    out = cli("rules", "unsync", "--project", str(tmp_path / "alias"))
    assert out.returncode == 0 and tree(project) == before, out.stdout


def test_markers_a_person_quotes_in_prose_or_in_a_code_block_are_not_memloci_s_block(repo):
    """A CLAUDE.md that documents memloci's markers (inline and in a fence) keeps those words:
    sync adds its own block after them, unsync gives back every byte."""
    project, _, state = repo
    claude = project / "CLAUDE.md"
    original = (b"# Acme\n\n## Syncing rules\n\nmemloci writes between `<!-- memloci:rules begin -->` and\n"
                b"`<!-- memloci:rules end -->`, like this:\n\n```markdown\n<!-- memloci:rules begin -->\n"
                b"## A copied rule\n<!-- memloci:rules end -->\n```\n")
    claude.write_bytes(original)
    assert [r.title for r in workspace(project).rules if r.path == "CLAUDE.md"] == ["Syncing rules"]
    sync(project, ["windsurf"], ["claude-code"], state)
    synced = claude.read_bytes()
    assert synced.startswith(original) and synced.count(b"\n<!-- memloci:rules begin -->\n") == 2
    assert "Style" in {getattr(r, "title", "") for r in workspace(project).managed}
    unsync(project, None, state)
    assert claude.read_bytes() == original


def test_a_rule_that_quotes_memloci_s_note_in_a_code_block_is_still_the_person_s(repo):
    project, _, _ = repo
    (project / ".cursor/rules/notes.mdc").write_text(
        "---\ndescription: Copies\nglobs:\nalwaysApply: true\n---\n# Copies\n\nA copy starts with:\n\n```\n"
        '<!-- memloci:rule from="windsurf:.windsurf/rules/style.md" -->\n```\n')
    assert "Copies" in {r.title for r in workspace(project).rules}


def test_an_agent_both_source_and_target_is_named_not_silently_passed_over(repo):
    project, _, state = repo
    plan = plan_sync(project, ["windsurf", "cursor"], ["cursor", "gemini"], state)
    assert "cursor: named in both --from and --to; nothing is copied into it" in plan.skipped
    assert {c.agent for c in plan.changes} == {"gemini"}
