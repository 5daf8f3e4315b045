"""A real OpenID Connect issuer on loopback, for the trusted-publishing tests: an HTTP server
serving ``/.well-known/openid-configuration`` and a JWKS with an RSA and an EC key (made with
`cryptography`), and `Issuer.mint` signing ID tokens with PyJWT as a CI provider would.

    issuer = Issuer.start()                           # http://127.0.0.1:PORT
    token = issuer.mint(repository="acme/etcd")       # RS256, every usual claim, a fresh jti
    token = issuer.mint(key="ec", exp_in=-120)        # ES256, expired two minutes ago
    issuer.requests                                   # the paths it served, in order
    issuer.stop()

Fixtures: ``oidc_issuer`` (started, allow-listed in the test's settings, the registry's key
cache cleared) and ``other_issuer`` (a second allow-listed issuer), both stopped afterwards.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

#: The claims a GitHub Actions job's token carries, for acme/kv-store's release workflow.
DEFAULT_CLAIMS = {
    "sub": "repo:acme/kv-store:environment:release",
    "repository": "acme/kv-store",
    "repository_owner": "acme",
    "workflow": "release",
    "ref": "refs/heads/main",
    "environment": "release",
    "sha": "0123456789abcdef0123456789abcdef01234567",
}


@functools.cache
def rsa_key(n: int = 0) -> rsa.RSAPrivateKey:
    """An RSA key (2048 bits), made once per test process (n: which one)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@functools.cache
def ec_key(n: int = 0) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algorithm = RSAAlgorithm if self.alg.startswith(("RS", "PS")) else ECAlgorithm
        data: dict[str, Any] = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**data, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return None

    def do_GET(self) -> None:
        issuer = self.server.issuer
        issuer.requests.append(self.path)
        if self.path == "/.well-known/openid-configuration":
            body: Any = issuer.discovery()
        elif self.path == "/jwks":
            body = {"keys": [k.jwk() for k in issuer.published]}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    issuer: Issuer


@dataclass
class Issuer:
    server: _Server
    thread: threading.Thread
    keys: dict[str, SigningKey]
    published: list[SigningKey]
    requests: list[str] = field(default_factory=list)
    algorithms: list[str] | None = None  # id_token_signing_alg_values_supported, when set

    @classmethod
    def start(cls, which: int = 0) -> Issuer:
        server = _Server(("127.0.0.1", 0), _Handler)
        keys = {
            "rsa": SigningKey(f"rsa-{which}", "RS256", rsa_key(which)),
            "ec": SigningKey(f"ec-{which}", "ES256", ec_key(which)),
        }
        issuer = cls(server, threading.Thread(target=server.serve_forever, daemon=True), keys, list(keys.values()))
        server.issuer = issuer
        issuer.thread.start()
        return issuer

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def discovery(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
        }
        if self.algorithms is not None:
            document["id_token_signing_alg_values_supported"] = self.algorithms
        return document

    def claims(self, *, audience: str | list[str], lifetime: int = 300, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": audience,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "nbf": now,
            "exp": now + lifetime,
            **DEFAULT_CLAIMS,
        }
        for name, value in overrides.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return claims

    def mint(
        self,
        *,
        audience: str | list[str] = "http://testserver",
        key: str = "rsa",
        exp_in: int | None = None,
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """An ID token signed with one of this issuer's keys; ``claims`` override (None removes)."""
        signing = self.keys[key]
        payload = self.claims(audience=audience, **claims)
        if exp_in is not None:
            payload["exp"] = int(time.time()) + exp_in
        return jwt.encode(
            payload, signing.private, algorithm=signing.alg, headers={"kid": signing.kid, **(headers or {})}
        )

    def mint_unsigned(self, *, audience: str = "http://testserver", **claims: Any) -> str:
        """``alg: none``: no signature at all."""
        header = {"alg": "none", "typ": "JWT", "kid": self.keys["rsa"].kid}
        payload = self.claims(audience=audience, **claims)
        return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}."

    def mint_hs256_with_public_key(self, *, audience: str = "http://testserver", **claims: Any) -> str:
        """Algorithm confusion: HS256 with the issuer's RSA public key (PEM) as the HMAC secret, as
        a verifier that lets the token choose the algorithm would check it."""
        signing = self.keys["rsa"]
        header = {"alg": "HS256", "typ": "JWT", "kid": signing.kid}
        payload = self.claims(audience=audience, **claims)
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(payload).encode())}"
        mac = hmac.new(signing.public_pem(), signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{b64url(mac)}"


@pytest.fixture
def oidc_issuer(settings: Any) -> Iterator[Issuer]:
    """An issuer on loopback, allow-listed (REGISTRY_OIDC_ISSUERS), with a clean key cache."""
    from registry.oidc import KEYS

    issuer = Issuer.start(0)
    settings.REGISTRY_OIDC_ISSUERS = [issuer.url]
    KEYS.clear()
    yield issuer
    issuer.stop()
    KEYS.clear()


@pytest.fixture
def other_issuer(settings: Any, oidc_issuer: Issuer) -> Iterator[Issuer]:
    """A second allow-listed issuer, with keys of its own."""
    issuer = Issuer.start(1)
    settings.REGISTRY_OIDC_ISSUERS = [oidc_issuer.url, issuer.url]
    yield issuer
    issuer.stop()
