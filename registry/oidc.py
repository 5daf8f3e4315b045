"""Verifying OpenID Connect ID tokens (JWTs) for trusted publishing (SPEC 6.3), with PyJWT.

A token is verified against its issuer's keys, which come from the issuer's discovery document
(``ISSUER/.well-known/openid-configuration``) and its ``jwks_uri``. Only issuers in
REGISTRY_OIDC_ISSUERS are ever asked, over https (plain http on loopback only). The keys are
cached per process for REGISTRY_OIDC_JWKS_SECONDS; a token naming a key ID (``kid``) that is not
in the cache fetches them again (keys rotate), but an issuer is never asked more than once every
REGISTRY_OIDC_JWKS_REFRESH_SECONDS per process, so a flood of made-up key IDs costs the issuer
nothing. Every fetch is bounded in time and size.

Only asymmetric signatures verify (`ASYMMETRIC_ALGORITHMS`): never ``none`` and never a shared
secret (HS256...), so the issuer's public key cannot be abused as an HMAC secret (algorithm
confusion). Each key is bound to one algorithm (its JWK ``alg``, or the one its type implies),
the token's ``alg`` must be that one, and, when the discovery document lists the algorithms the
issuer signs with, one of those. ``exp``, ``iat``, ``iss`` and ``jti`` are required; ``exp``,
``nbf`` and ``iat`` are checked with REGISTRY_OIDC_LEEWAY seconds of clock skew. The audience and
the other claims are matched by the caller (registry.trusted_publishing), per trusted publisher.

Refusals are `TokenRefused` (401), each with a short ``reason`` for the audit log and a message
that says what was wrong; an issuer that cannot be reached is `IssuerUnavailable` (503)."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
from django.conf import settings

from registry.env import secure_url_problem
from registry.errors import RegistryError, Unauthenticated
from registry.storedtext import holds_lone_surrogate, nul_escaped

log = logging.getLogger(__name__)

#: The signature algorithms a token may use: public-key ones only.
ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
#: Claims every token must carry (PyJWT checks them; ``aud`` is matched per trusted publisher).
REQUIRED_CLAIMS = ("exp", "iat", "iss", "jti")
MAX_TOKEN_CHARS = 16 * 1024  # an ID token is 1 to 2 KiB; far above that is not one
MAX_DOCUMENT_BYTES = 256 * 1024  # a discovery document or a JWKS
MAX_KEYS = 100
MAX_JTI_CHARS = 255
USER_AGENT = "provisioning-registry (trusted publishing)"
# How a claim is shown in the audit log and in messages (values of hostile tokens are bounded).
_MAX_SHOWN_CLAIMS = 50
_MAX_SHOWN_CHARS = 300
_LAST_TIMESTAMP = 253402300799  # 9999-12-31T23:59:59Z, the last moment a datetime can hold


class TokenRefused(Unauthenticated):
    """The token is not one this registry accepts (401); ``reason`` names the check, for the audit."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, details=[{"reason": reason}])
        self.reason = reason


class IssuerUnavailable(RegistryError):
    """The issuer's discovery document or keys could not be fetched (503): not the caller's fault."""

    code = "issuer_unavailable"

    def __init__(self, issuer: str, problem: str) -> None:
        super().__init__(
            f"cannot verify the token: the keys of the issuer {issuer} could not be fetched ({problem}); "
            "nothing was published, try again later",
            details=[{"reason": "issuer_unavailable", "issuer": issuer}],
        )
        self.reason = "issuer_unavailable"
        self.problem = problem


def shown_text(text: str, limit: int = _MAX_SHOWN_CHARS) -> str:
    """Text from a token, as it may be stored and shown: bounded, and without NUL (which
    PostgreSQL refuses in text and JSON), written ``\\u0000`` instead."""
    text = nul_escaped(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_value(value: Any) -> Any:
    """A claim's value as the audit log and messages show it: bounded, JSON-serialisable."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return shown_text(value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str))


def shown_claims(claims: Mapping[str, Any]) -> dict[str, Any]:
    """At most 50 claims (by name), each value bounded: what an exchange records of a token.
    ID tokens carry no secrets in their claims; the token itself (a bearer credential until it
    expires) is never recorded."""
    return {shown_text(str(k), 64): shown_value(claims[k]) for k in sorted(claims, key=str)[:_MAX_SHOWN_CLAIMS]}


@dataclass(frozen=True)
class UnverifiedToken:
    """A token's header and claims as sent, before anything about them is known to be true."""

    header: dict[str, Any]
    claims: dict[str, Any]

    def audit(self) -> dict[str, Any]:
        return {
            "header": {k: shown_value(self.header.get(k)) for k in ("alg", "kid", "typ") if k in self.header},
            "claims": shown_claims(self.claims),
            "verified": False,
        }


@dataclass(frozen=True)
class VerifiedToken:
    """A token whose signature, issuer, times and required claims were verified."""

    issuer: str
    algorithm: str
    key_id: str
    claims: dict[str, Any]

    @property
    def jti(self) -> str:
        return str(self.claims["jti"])

    @property
    def audiences(self) -> list[str]:
        aud = self.claims.get("aud")
        return [aud] if isinstance(aud, str) else [a for a in aud or () if isinstance(a, str)]

    @property
    def expires_at(self) -> datetime:
        return datetime.fromtimestamp(min(int(self.claims["exp"]), _LAST_TIMESTAMP), tz=UTC)

    def audit(self) -> dict[str, Any]:
        return {
            "header": {"alg": self.algorithm, "kid": shown_value(self.key_id)},
            "claims": shown_claims(self.claims),
            "verified": True,
        }


def peek(token: object) -> UnverifiedToken:
    """The header and claims of a JWT, not verified; `TokenRefused` if it is not a JWT at all."""
    if not isinstance(token, str) or not token.strip():
        raise TokenRefused("malformed", "the token is empty: send the OIDC ID token (a JWT) your CI job was issued")
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenRefused(
            "malformed", f"the token is {len(token)} characters long; an OIDC ID token is at most {MAX_TOKEN_CHARS}"
        )
    if not token.isascii():
        raise TokenRefused(
            "malformed", "the token holds characters outside ASCII: a JWT is three base64url parts separated by dots"
        )
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as exc:
        raise TokenRefused(
            "malformed",
            f"the token is not a JWT ({exc}): send the OIDC ID token your CI job was issued "
            "(three base64url parts separated by dots)",
        ) from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenRefused("malformed", "the token's header and claims must be JSON objects")
    if holds_lone_surrogate([header, claims]):
        raise TokenRefused(
            "malformed",
            "the token's header or claims hold a lone surrogate (a \\ud800-\\udfff escape without its pair): "
            "their strings must be Unicode text",
        )
    return UnverifiedToken(header=header, claims=claims)


# --- the issuers' keys ------------------------------------------------------------------------------


@dataclass
class _IssuerKeys:
    keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    algorithms: frozenset[str] | None = None  # what the discovery document says the issuer signs with
    fetched_at: float = float("-inf")  # time.monotonic() of the last successful fetch
    attempted_at: float = float("-inf")  # of the last attempt, successful or not
    problem: str = ""  # why the last attempt failed


def _get_json(client: httpx.Client, url: str, what: str) -> dict[str, Any]:
    problem = secure_url_problem(url)
    if problem is not None:
        raise ValueError(f"the {what} is at {problem}")
    with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise ValueError(f"GET {url} answered HTTP {response.status_code}")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_DOCUMENT_BYTES:
                raise ValueError(f"the {what} at {url} is larger than {MAX_DOCUMENT_BYTES // 1024} KiB")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError(f"the {what} at {url} is not JSON") from None
    if not isinstance(document, dict):
        raise ValueError(f"the {what} at {url} is not a JSON object")
    return document


def _usable_keys(jwks: dict[str, Any]) -> dict[str, jwt.PyJWK]:
    """The JWKS's signing keys by key ID: asymmetric keys only (an ``oct`` key, a key for
    encryption or for an algorithm outside `ASYMMETRIC_ALGORITHMS` is left out)."""
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise ValueError("the JWKS has no 'keys' list")
    keys: dict[str, jwt.PyJWK] = {}
    for entry in entries[:MAX_KEYS]:
        if not isinstance(entry, dict) or entry.get("kty") == "oct" or entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str) or not kid or kid in keys:
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError, TypeError, ValueError) as exc:
            log.info("trusted publishing: leaving out the key %r of a JWKS: %s", kid[:64], exc)
            continue
        if key.algorithm_name in ASYMMETRIC_ALGORITHMS:
            keys[kid] = key
    return keys


class KeyCache:
    """The allow-listed issuers' signing keys, per process (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[str, _IssuerKeys] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def clear(self) -> None:
        with self._guard:
            self._entries.clear()

    def _lock(self, issuer: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(issuer, threading.Lock())

    def signing_key(self, issuer: str, kid: str) -> tuple[jwt.PyJWK, frozenset[str] | None]:
        """The issuer's key ``kid`` and the algorithms the issuer declares (None: not declared)."""
        with self._lock(issuer):
            entry = self._entries.setdefault(issuer, _IssuerKeys())
            now = time.monotonic()
            stale = now - entry.fetched_at >= float(settings.REGISTRY_OIDC_JWKS_SECONDS)
            may_fetch = now - entry.attempted_at >= float(settings.REGISTRY_OIDC_JWKS_REFRESH_SECONDS)
            if (stale or kid not in entry.keys) and may_fetch:
                entry.attempted_at = now
                try:
                    entry.keys, entry.algorithms = self._fetch(issuer)
                    entry.fetched_at, entry.problem = now, ""
                except (httpx.HTTPError, ValueError) as exc:
                    entry.problem = str(exc) or type(exc).__name__
                    log.warning("trusted publishing: cannot fetch the keys of %s: %s", issuer, entry.problem)
            if kid in entry.keys:
                return entry.keys[kid], entry.algorithms  # a known key verifies even if a refresh failed
            if entry.problem:
                raise IssuerUnavailable(issuer, entry.problem)
            ago = max(0, int(now - entry.fetched_at))
            raise TokenRefused(
                "unknown_key",
                f"the token is signed with the key {shown_value(kid)!r}, which is not one of the issuer's "
                f"keys ({issuer}'s JWKS, fetched {ago} s ago): a token signed by the issuer names one of them",
            )

    def _fetch(self, issuer: str) -> tuple[dict[str, jwt.PyJWK], frozenset[str] | None]:
        timeout = float(settings.REGISTRY_OIDC_HTTP_TIMEOUT)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        with httpx.Client(timeout=timeout, follow_redirects=False, headers=headers) as client:
            discovery_url = issuer.rstrip("/") + "/.well-known/openid-configuration"
            discovery = _get_json(client, discovery_url, "discovery document")
            if discovery.get("issuer") != issuer:
                raise ValueError(
                    f"the discovery document at {discovery_url} names the issuer "
                    f"{shown_value(discovery.get('issuer'))!r}, not {issuer!r}"
                )
            jwks_uri = discovery.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise ValueError(f"the discovery document at {discovery_url} has no jwks_uri")
            keys = _usable_keys(_get_json(client, jwks_uri, "JWKS"))
        declared = discovery.get("id_token_signing_alg_values_supported")
        algorithms = None
        if isinstance(declared, list) and declared:
            algorithms = frozenset(a for a in declared if isinstance(a, str)) & ASYMMETRIC_ALGORITHMS
        return keys, algorithms


KEYS = KeyCache()


# --- verification ----------------------------------------------------------------------------------


def _when(timestamp: Any) -> str:
    try:
        return datetime.fromtimestamp(int(timestamp), tz=UTC).isoformat()
    except (TypeError, ValueError, OverflowError, OSError):
        return repr(shown_value(timestamp))


def verify(token: str, unverified: UnverifiedToken | None = None) -> VerifiedToken:
    """Verify a token from an allow-listed issuer (see the module docstring); `TokenRefused`
    (401) says which check failed, `IssuerUnavailable` (503) that the keys could not be had."""
    unverified = unverified or peek(token)
    header, claims = unverified.header, unverified.claims
    alg = header.get("alg")
    allowed = ", ".join(sorted(ASYMMETRIC_ALGORITHMS))
    if not isinstance(alg, str) or alg not in ASYMMETRIC_ALGORITHMS:
        raise TokenRefused(
            "algorithm",
            f"the token's algorithm is {shown_value(alg)!r}: this registry accepts only tokens signed with a "
            f"public-key algorithm ({allowed}), never 'none' or a shared secret (HS256, HS384, HS512)",
        )
    issuer = claims.get("iss")
    issuers: list[str] = list(settings.REGISTRY_OIDC_ISSUERS)
    if not isinstance(issuer, str) or issuer not in issuers:
        trusted = ", ".join(issuers) or "none (REGISTRY_OIDC_ISSUERS is empty)"
        raise TokenRefused(
            "issuer",
            f"the token's issuer {shown_value(issuer)!r} is not one this registry trusts; trusted issuers: {trusted}",
        )
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > 256:
        raise TokenRefused("key_id", "the token's header names no signing key ('kid'): the issuer's tokens name one")
    key, declared = KEYS.signing_key(issuer, kid)
    if alg != key.algorithm_name or (declared is not None and alg not in declared):
        raise TokenRefused(
            "algorithm",
            f"the token's algorithm {alg} is not the one of the issuer's key {kid!r} ({key.algorithm_name})",
        )
    leeway = float(settings.REGISTRY_OIDC_LEEWAY)
    try:
        verified: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[key.algorithm_name],
            issuer=issuer,
            leeway=leeway,
            options={"require": list(REQUIRED_CLAIMS), "verify_aud": False, "enforce_minimum_key_length": True},
        )
    except jwt.ExpiredSignatureError:
        raise TokenRefused(
            "expired",
            f"the token expired at {_when(claims.get('exp'))} (with {leeway:g} s of leeway): "
            "ask the issuer for a new one",
        ) from None
    except jwt.ImmatureSignatureError as exc:
        which = "nbf" if "nbf" in str(exc) else "iat"
        raise TokenRefused(
            "not_yet_valid",
            f"the token is not valid yet: its {which} is {_when(claims.get(which))}, later than now plus "
            f"{leeway:g} s of leeway (check the clocks)",
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenRefused(
            "missing_claim", f"the token has no {exc.claim!r} claim; this registry needs {', '.join(REQUIRED_CLAIMS)}"
        ) from None
    except jwt.InvalidSignatureError:
        raise TokenRefused(
            "signature", f"the token's signature does not verify with the issuer's key {kid!r}: it was not signed by it"
        ) from None
    except jwt.InvalidTokenError as exc:
        raise TokenRefused("invalid", f"the token is not valid: {exc}") from None
    jti = verified.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_CHARS:
        raise TokenRefused("jti", f"the token's ID (jti) must be a string of 1 to {MAX_JTI_CHARS} characters")
    aud = verified.get("aud")
    if not (isinstance(aud, str) or (isinstance(aud, list) and aud and all(isinstance(a, str) for a in aud))):
        raise TokenRefused(
            "audience",
            "the token has no audience (aud), or one that is not a string or a list of strings: ask the issuer "
            "for a token whose audience is the one the trusted publisher names (by default this registry's URL)",
        )
    return VerifiedToken(issuer=issuer, algorithm=alg, key_id=kid, claims=verified)
