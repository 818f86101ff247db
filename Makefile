# `make run` starts the MCP server on the embedded default; `make test` runs every test.
# Both create the virtual environment and install memloci into it first when needed.

PYTHON ?= python3
VENV   ?= .venv
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test install bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/memloci serve

test: $(STAMP)
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/memloci bench graph --n 50000

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
