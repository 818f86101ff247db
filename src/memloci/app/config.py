"""The config file: `name`, `tools`, `[libraries]`, `[schemas]`, `[lifecycle]`, and server mode's
`[http]` and `[oauth]` (server_config.py), each checked when the file is read; and the libraries to mount.

    name = "memloci"
    tools = "graph,memory"
    [libraries]
    work = "~/notes"                 # relative paths are relative to the config file
    [schemas]
    work = "strict"                  # a preset, or a table of rules (core/schema.py)
    [lifecycle]
    extract = true                   # auto-relations from what new text mentions (service/extraction.py)

The file is `--config` (MEMLOCI_CONFIG), else `config.toml` in the data folder if present.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from typing import Any

from memloci.app.server_config import parse_http_config, parse_oauth_config
from memloci.app.specs import DEFAULT_LIBRARY, LibrarySpec, is_url, library_spec, parse_library_specs
from memloci.core.errors import ValidationError
from memloci.core.schema import schema_from_config
from memloci.core.settings import Settings, data_home

CONFIG_KEYS = ("name", "tools", "libraries", "schemas", "oauth", "http", "lifecycle")  # every key a config file may have, at the top
CONFIG_EXAMPLES = {"name": "memloci", "tools": "graph,memory"}
LIFECYCLE_KEYS = {"extract": bool, "schedule": str, "schedule_horizon": str, "schedule_execute": bool}  # [lifecycle]
# the values a text key of [lifecycle] takes
LIFECYCLE_CHOICES = {"schedule": ("off", "daily", "weekly", "monthly"),
                     "schedule_horizon": ("daily", "weekly", "monthly", "quarterly", "yearly")}


def memloci_home(settings: Settings | None = None) -> Path:
    """The data directory: `settings.home`; without settings, as the environment says now
    (`$MEMLOCI_HOME`, else `$XDG_DATA_HOME/memloci`, else `~/.local/share/memloci`: core/settings.py)."""
    return settings.home if settings is not None else data_home()


def load_config(path: str | os.PathLike[str], settings: Settings | None = None) -> dict[str, Any]:
    """A TOML config file: `name = "..."`, `[libraries] work = "~/notes"`, `tools = "graph,memory"`.
    `settings` place the `default` library a `[schemas]` table may name (its data folder)."""
    p = Path(path).expanduser()
    try:
        with p.open("rb") as f:
            config = tomllib.load(f)
    except FileNotFoundError as exc:
        raise ValidationError(f"config: {p} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"config: {p} is not valid TOML: {exc}") from exc
    for key in config:  # a misspelt key would otherwise be ignored, and its setting silently lost
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(key, CONFIG_KEYS, n=1, cutoff=0.6)
            raise ValidationError(f"config: {p}: {key}: unknown key" + (f"; did you mean {close[0]}?" if close else ""),
                                  hint=f"Known keys: {', '.join(CONFIG_KEYS)}. Fix {p} and run the command again.")
    for key in ("name", "tools"):
        if key in config and not isinstance(config[key], str):
            raise ValidationError(f"config: {p}: {key}: must be a string, e.g. {key} = \"{CONFIG_EXAMPLES[key]}\"")
    if "oauth" in config:  # [oauth]: JWTs from an issuer (server mode); checked key by key like the rest
        config = {**config, "oauth": parse_oauth_config(config["oauth"], f"config: {p}: [oauth]")}
    if "http" in config:  # [http]: where server mode listens and what it lets in (http/settings.py)
        config = {**config, "http": parse_http_config(config["http"], f"config: {p}: [http]")}
    if "lifecycle" in config:
        check_lifecycle(config["lifecycle"], f"config: {p}: [lifecycle]")
    libraries = config.get("libraries", {})
    if not isinstance(libraries, dict) or not all(isinstance(v, str) for v in libraries.values()):
        raise ValidationError(f"config: {p}: [libraries] maps names to paths, e.g. work = \"~/notes\"")
    schemas = config.get("schemas", {})
    if not isinstance(schemas, dict):
        raise ValidationError(f"config: {p}: [schemas] maps library names to a preset (\"strict\") or a table of rules")
    # Without [libraries] the one library is `default`, and [schemas] may name it.
    mounted = set(libraries) or {DEFAULT_LIBRARY}
    unknown = sorted(set(schemas) - mounted)
    if unknown:
        raise ValidationError(f"config: {p}: [schemas] names libraries that are not mounted: {', '.join(unknown)}; "
                              f"mounted: {', '.join(sorted(mounted))}")
    if not libraries and DEFAULT_LIBRARY in schemas:
        rules = schema_from_config(schemas[DEFAULT_LIBRARY], f"config [schemas] {DEFAULT_LIBRARY}")
        default = LibrarySpec(DEFAULT_LIBRARY, memloci_home(settings) / f"{DEFAULT_LIBRARY}.db", "sqlite", rules)
        return {**config, "libraries": [default]}
    specs: list[LibrarySpec] = []
    for name, path in libraries.items():  # relative paths are relative to the config file
        text = str(path)  # a string: checked above
        full = Path(text).expanduser()
        where = text if is_url(text) else str(full if full.is_absolute() else p.parent / full)
        spec = library_spec(f"config [libraries] {name}", name, where, specs)
        if name in schemas:
            spec = LibrarySpec(spec.name, spec.path, spec.kind, schema_from_config(schemas[name], f"config [schemas] {name}"))
        specs.append(spec)
    return {**config, "libraries": specs}


def check_lifecycle(table: Any, where: str) -> None:
    """A `[lifecycle]` table, key by key: an unknown key or a wrong type is refused, never ignored."""
    if not isinstance(table, dict):
        raise ValidationError(f"{where}: must be a table, e.g. [lifecycle] extract = true")
    for key, value in table.items():
        kind = LIFECYCLE_KEYS.get(key)
        if kind is None:
            raise ValidationError(f"{where} {key}: unknown key", hint=f"Known keys: {', '.join(LIFECYCLE_KEYS)}.")
        if kind is str:
            choices = LIFECYCLE_CHOICES[key]
            if value not in choices:
                raise ValidationError(f"{where} {key}: must be one of {', '.join(choices)}, got {value!r}")
        elif not isinstance(value, kind):
            raise ValidationError(f"{where} {key}: must be true or false, e.g. {key} = false")


def extraction_on(settings: Settings, config: dict[str, Any]) -> bool:
    """Whether new text is extracted into auto-relations: MEMLOCI_EXTRACT, else the config file's
    `[lifecycle] extract`, else on (it costs a lookup per write: README, "Extraction")."""
    if settings.extract is not None:
        return settings.extract
    return bool(config.get("lifecycle", {}).get("extract", True))


def lifecycle_schedule(config: dict[str, Any]) -> tuple[str, str, bool]:
    """The config file's consolidation schedule: (how often: off, daily, weekly or monthly; the
    time horizon each run takes, by default the same span; whether a run executes what it plans
    rather than leaving a preview). Off unless configured."""
    table = config.get("lifecycle", {})
    every = table.get("schedule", "off")
    return every, table.get("schedule_horizon", every if every != "off" else "weekly"), bool(table.get("schedule_execute"))


def config_file(settings: Settings) -> dict[str, Any]:
    """The config file the settings name (`--config`, MEMLOCI_CONFIG), else `$MEMLOCI_HOME/config.toml`
    if present."""
    if settings.config is not None:
        return load_config(settings.config, settings)
    default = settings.home / "config.toml"
    return load_config(default, settings) if default.is_file() else {}


def default_specs(settings: Settings) -> list[LibrarySpec]:
    """The libraries to mount: `--libraries`/MEMLOCI_LIBRARIES, else the config file's, else `default`."""
    if settings.libraries:
        return parse_library_specs(settings.libraries)
    configured = config_file(settings).get("libraries")
    if configured:
        return configured
    return [LibrarySpec(DEFAULT_LIBRARY, settings.home / f"{DEFAULT_LIBRARY}.db")]
