"""The command line of server mode: `memloci token ...`, and `memloci serve --transport http`."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from memloci.core.errors import MemlociError
from memloci.core.settings import Settings

token_app = typer.Typer(help="Bearer tokens for `memloci serve --transport http` (stored hashed).",
                        no_args_is_help=True, rich_markup_mode=None)


def _fail(exc: MemlociError) -> None:
    print(f"{exc.code}: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(exc.hint, file=sys.stderr)
    raise typer.Exit(1)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="A name for the token's holder; the access log shows it.")],
    scope: Annotated[list[str], typer.Option("--scope", help="LIBRARY:read|write|admin, repeatable; * is every library.")],
) -> None:
    """Create a token and print it once: only its SHA-256 is stored ($MEMLOCI_HOME/tokens.json)."""
    from memloci.cli.main import _settings
    from memloci.http.tokens import TokenStore, token_file

    try:
        store = TokenStore(token_file(_settings()))
        secret = store.create(name, scope)
    except MemlociError as exc:
        _fail(exc)
    print(secret)
    print(f"Token '{name}' created with {', '.join(scope)}. It is shown only now: keep it in your client's "
          "configuration as the header Authorization: Bearer <token>.", file=sys.stderr)


@token_app.command("list")
def token_list(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The tokens: name, scopes, created. Never the tokens themselves (they are not stored)."""
    from memloci.cli.main import _settings
    from memloci.http.tokens import TokenStore, token_file

    try:
        tokens = [t.public() for t in TokenStore(token_file(_settings())).load()]
    except MemlociError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps({"tokens": tokens}, indent=2))
        return
    if not tokens:
        print("No tokens. Create one: memloci token create NAME --scope LIBRARY:write", file=sys.stderr)
    for t in tokens:
        print(f"{t['name']}\t{' '.join(t['scopes'])}\t{t['created']}")


@token_app.command("revoke")
def token_revoke(name: Annotated[str, typer.Argument(help="The token's name.")]) -> None:
    """Revoke a token: a running server refuses it from its next request."""
    from memloci.cli.main import _settings
    from memloci.http.tokens import TokenStore, token_file

    try:
        TokenStore(token_file(_settings())).revoke(name)
    except MemlociError as exc:
        _fail(exc)
    print(f"Token '{name}' revoked.", file=sys.stderr)


def serve_http_command(build: Callable[[dict[str, Any]], Any], *, host: str | None, port: int | None,
                       stateless: bool, allowed_hosts: list[str] | None, allowed_origins: list[str] | None,
                       max_body: int | None, rate_limit: int | None, settings: Settings) -> None:
    """`memloci serve --transport http`: `build(config)` gives (service, server); the rest is ours.
    `settings` are the program's."""
    from memloci.app.config import config_file
    from memloci.http.app import check_bind, serve_http
    from memloci.http.settings import resolve
    from memloci.http.tokens import StoredTokenVerifier, TokenStore, token_file

    level = settings.log_level or "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if settings.log_level is None:  # by default: warnings, plus the access log and start/stop lines
        for ours in ("memloci.access", "memloci.http", "uvicorn.error"):
            logging.getLogger(ours).setLevel(logging.INFO)
    if level != "DEBUG":  # the SDK's and uvicorn's info lines may echo paths and URIs
        for noisy in ("mcp", "uvicorn.access", "httpx2", "httpx"):
            logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        config = config_file(settings)
        http = resolve(config, host=host, port=port, stateless=stateless, allowed_hosts=allowed_hosts,
                       allowed_origins=allowed_origins, max_body_bytes=max_body, rate_limit=rate_limit,
                       process=settings)
        stored = StoredTokenVerifier(TokenStore(token_file(settings)))
        verifiers: list[Any] = [stored]
        extra_routes: list[Any] = []
        metadata_url = None
        oauth = config.get("oauth")
        if oauth is not None:  # JWTs from an issuer, tried after the stored tokens
            from memloci.http.oauth import JwtTokenVerifier, protected_resource_routes

            verifiers.append(JwtTokenVerifier(oauth))
            extra_routes = protected_resource_routes(oauth)
            metadata_url = oauth.metadata_url
        configured = oauth is not None or stored.configured()
        check_bind(http, configured)
        service, server = build(config)
    except MemlociError as exc:
        _fail(exc)
    service.embedder.start_background(delay=0.5)
    service.watch_libraries()
    try:
        serve_http(server, http, verifiers=verifiers, tokens_configured=configured, extra_routes=extra_routes,
                   configured_now=stored.configured,
                   resource_metadata_url=metadata_url, on_shutdown=service.close)
    except MemlociError as exc:
        service.close()
        _fail(exc)
