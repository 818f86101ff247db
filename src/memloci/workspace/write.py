"""Each target agent's own format: what `rules sync` puts where.

Files memloci creates are wholly its own (a Cursor `.mdc`, a Windsurf rule, a Copilot
`.instructions.md`, a skill folder); in a file a person keeps (CLAUDE.md, AGENTS.md, GEMINI.md,
copilot-instructions.md) only memloci's block, between BEGIN and END, is written. Every copy
carries a note naming its source, so a later read knows it for a copy (read.RULE_NOTE)."""

from __future__ import annotations

from dataclasses import dataclass

from memloci.markdown.syntax import yaml_scalar
from memloci.workspace.model import Rule, Skill, normalize, slug
from memloci.workspace.read import BEGIN, END

BLOCK_FILES = {"claude-code": "CLAUDE.md", "codex": "AGENTS.md", "copilot": ".github/copilot-instructions.md",
               "gemini": "GEMINI.md"}
BLOCK_NOTE = "<!-- Copied by `memloci rules sync` from other agents' rules; edit those and sync again. -->"
SKILL_NAME_MAX, SKILL_DESCRIPTION_MAX = 64, 1024  # the Agent Skills format's limits (agentskills.io/specification)


@dataclass(frozen=True)
class Output:
    """One file a target gets: `whole` (memloci's own file) or memloci's block in a person's file."""

    agent: str
    rel: str
    text: str
    whole: bool
    what: str  # the rule or skill it carries, for the plan's listing


def _note(kind: str, source: Rule | Skill) -> str:
    return f'<!-- memloci:{kind} from="{source.agent}:{source.path}" -->'


def _applies(rule: Rule) -> str:
    return "Applies to files matching: " + ", ".join(f"`{g}`" for g in rule.globs) + "\n\n" if rule.globs else ""


def _front(pairs: list[tuple[str, object]]) -> str:
    lines = ["---"]
    for key, value in pairs:
        if isinstance(value, bool):
            lines.append(f"{key}: {'true' if value else 'false'}")
        elif isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f"  - {yaml_scalar(v)}" for v in value]
        else:
            lines.append(f"{key}: {yaml_scalar(str(value))}")
    return "\n".join(lines + ["---", ""])


def _section(title: str, note: str, body: str) -> str:
    return f"## {title}\n{note}\n\n{body}\n"


def rule_section(rule: Rule) -> str:
    return _section(rule.title, _note("rule", rule), _applies(rule) + normalize(rule.content))


def skill_section(skill: Skill) -> str:
    kind = "Workflow" if skill.kind == "workflow" else "Skill"
    body = (f"{skill.description}\n\n" if skill.description else "") + normalize(skill.body)
    return _section(f"{kind}: {skill.name}", _note("skill", skill), body)


def block(sections: list[str]) -> str:
    """memloci's block: the markers, a note, then each section."""
    return "\n".join([BEGIN, BLOCK_NOTE, "", *sections, END]) if sections else ""


def skill_name(skill: Skill) -> str:
    """A name the Agent Skills format takes: lower-case letters, digits and '-', at most 64."""
    return slug(skill.name, f"skill-{skill.hash[:8]}")[:SKILL_NAME_MAX]


def skill_md(skill: Skill) -> str:
    """SKILL.md: front matter name and description (both required), then the steps as written."""
    description = (skill.description or f"{skill.kind.capitalize()} {skill.name} from {skill.agent}")
    description = " ".join(description.split())[:SKILL_DESCRIPTION_MAX]
    title = skill.name.replace("-", " ").replace("_", " ").capitalize()
    return (_front([("name", skill_name(skill)), ("description", description)])
            + f"\n# {title}\n\n{_note('skill', skill)}\n\n{normalize(skill.body)}\n")


def _cursor_front(description: str, globs: tuple[str, ...], always: bool) -> str:
    """Cursor's front matter as Cursor itself writes it (cursor.com/docs/context/rules): its
    reader is not YAML; `globs` is comma-separated globs, bare (a quote or a bracket would be
    part of the pattern), and left empty when there are none; `alwaysApply` true or false."""
    return "\n".join(["---", f"description: {yaml_scalar(' '.join(description.split()))}",
                      f"globs: {','.join(globs)}".rstrip(), f"alwaysApply: {'true' if always else 'false'}",
                      "---", ""])


def cursor_rule(rule: Rule) -> str:
    """A Cursor project rule (.mdc): description, globs (comma-separated), alwaysApply."""
    always = rule.scope != "path" and rule.always_apply
    return (_cursor_front(rule.description or rule.title, rule.globs, always)
            + f"\n# {rule.title}\n\n{_note('rule', rule)}\n\n{normalize(rule.content)}\n")


def cursor_skill(skill: Skill) -> str:
    """A workflow or skill as a Cursor rule the agent applies when its description fits."""
    description = skill.description or f"{skill.kind.capitalize()} {skill.name}"
    return (_cursor_front(description, (), False)
            + f"\n# {skill.name}\n\n{_note('skill', skill)}\n\n{normalize(skill.body)}\n")


def windsurf_rule(rule: Rule) -> str:
    trigger = "glob" if rule.scope == "path" else ("always_on" if rule.always_apply else "model_decision")
    pairs: list[tuple[str, object]] = [("trigger", trigger)]
    if rule.globs:
        pairs.append(("globs", ",".join(rule.globs)))
    if trigger == "model_decision" or rule.description:
        pairs.append(("description", rule.description or rule.title))
    return _front(pairs) + f"\n# {rule.title}\n\n{_note('rule', rule)}\n\n{normalize(rule.content)}\n"


def windsurf_workflow(skill: Skill) -> str:
    description = " ".join((skill.description or f"{skill.kind.capitalize()} {skill.name}").split())
    return (_front([("description", description)])
            + f"\n# {skill.name}\n\n{_note('skill', skill)}\n\n{normalize(skill.body)}\n")


def copilot_rule(rule: Rule) -> str:
    """A path-specific Copilot file: applyTo (comma-separated globs), description."""
    return (_front([("applyTo", ",".join(rule.globs)), ("description", rule.description or rule.title)])
            + f"\n# {rule.title}\n\n{_note('rule', rule)}\n\n{normalize(rule.content)}\n")


def claude_rule(rule: Rule) -> str:
    """A Claude Code path-specific rule (.claude/rules/*.md) with its `paths` globs."""
    return (_front([("paths", list(rule.globs))])
            + f"\n# {rule.title}\n\n{_note('rule', rule)}\n\n{normalize(rule.content)}\n")


def outputs(agent: str, rules: list[Rule], skills: list[Skill]) -> list[Output]:
    """What `agent` gets for these rules and skills, in its own format."""
    out: list[Output] = []
    sections: list[str] = []
    for rule in rules:
        name = f"memloci-{slug(rule.title, f'rule-{rule.hash[:8]}')}"
        if agent == "cursor":
            out.append(Output(agent, f".cursor/rules/{name}.mdc", cursor_rule(rule), True, rule.id))
        elif agent == "windsurf":
            out.append(Output(agent, f".windsurf/rules/{name}.md", windsurf_rule(rule), True, rule.id))
        elif agent == "copilot" and rule.scope == "path":
            out.append(Output(agent, f".github/instructions/{name}.instructions.md", copilot_rule(rule), True, rule.id))
        elif agent == "claude-code" and rule.scope == "path":
            out.append(Output(agent, f".claude/rules/{name}.md", claude_rule(rule), True, rule.id))
        else:
            sections.append(rule_section(rule))
    for skill in skills:
        if agent == "claude-code":
            out.append(Output(agent, f".claude/skills/{skill_name(skill)}/SKILL.md", skill_md(skill), True, skill.path))
        elif agent == "codex":
            out.append(Output(agent, f".agents/skills/{skill_name(skill)}/SKILL.md", skill_md(skill), True, skill.path))
        elif agent == "cursor":
            out.append(Output(agent, f".cursor/rules/memloci-{skill_name(skill)}.mdc", cursor_skill(skill), True,
                              skill.path))
        elif agent == "windsurf":
            out.append(Output(agent, f".windsurf/workflows/{skill_name(skill)}.md", windsurf_workflow(skill), True,
                              skill.path))
        else:
            sections.append(skill_section(skill))
    if agent in BLOCK_FILES:
        out.append(Output(agent, BLOCK_FILES[agent], block(sections), False, f"{len(sections)} section(s)"))
    return out
