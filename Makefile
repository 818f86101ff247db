# `make run` starts the MCP server on the embedded default; `make test` runs every test.
# Both create the virtual environment and install memloci into it first when needed.

PYTHON ?= python3
VENV   ?= .venv
STAMP  := $(VENV)/.installed-stamp
# The official Node server, for the drop-in compatibility tests (skipped when npm is missing).
OFFICIAL := .official/node_modules/@modelcontextprotocol/server-memory/dist/index.js

.PHONY: run test install bench clean

# Set-up output goes to stderr: `make run` is an MCP stdio server, its stdout is the protocol.
$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV) >&2
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]' >&2
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	@$(VENV)/bin/memloci serve

$(OFFICIAL):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix .official @modelcontextprotocol/server-memory \
		|| echo "npm install failed: the official-server compatibility tests will be skipped"; \
	else echo "npm not found: the official-server compatibility tests will be skipped"; fi

test: $(STAMP) $(OFFICIAL)
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/memloci bench graph --n 50000

clean:
	rm -rf $(VENV) .official build src/*.egg-info .pytest_cache
