"""memloci's settings: read from the environment once, where the program starts, and passed down.

Every environment variable memloci reads is read here and nowhere else (a test greps for it).
`Settings.from_env(environ)` parses them, refusing a malformed value with an error that names
the variable; a command line overlays its flags with `with_flags` (`--home`, `--config`,
`--libraries`, `--tools`, `--schema`); the registry, the embedder and the servers take the
result as an argument. Nothing writes the environment to pass a setting along: a process
memloci starts gets `child_env()`, an explicit copy that carries these settings.

This module imports only the standard library (and errors.py): the agent hook loads it on a
path that must stay fast.

Variables (README, "Configuration"):
    MEMLOCI_HOME, XDG_DATA_HOME     the data folder
    MEMLOCI_CONFIG                  the config file (else $MEMLOCI_HOME/config.toml if present)
    MEMLOCI_LIBRARIES               libraries to mount, NAME:PATH[,NAME:PATH...]
    MEMLOCI_TOOLS                   tool groups exposed
    MEMLOCI_SCHEMA                  rules of libraries without their own
    MEMLOCI_EMBEDDER, MEMLOCI_EMBEDDER_API_KEY, MEMLOCI_EMBEDDER_MULTILINGUAL
    MEMLOCI_CACHE, XDG_CACHE_HOME   derived model files (and the LoCoMo lab's libraries)
    MEMLOCI_LOG_LEVEL               stderr log level
    MEMLOCI_HOOK_DEADLINE           seconds the agent hook may take
    MEMLOCI_EXTRACT                 auto-relations from what new text mentions (a switch)
    MCP_SERVER_HOST, MCP_SERVER_PORT  server mode's address
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType

from memloci.core.errors import ValidationError

DEFAULT_EMBEDDER = "minilm"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL")  # logging's names
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


# Set in memloci's own process at start-up, for native code it loads that reads the environment
# only then: the e5 engine's OpenMP threads must not spin between calls, taking the cores the server
# needs (search/packaged.py). A value the user set is kept.
PROCESS_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def set_process_defaults(environ: MutableMapping[str, str] | None = None) -> None:
    """Write PROCESS_DEFAULTS into the environment (default: this process's) where unset. An entry
    point calls it once, when it reads its settings, before any model loads."""
    env = os.environ if environ is None else environ
    for name, value in PROCESS_DEFAULTS.items():
        env.setdefault(name, value)


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a memloci child process this one starts (a consolidation run): this
    process's, with `extra` set (the library's spec, its embedder, thread counts)."""
    return {**os.environ, **extra}


def _get(environ: Mapping[str, str], name: str) -> str | None:
    """A variable's value; unset and empty are the same (`VAR= memloci ...` clears a setting)."""
    value = environ.get(name)
    return value if value else None


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The data folder: `$MEMLOCI_HOME`, else `$XDG_DATA_HOME/memloci`, else `~/.local/share/memloci`
    (the XDG base-directory rule: a relative XDG_DATA_HOME is ignored). It cannot be malformed,
    so the agent hook finds its log folder even when another variable is refused."""
    env = os.environ if environ is None else environ
    if home := _get(env, "MEMLOCI_HOME"):
        return Path(home).expanduser()
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "memloci"
    return Path.home() / ".local" / "share" / "memloci"


def _switch(value: str | None, name: str, default: bool) -> bool:
    if value is None:
        return default
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValidationError(f"{name}: '{value}' is not a switch; use 1 or 0 (also true/false, yes/no, on/off)")


def _log_level(value: str | None) -> str | None:
    if value is None:
        return None
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise ValidationError(f"MEMLOCI_LOG_LEVEL: '{value}' is not a log level; use debug, info, warning, "
                              "error or critical")
    return level


def _seconds(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValidationError(f"{name}: '{value}' is not a number of seconds above 0")
    return seconds


def port_number(value: object, where: str) -> int:
    """A TCP port (1-65535), from a flag, a variable or a config value; else an error naming `where`."""
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise ValidationError(f"{where}: '{value}' is not a port number (1-65535)")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise ValidationError(f"{where}: {value!r} is not a port number (1-65535)")
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    """What configures one memloci process. Build it with `from_env`; change it with `with_flags`."""

    home: Path  # the data folder in force
    home_set: bool = False  # given (--home, MEMLOCI_HOME): `memloci install` carries it to clients
    config: Path | None = None  # --config, MEMLOCI_CONFIG; None: $home/config.toml if present
    libraries: str | None = None  # --libraries, MEMLOCI_LIBRARIES (parsed by app/specs.py)
    tools: str | None = None  # --tools, MEMLOCI_TOOLS (checked by mcp/server.py)
    schema: str | None = None  # --schema, MEMLOCI_SCHEMA (checked when the registry opens)
    embedder: str = DEFAULT_EMBEDDER  # MEMLOCI_EMBEDDER
    embedder_api_key: str | None = field(default=None, repr=False)  # MEMLOCI_EMBEDDER_API_KEY
    embedder_multilingual: bool = True  # MEMLOCI_EMBEDDER_MULTILINGUAL, for onnx:/openai: models
    cache: Path | None = None  # MEMLOCI_CACHE
    user_cache: Path = field(default_factory=lambda: Path.home() / ".cache")  # XDG_CACHE_HOME, else ~/.cache
    log_level: str | None = None  # MEMLOCI_LOG_LEVEL, upper case; None: the command's default
    hook_deadline: float | None = None  # MEMLOCI_HOOK_DEADLINE; None: the hook's own
    extract: bool | None = None  # MEMLOCI_EXTRACT; None: the config file's [lifecycle] extract, else on
    http_host: str | None = None  # MCP_SERVER_HOST
    http_port: int | None = None  # MCP_SERVER_PORT
    # The environment these were read from, for the processes memloci starts (child_env).
    environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False, compare=False)

    def __repr__(self) -> str:
        # The generated repr, but the library URLs' passwords masked: a log line or a traceback
        # may show the settings. (dataclass keeps a __repr__ the class defines itself.)
        from memloci.core.secrets import masked_specs

        shown = []
        for f in fields(self):
            if f.repr:
                value = getattr(self, f.name)
                shown.append(f"{f.name}={masked_specs(value) if f.name == 'libraries' and value else value!r}")
        return f"Settings({', '.join(shown)})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings `environ` gives (default: this process's environment, read now).
        A malformed value is refused with a ValidationError naming its variable."""
        env = dict(os.environ if environ is None else environ)
        cache = _get(env, "MEMLOCI_CACHE")
        port = _get(env, "MCP_SERVER_PORT")
        config = _get(env, "MEMLOCI_CONFIG")
        return cls(
            home=data_home(env),
            home_set=_get(env, "MEMLOCI_HOME") is not None,
            config=Path(config).expanduser() if config else None,
            libraries=_get(env, "MEMLOCI_LIBRARIES"),
            tools=_get(env, "MEMLOCI_TOOLS"),
            schema=_get(env, "MEMLOCI_SCHEMA"),
            embedder=env.get("MEMLOCI_EMBEDDER", DEFAULT_EMBEDDER),  # set but empty: no embedder, as `none`
            embedder_api_key=_get(env, "MEMLOCI_EMBEDDER_API_KEY"),
            embedder_multilingual=_switch(_get(env, "MEMLOCI_EMBEDDER_MULTILINGUAL"),
                                          "MEMLOCI_EMBEDDER_MULTILINGUAL", True),
            cache=Path(cache).expanduser() if cache else None,
            user_cache=Path(_get(env, "XDG_CACHE_HOME") or Path.home() / ".cache"),
            log_level=_log_level(_get(env, "MEMLOCI_LOG_LEVEL")),
            hook_deadline=_seconds(_get(env, "MEMLOCI_HOOK_DEADLINE"), "MEMLOCI_HOOK_DEADLINE"),
            extract=_switch(extract, "MEMLOCI_EXTRACT", True) if (extract := _get(env, "MEMLOCI_EXTRACT")) else None,
            http_host=_get(env, "MCP_SERVER_HOST"),
            http_port=port_number(port, "MCP_SERVER_PORT") if port else None,
            environ=MappingProxyType(env),
        )

    @classmethod
    def defaults(cls) -> Settings:
        """The settings of a process with none of memloci's variables set, built without reading
        the environment: what code that uses memloci as a library (a test, a benchmark) gets when it
        passes no settings. The program itself reads its own once (`from_env`) and passes them."""
        return cls(home=data_home({}))

    def with_flags(self, *, home: Path | str | None = None, config: Path | str | None = None,
                   libraries: str | None = None, tools: str | None = None, schema: str | None = None) -> Settings:
        """These settings with the command line's flags on top (a flag left out, None, changes nothing)."""
        changes: dict[str, object] = {}
        if home is not None:
            changes.update(home=Path(home).expanduser(), home_set=True)
        if config is not None:
            changes["config"] = Path(config).expanduser()
        for name, value in (("libraries", libraries), ("tools", tools), ("schema", schema)):
            if value is not None:
                changes[name] = value
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]

    @property
    def model_cache(self) -> Path:
        """Where derived model files are kept: MEMLOCI_CACHE, else $XDG_CACHE_HOME/memloci/models."""
        return self.cache if self.cache is not None else self.user_cache / "memloci" / "models"

    def cache_for(self, name: str) -> Path:
        """A named per-user cache folder: $MEMLOCI_CACHE/NAME, else $XDG_CACHE_HOME/memloci/NAME."""
        return (self.cache if self.cache is not None else self.user_cache / "memloci") / name

    def child_env(self, **extra: str) -> dict[str, str]:
        """The environment for a process memloci starts: the one these settings were read from,
        with the settings themselves written in (a flag given here reaches the child), plus `extra`."""
        env = dict(self.environ)
        if self.home_set:
            env["MEMLOCI_HOME"] = str(self.home)
        for name, value in (("MEMLOCI_CONFIG", self.config), ("MEMLOCI_LIBRARIES", self.libraries),
                            ("MEMLOCI_TOOLS", self.tools), ("MEMLOCI_SCHEMA", self.schema)):
            if value is not None:
                env[name] = str(value)
        env.update(extra)
        return env
