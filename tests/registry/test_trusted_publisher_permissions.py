"""The trusted-publisher endpoints against every kind of credential, as the ownership matrix does
for the other writes (tests/registry/test_ownership_matrix.py, whose world this reuses): the exact
status and code of each cell, and, when refused, that no publisher changed.

``etcd`` is owned by alice. A publisher of etcd exists (registered by alice) for the remove and
list cells. Credentials: ``owner`` (alice, every scope), ``session`` (alice logged in: every
scope), ``stranger`` (bob, every scope, owns nothing), ``scoped_other`` (alice, scoped to another
name), ``other_action`` (alice, publish:etcd and yank:etcd but not owners:etcd), ``expired``,
``revoked``, ``none``. Pending publishers (a name that does not exist) are any user's, with the
scope owners:NAME."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from registry.models import AuditEvent, TrustedPublisher
from tests.registry.test_ownership_matrix import _OWNER_ONLY as OWNER_ONLY
from tests.registry.test_ownership_matrix import World, make_world

pytest_plugins = ["tests.factories"]

ISSUER = "https://token.actions.githubusercontent.com"
URL = "/api/v1/extensions/etcd/trusted-publishers/"
CLAIMS = {"repository": "acme/etcd", "workflow": "release"}
CREDENTIALS = ("owner", "session", "stranger", "scoped_other", "other_action", "expired", "revoked", "none")


@pytest.fixture(autouse=True)
def _fresh_cache(settings: Any) -> None:
    cache.clear()
    settings.REGISTRY_OIDC_ISSUERS = [ISSUER]


def headers(world: World, credential: str) -> dict[str, str]:
    return {} if credential in ("none", "session") else world.headers(credential)


def as_credential(world: World, credential: str) -> Client:
    if credential == "session":
        session = Client(enforce_csrf_checks=False)
        session.force_login(world.alice)
        return session
    return world.client


def publishers() -> list[tuple[str, str, str]]:
    rows = TrustedPublisher.objects.order_by("pk")
    return [(p.name, p.added_by.get_username(), p.claims["repository"]) for p in rows]


def seed(world: World) -> TrustedPublisher:
    from registry.tokens import Actor
    from registry.trusted_publishing import publisher_add

    row, _ = publisher_add(
        actor=Actor(user=world.alice), name="etcd", issuer=ISSUER, audience="http://testserver", claims=CLAIMS
    )
    return row


def do_list(world: World, credential: str) -> Any:
    return as_credential(world, credential).get(URL, **headers(world, credential))


def do_add(world: World, credential: str) -> Any:
    body = {"issuer": ISSUER, "claims": {"repository": "acme/etcd", "workflow": "nightly"}}
    return as_credential(world, credential).post(
        URL, body, content_type="application/json", **headers(world, credential)
    )


def do_remove(world: World, credential: str) -> Any:
    row = TrustedPublisher.objects.get()
    return as_credential(world, credential).delete(
        URL, {"id": row.pk}, content_type="application/json", **headers(world, credential)
    )


def do_remove_by_path(world: World, credential: str) -> Any:
    row = TrustedPublisher.objects.get()
    return as_credential(world, credential).delete(f"{URL}{row.pk}/", **headers(world, credential))


REQUESTS: dict[str, Callable[[World, str], Any]] = {
    "list": do_list,
    "add": do_add,
    "remove": do_remove,
    "remove_by_path": do_remove_by_path,
}
OK = {"list": 200, "add": 201, "remove": 200, "remove_by_path": 200}
REFUSED = OWNER_ONLY  # the same cells as the other owners-only writes


@pytest.mark.parametrize("credential", CREDENTIALS)
@pytest.mark.parametrize("endpoint", list(REQUESTS))
def test_trusted_publisher_endpoint_by_credential(
    client: Client, db: None, tmp_path: Path, endpoint: str, credential: str
) -> None:
    world = make_world(client, tmp_path, ("publish:etcd", "yank:etcd"))
    seed(world)
    before = publishers()
    audited = AuditEvent.objects.count()

    response = REQUESTS[endpoint](world, credential)

    body = response.json()
    if credential in ("owner", "session"):
        assert response.status_code == OK[endpoint], body
        assert body["success"] is True
        after = publishers()
        if endpoint == "list":
            assert [p["claims"] for p in body["data"]["trusted_publishers"]] == [CLAIMS]
            assert after == before
        elif endpoint == "add":
            assert after == [*before, ("etcd", "alice", "acme/etcd")]
            assert body["data"]["audience"] == "http://testserver"  # the registry's URL by default
        else:
            assert after == []
        return
    status, code = REFUSED[credential]
    assert response.status_code == status, body
    assert body["error"]["code"] == code
    if credential == "stranger":
        assert "not an owner of 'etcd'" in body["error"]["message"]
    if credential in ("scoped_other", "other_action"):
        assert "owners:etcd" in body["error"]["message"]
        assert {"required_scope": "owners:etcd"} in body["error"]["details"]
    assert publishers() == before
    if credential not in ("expired", "revoked"):  # a bad token is audited as a failed authentication
        assert AuditEvent.objects.count() == audited


def test_a_session_without_its_csrf_token_cannot_add_a_publisher(client: Client, db: None, tmp_path: Path) -> None:
    world = make_world(client, tmp_path, ("yank:etcd",))
    session = Client(enforce_csrf_checks=True)
    session.force_login(world.alice)
    response = session.post(URL, {"issuer": ISSUER, "claims": CLAIMS}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "CSRF" in response.json()["error"]["message"]
    assert publishers() == []


@pytest.mark.parametrize("credential", ["stranger", "scoped_other", "none"])
def test_pending_publishers_need_a_user_with_the_owners_scope_of_the_name(
    client: Client, db: None, tmp_path: Path, credential: str
) -> None:
    world = make_world(client, tmp_path, ("yank:etcd",))
    url = "/api/v1/extensions/brand-new/trusted-publishers/"
    body = {"issuer": ISSUER, "claims": {"repository": "bob/brand-new"}}
    response = world.client.post(url, body, content_type="application/json", **headers(world, credential))
    expected = {"stranger": 201, "scoped_other": 403, "none": 401}[credential]
    assert response.status_code == expected, response.json()
    if expected == 201:
        data = response.json()["data"]
        assert data["pending"] is True and data["name"] == "brand-new" and data["added_by"] == "bob"
        assert publishers() == [("brand-new", "bob", "bob/brand-new")]
    else:
        assert publishers() == []


def test_a_pending_publisher_is_seen_and_removed_only_by_its_user(client: Client, db: None, tmp_path: Path) -> None:
    world = make_world(client, tmp_path, ("yank:etcd",))
    url = "/api/v1/extensions/brand-new/trusted-publishers/"
    body = {"issuer": ISSUER, "claims": {"repository": "bob/brand-new"}}
    created = world.client.post(url, body, content_type="application/json", **headers(world, "stranger"))
    assert created.status_code == 201
    row = created.json()["data"]["id"]
    # alice (who owns etcd, not this name) can neither see nor remove bob's reservation
    assert world.client.get(url, **headers(world, "owner")).status_code == 404
    assert world.client.delete(f"{url}{row}/", **headers(world, "owner")).status_code == 404
    listed = world.client.get(url, **headers(world, "stranger"))
    assert listed.status_code == 200
    assert listed.json()["data"]["exists"] is False
    assert [p["id"] for p in listed.json()["data"]["trusted_publishers"]] == [row]
    assert world.client.delete(f"{url}{row}/", **headers(world, "stranger")).status_code == 200
    assert publishers() == []


def test_unknown_names_and_publishers_are_404(client: Client, db: None, tmp_path: Path) -> None:
    world = make_world(client, tmp_path, ("yank:etcd",))
    assert (
        world.client.get("/api/v1/extensions/no-such/trusted-publishers/", **headers(world, "owner")).status_code == 404
    )
    assert world.client.delete(f"{URL}999/", **headers(world, "owner")).status_code == 404
    response = world.client.get("/api/v1/extensions/Not_Valid/trusted-publishers/", **headers(world, "owner"))
    assert response.status_code == 404
    assert "not a valid name" in response.json()["error"]["message"]
