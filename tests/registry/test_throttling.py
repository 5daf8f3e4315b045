"""Throttling (SPEC 3.4): failed authentications per address (REGISTRY_RATE_AUTH_FAILURE),
publishes per user (REGISTRY_RATE_PUBLISH), writes per address (REGISTRY_RATE_WRITE); a throttled
request gets 429 ``rate_limited`` in the envelope with ``Retry-After``."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client

from registry.authentication import AuthFailureThrottle
from registry.models import Version

pytest_plugins = ["tests.factories"]  # the user and token fixtures

URL = "/api/v1/tokens/"
ATTACKER = "203.0.113.9"
OTHER = "198.51.100.20"
BAD = "Bearer pvr_" + "A" * 43  # well-formed, unknown


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


@pytest.fixture
def auth_rate(settings: Any) -> None:
    settings.REGISTRY_RATE_AUTH_FAILURE = "3/minute"


def assert_rate_limited(response: Any, *, at_most: int = 60) -> int:
    assert response.status_code == 429, response.content
    assert response.json() == {
        "success": False,
        "error": {"code": "rate_limited", "message": response.json()["error"]["message"], "details": []},
    }
    message = response.json()["error"]["message"]
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= at_most
    assert f"try again in {retry_after} s" in message
    return retry_after


def fail_auth(client: Client, address: str, times: int) -> None:
    for _ in range(times):
        response = client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=address)
        assert response.status_code == 401, response.content


# --- failed authentication, per address -----------------------------------------------------------


def test_the_fourth_failed_authentication_from_an_address_is_throttled(
    client: Client, db: None, auth_rate: None
) -> None:
    fail_auth(client, ATTACKER, 3)
    assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=ATTACKER))


def test_a_valid_token_from_a_blocked_address_is_refused_too(client: Client, token: str, auth_rate: None) -> None:
    # Otherwise the block would only slow down guessing, not stop it: a blocked address learns
    # nothing, not even whether the token it sends is valid.
    fail_auth(client, ATTACKER, 3)
    assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER))


def test_a_password_from_a_blocked_address_is_refused_too(client: Client, db: None, auth_rate: None) -> None:
    from tests.factories import make_user

    make_user("bob", password="pw")
    fail_auth(client, ATTACKER, 3)
    raw = base64.b64encode(b"bob:pw").decode()
    response = client.post(
        URL, {"name": "x"}, content_type="application/json", HTTP_AUTHORIZATION=f"Basic {raw}", REMOTE_ADDR=ATTACKER
    )
    assert_rate_limited(response)


def test_wrong_passwords_count_as_failures(client: Client, db: None, auth_rate: None) -> None:
    from tests.factories import make_user

    make_user("bob", password="pw")
    raw = base64.b64encode(b"bob:wrong").decode()
    for _ in range(3):
        response = client.get(URL, HTTP_AUTHORIZATION=f"Basic {raw}", REMOTE_ADDR=ATTACKER)
        assert response.status_code == 401
    assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=ATTACKER))


def test_another_address_is_not_blocked(client: Client, token: str, auth_rate: None) -> None:
    fail_auth(client, ATTACKER, 3)
    assert client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=OTHER).status_code == 200
    # and its own failures are its own: a first failure there is a 401, not a 429
    assert client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=OTHER).status_code == 401


def test_successful_authentications_are_not_counted(client: Client, token: str, auth_rate: None) -> None:
    for _ in range(10):
        assert client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER).status_code == 200
    fail_auth(client, ATTACKER, 3)


def test_requests_without_credentials_are_not_blocked(client: Client, db: None, auth_rate: None) -> None:
    fail_auth(client, ATTACKER, 3)
    assert client.get("/api/v1/extensions/", REMOTE_ADDR=ATTACKER).status_code == 200


def test_the_block_ends_when_the_window_has_passed(
    client: Client, token: str, auth_rate: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail_auth(client, ATTACKER, 3)
    retry_after = assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER))
    later = time.time() + retry_after + 1
    monkeypatch.setattr(AuthFailureThrottle, "timer", lambda self: later)
    assert client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER).status_code == 200


def test_a_forwarded_for_header_does_not_dodge_the_block_without_proxies(
    client: Client, db: None, auth_rate: None
) -> None:
    for hop in range(3):
        response = client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR=f"10.0.0.{hop}")
        assert response.status_code == 401
    assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR="10.9.9.9"))


def test_behind_a_proxy_the_address_the_proxy_saw_is_throttled(
    client: Client, token: str, auth_rate: None, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = "10.0.0.1"
    for spoofed in ("1.1.1.1", "2.2.2.2", "3.3.3.3"):  # the client may prepend anything
        response = client.get(
            URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{spoofed}, {ATTACKER}"
        )
        assert response.status_code == 401
    assert_rate_limited(
        client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=ATTACKER)
    )
    # another client behind the same proxy is not blocked
    response = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=OTHER)
    assert response.status_code == 200


def test_a_port_added_by_the_proxy_does_not_make_another_address(
    client: Client, db: None, auth_rate: None, settings: Any
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    for port in (40001, 40002, 40003):
        response = client.get(
            URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"{ATTACKER}:{port}"
        )
        assert response.status_code == 401
    assert_rate_limited(
        client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"{ATTACKER}:40004")
    )


def test_the_default_rate_allows_twenty_failures_a_minute(client: Client, db: None) -> None:
    fail_auth(client, ATTACKER, 20)
    assert_rate_limited(client.get(URL, HTTP_AUTHORIZATION=BAD, REMOTE_ADDR=ATTACKER))


# --- publishes, per user -------------------------------------------------------------------------


@pytest.fixture
def publish_rate(settings: Any) -> None:
    settings.REGISTRY_RATE_PUBLISH = "2/minute"


def post_package(client: Client, token: str, path: Path, address: str = "192.0.2.1") -> Any:
    from tests.factories import autocommit_hooks

    with autocommit_hooks(), path.open("rb") as handle:
        return client.post(
            "/api/v1/extensions/", {"file": handle}, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address
        )


def test_the_third_publish_by_a_user_is_throttled(
    client: Client, token: str, tmp_path: Path, publish_rate: None
) -> None:
    from tests.factories import package

    for n in range(2):
        assert post_package(client, token, package(tmp_path / f"p{n}", "etcd", f"3.5.{n}")).status_code == 202
    response = post_package(client, token, package(tmp_path / "p2", "etcd", "3.5.2"), address="192.0.2.77")
    assert_rate_limited(response)
    assert sorted(Version.objects.values_list("version", flat=True)) == ["3.5.0", "3.5.1"]


def test_source_builds_count_as_publishes(client: Client, token: str, tmp_path: Path, publish_rate: None) -> None:
    from tests.factories import autocommit_hooks, package

    for n in range(2):
        assert post_package(client, token, package(tmp_path / f"p{n}", "etcd", f"3.5.{n}")).status_code == 202
    with autocommit_hooks():
        response = client.post(
            "/api/v1/builds/", {"source": b"whatever"}, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR="192.0.2.1"
        )
    assert_rate_limited(response)


def test_another_user_is_not_throttled_by_someone_elses_publishes(
    client: Client, token: str, tmp_path: Path, publish_rate: None
) -> None:
    from tests.factories import make_token, make_user, package

    for n in range(2):
        assert post_package(client, token, package(tmp_path / f"p{n}", "etcd", f"3.5.{n}")).status_code == 202
    bobs = make_token(make_user("bob"))
    assert post_package(client, bobs, package(tmp_path / "bob", "redis", "7.2.4")).status_code == 202


def test_reading_is_not_throttled_by_publishing(client: Client, token: str, tmp_path: Path, publish_rate: None) -> None:
    from tests.factories import package

    for n in range(2):
        assert post_package(client, token, package(tmp_path / f"p{n}", "etcd", f"3.5.{n}")).status_code == 202
    for _ in range(5):
        assert client.get("/api/v1/extensions/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


# --- writes, per address -------------------------------------------------------------------------


def test_writes_are_throttled_per_address(client: Client, user: AbstractBaseUser, settings: Any) -> None:
    from tests.factories import make_token

    settings.REGISTRY_RATE_WRITE = "2/minute"
    token = make_token(user)
    body = {"name": "x", "scopes": ["yank:*"]}
    for _ in range(2):
        response = client.post(
            URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER
        )
        assert response.status_code == 201
    response = client.post(
        URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=ATTACKER
    )
    assert_rate_limited(response)
    response = client.post(
        URL, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=OTHER
    )
    assert response.status_code == 201
