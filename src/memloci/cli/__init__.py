"""The `memloci` command line (Typer + Rich): a thin adapter over the service."""
