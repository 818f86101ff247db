"""A tiny OAuth issuer on loopback for the tests: it serves a JWKS for keys made here and signs tokens.

Only what a resource server reads from an issuer: the JWKS document at /jwks.json. Tokens are
signed in-process with the matching private keys (an issuer's token endpoint is not needed to
check that memloci verifies what it is given).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """Keys by kid, a JWKS server on 127.0.0.1, and a `token()` that signs claims."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.published: set[str] = set()  # kids the JWKS shows
        self.fail = False  # answer 500 instead of the JWKS
        self.hang = 0.0  # seconds to wait before answering
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                if issuer.hang:
                    time.sleep(issuer.hang)
                if self.path != "/jwks.json" or issuer.fail:
                    self.send_response(500 if issuer.fail else 404)
                    self.end_headers()
                    return
                body = json.dumps(issuer.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (timeout test)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.jwks_url = self.url + "/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Issuer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_key(self, kid: str, kind: str = "RSA", publish: bool = True) -> None:
        self.keys[kid] = (rsa.generate_private_key(public_exponent=65537, key_size=2048) if kind == "RSA"
                          else ec.generate_private_key(ec.SECP256R1()))
        if publish:
            self.published.add(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in sorted(self.published):
            key = self.keys[kid]
            alg = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
            algo = jwt.get_algorithm_by_name(alg)
            jwk = json.loads(algo.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": alg})
        return {"keys": keys}

    def claims(self, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.url, "aud": "memloci-test", "sub": "alice", "client_id": "agent-1",
                "iat": now, "exp": now + 600, "scope": "team:read"}
        base.update(over)
        return {k: v for k, v in base.items() if v is not None}

    def token(self, kid: str = "k1", alg: str | None = None, sign_with: str | None = None, **over: Any) -> str:
        key = self.keys[sign_with or kid]
        alg = alg or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(self.claims(**over), key, algorithm=alg, headers={"kid": kid})

    def token_none(self, kid: str = "k1", **over: Any) -> str:
        """`alg: none`, no signature: the oldest forgery."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
        return f"{header}.{_b64(json.dumps(self.claims(**over)).encode())}."

    def token_hs256_with_public_key(self, kid: str = "k1", **over: Any) -> str:
        """HS256 keyed with the public key's PEM: forgeable by anyone who can read the JWKS."""
        pem = self.keys[kid].public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        body = _b64(json.dumps(self.claims(**over)).encode())
        sig = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(sig)}"
