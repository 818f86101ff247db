"""A process for tests/test_install.py's kill test: `install_loop.py CONFIG` installs memloci into
CONFIG (Cursor's format) and takes it out again, over and over, until it is killed."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from memloci.cli.install import install, uninstall


def main() -> None:
    config = Path(sys.argv[1])
    print("looping", flush=True)
    while True:
        for step in (lambda: install("cursor", config=config), lambda: uninstall("cursor", config=config)):
            try:
                step()
            except typer.Exit:
                pass


if __name__ == "__main__":
    main()
