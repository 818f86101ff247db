"""`memloci hook AGENT`: one hook event on stdin, maybe one memory stored; never a nuisance.

A hook runs inside the agent's loop, so it must never fail, slow or clutter it:
- the exit status is always 0, and a watchdog thread ends the process (status 0) at
  DEADLINE_S whatever it is doing (a busy lock, a slow disk); a write cut off there is a
  killed writer, which every store survives whole or not at all. The event is not lost: it
  was spooled first (spool.py), and the watchdog starts a detached drainer that stores it;
- stdout carries only the agent's neutral reply (Gemini CLI parses it as JSON), or at the
  start of a session of Claude Code or Gemini CLI the project's remembered rules as context
  (remind.py; nothing is stored then), and stderr goes to /dev/null: what went wrong (bad
  JSON, a missing library, a full disk, a busy lock) is written to
  `$MEMLOCI_HOME/logs/hook.log` (0600, rotated at LOG_BYTES);
- the embedder is never loaded: the memory is stored without a vector, and a server embeds
  the backlog at its next search or write of that library.

Where: the event's project (the nearest folder above its file or cwd holding `.mcp` or
`.git`) when that project already has memory in `<root>/.mcp/`; memloci never creates
`.mcp/` here. Otherwise the default library. Either way a memory from a project carries the
project's id (projects.project_id: from its git remote, else its folder name) as tag
`project:<id>` and `metadata.project`, and the edited file's path relative to the project.

Cooldown: one memory per COOLDOWN_S per (agent, event, project), kept in
`$MEMLOCI_HOME/hook-cooldown.json`; lifecycle events (before compaction, session end) always
pass. The same text already stored is not stored twice (the content hash).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sys
import threading
import time
from contextlib import suppress
from functools import partial
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from memloci.core.errors import MemlociError
from memloci.core.settings import Settings, data_home
from memloci.hooks import spool
from memloci.hooks.classify import MAX_CHARS, classify, cut, worth_keeping
from memloci.hooks.events import (
    NEUTRAL_REPLY,
    PARSERS,
    EventError,
    HookEvent,
    Unsupported,
    context_reply,
    parse_event,
    session_start,
)
from memloci.hooks.remind import remind

DEADLINE_S = 1.8  # from process start; the agents' limit is 2 s, the rest is process exit
MIN_WORK_S = 0.05  # what is left when start-up alone took DEADLINE_S (2 s is the promise)
MAX_INPUT = 16 * 1024 * 1024  # bytes read at most; a larger event cannot be parsed, so it is dropped
DRAIN_MARGIN_S = 0.5  # older spool files are drained inline only with this much time to spare
COOLDOWN_S = 30.0
COOLDOWN_FILE = "hook-cooldown.json"
COOLDOWN_KEEP_S = 24 * 3600  # older entries are dropped, so the file stays small
LOG_BYTES = 256 * 1024

log = logging.getLogger("memloci.hook")


# -- process set-up: silence, log file, deadline ------------------------------------------

def _silence() -> int | None:
    """Point fd 1 and fd 2 at /dev/null (a library's warning must not reach the agent's terminal);
    return a private copy of the real stdout for the neutral reply."""
    try:
        sys.stdout.flush()
        out = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        return out
    except OSError:
        return None


class PrivateLog(RotatingFileHandler):
    """A rotated log whose files are 0600 from their first byte (the log names projects and tools)."""

    def _open(self):
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding)


def _log_to_file(home: Path) -> None:
    try:
        folder = home / "logs"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handler = PrivateLog(folder / "hook.log", maxBytes=LOG_BYTES, backupCount=1, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        for noisy in ("memloci.store.protocols", "memloci.search"):  # their info lines are for servers
            logging.getLogger(noisy).setLevel(logging.WARNING)
    except OSError:
        logging.getLogger().handlers[:] = [logging.NullHandler()]


_home: Path | None = None  # known once set up: where the watchdog looks for spooled events
_child_env: dict[str, str] | None = None  # the drainer's environment: this hook's settings (Settings.child_env)


def _watchdog(seconds: float, reply: str | None, out: int | None) -> None:
    """End the process with status 0 after `seconds`, whatever the main thread is blocked in;
    what is spooled and not yet stored is left to a detached drainer."""
    def fire() -> None:
        if not done.wait(seconds):
            left = spool.pending(_home) if _home is not None else []
            if left:
                try:
                    spool.spawn_drainer(_child_env)
                    log.warning("deadline of %.1f s reached; %d spooled event(s) left to the drainer",
                                seconds, len(left))
                except OSError as exc:
                    log.warning("deadline of %.1f s reached; drainer not started (%s), the next hook stores "
                                "the spooled events", seconds, exc)
            else:
                log.warning("deadline of %.1f s reached; nothing spooled, nothing stored", seconds)
            _finish(reply, out)

    done = threading.Event()
    threading.Thread(target=fire, name="memloci-hook-deadline", daemon=True).start()


def _since_start() -> float:
    """Seconds since this process started (interpreter start-up and imports count against the
    agent's 2 s too); 0 where /proc cannot say."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _deadline(settings: Settings | None) -> float:
    """DEADLINE_S, or MEMLOCI_HOOK_DEADLINE seconds (tests on a loaded machine set it longer, so
    they check what is stored, not how fast). Settings that could not be read: DEADLINE_S."""
    if settings is None or settings.hook_deadline is None:
        return DEADLINE_S
    return settings.hook_deadline


_finishing = threading.Lock()  # one reply: the watchdog's and the main thread's never both


def _finish(reply: str | None, out: int | None) -> None:
    if not _finishing.acquire(blocking=False):
        threading.Event().wait()  # the other is writing its reply and ending the process
    if reply and out is not None:
        with suppress(OSError):
            os.write(out, (reply + "\n").encode())
    logging.shutdown()
    os._exit(0)


# -- the event --------------------------------------------------------------------------

def read_payload(args: list[str]) -> Any:
    """The event: the JSON argument Codex's `notify` passes, else stdin (at most MAX_INPUT bytes)."""
    if args:
        raw = args[0].encode("utf-8", errors="surrogateescape")
    else:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1)
    if len(raw) > MAX_INPUT:  # JSON cut short cannot be read, so this one is dropped (and said so)
        raise EventError(f"event larger than {MAX_INPUT} bytes, dropped")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventError(f"not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise EventError("empty input")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise EventError(f"not JSON: {exc}") from None


def find_project(event: HookEvent) -> tuple[Path | None, bool]:
    """The event's project (the nearest folder above its file or cwd holding `.mcp` or `.git`),
    and whether it already has memory (`<root>/.mcp/` a real folder); (None, False) outside one."""
    start: Path | None = None
    if event.file_path and "\x00" not in event.file_path:
        path = Path(event.file_path)
        if not path.is_absolute() and event.cwd and os.path.isabs(event.cwd):
            path = Path(event.cwd) / path
        if path.is_absolute():
            start = path.parent
    if start is None and event.cwd and "\x00" not in event.cwd and os.path.isabs(event.cwd):
        start = Path(event.cwd)
    if start is None:
        return None, False
    try:
        start = start.resolve()
    except (OSError, RuntimeError):
        return None, False
    for folder in (start, *start.parents):
        mcp = folder / ".mcp"
        if mcp.is_dir() and not mcp.is_symlink():
            return folder, True
        if (folder / ".git").exists() or mcp.is_symlink():
            return folder, False  # no project memory (or a link there, which memloci refuses)
    return None, False


def project_root(event: HookEvent) -> Path | None:
    """The project of the event when it already has memory, else None."""
    root, has_memory = find_project(event)
    return root if has_memory else None


def relative_file(event: HookEvent, root: Path | None) -> str | None:
    """The edited file relative to its project; outside a project only its name (no home paths)."""
    if not event.file_path or "\x00" in event.file_path:
        return None
    path = Path(event.file_path)
    if not path.is_absolute() and event.cwd and os.path.isabs(event.cwd):
        path = Path(event.cwd) / path
    if root is not None and path.is_absolute():
        with suppress(ValueError, OSError):
            return str(path.resolve().relative_to(root))
    return path.name


def compose(event: HookEvent, rel: str | None) -> str:
    """The memory's text: a one-line header saying what happened, then what it said."""
    body = event.body.strip()
    if event.kind == "code":
        return f"{event.tool or 'edit'} {rel or 'a file'}:\n{body}"
    if event.kind == "command":
        command = (event.command or "").strip()
        return f"$ {command}" if body == command else f"$ {command}\n{body}"  # no output: the line alone
    if event.kind == "lifecycle":
        return f"{event.event}{f' ({event.detail})' if event.detail else ''}:\n{body}"
    return f"{event.tool}:\n{body}" if event.tool else body


# -- cooldown -------------------------------------------------------------------------------

class Cooldown:
    """The last store time per (agent, event, project), under an exclusive lock held until close,
    so two hooks firing together do not both pass."""

    def __init__(self, home: Path):
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.fd = os.open(home / COOLDOWN_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            data = json.loads(os.pread(self.fd, 64 * 1024, 0).decode("utf-8") or "{}")
        except ValueError:
            data = {}
        self.state: dict[str, float] = {k: v for k, v in data.items() if isinstance(v, (int, float))} \
            if isinstance(data, dict) else {}

    def waiting(self, key: str, now: float) -> float:
        """Seconds left before `key` may store again (0: it may)."""
        return max(0.0, self.state.get(key, 0.0) + COOLDOWN_S - now)

    def record(self, key: str, now: float) -> None:
        self.state = {k: v for k, v in self.state.items() if now - v < COOLDOWN_KEEP_S}
        self.state[key] = now
        data = json.dumps(self.state, sort_keys=True).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def close(self) -> None:
        with suppress(OSError):
            os.close(self.fd)


# -- storing ----------------------------------------------------------------------------------

def spool_record(event: HookEvent, root: Path | None, has_memory: bool) -> dict[str, Any]:
    """What the spool keeps of an event: its fields with the body cut to what can be stored
    (its true length kept), and its project."""
    fields = {name: getattr(event, name) for name in HookEvent.__dataclass_fields__}
    body = event.body.strip()
    fields["body"] = body[:MAX_CHARS]
    if len(body) > MAX_CHARS or event.full_chars is not None:
        fields["full_chars"] = max(len(body), event.full_chars or 0)
    return {"event": fields, "root": str(root) if root is not None else None, "memory": has_memory,
            "time": time.time()}


def store(record: dict[str, Any], settings: Settings) -> str:
    """Store one spooled event (the caller has decided it is worth it); returns what happened.
    `settings` (the hook's, read once by main) say which libraries are mounted."""
    from memloci.app.config import config_file, default_specs, extraction_on
    from memloci.app.projects import ProjectRef, project_id
    from memloci.app.registry import LibraryRegistry
    from memloci.app.specs import DEFAULT_LIBRARY
    from memloci.search.embedder import EmbedderHandle
    from memloci.service.facade import MemoryService

    try:
        event = HookEvent(**record["event"])
        root = Path(record["root"]) if record.get("root") else None
        has_memory = record.get("memory") is True and root is not None
    except (KeyError, TypeError) as exc:
        raise EventError(f"spooled event unreadable: {exc}") from None
    rel = relative_file(event, root)
    composed = compose(event, rel)
    content, truncated = cut(composed)
    label = classify(content, event.kind)
    project = project_id(root) if root is not None else None
    tags = ["hook", f"agent:{event.agent}", f"event:{event.event}"]
    if event.tool:
        tags.append(f"tool:{event.tool[:59]}")
    if project:
        tags.append(f"project:{project[:56]}")
    metadata: dict[str, Any] = {"source": f"hook:{event.agent}:{event.event}", "confidence": label.confidence,
                                "matched": list(label.matched)}
    for key, value in (("session_id", event.session_id), ("tool", event.tool), ("file_path", rel),
                       ("project", project), ("trigger", event.detail)):
        if value:
            metadata[key] = value[:512]
    if truncated:
        metadata["truncated"] = True
        # the header, then the body as long as it really was (the spool holds only its start)
        metadata["original_chars"] = len(composed) - len(event.body) + max(len(event.body), event.full_chars or 0)

    specs = default_specs(settings)
    service = MemoryService(LibraryRegistry(specs, settings=settings), EmbedderHandle("none", settings),
                            extract=extraction_on(settings, config_file(settings)))
    try:
        if has_memory:
            library: Any = ProjectRef(str(root), None, may_create=False)
        else:
            library = next((s.name for s in specs if s.name == DEFAULT_LIBRARY), specs[0].name)
        memory, created = service.store_memory(content, tags=tags, memory_type=label.memory_type,
                                               metadata=metadata, importance=label.importance, library=library)
    finally:
        service.close()
    where = f"project {project}" if has_memory else f"library {library}" + (f" (project {project})" if project else "")
    if not created:
        return f"already stored in {where} ({memory.content_hash[:12]})"
    return f"stored {label.memory_type} ({label.importance}, confidence {label.confidence}) in {where}"


def run(agent: str, args: list[str], home: Path, until: float | None, settings: Settings) -> tuple[str, str | None]:
    """Decide, spool, store; returns the log line, and the reply when it is not the neutral one
    (at session start: the project's rules, remind.py). Raises on a bad event or a failed write.
    With time left before `until` (time.monotonic()), older spooled events are stored too."""
    if agent not in PARSERS:
        raise EventError(f"unknown agent '{agent}'; known: {', '.join(PARSERS)}")
    if PARSERS[agent] is None:
        return f"{agent} has no hooks; nothing to capture", None
    payload = read_payload(args)
    start = session_start(agent, payload)
    if start is not None:  # nothing stored: the reply is what matters, so no spool is drained either
        root, has_memory = find_project(start)
        context, line = remind(start, root, has_memory, settings)
        return line, context_reply(start, context) if context else None
    return capture(agent, payload, home, until, settings), None


def capture(agent: str, payload: Any, home: Path, until: float | None, settings: Settings) -> str:
    """The event stored when it is worth it; returns the log line."""
    drain = partial(_drain_older, settings=settings)
    try:
        event = parse_event(agent, payload)
    except Unsupported as exc:
        return f"{agent}: event {exc} is not captured" + drain(home, until)
    verdict = worth_keeping(event.kind, event.tool, event.command, event.body)
    if not verdict.keep:
        return f"{agent} {event.event}: skipped, {verdict.why}" + drain(home, until)
    root, has_memory = find_project(event)
    key = f"{agent}|{event.event}|{root or '-'}"
    record = spool_record(event, root, has_memory)
    cooldown = None if event.lifecycle else Cooldown(home)
    try:
        now = time.time()
        if cooldown is not None and (left := cooldown.waiting(key, now)):
            cooldown.close()
            cooldown = None
            return f"{agent} {event.event}: skipped, cooldown ({left:.0f} s left)" + drain(home, until)
        spooled = spool.write(home, record)  # from here a deadline cannot lose the event
        if cooldown is not None:
            cooldown.record(key, now)
    finally:
        if cooldown is not None:
            cooldown.close()
    result = store(record, settings)
    spool.remove(spooled)
    return f"{agent} {event.event}: {result}" + drain(home, until, skip=spooled)


def _drain_older(home: Path, until: float | None, skip: Path | None = None, *, settings: Settings) -> str:
    """Store what earlier hooks spooled and could not store, when there is time (else the next
    run, or a drainer, does)."""
    if until is not None and until - time.monotonic() < DRAIN_MARGIN_S:
        return ""
    if not spool.pending(home):
        return ""
    left = spool.drain(home, partial(store, settings=settings), until=None if until is None else until - DRAIN_MARGIN_S, wait=False,
                       skip=skip)
    return f"; spool drained ({left} left)"


def main(argv: list[str], *, home: Path | None = None, config: Path | None = None) -> int:
    """`memloci hook AGENT [EVENT_JSON]`: always 0, nothing on the terminal. `home` and `config`
    are the command line's `--home` and `--config`, over the environment's settings.
    `python -m memloci.hooks --drain`: store every spooled event, with no deadline."""
    global _home, _child_env
    started = time.monotonic()
    settings, refused = _settings(home, config)  # the one reading of the environment
    if argv[:1] == ["--drain"]:
        return drain_main(settings, refused)
    agent = argv[0] if argv else ""
    reply = NEUTRAL_REPLY.get(agent)
    out = _silence()
    seconds = max(MIN_WORK_S, _deadline(settings) - _since_start())
    if settings is not None:
        _child_env = settings.child_env()
    _watchdog(seconds, reply, out)
    try:
        home = settings.home if settings is not None else home.expanduser() if home else data_home()
        _log_to_file(home)
        _home = home
        if settings is None:  # a malformed variable: said in the log, nothing guessed
            raise refused or MemlociError("settings: not read")
        line, answer = run(agent, argv[1:], home, started + seconds, settings) if agent else \
            ("no agent named; usage: memloci hook AGENT < event.json", None)
        log.info("%s (%.0f ms)", line, (time.monotonic() - started) * 1000)
        reply = answer or reply
    except EventError as exc:
        log.warning("%s: bad event: %s", agent or "?", exc)
    except BaseException as exc:  # a full disk, a busy lock, a broken library: logged, never shown
        log.error("%s: not stored: %s: %s", agent or "?", type(exc).__name__, exc)
    _finish(reply, out)
    return 0


def drain_main(settings: Settings | None, refused: MemlociError | None) -> int:
    """The detached drainer: its stdio is /dev/null already; what happens goes to the log. The hook
    gave it its settings in the environment (Settings.child_env); `refused` says why they could
    not be read."""
    try:
        _log_to_file(settings.home if settings is not None else data_home())
        if settings is None:
            raise refused or MemlociError("settings: not read")
        spool.run_drainer(settings.home, partial(store, settings=settings))
    except BaseException as exc:
        log.error("spool drainer: %s: %s", type(exc).__name__, exc)
    logging.shutdown()
    return 0


def _settings(home: Path | None, config: Path | None) -> tuple[Settings | None, MemlociError | None]:
    """The settings, or why they could not be read (the hook logs that, and still exits 0)."""
    try:
        return Settings.from_env().with_flags(home=home, config=config), None
    except MemlociError as exc:
        return None, exc
