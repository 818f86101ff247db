"""`python -m memloci.hooks AGENT`: the hook without the command line's start-up (Typer, Rich)."""

import sys

from .capture import main

main(sys.argv[1:])
