"""The engine contract suite: one set of tests, run on every engine (see conftest.py).

A package, so that its conftest is `contract.conftest` and never shadows tests/conftest.py,
which other test modules import as `conftest`."""
