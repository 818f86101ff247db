"""A process for tests/test_install.py's kill test: `install_loop.py CONFIG` installs memloci into
CONFIG (Cursor's format) and takes it out again, over and over, until it is killed."""

from __future__ import annotations

import sys

from memloci.cli.main import app


def main() -> None:
    config = sys.argv[1]
    print("looping", flush=True)
    while True:
        # Through the root command, as `memloci install` runs: it reads the settings for the run.
        for verb in ("install", "uninstall"):
            app([verb, "cursor", "--config", config], standalone_mode=False)


if __name__ == "__main__":
    main()
