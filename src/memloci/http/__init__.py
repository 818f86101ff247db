"""Server mode: memloci over the MCP SDK's streamable HTTP, with bearer tokens and library scopes.

- `settings.py`  where to listen and what to allow (flags, `MCP_SERVER_HOST`/`MCP_SERVER_PORT`, `[http]`)
- `tokens.py`    `memloci token ...`: hashed bearer tokens in `$MEMLOCI_HOME/tokens.json`, and their verifier
- `scopes.py`    a token's library scopes (`LIBRARY:read|write|admin`): the caller the MCP server checks
- `limits.py`    request checks before the SDK: body size, the stdio reader's message checks, rate limits
- `connections.py` uvicorn's protocol with deadlines on a request's headers and body, and a connection cap
- `app.py`       the ASGI app (SDK session manager + our checks) and `serve_http` (uvicorn, SIGTERM)
- `oauth.py`     JWT access tokens from an OAuth issuer, a second verifier beside the stored tokens
- `loopback.py`  `memloci serve --transport http` as a process on loopback, and a client session to it
                 (for what drives a real server from outside: `memloci bench http`, the tests)
- `dashboard/`   the page for people at `/` and its JSON API under `/api/` (same tokens and scopes)
"""
