"""OAuth resource server: JWT access tokens checked against an issuer the test runs on loopback.

The verifier is exercised in-process against a real JWKS server (the key fetch, its cache and
failures), then through a real `memloci serve --transport http` with a real MCP client.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time

import pytest
from oauth_issuer import Issuer

from memloci.app.config import load_config
from memloci.app.server_config import parse_oauth_config
from memloci.core.errors import ValidationError
from memloci.http.oauth import JwksCache, JwtTokenVerifier


@pytest.fixture()
def issuer():
    with Issuer() as iss:
        iss.add_key("k1")
        yield iss


def _config(iss: Issuer, **over):
    table = {"issuer": iss.url, "jwks_url": iss.jwks_url, "audience": "memloci-test",
             "resource_url": "http://127.0.0.1:8001/mcp"}
    table.update(over)
    return parse_oauth_config(table)


def _verify(verifier: JwtTokenVerifier, token: str):
    return asyncio.run(verifier.verify_token(token))


def test_valid_token_maps_scopes_and_names_the_client(issuer):
    v = JwtTokenVerifier(_config(issuer))
    got = _verify(v, issuer.token(scope="openid team:read personal:write profile"))
    assert got is not None
    assert got.scopes == ["team:read", "personal:write"]  # openid/profile are the issuer's business
    assert got.client_id == "jwt:agent-1" and got.subject == "alice"
    assert got.claims == {"iss": issuer.url}
    assert got.expires_at > time.time()


def test_ec_keys_and_scp_list_claim(issuer):
    issuer.add_key("e1", kind="EC")
    v = JwtTokenVerifier(_config(issuer, scope_claim="scp"))
    got = _verify(v, issuer.token(kid="e1", scope=None, scp=["team:write"]))
    assert got is not None and got.scopes == ["team:write"]


def test_scope_map_turns_issuer_scopes_into_library_scopes(issuer):
    v = JwtTokenVerifier(_config(issuer, scope_map={"memory.read": ["team:read", "notes:read"], "memory.admin": "team:admin"}))
    assert _verify(v, issuer.token(scope="memory.read")).scopes == ["team:read", "notes:read"]
    assert _verify(v, issuer.token(scope="memory.admin team:read")).scopes == ["team:admin", "team:read"]
    assert _verify(v, issuer.token(scope="*:read team:readonly")).scopes == ["*:read"]  # as stored tokens spell it


@pytest.mark.parametrize("case", ["expired", "not_yet", "wrong_audience", "wrong_issuer", "no_exp",
                                  "bad_signature", "alg_none", "hs256_public_key", "unknown_kid",
                                  "no_library_scope", "scope_not_text", "garbage"])
def test_refused_tokens(issuer, case, caplog):
    issuer.add_key("other", publish=False)
    now = int(time.time())
    tokens = {
        "expired": lambda: issuer.token(exp=now - 120),  # past the 30 s leeway
        "not_yet": lambda: issuer.token(nbf=now + 300),
        "wrong_audience": lambda: issuer.token(aud="someone-else"),
        "wrong_issuer": lambda: issuer.token(iss="http://127.0.0.1:1/"),
        "no_exp": lambda: issuer.token(exp=None),
        "bad_signature": lambda: issuer.token(kid="k1", sign_with="other"),
        "alg_none": lambda: issuer.token_none(),
        "hs256_public_key": lambda: issuer.token_hs256_with_public_key(),
        "unknown_kid": lambda: issuer.token(kid="other"),
        "no_library_scope": lambda: issuer.token(scope="openid profile"),
        "scope_not_text": lambda: issuer.token(scope=42),
        "garbage": lambda: "eyJhbGciOi.not-a.jwt",
    }
    token = tokens[case]()
    v = JwtTokenVerifier(_config(issuer))
    with caplog.at_level(logging.WARNING, logger="memloci.http.oauth"):
        assert _verify(v, token) is None
    logged = caplog.text
    assert "token refused" in logged  # the operator learns why
    assert all(part not in logged for part in token.split(".") if part)  # never the token itself


def test_opaque_tokens_are_left_to_other_verifiers_quietly(issuer, caplog):
    v = JwtTokenVerifier(_config(issuer))
    with caplog.at_level(logging.WARNING, logger="memloci.http.oauth"):
        assert _verify(v, "mlc_opaque-token-value") is None
    assert caplog.text == "" and issuer.fetches == 0


def test_keys_are_cached_and_a_new_kid_refetches(issuer):
    v = JwtTokenVerifier(_config(issuer), jwks=JwksCache(issuer.jwks_url, min_refresh=0))
    for _ in range(3):
        assert _verify(v, issuer.token()) is not None
    assert issuer.fetches == 1  # one fetch for three tokens
    issuer.add_key("k2")  # the issuer rotates its keys
    assert _verify(v, issuer.token(kid="k2")) is not None
    assert issuer.fetches == 2


def test_unknown_kids_do_not_storm_the_issuer(issuer):
    issuer.add_key("other", publish=False)
    v = JwtTokenVerifier(_config(issuer))  # default: an unknown kid refetches at most every 10 s
    assert _verify(v, issuer.token()) is not None
    for _ in range(5):
        assert _verify(v, issuer.token(kid="other")) is None
    assert issuer.fetches == 1


def test_an_unreachable_issuer_refuses_tokens_without_crashing(issuer, caplog):
    issuer.fail = True
    v = JwtTokenVerifier(_config(issuer), jwks=JwksCache(issuer.jwks_url, min_refresh=0))
    with caplog.at_level(logging.WARNING, logger="memloci.http.oauth"):
        assert _verify(v, issuer.token()) is None
    assert "could not fetch the issuer's keys" in caplog.text and "HTTP 500" in caplog.text
    issuer.fail = False  # back up: the next token fetches again and passes
    assert _verify(v, issuer.token()) is not None


def test_a_hanging_issuer_times_out(issuer, caplog):
    issuer.hang = 2.0
    v = JwtTokenVerifier(_config(issuer), jwks=JwksCache(issuer.jwks_url, timeout=0.3))
    with caplog.at_level(logging.WARNING, logger="memloci.http.oauth"):
        assert _verify(v, issuer.token()) is None
    assert "could not fetch the issuer's keys" in caplog.text


def test_a_slow_refetch_does_not_hold_up_tokens_with_known_keys(issuer):
    issuer.add_key("other", publish=False)
    v = JwtTokenVerifier(_config(issuer), jwks=JwksCache(issuer.jwks_url, min_refresh=0))
    assert _verify(v, issuer.token()) is not None  # k1 is cached
    issuer.hang = 1.5  # the next fetch (for the unknown kid) is slow
    finished: list[str] = []

    async def verify(label: str, token: str):
        result = await v.verify_token(token)
        finished.append(label)
        return result

    async def both():
        unknown = asyncio.ensure_future(verify("unknown kid", issuer.token(kid="other")))
        await asyncio.sleep(0.2)  # the refetch is under way
        known = await verify("known kid", issuer.token())
        return known, await unknown

    known, unknown = asyncio.run(both())
    assert known is not None and unknown is None
    assert finished == ["known kid", "unknown kid"]


def test_stale_keys_are_dropped_when_the_refresh_fails(issuer):
    cache = JwksCache(issuer.jwks_url, max_age=0, min_refresh=0)  # every use refetches
    v = JwtTokenVerifier(_config(issuer), jwks=cache)
    assert _verify(v, issuer.token()) is not None
    issuer.fail = True  # a key the issuer may have withdrawn is not trusted past its age
    assert _verify(v, issuer.token()) is None


@pytest.mark.parametrize("table, message", [
    ({"issuer": "https://a/", "jwks_url": "https://a/j", "audience": "x", "resource_url": "https://m/mcp", "scopes": "s"},
     "scopes: unknown key"),
    ({"issuer": "https://a/", "audience": "x", "resource_url": "https://m/mcp"}, "missing jwks_url"),
    ({"issuer": "https://a/", "jwks_url": "http://auth.example.com/j", "audience": "x", "resource_url": "https://m/mcp"},
     "must use https"),
    ({"issuer": "https://a/", "jwks_url": "https://a/j", "audience": 3, "resource_url": "https://m/mcp"},
     "audience: must be a non-empty string"),
    ({"issuer": "a", "jwks_url": "https://a/j", "audience": "x", "resource_url": "https://m/mcp"}, "issuer: 'a' is not an http(s) URL"),
    ({"issuer": "https://a/", "jwks_url": "https://a/j", "audience": "x", "resource_url": "https://m/mcp",
      "scope_map": {"memory.read": "team:readonly"}}, "scope_map.memory.read: 'team:readonly' is not LIBRARY:read"),
])
def test_bad_oauth_tables_are_refused_naming_the_key(table, message):
    with pytest.raises(ValidationError) as err:
        parse_oauth_config(table)
    assert message in err.value.message


def test_config_file_oauth_table(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[oauth]\nissuer = "https://auth.example.com/"\njwks_url = "https://auth.example.com/jwks"\n'
                    'audience = "memloci"\nresource_url = "https://memory.example.com/mcp"\nscope_claim = "scp"\n')
    config = load_config(path)["oauth"]
    assert config.scope_claim == "scp"
    assert config.metadata_url == "https://memory.example.com/.well-known/oauth-protected-resource/mcp"
    path.write_text('[oauth]\nissuer = "https://auth.example.com/"\n')
    with pytest.raises(ValidationError, match=r"\[oauth\]: missing jwks_url, audience, resource_url"):
        load_config(path)


# ----- through a real server ------------------------------------------------------------------

RESOURCE = "http://127.0.0.1:8001/mcp"  # what the metadata names (the proxy's public address in real use)


def _server_config(tmp_path, iss: Issuer):
    path = tmp_path / "config.toml"
    path.write_text(f'[libraries]\nteam = "team.db"\npersonal = "personal.db"\n\n[oauth]\nissuer = "{iss.url}"\n'
                    f'jwks_url = "{iss.jwks_url}"\naudience = "memloci-test"\nresource_url = "{RESOURCE}"\n')
    return path


def _post_initialize(url: str, token: str | None):
    """A bare initialize POST: what any client sends first."""
    import httpx2

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx2.post(url, json=body, headers=headers, timeout=30)


@pytest.mark.full  # a server process over HTTP
def test_jwts_through_a_real_server(tmp_path, issuer):
    import anyio
    import httpx2
    from conftest import Client, server_env

    from memloci.http.loopback import http_session, loopback_server

    env = server_env(tmp_path / "home", MEMLOCI_CONFIG=str(_server_config(tmp_path, issuer)))
    with loopback_server([], env, log=tmp_path / "server.log") as server:
        base = server.url.removesuffix("/mcp")
        # RFC 9728 metadata, unauthenticated; the 401 points at it.
        meta = httpx2.get(base + "/.well-known/oauth-protected-resource/mcp", timeout=30)
        assert meta.status_code == 200
        assert meta.json() == {"resource": RESOURCE, "authorization_servers": [issuer.url],
                               "bearer_methods_supported": ["header"], "resource_name": "memloci"}
        refused = _post_initialize(server.url, None)
        assert refused.status_code == 401
        assert ('resource_metadata="http://127.0.0.1:8001/.well-known/oauth-protected-resource/mcp"'
                in refused.headers["www-authenticate"])

        issuer.add_key("other", publish=False)
        now = int(time.time())
        bad = {"expired": issuer.token(exp=now - 120), "wrong audience": issuer.token(aud="another-api"),
               "wrong issuer": issuer.token(iss="http://127.0.0.1:1"),
               "bad signature": issuer.token(sign_with="other"), "alg none": issuer.token_none(),
               "HS256 with the public key": issuer.token_hs256_with_public_key(),
               "unknown kid": issuer.token(kid="other"), "no library scope": issuer.token(scope="openid")}
        for why, token in bad.items():
            reply = _post_initialize(server.url, token)
            assert reply.status_code == 401, why
            assert "resource_metadata=" in reply.headers["www-authenticate"], why

        writer = {"Authorization": f"Bearer {issuer.token(scope='team:write', client_id='writer')}"}
        reader = {"Authorization": f"Bearer {issuer.token(scope='openid team:read', client_id='reader')}"}

        async def main():
            async with http_session(server.url, writer) as session:
                await Client(session).ok("create_entities", library="team", entities=[
                    {"name": "Ada", "entityType": "person", "observations": ["writes the scheduler"]}])
            async with http_session(server.url, reader) as session:
                client = Client(session)
                tools = {t.name for t in (await session.list_tools()).tools}
                assert "search_nodes" in tools and "create_entities" not in tools  # a reader sees no writes
                found, _ = await client.ok("search_nodes", library="team", query="scheduler")
                assert [e["name"] for e in found["entities"]] == ["Ada"]
                denied = await client.error("create_entities", library="team",
                                            entities=[{"name": "Eve", "entityType": "person", "observations": []}])
                assert denied["code"] == "PERMISSION_DENIED" and "team:write" in denied["message"]
                other = await client.error("search_nodes", library="personal", query="x")
                assert other["code"] == "PERMISSION_DENIED"
                listed, _ = await client.ok("list_libraries")
                assert [lib["name"] for lib in listed["libraries"]] == ["team"]  # personal is not shown

        anyio.run(main)
        log = server.log.read_text(errors="replace")
    for token in [*bad.values(), writer["Authorization"], reader["Authorization"]]:
        assert all(part not in log for part in token.removeprefix("Bearer ").split(".") if part)  # never a token
    assert "alg 'none' is not one of RS256, ES256" in log and "Signature verification failed" in log  # but why
    assert "token=jwt:reader tool=search_nodes library=team" in log  # the access log names the JWT's client
    assert "token=jwt:reader tool=create_entities library=team" in log and "outcome=PERMISSION_DENIED" in log


@pytest.mark.full  # a server process over HTTP
def test_oauth_alone_counts_as_tokens_configured_for_a_wide_bind(tmp_path, issuer):
    """No stored token, only [oauth]: listening beyond loopback is allowed, and a JWT gets in."""
    from conftest import server_env

    from memloci.http.loopback import free_port, memloci_command, stop, wait_listening

    env = server_env(tmp_path / "home", MEMLOCI_CONFIG=str(_server_config(tmp_path, issuer)))
    port, log = free_port(), tmp_path / "server.log"
    with log.open("ab") as errlog:
        process = subprocess.Popen(memloci_command("serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(port)),
                                   env=env, stdin=subprocess.DEVNULL, stdout=errlog, stderr=errlog)
    try:
        wait_listening(port, process, log, 90)
        url = f"http://127.0.0.1:{port}/mcp"
        assert _post_initialize(url, None).status_code == 401
        assert _post_initialize(url, issuer.token()).status_code == 200
    finally:
        stop(process)
    assert not (tmp_path / "home" / "tokens.json").exists()
