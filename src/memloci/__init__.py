"""memloci: durable memory for AI agents over the Model Context Protocol."""

__version__ = "0.1.0"

import sys as _sys


def _hook_argv(argv: list[str]) -> tuple[list[str], str | None] | None:
    """The hook's own arguments and the `--home` given when `argv` (after the program name) is
    `[--home H] hook ...`, else None. `memloci install` writes the `--home H` form into a client's
    hooks, so it must take the fast path too; the hook takes H as the `--home` option would.
    Anything else (two --home, an empty one, --help) is left to the full command line."""
    home = None
    if argv[:1] == ["--home"] and len(argv) >= 2:
        home, argv = argv[1], argv[2:]
    elif argv[:1] and argv[0].startswith("--home="):
        home, argv = argv[0][len("--home="):], argv[1:]
    if argv[:1] != ["hook"] or {"--help", "-h"} & set(argv[1:2]) or home == "":
        return None
    return argv[1:], home


# `memloci hook AGENT` runs inside an agent's loop and must be gone within 2 s. Loading the whole
# command line first (Typer, Rich and every command's imports: about a second on a busy 2-core
# machine) would spend half of that, so the `memloci` script goes straight to the hook.
if _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1].split(".")[0] in ("memloci", "memloci-script") \
        and (_hook_args := _hook_argv(_sys.argv[1:])) is not None:
    from pathlib import Path as _Path

    from memloci.hooks.capture import main as _hook

    _hook(_hook_args[0], home=_Path(_hook_args[1]).expanduser() if _hook_args[1] is not None else None)
    # (never returns: it ends the process with status 0)


def _is_the_program(argv: list[str], orig_argv: list[str]) -> bool:
    """Whether this process is the `memloci` program (its script, or `python -m memloci`), not
    a program that imports memloci."""
    if argv[:1] and argv[0].replace("\\", "/").rsplit("/", 1)[-1].split(".")[0] in ("memloci", "memloci-script"):
        return True
    # `python [options] -m memloci args`: the interpreter's own arguments end with -m memloci
    # (a "-m memloci" among a program's arguments, as `pytest -m memloci`, is not this)
    k = len(orig_argv) - len(argv)
    return k >= 2 and orig_argv[k - 1:k + 1] == ["-m", "memloci"]


# The program's start is imports (the command line, the MCP SDK's models) and the server's
# build: hundreds of thousands of objects that all live on, so the cyclic garbage collector's
# passes over them find nothing and cost about a sixth of `memloci serve`'s time to its first
# tools/list. It is off until then: the root command turns it back on before any other command
# runs (cli/main.py), `memloci serve` once the client has its tool list (cli/serve.py).
if _is_the_program(_sys.argv, getattr(_sys, "orig_argv", [])):
    import gc as _gc

    _gc.disable()
    # `memloci serve` (stdio): the client's initialize and tools/list answered from this
    # configuration's recorded replies, before the SDK is imported (mcp/early.py).
    if "serve" in _sys.argv[1:6]:
        from memloci.mcp.early import begin as _begin

        _begin(_sys.argv[1:])
