"""API tokens (SPEC 3.4): created with a password, a token or a session (CSRF enforced), shown once,
stored as a SHA-256 digest only, scoped without escalation, expiring, revocable by their owner
only, with last use recorded; and `manage.py createtoken`."""

from __future__ import annotations

import base64
import hashlib
import io
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from registry.models import ApiToken

if TYPE_CHECKING:
    from django.http import HttpResponse

pytest_plugins = ["tests.factories"]  # the user and token fixtures

URL = "/api/v1/tokens/"
TOKEN_RE = re.compile(r"^pvr_[A-Za-z0-9_-]{43}$")
ALLOWED = "use publish:NAME, yank:NAME or owners:NAME"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()  # failed-authentication counters must not leak between tests


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def basic(username: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return {"HTTP_AUTHORIZATION": f"Basic {raw}"}


def create(client: Client, body: dict[str, Any], **headers: Any) -> HttpResponse:
    return client.post(URL, body, content_type="application/json", **headers)  # type: ignore[return-value]


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code
    return dict(body["error"])


def created(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["success"] is True
    return dict(body["data"])


def whoami(client: Client, token: str) -> Any:
    """An authenticated request with the token (listing the caller's tokens)."""
    return client.get(URL, **bearer(token))


# --- creating ------------------------------------------------------------------------------------


def test_a_first_token_is_created_with_a_username_and_password(client: Client, db: None) -> None:
    from tests.factories import make_user

    make_user("bob", password="correct horse")
    data = created(create(client, {"name": "laptop", "scopes": ["publish:*"]}, **basic("bob", "correct horse")))
    assert TOKEN_RE.match(data["token"])
    assert data["name"] == "laptop"
    assert data["scopes"] == ["publish:*"]
    assert data["prefix"] == data["token"][:12]
    assert data["expires_at"] is None and data["revoked_at"] is None and data["last_used_at"] is None
    row = ApiToken.objects.get(pk=data["id"])
    assert row.user.get_username() == "bob"
    error = error_of(whoami(client, data["token"]), 403, "forbidden")  # it works, but has no tokens scope
    assert error["details"] == [{"required_scope": "tokens"}]


def test_a_wrong_password_creates_nothing(client: Client, db: None) -> None:
    from tests.factories import make_user

    make_user("bob", password="correct horse")
    error = error_of(create(client, {"name": "laptop"}, **basic("bob", "wrong")), 401, "unauthenticated")
    assert error["message"].startswith("wrong username or password; send the username and password")
    error_of(create(client, {"name": "laptop"}, **basic("nobody", "x")), 401, "unauthenticated")
    assert not ApiToken.objects.exists()


def test_a_password_is_only_accepted_by_the_tokens_endpoint(client: Client, token: str, tmp_path: Any) -> None:
    from tests.factories import make_user, publish_new

    publish_new(client, token, tmp_path, "etcd", "3.5.9")
    make_user("bob", password="correct horse")
    response = client.post(
        "/api/v1/extensions/etcd/owners/",
        {"username": "bob"},
        content_type="application/json",
        **basic("bob", "correct horse"),
    )
    error_of(response, 401, "unauthenticated")
    assert client.get("/api/v1/extensions/etcd/owners/").json()["data"]["owners"][0]["username"] == "alice"


def test_without_any_credentials_nothing_is_created(client: Client, db: None) -> None:
    error_of(create(client, {"name": "x"}), 401, "unauthenticated")
    error_of(client.get(URL), 401, "unauthenticated")
    assert not ApiToken.objects.exists()


def test_a_token_creates_another_token(client: Client, token: str) -> None:
    data = created(create(client, {"name": "ci", "scopes": ["publish:etcd"]}, **bearer(token)))
    assert TOKEN_RE.match(data["token"]) and data["token"] != token
    assert data["scopes"] == ["publish:etcd"]
    assert ApiToken.objects.filter(user__username="alice").count() == 2


def test_scopes_default_to_every_action_on_every_name(client: Client, token: str) -> None:
    data = created(create(client, {"name": "all"}, **bearer(token)))
    assert data["scopes"] == ["owners:*", "publish:*", "tokens", "yank:*"]


def test_a_scoped_token_without_scopes_asked_creates_a_token_with_its_own_scopes(client: Client, user: Any) -> None:
    from tests.factories import make_token

    scoped = make_token(user, scopes=("publish:etcd", "yank:etcd", "tokens"))
    data = created(create(client, {"name": "narrow"}, **bearer(scoped)))
    assert data["scopes"] == ["publish:etcd", "tokens", "yank:etcd"]


def session_client(user: AbstractBaseUser) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_token(client: Client) -> str:
    """The CSRF cookie, as a browser gets it from any form page (the admin's login page)."""
    assert client.get("/admin/login/").status_code in (200, 302)
    return str(client.cookies["csrftoken"].value)


def test_a_session_post_without_the_csrf_token_is_refused(user: AbstractBaseUser) -> None:
    client = session_client(user)
    csrf_token(client)  # the cookie alone is not enough: the header must repeat it
    error = error_of(create(client, {"name": "web"}), 403, "forbidden")
    assert "CSRF" in error["message"]
    assert not ApiToken.objects.exists()


def test_a_session_post_with_the_csrf_token_is_accepted(user: AbstractBaseUser) -> None:
    client = session_client(user)
    data = created(create(client, {"name": "web"}, HTTP_X_CSRFTOKEN=csrf_token(client)))
    assert ApiToken.objects.get(pk=data["id"]).user == user
    assert data["scopes"] == ["owners:*", "publish:*", "tokens", "yank:*"]


def test_a_session_delete_needs_the_csrf_token_too(user: AbstractBaseUser) -> None:
    from tests.factories import make_token

    make_token(user)
    row = ApiToken.objects.get()
    client = session_client(user)
    csrf = csrf_token(client)
    error_of(client.delete(URL, {"id": row.pk}, content_type="application/json"), 403, "forbidden")
    row.refresh_from_db()
    assert row.revoked_at is None
    response = client.delete(URL, {"id": row.pk}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200, response.content
    row.refresh_from_db()
    assert row.revoked_at is not None


# --- the secret ----------------------------------------------------------------------------------


def test_the_secret_is_shown_once_and_listings_show_prefixes_only(client: Client, token: str) -> None:
    data = created(create(client, {"name": "ci", "scopes": ["yank:*"]}, **bearer(token)))
    secret = data["token"]
    response = client.get(URL, **bearer(token))
    assert response.status_code == 200
    text = response.content.decode()
    assert secret not in text and token not in text
    assert hashlib.sha256(secret.encode()).hexdigest() not in text
    listed = response.json()["data"]
    assert [t["prefix"] for t in listed] == [secret[:12], token[:12]]
    for item in listed:
        assert set(item) == {"id", "name", "prefix", "scopes", "created_at", "expires_at", "last_used_at", "revoked_at"}
        assert len(item["prefix"]) == 12 and item["prefix"].startswith("pvr_")


def test_only_the_sha256_digest_of_the_secret_is_stored(client: Client, token: str) -> None:
    secret = created(create(client, {"name": "ci"}, **bearer(token)))["token"]
    row = ApiToken.objects.get(prefix=secret[:12])
    assert row.digest == hashlib.sha256(secret.encode()).hexdigest()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")  # noqa: S608 - a constant table name
        rows = cursor.fetchall()
    assert len(rows) == 2
    stored = repr(rows)
    for value in (secret, token):
        assert value not in stored
        assert value[12:] not in stored  # nor its secret part anywhere
        assert value[12:24] not in stored


# --- scopes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scopes",
    [["publish:*"], ["yank:etcd"], ["owners:etcd"], ["publish:kube-proxy", "yank:*", "owners:etcd"]],
)
def test_it_accepts_valid_scopes(client: Client, token: str, scopes: list[str]) -> None:
    data = created(create(client, {"name": "x", "scopes": scopes}, **bearer(token)))
    assert data["scopes"] == sorted(scopes)


@pytest.mark.parametrize(
    "scope",
    ["admin:*", "publish:Bad_Name", "publish:", "publish", "*", "publish:etcd:x", "Publish:*", "publish: *", "read:*"],
)
def test_it_refuses_an_invalid_scope_naming_what_is_allowed(client: Client, token: str, scope: str) -> None:
    error = error_of(create(client, {"name": "x", "scopes": ["publish:*", scope]}, **bearer(token)), 400, "bad_request")
    assert ALLOWED in error["message"]
    assert repr(scope) in error["message"]
    assert error["details"] == [{"path": "scopes", "message": error["message"]}]
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize(
    "scopes",
    [[], "publish:*", {"publish": "*"}, [["publish:*"]], [None], ["x" * 81]],
)
def test_it_refuses_scopes_that_are_not_a_list_of_scopes(client: Client, token: str, scopes: Any) -> None:
    error_of(create(client, {"name": "x", "scopes": scopes}, **bearer(token)), 400, "bad_request")
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize(
    ("held", "wanted"),
    [
        (["publish:etcd"], ["publish:*"]),
        (["publish:etcd"], ["publish:other"]),
        (["publish:etcd"], ["yank:etcd"]),
        (["publish:etcd"], ["publish:etcd", "owners:etcd"]),
        (["publish:*"], ["yank:*"]),
        (["yank:*"], ["owners:etcd"]),
    ],
)
def test_a_token_cannot_grant_scopes_it_lacks(client: Client, user: Any, held: list[str], wanted: list[str]) -> None:
    from tests.factories import make_token

    scoped = make_token(user, scopes=[*held, "tokens"])
    error = error_of(create(client, {"name": "x", "scopes": wanted}, **bearer(scoped)), 403, "forbidden")
    assert "can only grant scopes it has" in error["message"]
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize(
    ("held", "wanted"),
    [
        (["publish:etcd"], ["publish:etcd"]),
        (["publish:*"], ["publish:etcd"]),
        (["publish:*", "yank:*"], ["yank:etcd", "publish:*"]),
        ([], ["tokens"]),
    ],
)
def test_a_token_can_grant_scopes_it_has(client: Client, user: Any, held: list[str], wanted: list[str]) -> None:
    from tests.factories import make_token

    scoped = make_token(user, scopes=[*held, "tokens"])
    assert created(create(client, {"name": "x", "scopes": wanted}, **bearer(scoped)))["scopes"] == sorted(wanted)


# --- expiry --------------------------------------------------------------------------------------


@pytest.mark.parametrize("days", [0, -1, 3651, 10**12, "soon", 1.5, True])
def test_it_refuses_an_expiry_out_of_bounds(client: Client, token: str, days: Any) -> None:
    error = error_of(
        create(client, {"name": "x", "expires_in_days": days}, **bearer(token)),
        400,
        "bad_request",
    )
    assert error["details"][0]["path"] == "expires_in_days"
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize("days", [1, 30, 3650])
def test_a_token_expires_after_the_days_asked(client: Client, token: str, days: int) -> None:
    before = timezone.now()
    data = created(create(client, {"name": "x", "expires_in_days": days}, **bearer(token)))
    row = ApiToken.objects.get(pk=data["id"])
    assert row.expires_at is not None
    assert before + timedelta(days=days) <= row.expires_at <= timezone.now() + timedelta(days=days)
    assert data["expires_at"] == row.expires_at.isoformat()


def test_no_expiry_means_the_token_never_expires(client: Client, token: str) -> None:
    data = created(create(client, {"name": "x", "expires_in_days": None}, **bearer(token)))
    assert data["expires_at"] is None


def test_a_token_cannot_outlive_the_token_that_created_it(client: Client, user: Any) -> None:
    from tests.factories import make_token

    parent = make_token(user, expires_in_days=2)
    parent_expiry = ApiToken.objects.get().expires_at
    for body in ({"name": "longer", "expires_in_days": 30}, {"name": "forever"}):
        data = created(create(client, body, **bearer(parent)))
        assert ApiToken.objects.get(pk=data["id"]).expires_at == parent_expiry


def expire(secret: str) -> None:
    ApiToken.objects.filter(prefix=secret[:12]).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_an_expired_token_is_refused_with_401(client: Client, user: Any) -> None:
    from tests.factories import make_token

    secret = make_token(user, expires_in_days=1)
    assert whoami(client, secret).status_code == 200
    expire(secret)
    error = error_of(whoami(client, secret), 401, "unauthenticated")
    assert "expired" in error["message"]
    error_of(create(client, {"name": "x"}, **bearer(secret)), 401, "unauthenticated")
    assert ApiToken.objects.count() == 1


def test_a_revoked_token_is_refused_with_401(client: Client, token: str) -> None:
    row = ApiToken.objects.get()
    response = client.delete(URL, {"id": row.pk}, content_type="application/json", **bearer(token))
    assert response.status_code == 200
    assert response.json()["data"]["revoked_at"] is not None
    error = error_of(whoami(client, token), 401, "unauthenticated")
    assert "revoked" in error["message"]


def test_a_token_of_an_inactive_user_is_refused_with_401(client: Client, user: AbstractBaseUser, token: str) -> None:
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    error = error_of(whoami(client, token), 401, "unauthenticated")
    assert "inactive" in error["message"]


@pytest.mark.parametrize(
    "header",
    [
        "Bearer pvr_" + "A" * 43,  # well-formed, unknown
        "Bearer pvr_short",
        "Bearer not-a-token",
        "Bearer",
        "Bearer a b",
        "bearer pvr_" + "A" * 43,
    ],
)
def test_an_unknown_or_malformed_token_is_refused_with_401(client: Client, db: None, header: str) -> None:
    response = client.get(URL, HTTP_AUTHORIZATION=header)
    error_of(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == 'Bearer realm="registry"'


# --- last use ------------------------------------------------------------------------------------


def test_last_use_time_and_address_are_recorded(client: Client, token: str) -> None:
    row = ApiToken.objects.get()
    assert row.last_used_at is None and row.last_used_ip is None
    before = timezone.now()
    assert client.get(URL, REMOTE_ADDR="203.0.113.7", **bearer(token)).status_code == 200
    row.refresh_from_db()
    assert row.last_used_ip == "203.0.113.7"
    assert row.last_used_at is not None and before <= row.last_used_at <= timezone.now()
    listed = client.get(URL, **bearer(token)).json()["data"]
    assert listed[0]["last_used_at"] == row.last_used_at.isoformat()


def test_last_use_is_refreshed_once_it_is_older_than_a_minute(client: Client, token: str) -> None:
    old = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.update(last_used_at=old, last_used_ip="198.51.100.1")
    assert client.get(URL, REMOTE_ADDR="2001:db8::1", **bearer(token)).status_code == 200
    row = ApiToken.objects.get()
    assert row.last_used_at is not None and row.last_used_at > old
    assert row.last_used_ip == "2001:db8::1"


def test_a_refused_token_does_not_record_a_use(client: Client, token: str) -> None:
    expire(token)
    client.get(URL, REMOTE_ADDR="203.0.113.7", **bearer(token))
    assert ApiToken.objects.get().last_used_at is None


# --- the tokens scope: every token endpoint by every credential ----------------------------------

SCOPE_CREDENTIALS = [
    "publish:*",
    "publish:etcd",
    "yank:*",
    "yank:etcd",
    "owners:*",
    "owners:etcd",
    "publish:*+yank:*+owners:*",  # every scope but tokens
    "tokens",
    "session",
    "password",
]


def token_request(client: Client, endpoint: str, victim: int, headers: dict[str, str]) -> Any:
    if endpoint == "list":
        return client.get(URL, **headers)
    if endpoint == "create":
        return create(client, {"name": "new"}, **headers)
    if endpoint == "revoke":
        return client.delete(URL, {"id": victim}, content_type="application/json", **headers)
    return client.delete(f"{URL}{victim}/", **headers)


@pytest.mark.parametrize("credential", SCOPE_CREDENTIALS)
@pytest.mark.parametrize("endpoint", ["list", "create", "revoke", "revoke_by_path"])
def test_managing_tokens_needs_the_tokens_scope_or_a_session(
    client: Client, user: AbstractBaseUser, endpoint: str, credential: str
) -> None:
    from registry.models import AuditEvent
    from tests.factories import make_token, make_user

    make_user("bob", password="correct horse")
    bob = type(user).objects.get(username="bob")
    victim_secret = make_token(bob, scopes=("publish:*",))
    victim = ApiToken.objects.get(prefix=victim_secret[:12])
    headers: dict[str, str] = {}
    if credential == "session":
        client.force_login(bob)
    elif credential == "password":
        headers = basic("bob", "correct horse")
    else:
        headers = bearer(make_token(bob, scopes=credential.split("+")))
    before = sorted(ApiToken.objects.values_list("prefix", "revoked_at"))
    audited = AuditEvent.objects.count()

    response = token_request(client, endpoint, victim.pk, headers)

    if credential in ("tokens", "session", "password"):
        assert response.status_code == (201 if endpoint == "create" else 200), response.content
        if endpoint == "list":
            assert victim_secret[:12] in [t["prefix"] for t in response.json()["data"]]
        elif endpoint == "create":
            assert ApiToken.objects.count() == len(before) + 1
            assert AuditEvent.objects.count() == audited + 1
            assert AuditEvent.objects.order_by("-id").values_list("action", flat=True)[0] == "token_create"
        else:
            victim.refresh_from_db()
            assert victim.revoked_at is not None
            assert AuditEvent.objects.count() == audited + 1
            assert AuditEvent.objects.order_by("-id").values_list("action", flat=True)[0] == "token_revoke"
        return
    error = error_of(response, 403, "forbidden")
    assert "it needs the scope tokens" in error["message"]
    assert error["details"] == [{"required_scope": "tokens"}]
    assert sorted(ApiToken.objects.values_list("prefix", "revoked_at")) == before
    assert AuditEvent.objects.count() == audited


def test_a_publish_token_cannot_revoke_its_owners_other_tokens(client: Client, user: AbstractBaseUser) -> None:
    """The leak this scope closes: alice's publish:foo token revoking her publish:* token."""
    from tests.factories import make_token

    leaked = make_token(user, scopes=("publish:foo",))
    other = make_token(user, scopes=("publish:*",))
    row = ApiToken.objects.get(prefix=other[:12])
    error_of(client.delete(f"{URL}{row.pk}/", **bearer(leaked)), 403, "forbidden")
    error_of(client.get(URL, **bearer(leaked)), 403, "forbidden")
    row.refresh_from_db()
    assert row.revoked_at is None


def test_a_token_with_only_the_tokens_scope_creates_tokens_of_that_scope_only(client: Client, user: Any) -> None:
    from tests.factories import make_token

    manager = make_token(user, scopes=("tokens",))
    assert created(create(client, {"name": "x"}, **bearer(manager)))["scopes"] == ["tokens"]
    error = error_of(create(client, {"name": "y", "scopes": ["publish:*"]}, **bearer(manager)), 403, "forbidden")
    assert "can only grant scopes it has" in error["message"]


# --- revoking ------------------------------------------------------------------------------------


def revoke(client: Client, token_id: Any, token: str) -> Any:
    return client.delete(URL, {"id": token_id}, content_type="application/json", **bearer(token))


def test_delete_revokes_the_callers_own_token(client: Client, user: Any, token: str) -> None:
    from tests.factories import make_token

    other = make_token(user, scopes=("yank:*",))
    row = ApiToken.objects.get(prefix=other[:12])
    response = revoke(client, row.pk, token)
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["id"] == row.pk and data["prefix"] == other[:12] and "token" not in data
    row.refresh_from_db()
    assert row.revoked_at is not None
    error_of(whoami(client, other), 401, "unauthenticated")
    assert whoami(client, token).status_code == 200


def test_revoking_twice_keeps_the_first_revocation(client: Client, user: Any, token: str) -> None:
    from tests.factories import make_token

    other = make_token(user)
    row = ApiToken.objects.get(prefix=other[:12])
    first = revoke(client, row.pk, token).json()["data"]["revoked_at"]
    second = revoke(client, row.pk, token).json()["data"]["revoked_at"]
    assert first == second is not None


def test_another_users_token_cannot_be_revoked(client: Client, token: str) -> None:
    from tests.factories import make_token, make_user

    bobs = make_token(make_user("bob"))
    bob_row = ApiToken.objects.get(prefix=bobs[:12])
    error = error_of(revoke(client, bob_row.pk, token), 404, "not_found")
    assert str(bob_row.pk) in error["message"]
    bob_row.refresh_from_db()
    assert bob_row.revoked_at is None
    assert whoami(client, bobs).status_code == 200
    # and bob's listing is his own
    listed = client.get(URL, **bearer(bobs)).json()["data"]
    assert [t["prefix"] for t in listed] == [bobs[:12]]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"id": 999999}, 404, "not_found"),
        ({"id": 0}, 400, "bad_request"),
        ({"id": "x"}, 400, "bad_request"),
        ({}, 400, "bad_request"),
        ([], 400, "bad_request"),
    ],
)
def test_revoking_needs_the_id_of_an_existing_token(
    client: Client, token: str, body: Any, status: int, code: str
) -> None:
    response = client.delete(URL, body, content_type="application/json", **bearer(token))
    error_of(response, status, code)
    assert ApiToken.objects.get().revoked_at is None


# --- manage.py createtoken -----------------------------------------------------------------------


def test_createtoken_prints_a_working_token(client: Client, db: None) -> None:
    out = io.StringIO()
    args = ["--scope", "publish:*", "--scope", "yank:etcd", "--scope", "tokens"]
    call_command("createtoken", "carol", "--create-user", *args, stdout=out)
    secret = out.getvalue().strip()
    assert TOKEN_RE.match(secret)
    response = whoami(client, secret)
    assert response.status_code == 200
    assert response.json()["data"][0]["scopes"] == ["publish:*", "tokens", "yank:etcd"]
    assert ApiToken.objects.get().digest == hashlib.sha256(secret.encode()).hexdigest()


def test_createtoken_defaults_to_every_scope_and_honours_expiry(db: None) -> None:
    from tests.factories import make_user

    make_user("carol")
    out = io.StringIO()
    call_command("createtoken", "carol", "--expires-in-days", "7", stdout=out)
    row = ApiToken.objects.get()
    assert row.scopes == ["owners:*", "publish:*", "tokens", "yank:*"]
    assert row.expires_at is not None
    assert abs(row.expires_at - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody"], "--create-user"),
        (["carol", "--create-user", "--scope", "admin:*"], "publish:NAME"),
        (["carol", "--create-user", "--expires-in-days", "0"], "expires_in_days"),
    ],
)
def test_createtoken_explains_what_is_wrong(db: None, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("createtoken", *args, stdout=io.StringIO())
    assert not ApiToken.objects.exists()
