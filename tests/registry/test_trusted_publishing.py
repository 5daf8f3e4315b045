"""Trusted publishing (SPEC 6.3) against a real OIDC issuer on loopback (tests/oidc_issuer.py):
the exchange of a CI job's ID token for a publish token, the publish it allows, and every attack,
each refused with 401 or 403, an audit row saying why, and no token issued.

alice owns ``etcd`` and ``containerd``. etcd's trusted publisher: the loopback issuer, audience
the registry's URL (``http://testserver``), claims repository=acme/kv-store, workflow=release,
ref=refs/heads/main, environment=release (the repository's name is not the extension's, so a
refusal can be checked for naming the extension)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from builds.models import Build
from registry.models import ApiToken, AuditEvent, Extension, OidcTokenUse, TrustedPublisher, Version
from registry.trusted_publishing import CLAIM_NAMES
from tests.oidc_issuer import Issuer, SigningKey, b64url, rsa_key

pytest_plugins = ["tests.factories"]

EXCHANGE = "/api/v1/trusted-publishing/exchange"
CLAIMS = {"repository": "acme/kv-store", "workflow": "release", "ref": "refs/heads/main", "environment": "release"}


def publishers_url(name: str) -> str:
    return f"/api/v1/extensions/{name}/trusted-publishers/"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


@dataclass
class World:
    client: Client
    tmp_path: Path
    issuer: Issuer
    alice: AbstractBaseUser
    token: str  # alice's, every scope
    publisher: dict[str, Any]

    def exchange(self, jwt: str, name: str | None = None, **extra: Any) -> Any:
        body: dict[str, Any] = {"token": jwt, **extra}
        if name is not None:
            body["name"] = name
        return self.client.post(EXCHANGE, body, content_type="application/json")

    def mint(self, **claims: Any) -> str:
        return self.issuer.mint(**{**CLAIMS, **claims})

    def publish(self, token: str, name: str, version: str, **kw: Any) -> Any:
        from tests.factories import package, publish

        return publish(self.client, token, package(self.tmp_path / f"{name}-{version}", name, version, **kw))


def add_publisher(
    client: Client, token: str, name: str, issuer: str, claims: dict[str, str] = CLAIMS, **body: Any
) -> Any:
    return client.post(
        publishers_url(name),
        {"issuer": issuer, "claims": claims, **body},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.fixture
def world(client: Client, db: None, tmp_path: Path, oidc_issuer: Issuer) -> World:
    from tests.factories import make_token, make_user, publish_new

    alice = make_user("alice")
    token = make_token(alice)
    publish_new(client, token, tmp_path / "seed", "etcd", "3.5.9")
    publish_new(client, token, tmp_path / "seed2", "containerd", "1.7.0")
    response = add_publisher(client, token, "etcd", oidc_issuer.url)
    assert response.status_code == 201, response.json()
    add_publisher(client, token, "containerd", oidc_issuer.url, {**CLAIMS, "repository": "acme/containerd"})
    return World(client, tmp_path, oidc_issuer, alice, token, response.json()["data"])


def tokens_issued() -> int:
    return sum(1 for token in ApiToken.objects.all() if token.from_trusted_publishing)


def refused(world: World, response: Any, status: int, reason: str, *, issued: int = 0) -> dict[str, Any]:
    """The refusal's error; asserts its status, its code, the audit row saying why, and that no
    token was issued (beyond the ``issued`` ones before)."""
    body = response.json()
    assert response.status_code == status, body
    assert body["success"] is False
    error: dict[str, Any] = body["error"]
    assert (
        error["code"]
        == {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 503: "issuer_unavailable"}[status]
    )
    assert error["message"]
    row = AuditEvent.objects.filter(action=AuditEvent.Action.OIDC_EXCHANGE_REFUSED).first()
    assert row is not None, "a refused exchange is audited"
    assert row.details["reason"] == reason, row.details
    assert row.details["status"] == status
    assert row.address == "127.0.0.1"
    assert tokens_issued() == issued
    return error


def audited_text() -> str:
    return json.dumps([(e.action, e.details, e.token_prefix) for e in AuditEvent.objects.all()])


# --- the happy path ---------------------------------------------------------------------------------


def test_a_ci_job_exchanges_its_token_and_publishes_without_a_stored_secret(world: World) -> None:
    from tests.factories import refusal

    jwt = world.mint()
    before = timezone.now()
    response = world.exchange(jwt)
    assert response.status_code == 201, response.json()
    data = response.json()["data"]
    secret = data["token"]
    assert secret.startswith("pvr_") and data["name"] == "etcd" and data["scopes"] == ["publish:etcd"]
    assert data["user"] == "alice" and data["pending"] is False
    assert data["trusted_publisher"]["id"] == world.publisher["id"]
    lifetime = timezone.datetime.fromisoformat(data["expires_at"]) - before
    assert timedelta(minutes=14) < lifetime <= timedelta(minutes=15, seconds=1)

    published = world.publish(secret, "etcd", "3.5.10")
    assert published.status_code == 202 and published.json()["data"]["status"] == "succeeded", published.json()
    version = Version.objects.get(extension__name="etcd", version="3.5.10")
    assert version.published_by == world.alice
    # The build knows who published it and through which trusted publisher, with the verified claims.
    build = Build.objects.get(pk=published.json()["data"]["id"])
    assert build.token is not None and build.token.trusted_publisher_id == world.publisher["id"]
    assert build.token.oidc_claims["repository"] == "acme/kv-store"
    assert build.token.oidc_claims["sha"] == "0123456789abcdef0123456789abcdef01234567"
    assert build.token.oidc_claims["iss"] == world.issuer.url

    exchanged = AuditEvent.objects.get(action=AuditEvent.Action.OIDC_EXCHANGE)
    assert exchanged.actor_name == "alice" and exchanged.extension == "etcd"
    assert exchanged.details["verified"] is True
    assert exchanged.details["claims"]["workflow"] == "release"
    assert exchanged.details["header"] == {"alg": "RS256", "kid": "rsa-0"}
    assert AuditEvent.objects.filter(action=AuditEvent.Action.TOKEN_CREATE, token_prefix=secret[:12]).exists()
    # No secret in the audit log: neither the JWT nor the registry token.
    text = audited_text()
    assert jwt not in text and jwt.split(".")[2] not in text and secret not in text
    # It publishes etcd only, and does nothing else.
    other = world.publish(secret, "containerd", "1.7.1")
    assert refusal(other)[0] == 403
    assert "publish:containerd" in refusal(other)[1]["message"]


def test_an_ec_key_and_a_token_for_several_audiences_work_too(world: World) -> None:
    jwt = world.issuer.mint(key="ec", audience=["https://elsewhere.example", "http://testserver"], **CLAIMS)
    response = world.exchange(jwt)
    assert response.status_code == 201, response.json()
    assert AuditEvent.objects.get(action=AuditEvent.Action.OIDC_EXCHANGE).details["header"]["alg"] == "ES256"


def test_the_exchanged_token_cannot_mint_longer_lived_tokens_nor_act_as_the_owner(world: World) -> None:
    secret = world.exchange(world.mint()).json()["data"]["token"]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    created = world.client.post(
        "/api/v1/tokens/", {"name": "forever", "scopes": ["publish:etcd"]}, content_type="application/json", **auth
    )
    assert created.status_code == 403 and "may not manage tokens" in created.json()["error"]["message"]
    assert world.client.get("/api/v1/tokens/", **auth).status_code == 403
    victim = ApiToken.objects.filter(user=world.alice, trusted_publisher=None).first()
    assert victim is not None
    assert world.client.delete(f"/api/v1/tokens/{victim.pk}/", **auth).status_code == 403
    yank = world.client.post(
        "/api/v1/extensions/etcd/versions/3.5.9/yank", {"reason": "x"}, content_type="application/json", **auth
    )
    assert yank.status_code == 403
    owners = world.client.post(
        "/api/v1/extensions/etcd/owners/", {"username": "alice"}, content_type="application/json", **auth
    )
    assert owners.status_code == 403
    assert add_publisher(world.client, secret, "etcd", world.issuer.url, {"repository": "evil/x"}).status_code == 403
    assert ApiToken.objects.filter(user=world.alice).count() == 2  # alice's own and the exchanged one
    assert ApiToken.objects.get(pk=victim.pk).revoked_at is None


def test_a_token_within_the_leeway_is_accepted(world: World) -> None:
    assert world.exchange(world.issuer.mint(exp_in=-10, **CLAIMS)).status_code == 201  # 10 s late, 30 s leeway
    now = int(time.time())
    assert world.exchange(world.mint(nbf=now + 10, iat=now + 10)).status_code == 201


# --- invalid tokens: 401 -----------------------------------------------------------------------------


def test_an_issuer_that_is_not_allow_listed_is_refused_without_asking_it(world: World) -> None:
    stranger = Issuer.start(2)
    try:
        jwt = stranger.mint(**CLAIMS)
        error = refused(world, world.exchange(jwt), 401, "issuer")
        assert stranger.url in error["message"] and world.issuer.url in error["message"]  # trusted: ...
        assert stranger.requests == []
        row = AuditEvent.objects.get(action=AuditEvent.Action.OIDC_EXCHANGE_REFUSED)
        assert row.details["verified"] is False and row.details["claims"]["iss"] == stranger.url
    finally:
        stranger.stop()


def test_a_token_claiming_an_issuer_it_was_not_signed_by_is_refused(world: World, other_issuer: Issuer) -> None:
    # Signed by the other issuer's key, claiming to come from etcd's issuer.
    forged = other_issuer.mint(iss=world.issuer.url, **CLAIMS)
    error = refused(world, world.exchange(forged), 401, "unknown_key")
    assert "rsa-1" in error["message"]
    # The same, naming a key etcd's issuer does have: the signature does not verify.
    forged = other_issuer.mint(iss=world.issuer.url, headers={"kid": "rsa-0"}, **CLAIMS)
    error = refused(world, world.exchange(forged), 401, "signature")
    assert "does not verify" in error["message"]


def test_a_token_from_another_trusted_issuer_matches_no_publisher_of_this_one(
    world: World, other_issuer: Issuer
) -> None:
    error = refused(world, world.exchange(other_issuer.mint(**CLAIMS)), 403, "no_match")
    assert "no trusted publisher matches this token" in error["message"]
    assert f"iss={other_issuer.url!r}" in error["message"]


def test_an_expired_token_is_refused(world: World) -> None:
    error = refused(world, world.exchange(world.issuer.mint(exp_in=-120, **CLAIMS)), 401, "expired")
    assert "expired at" in error["message"] and "leeway" in error["message"]


@pytest.mark.parametrize("claim", ["nbf", "iat"])
def test_a_token_not_yet_valid_is_refused(world: World, claim: str) -> None:
    later = int(time.time()) + 600
    error = refused(world, world.exchange(world.mint(**{claim: later}, exp=later + 300)), 401, "not_yet_valid")
    assert f"its {claim} is" in error["message"]


def test_a_replayed_token_is_refused(world: World) -> None:
    jwt = world.mint()
    assert world.exchange(jwt).status_code == 201
    issued = tokens_issued()
    response = world.exchange(jwt)
    assert response.status_code == 401
    assert "already presented" in response.json()["error"]["message"]
    assert tokens_issued() == issued
    row = AuditEvent.objects.filter(action=AuditEvent.Action.OIDC_EXCHANGE_REFUSED).get()
    assert row.details["reason"] == "replayed" and row.details["verified"] is True


def test_a_token_is_tried_once_so_probing_what_it_matches_costs_a_new_token(world: World) -> None:
    jwt = world.mint()
    assert world.exchange(jwt, name="containerd").status_code == 403  # wrong extension: refused
    again = world.exchange(jwt, name="etcd")  # the same token, for the right one: seen already
    assert again.status_code == 401 and "already presented" in again.json()["error"]["message"]
    assert OidcTokenUse.objects.count() == 1
    assert world.exchange(world.mint(), name="etcd").status_code == 201


def test_a_forged_token_does_not_use_up_the_id_it_names(world: World) -> None:
    genuine = world.mint()
    header, payload, _ = genuine.split(".")
    assert world.exchange(f"{header}.{payload}.{'A' * 342}").status_code == 401  # its signature forged
    assert OidcTokenUse.objects.count() == 0
    assert world.exchange(genuine).status_code == 201


def test_used_token_ids_are_pruned_once_they_could_no_longer_be_accepted(world: World) -> None:
    OidcTokenUse.objects.create(key="old" * 21 + "x", expires_at=timezone.now() - timedelta(seconds=1))
    OidcTokenUse.objects.create(key="new" * 21 + "x", expires_at=timezone.now() + timedelta(minutes=5))
    assert world.exchange(world.mint()).status_code == 201
    assert sorted(OidcTokenUse.objects.values_list("key", flat=True))[1:] == ["new" * 21 + "x"]
    assert OidcTokenUse.objects.count() == 2


def test_alg_none_is_refused(world: World) -> None:
    error = refused(world, world.exchange(world.issuer.mint_unsigned(**CLAIMS)), 401, "algorithm")
    assert "'none'" in error["message"]


def test_an_hs256_token_signed_with_the_issuers_public_key_is_refused(world: World) -> None:
    # Algorithm confusion: a verifier letting the token pick HS256 would check this MAC with the
    # public key as the secret, and accept it.
    error = refused(world, world.exchange(world.issuer.mint_hs256_with_public_key(**CLAIMS)), 401, "algorithm")
    assert "'HS256'" in error["message"] and "shared secret" in error["message"]


def test_a_token_whose_alg_is_not_its_keys_is_refused(world: World) -> None:
    signing = world.issuer.keys["rsa"]
    jwt = world.issuer.mint(headers={"alg": "RS512"}, **CLAIMS)  # signed RS512 with the RS256 key
    assert signing.alg == "RS256"
    error = refused(world, world.exchange(jwt), 401, "algorithm")
    assert "RS512" in error["message"] and "RS256" in error["message"]


@pytest.mark.parametrize("alg", [["RS256"], {"RS256": True}, 256, None])
def test_an_alg_that_is_not_a_name_is_refused(world: World, alg: Any) -> None:
    _, payload, signature = world.mint().split(".")
    forged = b64url(json.dumps({"alg": alg, "typ": "JWT", "kid": world.issuer.keys["rsa"].kid}).encode())
    error = refused(world, world.exchange(f"{forged}.{payload}.{signature}"), 401, "algorithm")
    assert "public-key algorithm" in error["message"]


@pytest.mark.parametrize("where", ["claims", "header"])
def test_a_token_holding_a_lone_surrogate_is_refused_as_malformed(world: World, where: str) -> None:
    # Signed by the issuer; PostgreSQL's json refuses the text, and UTF-8 cannot encode it.
    jwt = world.mint(repository="acme/\ud800") if where == "claims" else world.mint(headers={"x": "\udc00"})
    error = refused(world, world.exchange(jwt), 401, "malformed")
    assert "lone surrogate" in error["message"]


def test_an_algorithm_the_issuer_does_not_declare_is_refused(world: World) -> None:
    world.issuer.algorithms = ["RS256"]  # the discovery document lists RS256 only
    refused(world, world.exchange(world.issuer.mint(key="ec", **CLAIMS)), 401, "algorithm")


def test_a_kid_not_in_the_jwks_is_refused_and_the_issuer_is_not_hammered(world: World, settings: Any) -> None:
    settings.REGISTRY_OIDC_JWKS_REFRESH_SECONDS = 1
    assert world.exchange(world.mint()).status_code == 201  # the keys are cached now
    fetched = len(world.issuer.requests)
    assert fetched == 2  # discovery, then the JWKS
    time.sleep(1.1)  # past the refresh bound: an unknown kid may fetch the keys again, once
    stranger = SigningKey("rotated-away", "RS256", rsa_key(5))
    world.issuer.keys["stranger"] = stranger
    for _ in range(5):
        jwt = world.issuer.mint(key="stranger", **CLAIMS)
        error = refused(world, world.exchange(jwt), 401, "unknown_key", issued=1)
        assert "'rotated-away'" in error["message"]
    # One refresh for an unknown kid; the others came within REGISTRY_OIDC_JWKS_REFRESH_SECONDS.
    assert len(world.issuer.requests) == fetched + 2


def test_a_rotated_key_is_fetched_when_a_token_names_it(world: World, settings: Any) -> None:
    settings.REGISTRY_OIDC_JWKS_REFRESH_SECONDS = 1
    assert world.exchange(world.mint()).status_code == 201
    rotated = SigningKey("rsa-next", "RS256", rsa_key(6))
    world.issuer.keys["next"] = rotated
    world.issuer.published.append(rotated)
    time.sleep(1.1)
    response = world.exchange(world.issuer.mint(key="next", **CLAIMS))
    assert response.status_code == 201, response.json()


def test_a_tampered_token_is_refused(world: World) -> None:
    import base64

    header, payload, signature = world.mint(repository="someone/else").split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["repository"] = "acme/kv-store"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    refused(world, world.exchange(f"{header}.{forged}.{signature}"), 401, "signature")


@pytest.mark.parametrize("missing", ["jti", "exp", "iat"])
def test_a_token_without_a_required_claim_is_refused(world: World, missing: str) -> None:
    error = refused(world, world.exchange(world.mint(**{missing: None})), 401, "missing_claim")
    assert f"{missing!r}" in error["message"]


@pytest.mark.parametrize("garbage", ["not-a-jwt", "a.b.c", "x" * 20_000])
def test_something_that_is_not_a_jwt_is_refused(world: World, garbage: str) -> None:
    response = world.exchange(garbage)
    if len(garbage) > 16384:
        assert response.status_code == 400  # refused by the request's own bounds, not audited
        return
    error = refused(world, response, 401, "malformed")
    assert "not a JWT" in error["message"]


def test_a_token_with_characters_outside_ascii_is_refused_as_malformed(world: World) -> None:
    header, payload, signature = world.mint().split(".")
    error = refused(world, world.exchange(f"{header}.{payload}\u00e9.{signature}"), 401, "malformed")
    assert "outside ASCII" in error["message"]


def test_an_issuer_that_cannot_be_reached_is_503_and_nothing_is_issued(world: World) -> None:
    from registry.oidc import KEYS

    jwt = world.mint()
    world.issuer.stop()
    KEYS.clear()
    error = refused(world, world.exchange(jwt), 503, "issuer_unavailable")
    assert world.issuer.url in error["message"] and "try again later" in error["message"]


# --- valid tokens that match no publisher: 403 --------------------------------------------------------


def test_a_token_for_another_audience_is_refused(world: World) -> None:
    jwt = world.issuer.mint(audience="https://elsewhere.example", **CLAIMS)
    error = refused(world, world.exchange(jwt), 403, "no_match")
    assert "aud=['https://elsewhere.example']" in error["message"]
    assert "http://testserver" in error["message"]  # the default audience, said


@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_claims_that_differ_by_one_character_are_refused_without_saying_which(world: World, claim: str) -> None:
    value = CLAIMS[claim]
    changed = value[:-1] + ("X" if value[-1] != "X" else "Y")
    error = refused(world, world.exchange(world.mint(**{claim: changed})), 403, "no_match")
    # The refusal says what the token carries, never which publisher was closest or what it expects.
    assert "etcd" not in json.dumps(error)
    assert error["details"][0]["claims"][claim] == changed
    assert set(error["details"][0]) == {"reason", "issuer", "audience", "claims"}


def test_hostile_claims_are_recorded_safely(world: World) -> None:
    # NUL (which PostgreSQL refuses in text and JSON), NaN, huge numbers, deep values, long text.
    hostile = {"repository": "acme/kv\x00store", "k\x00": "v", "score": float("nan"), "big": 10**300}
    hostile |= {"deep": [[[[{"a": "b" * 10_000}]]]], "exp": 10**11}
    error = refused(world, world.exchange(world.mint(**hostile)), 403, "no_match")
    assert "u0000store" in error["message"] and "\x00" not in error["message"]
    row = AuditEvent.objects.get(action=AuditEvent.Action.OIDC_EXCHANGE_REFUSED)
    assert row.details["claims"]["k\\u0000"] == "v" and row.details["claims"]["score"] == "nan"
    assert len(row.details["claims"]["deep"]) <= 300
    unverified = world.issuer.mint(**hostile)[:-5] + "AAAAA"  # its signature broken: recorded unverified
    refused(world, world.exchange(unverified), 401, "signature")


def test_a_claim_of_another_type_never_matches(world: World) -> None:
    refused(world, world.exchange(world.mint(repository=["acme/kv-store"])), 403, "no_match")


def test_a_token_for_extension_a_cannot_publish_extension_b(world: World) -> None:
    from tests.factories import refusal

    error = refused(world, world.exchange(world.mint(), name="containerd"), 403, "no_match")
    assert "of 'containerd'" in error["message"]
    secret = world.exchange(world.mint()).json()["data"]["token"]  # it is etcd's
    status, error = refusal(world.publish(secret, "containerd", "1.7.1"))
    assert status == 403 and "publish:containerd" in error["message"]
    assert not Version.objects.filter(extension__name="containerd", version="1.7.1").exists()


def test_a_token_matching_several_extensions_must_name_one(world: World) -> None:
    add_publisher(world.client, world.token, "containerd", world.issuer.url)  # the same identity as etcd's
    response = world.exchange(world.mint())
    assert response.status_code == 400
    assert "containerd, etcd" in response.json()["error"]["message"] and '"name"' in response.json()["error"]["message"]
    granted = world.exchange(world.mint(), name="containerd")
    assert granted.status_code == 201 and granted.json()["data"]["scopes"] == ["publish:containerd"]


def test_the_most_specific_publisher_is_chosen(world: World) -> None:
    loose = add_publisher(world.client, world.token, "etcd", world.issuer.url, {"repository": "acme/kv-store"})
    assert loose.status_code == 201
    granted = world.exchange(world.mint()).json()["data"]
    assert granted["trusted_publisher"]["id"] == world.publisher["id"]  # four claims beat one
    granted = world.exchange(world.mint(environment="staging")).json()["data"]
    assert granted["trusted_publisher"]["id"] == loose.json()["data"]["id"]


def test_a_publisher_whose_owner_left_is_refused(world: World) -> None:
    from registry.services import owner_add, owner_remove
    from registry.tokens import Actor
    from tests.factories import make_token, make_user

    bob = make_user("bob")
    owner_add(actor=Actor(user=world.alice), name="etcd", username="bob")
    owner_remove(actor=Actor(user=bob), name="etcd", username="alice")
    error = refused(world, world.exchange(world.mint()), 403, "publisher_unusable")
    assert "alice, who registered it, is no longer an owner of 'etcd'" in error["message"]
    listed = world.client.get(publishers_url("etcd"), HTTP_AUTHORIZATION=f"Bearer {make_token(bob)}")
    assert listed.json()["data"]["trusted_publishers"][0]["usable"] is False


def test_removing_a_publisher_revokes_its_live_tokens(world: World) -> None:
    secret = world.exchange(world.mint()).json()["data"]["token"]
    removed = world.client.delete(
        f"{publishers_url('etcd')}{world.publisher['id']}/", HTTP_AUTHORIZATION=f"Bearer {world.token}"
    )
    assert removed.status_code == 200
    assert removed.json()["data"]["id"] == world.publisher["id"]
    response = world.publish(secret, "etcd", "3.5.10")
    assert response.status_code == 401 and "revoked" in response.json()["error"]["message"]
    row = AuditEvent.objects.get(action=AuditEvent.Action.PUBLISHER_REMOVE)
    assert row.details["revoked_tokens"] == [secret[:12]]
    refused(world, world.exchange(world.mint()), 403, "no_match", issued=1)


def test_refused_exchanges_are_throttled_like_failed_authentications(world: World, settings: Any) -> None:
    settings.REGISTRY_RATE_AUTH_FAILURE = "3/minute"
    for _ in range(3):
        assert world.exchange(world.issuer.mint(exp_in=-300, **CLAIMS)).status_code == 401
    response = world.exchange(world.mint())  # valid, but this address failed too often
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "rate_limited" and int(response["Retry-After"]) >= 1
    assert tokens_issued() == 0


# --- pending publishers ------------------------------------------------------------------------------


@pytest.fixture
def bob(db: None) -> tuple[AbstractBaseUser, str]:
    from tests.factories import make_token, make_user

    user = make_user("bob")
    return user, make_token(user)


@pytest.fixture
def carol(db: None) -> tuple[AbstractBaseUser, str]:
    from tests.factories import make_token, make_user

    user = make_user("carol")
    return user, make_token(user)


BOBS = {"repository": "bob/kv", "workflow": "release"}
CAROLS = {"repository": "carol/kv", "workflow": "release"}


def test_a_pending_publisher_creates_its_extension_on_first_publish(world: World, bob: Any) -> None:
    _user, token = bob
    added = add_publisher(world.client, token, "kvstore", world.issuer.url, BOBS)
    assert added.status_code == 201, added.json()
    pending = added.json()["data"]
    assert pending["pending"] is True and pending["usable"] is True
    reserved = timezone.datetime.fromisoformat(pending["reserved_until"]) - timezone.now()
    assert timedelta(days=13, hours=23) < reserved <= timedelta(days=14)

    granted = world.exchange(world.issuer.mint(**BOBS))
    assert granted.status_code == 201, granted.json()
    data = granted.json()["data"]
    assert data["pending"] is True and data["name"] == "kvstore" and data["user"] == "bob"
    published = world.publish(data["token"], "kvstore", "0.1.0")
    assert published.json()["data"]["status"] == "succeeded", published.json()
    assert list(Extension.objects.get(name="kvstore").owners.values_list("username", flat=True)) == ["bob"]
    # The pending publisher is now kvstore's own.
    listed = world.client.get(publishers_url("kvstore"), HTTP_AUTHORIZATION=f"Bearer {token}").json()["data"]
    assert listed["exists"] is True
    assert [(p["id"], p["pending"], p["reserved_until"]) for p in listed["trusted_publishers"]] == [
        (pending["id"], False, None)
    ]
    again = world.exchange(world.issuer.mint(**BOBS))
    assert again.status_code == 201 and again.json()["data"]["pending"] is False


def test_a_pending_name_cannot_be_claimed_by_a_second_identity(world: World, bob: Any, carol: Any) -> None:
    from tests.factories import refusal

    assert add_publisher(world.client, bob[1], "kvstore", world.issuer.url, BOBS).status_code == 201
    # carol cannot reserve it too, nor a look-alike, nor publish it, nor provide it
    for name in ("kvstore", "kv-store", "kvst0re"):
        response = add_publisher(world.client, carol[1], name, world.issuer.url, CAROLS)
        assert response.status_code == 409, (name, response.json())
        assert response.json()["error"]["code"] == "name_taken"
        assert "reserved by another user's pending trusted publisher" in response.json()["error"]["message"]
    status, error = refusal(world.publish(carol[1], "kvstore", "0.1.0"))
    assert status == 409 and "reserved" in error["message"]
    status, error = refusal(world.publish(carol[1], "carols", "0.1.0", provides={"taskservs": ["kvstore"]}))
    assert status == 409 and "the taskserv 'kvstore'" in error["message"]
    # carol's CI identity gets nothing for it
    refused(world, world.exchange(world.issuer.mint(**CAROLS), name="kvstore"), 403, "no_match")
    assert not Extension.objects.filter(name="kvstore").exists()
    # bob's does
    assert world.exchange(world.issuer.mint(**BOBS), name="kvstore").status_code == 201


def test_pending_publishers_of_two_users_matching_one_token_give_nobody_the_name(
    world: World, bob: Any, carol: Any
) -> None:
    # Reservations make this impossible through the API; were it ever in the database, the
    # exchange would refuse rather than pick one.
    from registry.trusted_publishing import claim_names, claims_digest

    for user in (bob[0], carol[0]):
        TrustedPublisher.objects.create(
            pending_name="kvstore",
            pending_key="kvstore",
            reserved_until=timezone.now() + timedelta(days=1),
            issuer=world.issuer.url,
            audience="http://testserver" if user == bob[0] else "https://other.example",
            claims=BOBS,
            claim_names=claim_names(BOBS),
            claims_digest=claims_digest(BOBS),
            added_by=user,
        )
    jwt = world.issuer.mint(audience=["http://testserver", "https://other.example"], **BOBS)
    refused(world, world.exchange(jwt), 403, "contested")


def test_a_user_reserves_a_bounded_number_of_names(world: World, bob: Any, settings: Any) -> None:
    settings.REGISTRY_OIDC_MAX_PENDING = 2
    for name in ("first-one", "second-one"):
        assert add_publisher(world.client, bob[1], name, world.issuer.url, BOBS).status_code == 201
    # more publishers for a name already reserved are fine; a third name is not
    assert add_publisher(world.client, bob[1], "first-one", world.issuer.url, CAROLS).status_code == 201
    response = add_publisher(world.client, bob[1], "third-one", world.issuer.url, BOBS)
    assert response.status_code == 403
    assert "first-one, second-one" in response.json()["error"]["message"]


def test_a_reservation_lapses_and_cannot_be_renewed(world: World, bob: Any, carol: Any, monkeypatch: Any) -> None:
    first = add_publisher(world.client, bob[1], "kvstore", world.issuer.url, BOBS).json()["data"]
    # adding another publisher later shares the reservation, never extends it
    clock = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: clock + timedelta(days=10))
    second = add_publisher(world.client, bob[1], "kvstore", world.issuer.url, CAROLS).json()["data"]
    assert second["reserved_until"] == first["reserved_until"]
    # removing them all and adding again does not renew it either
    for row in (first, second):
        url = f"{publishers_url('kvstore')}{row['id']}/"
        assert world.client.delete(url, HTTP_AUTHORIZATION=f"Bearer {bob[1]}").status_code == 200
    third = add_publisher(world.client, bob[1], "kvstore", world.issuer.url, BOBS).json()["data"]
    assert third["reserved_until"] == first["reserved_until"]
    # 15 days on, it has lapsed: the exchange says so, bob cannot reserve it again for a while...
    monkeypatch.setattr(timezone, "now", lambda: clock + timedelta(days=15))
    error = refused(world, world.exchange(world.issuer.mint(**BOBS), name="kvstore"), 403, "publisher_unusable")
    assert "its reservation of 'kvstore' lapsed on" in error["message"]
    response = add_publisher(world.client, bob[1], "kvstore", world.issuer.url, BOBS)
    assert response.status_code == 403 and "lapsed on" in response.json()["error"]["message"]
    assert "meanwhile anyone may publish the name" in response.json()["error"]["message"].lower()
    # ...and anyone else may take the name
    assert add_publisher(world.client, carol[1], "kvstore", world.issuer.url, CAROLS).status_code == 201
    assert list(TrustedPublisher.objects.filter(extension=None).values_list("added_by__username", flat=True)) == [
        "carol"
    ]
    assert error["code"] == "forbidden"


def test_an_ordinary_publish_by_the_reserving_user_adopts_the_pending_publishers(world: World, bob: Any) -> None:
    assert add_publisher(world.client, bob[1], "kvstore", world.issuer.url, BOBS).status_code == 201
    assert world.publish(bob[1], "kvstore", "0.1.0").json()["data"]["status"] == "succeeded"
    row = TrustedPublisher.objects.get(added_by__username="bob")
    assert row.extension is not None and row.extension.name == "kvstore" and row.pending_name == ""


# --- what a publisher may be ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"claims": {"workflow": "release"}}, "at least one claim that says whose workload"),
        ({"claims": {}}, "give the claims a token must carry"),
        ({"claims": {"repository": "acme/x", "aud": "x"}}, "checked by the registry itself"),
        ({"claims": {"repository": "acme/x", "bad-name": "x"}}, "not a claim a trusted publisher can require"),
        ({"claims": {"repository": "acme/x", "run_id": "1"}}, "use: sub, repository"),
        ({"claims": {"repository": "acme/x\u0007"}}, "without control characters"),
        ({"claims": {"repository": "acme/x\u0000"}}, "without control characters"),
        ({"claims": {"repository": "acme/x\u0085"}}, "without control characters"),
        ({"claims": {"repository": "acme/x", "workflow": 5}}, "the value must be text"),
        ({"claims": ["repository", "acme/x"]}, "Expected an object"),
        ({"audience": "\u0085x"}, "audience"),
        ({"claims": {"repository": "a" * 513}}, "512"),
        ({"claims": dict.fromkeys(CLAIM_NAMES[:17], "x")}, "at most 16"),
        ({"issuer": "https://evil.example"}, "not an issuer this registry trusts"),
        ({"audience": " padded"}, "audience"),
        # A lone surrogate (a \ud800 escape without its pair) is no text to store, hash or echo.
        ({"claims": {"repository": "acme/\ud800"}}, "lone surrogate"),
        ({"claims": {"repository": "acme/x", "w\udc00": "x"}}, "lone surrogate"),
        ({"issuer": "https://\ud800.example"}, "lone surrogate"),
    ],
)
def test_a_publisher_that_would_match_too_much_or_cannot_be_stored_is_refused(
    world: World, body: dict[str, Any], message: str
) -> None:
    request = {"issuer": world.issuer.url, "claims": CLAIMS, **body}
    response = world.client.post(
        publishers_url("etcd"), request, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {world.token}"
    )
    assert response.status_code == 400, response.json()
    assert message in response.json()["error"]["message"] or message in json.dumps(response.json()["error"])
    assert TrustedPublisher.objects.filter(extension__name="etcd").count() == 1


def test_registering_the_same_publisher_twice_changes_nothing(world: World) -> None:
    response = add_publisher(world.client, world.token, "etcd", world.issuer.url)
    assert response.status_code == 200 and response.json()["data"]["id"] == world.publisher["id"]
    assert AuditEvent.objects.filter(action=AuditEvent.Action.PUBLISHER_ADD).count() == 2  # etcd's, containerd's


def test_pending_names_follow_the_name_rules(world: World, bob: Any) -> None:
    bad = add_publisher(world.client, bob[1], "Cert_Manager", world.issuer.url, BOBS)
    assert bad.status_code == 400 and "'cert-manager'" in bad.json()["error"]["message"]
    reserved = add_publisher(world.client, bob[1], "install", world.issuer.url, BOBS)
    assert reserved.status_code == 409 and "reserved name" in reserved.json()["error"]["message"]
    squat = add_publisher(world.client, bob[1], "etdc", world.issuer.url, BOBS)  # alice's etcd, look-alike
    assert squat.status_code == 409 and "'etcd'" in squat.json()["error"]["message"]
