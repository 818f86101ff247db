"""memloci: durable memory for AI agents over the Model Context Protocol."""

__version__ = "0.1.0"

import sys as _sys  # noqa: E402

# `memloci hook AGENT` runs inside an agent's loop and must be gone within 2 s. Loading the whole
# command line first (Typer, Rich and every command's imports: about a second on a busy 2-core
# machine) would spend half of that, so the `memloci` script goes straight to the hook.
if _sys.argv[1:2] == ["hook"] and _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1].split(".")[0] in (
        "memloci", "memloci-script") and not {"--help", "-h"} & set(_sys.argv[2:3]):
    from .hooks.capture import main as _hook

    _hook(_sys.argv[2:])  # never returns: it ends the process with status 0
