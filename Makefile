# `make run` starts the MCP server on the embedded default. `make test` runs the fast tier (every
# test not marked `full`: the contract suite on the three engines, the Python-client conformance
# pass, mypy, ruff; a few minutes); `make test-full` runs every test (processes killed and
# crashed, several servers, the TypeScript and Inspector clients on both transports, HTTP load,
# packaging), as CI does. Each creates the virtual environment and installs memloci first when needed.
# `make docs` builds the documentation site (docs/, mkdocs.yml) into site/.

PYTHON ?= python3
VENV   ?= .venv
# Two installs: `make run` needs memloci and its runtime dependencies only; `make test` adds the
# test tools. The test install includes the runtime one, so it refreshes both stamps; a change to
# pyproject.toml makes both stale.
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# The official Node server, for the drop-in compatibility tests (skipped when npm is missing).
OFFICIAL := .official/node_modules/@modelcontextprotocol/server-memory/dist/index.js
# The TypeScript SDK and the MCP Inspector, pinned in tests/conformance/package-lock.json, for the
# conformance suite (skipped when npm is missing; under CI=true that is a failure).
CONFORMANCE := tests/conformance/node_modules/.package-lock.json
# The LangChain client of tests/test_frameworks.py: langchain-mcp-adapters needs MCP SDK 1.x, memloci
# runs on 2.x, so the client gets its own environment, pinned in tests/frameworks/requirements-langchain.txt
# (skipped when missing; under CI=true that is a failure).
LANGCHAIN_VENV := .venv-langchain
LANGCHAIN := $(LANGCHAIN_VENV)/.installed

# Both tiers run on two processes (pytest-xdist); a file's tests stay on one process, since the
# conformance and recall modules share a server run or a library between their tests.
PYTEST_XDIST ?= -n 2 --dist loadfile

.PHONY: run test test-full install dist bench docs clean

# `make -C /path/to/memloci run` must not print "Entering directory" on stdout: it is the protocol.
MAKEFLAGS += --no-print-directory

# Set-up output goes to stderr: `make run` is an MCP stdio server, its stdout is the protocol.
$(VENV)/bin/python:
	@$(PYTHON) -m venv $(VENV) >&2

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e . >&2
	@touch $@

$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	@$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]' >&2
	@touch $(RUN_STAMP) $@

install: $(RUN_STAMP)

run: $(RUN_STAMP)
	@$(VENV)/bin/memloci serve

# A wheel and an sdist in dist/ (`pipx install dist/memloci-*.whl`, `uv tool install ...`).
dist: $(TEST_STAMP)
	$(VENV)/bin/python -m build --outdir dist

$(OFFICIAL):
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix .official @modelcontextprotocol/server-memory \
		|| echo "npm install failed: the official-server compatibility tests will be skipped"; \
	else echo "npm not found: the official-server compatibility tests will be skipped"; fi

$(CONFORMANCE): tests/conformance/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --silent --no-audit --no-fund --prefix tests/conformance >&2 \
		|| echo "npm ci failed: the TypeScript conformance tests will be skipped" >&2; \
	else echo "npm not found: the TypeScript conformance tests will be skipped" >&2; fi

$(LANGCHAIN): tests/frameworks/requirements-langchain.txt
	@($(PYTHON) -m venv $(LANGCHAIN_VENV) >&2 \
		&& $(LANGCHAIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
			-r tests/frameworks/requirements-langchain.txt >&2 \
		&& touch $@) \
	|| echo "pip install failed: the LangChain framework tests will be skipped" >&2

test: $(TEST_STAMP)
	$(VENV)/bin/python -m pytest $(PYTEST_XDIST) -m "not full"

test-full: $(TEST_STAMP) $(OFFICIAL) $(CONFORMANCE) $(LANGCHAIN)
	$(VENV)/bin/python -m pytest $(PYTEST_XDIST)

# The documentation site in site/: the tool reference written from the tool definitions first, then
# mkdocs with --strict, so a broken link or a page left out of the nav fails. NO_MKDOCS_2_WARNING
# silences Material's notice about its end of life, which is not about this site.
docs: $(TEST_STAMP)
	$(VENV)/bin/python docs/gen_tools.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict

bench: $(RUN_STAMP)
	$(VENV)/bin/memloci bench graph --n 50000

clean:
	rm -rf $(VENV) $(LANGCHAIN_VENV) .official tests/conformance/node_modules build dist site src/*.egg-info .pytest_cache
