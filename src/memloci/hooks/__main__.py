"""`python -m memloci.hooks AGENT`: the hook without the command line's start-up (Typer, Rich);
`python -m memloci.hooks --drain`: store what hooks spooled and could not store in time."""

import sys

from memloci.hooks.capture import main

main(sys.argv[1:])
