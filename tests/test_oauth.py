"""OAuth resource server: JWT access tokens checked against an issuer the test runs on loopback.

The verifier is exercised in-process against a real JWKS server (the key fetch, its cache and
failures), then through a real `memloci serve --transport http` with a real MCP client.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from oauth_issuer import Issuer

from memloci.errors import ValidationError
from memloci.http.oauth import JwksCache, JwtTokenVerifier, parse_oauth_config
from memloci.libraries import load_config


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
