"""Every write endpoint against every kind of credential (STYLE 9): the exact status and error code
of each cell, and, when the request is refused, that nothing changed in the database.

The extension ``etcd`` (3.5.9) is owned by alice. The credentials:

- ``owner``: alice's token with every scope;
- ``stranger``: bob's token with every scope (bob owns nothing here);
- ``scoped_other``: alice's token scoped to another name (publish:other, yank:other, owners:other);
- ``other_action``: alice's token scoped to etcd, but only for the actions this endpoint does not need;
- ``expired``, ``revoked``: alice's full tokens, expired or revoked;
- ``none``: no Authorization header.

The token endpoints are per user, not per extension, and need the ``tokens`` scope (SPEC 3.4): a
token that has it acts on its own user's tokens, so bob creates a token for himself (201) and
cannot see alice's (404); a token only creates tokens within its scopes (403 otherwise); a token
without the ``tokens`` scope may neither create nor revoke (403), so a leaked publish token cannot
revoke its owner's other tokens. Every scope against every token endpoint: tests/registry/test_tokens.py."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from registry.models import ApiToken, Extension, Version

pytest_plugins = ["tests.factories"]  # imported at run time below, so pytest can rewrite its asserts

EXTENSION = "etcd"
VERSION = "3.5.9"
NEW_VERSION = "3.5.10"
ALL = ("publish:*", "yank:*", "owners:*", "tokens")

CREDENTIALS = ("owner", "stranger", "scoped_other", "other_action", "expired", "revoked", "none")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


@dataclass
class World:
    client: Client
    tmp_path: Path
    alice: AbstractBaseUser
    bob: AbstractBaseUser
    carol: AbstractBaseUser
    tokens: dict[str, str]

    def headers(self, credential: str) -> dict[str, str]:
        if credential == "none":
            return {}
        return {"HTTP_AUTHORIZATION": f"Bearer {self.tokens[credential]}"}

    def owners(self) -> list[str]:
        return sorted(Extension.objects.get(name=EXTENSION).owners.values_list("username", flat=True))

    def versions(self) -> list[str]:
        return sorted(Version.objects.filter(extension__name=EXTENSION).values_list("version", flat=True))

    def yanked(self) -> bool:
        return Version.objects.get(extension__name=EXTENSION, version=VERSION).yanked

    def alices_tokens(self) -> list[tuple[str, bool]]:
        rows = ApiToken.objects.filter(user=self.alice).order_by("pk")
        return [(t.prefix, t.revoked_at is None) for t in rows]

    def state(self) -> dict[str, Any]:
        return {
            "versions": self.versions(),
            "yanked": self.yanked(),
            "owners": self.owners(),
            "alices_tokens": self.alices_tokens(),
            "bobs_tokens": ApiToken.objects.filter(user=self.bob).count(),
        }


def expire(secret: str) -> None:
    ApiToken.objects.filter(prefix=secret[:12]).update(expires_at=timezone.now() - timedelta(seconds=1))


def revoke(secret: str) -> None:
    ApiToken.objects.filter(prefix=secret[:12]).update(revoked_at=timezone.now())


def make_world(client: Client, tmp_path: Path, other_action: tuple[str, ...]) -> World:
    from tests.factories import make_token, make_user, publish_new

    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    owner = make_token(alice, ALL)
    publish_new(client, owner, tmp_path / "seed", EXTENSION, VERSION)
    tokens = {
        "owner": owner,
        "stranger": make_token(bob, ALL),
        "scoped_other": make_token(alice, ("publish:other", "yank:other", "owners:other")),
        "other_action": make_token(alice, other_action),
        "expired": make_token(alice, ALL, expires_in_days=1),
        "revoked": make_token(alice, ALL),
    }
    expire(tokens["expired"])
    revoke(tokens["revoked"])
    return World(client, tmp_path, alice, bob, carol, tokens)


# --- the requests --------------------------------------------------------------------------------


def source_archive(tmp_path: Path) -> Path:
    """A tar.gz of an etcd 3.5.10 source directory (members relative to the source root)."""
    from tests.factories import write_extension

    source = write_extension(tmp_path / "src", EXTENSION, NEW_VERSION)
    target = tmp_path / "source.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(source).as_posix(), recursive=False)
    return target


def do_publish(world: World, credential: str) -> Any:
    from tests.factories import autocommit_hooks, package

    path = package(world.tmp_path / "new", EXTENSION, NEW_VERSION)
    with autocommit_hooks(), path.open("rb") as handle:
        return world.client.post("/api/v1/extensions/", {"file": handle}, **world.headers(credential))


def do_build(world: World, credential: str) -> Any:
    from tests.factories import autocommit_hooks

    path = source_archive(world.tmp_path / "build")
    with autocommit_hooks(), path.open("rb") as handle:
        return world.client.post("/api/v1/builds/", {"source": handle}, **world.headers(credential))


YANK_URL = f"/api/v1/extensions/{EXTENSION}/versions/{VERSION}/yank"
OWNERS_URL = f"/api/v1/extensions/{EXTENSION}/owners/"


def do_yank(world: World, credential: str) -> Any:
    return world.client.post(
        YANK_URL, {"reason": "broken"}, content_type="application/json", **world.headers(credential)
    )


def do_unyank(world: World, credential: str) -> Any:
    return world.client.delete(YANK_URL, content_type="application/json", **world.headers(credential))


def do_owner_add(world: World, credential: str) -> Any:
    return world.client.post(
        OWNERS_URL, {"username": "carol"}, content_type="application/json", **world.headers(credential)
    )


def do_owner_remove(world: World, credential: str) -> Any:
    return world.client.delete(
        OWNERS_URL, {"username": "carol"}, content_type="application/json", **world.headers(credential)
    )


def do_owner_remove_by_path(world: World, credential: str) -> Any:
    return world.client.delete(f"{OWNERS_URL}carol/", **world.headers(credential))


def do_token_create(world: World, credential: str) -> Any:
    body = {"name": "new", "scopes": [f"publish:{EXTENSION}"]}
    return world.client.post("/api/v1/tokens/", body, content_type="application/json", **world.headers(credential))


def do_token_revoke(world: World, credential: str) -> Any:
    victim = ApiToken.objects.get(user=world.alice, name="victim")
    body = {"id": victim.pk}
    return world.client.delete("/api/v1/tokens/", body, content_type="application/json", **world.headers(credential))


def do_token_revoke_by_path(world: World, credential: str) -> Any:
    victim = ApiToken.objects.get(user=world.alice, name="victim")
    return world.client.delete(f"/api/v1/tokens/{victim.pk}/", **world.headers(credential))


def prepare_unyank(world: World) -> None:
    response = do_yank(world, "owner")
    assert response.status_code == 200 and world.yanked()


def prepare_owner_remove(world: World) -> None:
    assert do_owner_add(world, "owner").status_code == 200
    assert world.owners() == ["alice", "carol"]


def prepare_token_revoke(world: World) -> None:
    from registry.services import token_create
    from registry.tokens import Actor

    token_create(actor=Actor(user=world.alice), name="victim", scopes=["yank:*"], expires_in_days=None)


@dataclass(frozen=True)
class Endpoint:
    request: Callable[[World, str], Any]
    # The scopes, on etcd, of the actions this endpoint does NOT need (for `other_action`).
    other_action: tuple[str, ...]
    required_scope: str | None
    prepare: Callable[[World], None] | None = None


ENDPOINTS: dict[str, Endpoint] = {
    "publish": Endpoint(do_publish, ("yank:etcd", "owners:etcd"), "publish:etcd"),
    "build": Endpoint(do_build, ("yank:etcd", "owners:etcd"), "publish:etcd"),
    "yank": Endpoint(do_yank, ("publish:etcd", "owners:etcd"), "yank:etcd"),
    "unyank": Endpoint(do_unyank, ("publish:etcd", "owners:etcd"), "yank:etcd", prepare_unyank),
    "owner_add": Endpoint(do_owner_add, ("publish:etcd", "yank:etcd"), "owners:etcd"),
    "owner_remove": Endpoint(do_owner_remove, ("publish:etcd", "yank:etcd"), "owners:etcd", prepare_owner_remove),
    "owner_remove_by_path": Endpoint(
        do_owner_remove_by_path, ("publish:etcd", "yank:etcd"), "owners:etcd", prepare_owner_remove
    ),
    "token_create": Endpoint(do_token_create, ("publish:etcd", "yank:etcd", "owners:etcd"), "tokens"),
    "token_revoke": Endpoint(do_token_revoke, ("publish:*", "yank:*", "owners:*"), "tokens", prepare_token_revoke),
    "token_revoke_by_path": Endpoint(
        do_token_revoke_by_path, ("publish:*", "yank:*", "owners:*"), "tokens", prepare_token_revoke
    ),
}

# (status, code) of each cell.
_OWNER_ONLY = {
    "stranger": (403, "forbidden"),
    "scoped_other": (403, "forbidden"),
    "other_action": (403, "forbidden"),
    "expired": (401, "unauthenticated"),
    "revoked": (401, "unauthenticated"),
    "none": (401, "unauthenticated"),
}
EXPECTED: dict[str, dict[str, tuple[int, str | None]]] = {
    "publish": {"owner": (202, None), **_OWNER_ONLY},
    "build": {"owner": (202, None), **_OWNER_ONLY},
    "yank": {"owner": (200, None), **_OWNER_ONLY},
    "unyank": {"owner": (200, None), **_OWNER_ONLY},
    "owner_add": {"owner": (200, None), **_OWNER_ONLY},
    "owner_remove": {"owner": (200, None), **_OWNER_ONLY},
    "owner_remove_by_path": {"owner": (200, None), **_OWNER_ONLY},
    "token_create": {
        "owner": (201, None),
        "stranger": (201, None),  # a token for bob himself
        "scoped_other": (403, "forbidden"),  # no tokens scope
        "other_action": (403, "forbidden"),  # publish:etcd itself, but no tokens scope
        "expired": (401, "unauthenticated"),
        "revoked": (401, "unauthenticated"),
        "none": (401, "unauthenticated"),
    },
    "token_revoke": {
        "owner": (200, None),
        "stranger": (404, "not_found"),  # bob cannot even see alice's tokens
        "scoped_other": (403, "forbidden"),  # no tokens scope
        "other_action": (403, "forbidden"),  # every other scope, but not tokens
        "expired": (401, "unauthenticated"),
        "revoked": (401, "unauthenticated"),
        "none": (401, "unauthenticated"),
    },
}


EXPECTED["token_revoke_by_path"] = EXPECTED["token_revoke"]


def expected_change(endpoint: str, credential: str, before: dict[str, Any], world: World) -> dict[str, Any]:
    """The state after a successful request."""
    after = dict(before)
    if endpoint in ("publish", "build"):
        after["versions"] = sorted([*before["versions"], NEW_VERSION])
    elif endpoint == "yank":
        after["yanked"] = True
    elif endpoint == "unyank":
        after["yanked"] = False
    elif endpoint == "owner_add":
        after["owners"] = ["alice", "carol"]
    elif endpoint in ("owner_remove", "owner_remove_by_path"):
        after["owners"] = ["alice"]
    elif endpoint == "token_create":
        if credential == "stranger":
            after["bobs_tokens"] = before["bobs_tokens"] + 1
        else:
            after["alices_tokens"] = world.alices_tokens()  # one more, checked below
            assert len(after["alices_tokens"]) == len(before["alices_tokens"]) + 1
            assert after["alices_tokens"][:-1] == before["alices_tokens"]
    elif endpoint in ("token_revoke", "token_revoke_by_path"):
        victim = ApiToken.objects.get(user=world.alice, name="victim").prefix
        after["alices_tokens"] = [(p, live and p != victim) for p, live in before["alices_tokens"]]
    return after


@pytest.mark.parametrize("credential", CREDENTIALS)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_write_endpoint_by_credential(client: Client, db: None, tmp_path: Path, endpoint: str, credential: str) -> None:
    from tests.factories import refusal

    spec = ENDPOINTS[endpoint]
    world = make_world(client, tmp_path, spec.other_action)
    if spec.prepare is not None:
        spec.prepare(world)
    before = world.state()
    status, code = EXPECTED[endpoint][credential]

    response = spec.request(world, credential)

    if code is None:
        assert response.status_code == status, response.content
        assert response.json()["success"] is True
        assert world.state() == expected_change(endpoint, credential, before, world)
        return
    answered, error = refusal(response)  # an error envelope, or a publish's failed build
    assert answered == status, response.content
    assert error["code"] == code
    assert error["message"]
    if status == 401:
        assert response["WWW-Authenticate"] == 'Bearer realm="registry"'
    if credential == "stranger":
        assert ("no token with id" if endpoint.startswith("token_revoke") else "not an owner") in error["message"]
    if credential in ("scoped_other", "other_action") and spec.required_scope is not None:
        if endpoint in ("publish", "build") and credential == "other_action":
            # no publish scope at all: refused before the upload is even read
            assert "publish:NAME or publish:*" in error["message"]
        else:
            assert spec.required_scope in error["message"]
            assert {"required_scope": spec.required_scope} in error["details"]
    assert world.state() == before


# --- owners: the rest ---------------------------------------------------------------------------


@pytest.fixture
def world(client: Client, db: None, tmp_path: Path) -> World:
    return make_world(client, tmp_path, ("yank:etcd",))


def test_removing_the_last_owner_is_refused(world: World) -> None:
    response = world.client.delete(
        OWNERS_URL, {"username": "alice"}, content_type="application/json", **world.headers("owner")
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert "last owner" in error["message"] and "add another owner" in error["message"]
    assert world.owners() == ["alice"]


def test_an_owner_can_remove_themselves_when_another_owner_remains(world: World) -> None:
    assert do_owner_add(world, "owner").status_code == 200
    response = world.client.delete(
        OWNERS_URL, {"username": "alice"}, content_type="application/json", **world.headers("owner")
    )
    assert response.status_code == 200
    assert world.owners() == ["carol"]
    # and then she is a stranger to it
    assert do_yank(world, "owner").status_code == 403


@pytest.mark.parametrize("username", ["nobody", "", "x" * 151])
def test_adding_an_unknown_user_is_refused(world: World, username: str) -> None:
    response = world.client.post(
        OWNERS_URL, {"username": username}, content_type="application/json", **world.headers("owner")
    )
    assert response.status_code == (404 if username == "nobody" else 400)
    assert response.json()["error"]["code"] == ("not_found" if username == "nobody" else "bad_request")
    assert world.owners() == ["alice"]


def test_adding_an_inactive_user_is_refused(world: World) -> None:
    type(world.carol).objects.filter(pk=world.carol.pk).update(is_active=False)
    response = do_owner_add(world, "owner")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert world.owners() == ["alice"]


def test_removing_someone_who_is_not_an_owner_is_404(world: World) -> None:
    response = do_owner_remove(world, "owner")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_adding_an_existing_owner_changes_nothing(world: World) -> None:
    response = world.client.post(
        OWNERS_URL, {"username": "alice"}, content_type="application/json", **world.headers("owner")
    )
    assert response.status_code == 200
    assert [o["username"] for o in response.json()["data"]["owners"]] == ["alice"]


def test_owners_are_public(world: World) -> None:
    assert do_owner_add(world, "owner").status_code == 200
    response = Client().get(OWNERS_URL)
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["name"] == EXTENSION
    assert [(o["username"], o["added_by"]) for o in data["owners"]] == [("alice", "alice"), ("carol", "alice")]


def test_owners_of_an_unknown_extension_is_404(world: World) -> None:
    response = Client().get("/api/v1/extensions/nope/owners/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_new_owner_may_then_publish(world: World) -> None:
    from tests.factories import make_token, publish_new

    assert do_owner_add(world, "owner").status_code == 200
    carols = make_token(world.carol, ALL)
    publish_new(world.client, carols, world.tmp_path / "carol", EXTENSION, NEW_VERSION)
    assert world.versions() == [NEW_VERSION, VERSION]


def test_a_removed_owner_may_no_longer_publish(world: World) -> None:
    from tests.factories import autocommit_hooks, make_token, package, refusal

    assert do_owner_add(world, "owner").status_code == 200
    assert do_owner_remove(world, "owner").status_code == 200
    carols = make_token(world.carol, ALL)
    path = package(world.tmp_path / "carol", EXTENSION, NEW_VERSION)
    with autocommit_hooks(), path.open("rb") as handle:
        response = world.client.post("/api/v1/extensions/", {"file": handle}, HTTP_AUTHORIZATION=f"Bearer {carols}")
    assert refusal(response)[0] == 403
    assert refusal(response)[1]["code"] == "forbidden"
    assert world.versions() == [VERSION]


@pytest.mark.parametrize("name", ["etc-d", "etdc", "etcdd"])
def test_a_stranger_cannot_claim_a_name_confusable_with_an_owned_one(world: World, name: str) -> None:
    from tests.factories import autocommit_hooks, package, refusal

    path = package(world.tmp_path / "typo", name, "1.0.0", provides={"taskservs": [name]})
    with autocommit_hooks(), path.open("rb") as handle:
        response = world.client.post("/api/v1/extensions/", {"file": handle}, **world.headers("stranger"))
    status, error = refusal(response)
    assert status == 409, response.content
    assert error["code"] == "name_taken"
    assert "'etcd'" in error["message"]
    assert not Extension.objects.filter(name=name).exists()


def test_the_owner_may_claim_a_name_confusable_with_their_own(world: World) -> None:
    from tests.factories import publish_new

    publish_new(world.client, world.tokens["owner"], world.tmp_path / "own", "etc-d", "1.0.0")
    assert sorted(Extension.objects.get(name="etc-d").owners.values_list("username", flat=True)) == ["alice"]


def test_a_session_write_needs_the_csrf_token(world: World) -> None:
    """The web session has every scope of its user, so its writes are guarded by CSRF."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.alice)
    assert client.get("/admin/login/").status_code in (200, 302)
    csrf = str(client.cookies["csrftoken"].value)
    response = client.post(YANK_URL, {"reason": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert world.yanked() is False
    response = client.post(YANK_URL, {"reason": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200
    assert world.yanked() is True


def test_a_session_of_a_non_owner_cannot_yank(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    response = client.post(YANK_URL, {"reason": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert "not an owner" in response.json()["error"]["message"]
    assert world.yanked() is False
