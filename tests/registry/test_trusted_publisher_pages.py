"""The web catalog's trusted-publisher page (SPEC 6.3: "and in the web catalog") and its login:
owners list, add and remove publishers with a session and a CSRF token; strangers see why not;
nothing per-user is ever cacheable; failed logins are throttled and audited like the API's."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client

from registry.models import AuditEvent, TrustedPublisher

pytest_plugins = ["tests.factories"]

ISSUER = "https://token.actions.githubusercontent.com"
PAGE = "/extensions/etcd/trusted-publishers/"
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _setup(settings: Any) -> None:
    cache.clear()
    settings.REGISTRY_OIDC_ISSUERS = [ISSUER]


@pytest.fixture
def alice(client: Client, db: None, tmp_path: Any) -> AbstractBaseUser:
    from tests.factories import make_token, make_user, publish_new

    user = make_user("alice", password=PASSWORD)
    publish_new(client, make_token(user), tmp_path, "etcd", "3.5.9")
    return user


def private(response: Any) -> bool:
    """Never stored by any cache: it differs per user."""
    directives = {d.strip() for d in response["Cache-Control"].split(",")}
    return {"private", "no-store"} <= directives


def browser(user: AbstractBaseUser | None = None) -> Client:
    session = Client(enforce_csrf_checks=True)
    if user is not None:
        session.force_login(user)
    return session


def csrf(session: Client, url: str = PAGE) -> str:
    page = session.get(url)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert match, page.content.decode()[:500]
    return match.group(1)


def add(session: Client, claims: str, url: str = PAGE, **form: str) -> Any:
    token = csrf(session, url)
    body = {"csrfmiddlewaretoken": token, "action": "add", "issuer": ISSUER, "claims": claims, **form}
    return session.post(url, body)


def test_an_owner_adds_and_removes_a_trusted_publisher_in_the_catalog(alice: AbstractBaseUser) -> None:
    session = browser(alice)
    page = session.get(PAGE)
    assert page.status_code == 200
    assert private(page) and "default-src 'self'" in page["Content-Security-Policy"]
    assert "No trusted publishers yet" in page.content.decode()
    assert page.content.decode().count(">Log out<") == 1  # the header's, once

    added = add(session, "repository=acme/etcd\nworkflow=release\n")
    text = added.content.decode()
    assert added.status_code == 200 and "Added trusted publisher" in text
    row = TrustedPublisher.objects.get()
    assert row.extension is not None and row.claims == {"repository": "acme/etcd", "workflow": "release"}
    assert row.audience == "http://testserver" and row.added_by == alice
    assert "repository=acme/etcd" in text and "active" in text

    removed = session.post(PAGE, {"csrfmiddlewaretoken": csrf(session), "action": "remove", "id": str(row.pk)})
    assert removed.status_code == 200 and "Removed trusted publisher" in removed.content.decode()
    assert not TrustedPublisher.objects.exists()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor_name"))
    assert ("publisher_add", "alice") in actions and ("publisher_remove", "alice") in actions


def test_bad_claims_are_shown_and_nothing_is_added(alice: AbstractBaseUser) -> None:
    session = browser(alice)
    for claims, message in [
        ("workflow=release", "at least one claim that says whose workload"),
        ("repository", "write one claim per line as NAME=VALUE"),
        ("aud=x\nrepository=a/b", "checked by the registry itself"),
    ]:
        response = add(session, claims)
        assert response.status_code == 400, claims
        assert message in response.content.decode()
    assert add(session, "repository=a/b", issuer="https://evil.example").status_code == 400
    assert not TrustedPublisher.objects.exists()


def test_what_an_author_wrote_is_shown_escaped(alice: AbstractBaseUser) -> None:
    session = browser(alice)
    response = add(session, 'repository=<script>alert("x")</script>')
    text = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in text and "&lt;script&gt;alert" in text


def test_a_stranger_sees_why_not_and_changes_nothing(alice: AbstractBaseUser, db: None) -> None:
    from tests.factories import make_user

    bob = browser(make_user("bob"))
    page = bob.get(PAGE)
    assert page.status_code == 403 and "not an owner of" in page.content.decode()
    assert private(page)
    # a crafted POST (with a valid CSRF token of bob's own session) is refused by the service
    token = bob.cookies["csrftoken"].value
    response = bob.post(
        PAGE, {"csrfmiddlewaretoken": token, "action": "add", "issuer": ISSUER, "claims": "repository=evil/x"}
    )
    assert response.status_code == 403
    assert not TrustedPublisher.objects.exists()


def test_a_form_without_its_csrf_token_is_refused(alice: AbstractBaseUser) -> None:
    session = browser(alice)
    response = session.post(PAGE, {"action": "add", "issuer": ISSUER, "claims": "repository=acme/etcd"})
    assert response.status_code == 403
    assert not TrustedPublisher.objects.exists()


def test_anyone_signed_in_reserves_a_new_name_with_a_pending_publisher(db: None) -> None:
    from tests.factories import make_user

    bob = browser(make_user("bob"))
    url = "/extensions/kvstore/trusted-publishers/"
    page = bob.get(url)
    assert page.status_code == 200 and "does not exist yet" in page.content.decode()
    response = add(bob, "repository=bob/kvstore", url=url)
    assert response.status_code == 200 and "Added pending trusted publisher" in response.content.decode()
    assert TrustedPublisher.objects.get().pending_name == "kvstore"
    assert "reserves the name for you" in bob.get(url).content.decode()
    carol = browser(make_user("carol"))
    seen = html.unescape(carol.get(url).content.decode())
    assert seen.count("bob/kvstore") == 0  # others see nothing of it but that the name is taken
    until = TrustedPublisher.objects.get().reserved_until
    assert until is not None
    assert (
        "kvstore does not exist yet, and a publisher added here would be refused: 'kvstore' is reserved by "
        f"another user's pending trusted publisher until {until:%Y-%m-%d}; choose a clearly different name"
    ) in seen
    assert "reserves the name for you" not in seen
    similar = html.unescape(carol.get("/extensions/kv-store/trusted-publishers/").content.decode())
    assert "'kv-store' is too similar to 'kvstore', which is reserved by another user's" in similar
    refused = html.unescape(add(carol, "repository=carol/kvstore", url=url).content.decode())
    assert refused.count("reserved by another user's pending trusted publisher") == 1  # the error, once
    reserved = html.unescape(carol.get("/extensions/admin/trusted-publishers/").content.decode())
    assert "a publisher added here would be refused: 'admin' is a reserved name" in reserved


def test_invalid_names_are_the_catalogs_404(db: None) -> None:
    from tests.factories import make_user

    bob = make_user("bob")
    response = browser(bob).get("/extensions/Not_Valid/trusted-publishers/")
    assert response.status_code == 404 and "not a valid name" in response.content.decode()
    # NUL, which PostgreSQL refuses in text (the CI's PostgreSQL run asks it), sent or posted.
    session = Client()  # no CSRF check: the form's token comes from no page here
    session.force_login(bob)
    for response in (
        session.get("/extensions/%00/trusted-publishers/"),
        session.post("/extensions/%00/trusted-publishers/", {"action": "add", "issuer": ISSUER, "claims": "a=b"}),
        session.post("/extensions/%00/trusted-publishers/", {"action": "remove", "id": "1"}),
    ):
        assert response.status_code == 404 and "not a valid name" in response.content.decode()


def test_the_page_asks_an_anonymous_visitor_to_log_in_then_comes_back(alice: AbstractBaseUser) -> None:
    session = browser()
    response = session.get(PAGE)
    assert response.status_code == 302 and response["Location"] == f"/accounts/login/?next={PAGE}"
    login = session.get(response["Location"])
    assert login.status_code == 200 and private(login)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.content.decode())
    assert token
    done = session.post(
        "/accounts/login/",
        {"csrfmiddlewaretoken": token.group(1), "username": "alice", "password": PASSWORD, "next": PAGE},
    )
    assert done.status_code == 302 and done["Location"] == PAGE
    assert session.get(PAGE).status_code == 200


def test_failed_logins_are_audited_and_throttled(alice: AbstractBaseUser, settings: Any) -> None:
    settings.REGISTRY_RATE_AUTH_FAILURE = "2/minute"
    session = browser()
    for _ in range(2):
        token = csrf(session, "/accounts/login/")
        wrong = session.post("/accounts/login/", {"csrfmiddlewaretoken": token, "username": "alice", "password": "x"})
        assert wrong.status_code == 200 and "Wrong username or password" in wrong.content.decode()
    assert AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_FAILURE).count() == 2
    token = csrf(session, "/accounts/login/")
    right = session.post("/accounts/login/", {"csrfmiddlewaretoken": token, "username": "alice", "password": PASSWORD})
    assert right.status_code == 429 and int(right["Retry-After"]) >= 1
    assert "Too many failed logins" in right.content.decode()
    assert "_auth_user_id" not in session.session


def test_the_extension_page_links_to_it_for_everyone_alike(alice: AbstractBaseUser, client: Client) -> None:
    page = client.get("/extensions/etcd/")
    assert PAGE in page.content.decode()
    assert "public" in page["Cache-Control"]  # the same for every visitor: nothing per-user on it
