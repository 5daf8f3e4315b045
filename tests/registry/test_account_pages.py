"""The web catalog for people who act (issue 14): the header's log in / log out, the account page,
API tokens (secret shown once), publishing from the browser, and the owners' controls on the
extension and version pages. Every page and form with every permission case (anonymous, a
logged-in stranger, an owner, staff as the API decides: no rights beyond ownership), CSRF
refusals, the audit log, and the number of queries of each page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client

from registry import views
from registry.models import ApiToken, AuditEvent, Ownership, Version

pytest_plugins = ["tests.factories"]

EXT = "/extensions/etcd/"


@pytest.fixture(autouse=True)
def _fresh_throttles() -> None:
    cache.clear()


@pytest.fixture
def alice(client: Client, db: None, tmp_path: Path) -> AbstractBaseUser:
    """alice owns etcd (3.5.9 and 3.5.12), published through the API."""
    from tests.factories import make_token, make_user, publish_new

    user = make_user("alice", password="correct horse battery staple")
    token = make_token(user)
    publish_new(client, token, tmp_path / "a", "etcd", "3.5.9")
    publish_new(client, token, tmp_path / "b", "etcd", "3.5.12")
    return user


@pytest.fixture
def bob(db: None) -> AbstractBaseUser:
    from tests.factories import make_user

    return make_user("bob")


def session(user: AbstractBaseUser | None = None) -> Client:
    browser = Client(enforce_csrf_checks=True)
    if user is not None:
        browser.force_login(user)
    return browser


def csrf(browser: Client, url: str) -> str:
    page = browser.get(url)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert match, page.content.decode()[:500]
    return match.group(1)


def private(response: Any) -> bool:
    directives = {d.strip() for d in response["Cache-Control"].split(",")}
    return {"private", "no-store"} <= directives and "ETag" not in response


def count_queries(browser: Client, url: str) -> int:
    """The queries of a warm GET that renders the page (the per-process caches filled by a first
    one; the copy of an anonymous page a process keeps dropped)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    browser.get(url)
    views.forget_pages()
    with CaptureQueriesContext(connection) as captured:
        assert browser.get(url).status_code == 200
    return len(captured)


def text(response: Any) -> str:
    return str(response.content.decode())


def anonymous_post(url: str, form: dict[str, Any] | None = None) -> Any:
    """A POST by a visitor who is not logged in (with their own valid CSRF token)."""
    visitor = session()
    return visitor.post(url, {"csrfmiddlewaretoken": csrf(visitor, "/accounts/login/"), **(form or {})})


def goes_to_login(response: Any, path: str) -> bool:
    return response.status_code == 302 and response["Location"].startswith(f"/accounts/login/?next={path}")


# --- the header, logging out, the account page ----------------------------------------------------


def test_the_header_says_log_in_to_a_visitor_and_names_a_logged_in_user(alice: AbstractBaseUser) -> None:
    anonymous = Client().get(EXT)
    assert 'href="/accounts/login/?next=/extensions/etcd/"' in text(anonymous)
    assert "Log out" not in text(anonymous)
    assert anonymous["Cache-Control"] == "public, max-age=0, must-revalidate" and "ETag" in anonymous

    page = session(alice).get(EXT)
    assert page.status_code == 200
    assert "Log out" in text(page) and 'class="account-user"' in text(page) and "alice</a>" in text(page)
    # A page that names its reader is stored by nobody, and never answered 304 from a validator
    # of the page as someone else saw it.
    assert private(page) and "Cookie" in page["Vary"]
    revalidated = session(alice).get(EXT, HTTP_IF_NONE_MATCH=anonymous["ETag"])
    assert revalidated.status_code == 200 and "Log out" in text(revalidated)


def test_logging_out_is_a_post_with_the_csrf_token(alice: AbstractBaseUser) -> None:
    browser = session(alice)
    assert browser.get("/accounts/logout/").status_code == 405  # a link or an image cannot log out
    assert browser.post("/accounts/logout/").status_code == 403  # no CSRF token
    assert "Log out" in text(browser.get("/account/"))
    out = browser.post("/accounts/logout/", {"csrfmiddlewaretoken": csrf(browser, "/account/")})
    assert out.status_code == 302 and out["Location"] == "/"
    assert goes_to_login(browser.get("/account/"), "/account/")


def test_the_login_page_needs_no_next_to_itself(db: None) -> None:
    page = Client().get("/accounts/login/")
    assert page.status_code == 200 and 'href="/accounts/login/"' in text(page)


def test_the_account_page_lists_the_users_extensions_builds_and_tokens(
    alice: AbstractBaseUser, bob: AbstractBaseUser, django_assert_max_num_queries: Any
) -> None:
    assert goes_to_login(Client().get("/account/"), "/account/")
    browser = session(alice)
    with django_assert_max_num_queries(8):
        page = browser.get("/account/")
    body = text(page)
    assert page.status_code == 200 and private(page)
    assert 'href="/extensions/etcd/"' in body and "3.5.12" in body
    assert body.count('class="badge status status-succeeded"') == 2  # its two builds
    assert "1 active of 1." in body and 'href="/account/tokens/"' in body
    other = text(session(bob).get("/account/"))
    assert "You own no extension yet" in other and "No builds yet." in other and "etcd" not in other


# --- API tokens -----------------------------------------------------------------------------------

TOKENS = "/account/tokens/"


def create_token(browser: Client, **form: Any) -> Any:
    body = {"name": "laptop", "scope": ["publish:*", "yank:*"], "expires_in_days": "30", **form}
    return browser.post(TOKENS, {"csrfmiddlewaretoken": csrf(browser, TOKENS), **body})


def test_a_token_is_created_with_its_secret_shown_once(alice: AbstractBaseUser, caplog: Any) -> None:
    browser = session(alice)
    created = create_token(browser, more_scopes="owners:etcd, publish:etcd")
    body = text(created)
    assert created.status_code == 201 and private(created)
    secret = re.search(r'<code id="new-token">(pvr_[A-Za-z0-9_-]{43})</code>', body)
    assert secret, body[:2000]
    token = ApiToken.objects.get(name="laptop")
    assert token.scopes == ["owners:etcd", "publish:*", "publish:etcd", "yank:*"]
    assert token.expires_at is not None and token.parent is None
    assert AuditEvent.objects.filter(action="token_create", actor_name="alice", details__name="laptop").count() == 1
    # It works against the API, and its secret is nowhere but in that one answer.
    api = Client().get("/api/v1/tokens/", HTTP_AUTHORIZATION=f"Bearer {secret.group(1)}")
    assert api.status_code == 403  # no tokens scope: authenticated, refused by the scope rule
    again = text(browser.get(TOKENS))
    assert secret.group(1) not in again and "laptop" in again and "pvr_" in again
    assert secret.group(1) not in caplog.text


def test_the_token_list_shows_scopes_creation_last_use_expiry_and_state(alice: AbstractBaseUser) -> None:
    from django.utils import timezone

    from tests.factories import make_token

    make_token(alice, scopes=["publish:etcd"], expires_in_days=1)
    ApiToken.objects.filter(scopes=["publish:etcd"]).update(
        expires_at=timezone.now() - timezone.timedelta(days=1), last_used_ip="192.0.2.7", last_used_at=timezone.now()
    )
    page = text(session(alice).get(TOKENS))
    assert "<code>publish:etcd</code>" in page and "from 192.0.2.7" in page
    assert 'state-expired">expired' in page and 'state-active">active' in page and "never" in page


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"name": ""}, "Name: This field may not be blank."),
        ({"name": "x" * 101}, "Name: Ensure this field has no more than 100 characters."),
        ({"name": "a\x1b[31mb"}, "Name: This field holds a control character (U+001B); allowed: one line of text"),
        ({"name": "a\x85b"}, "Name: This field holds a control character (U+0085); allowed: one line of text"),
        ({"scope": [], "more_scopes": ""}, "Scopes: choose at least one"),
        ({"more_scopes": "deploy:etcd"}, "is not a scope: use publish:NAME, yank:NAME or owners:NAME"),
        ({"expires_in_days": "0"}, "Expires after (days): Ensure this value is greater than or equal to 1."),
        ({"expires_in_days": "3651"}, "Ensure this value is less than or equal to 3650."),
        ({"expires_in_days": "soon"}, "Expires after (days): A valid integer is required."),
    ],
)
def test_a_bad_token_form_says_what_is_wrong_and_creates_nothing(
    alice: AbstractBaseUser, form: dict[str, Any], message: str
) -> None:
    before = ApiToken.objects.count()
    response = create_token(session(alice), **form)
    assert response.status_code == 400, text(response)[:500]
    assert message in text(response).replace("&#x27;", "'")
    assert ApiToken.objects.count() == before and 'id="new-token"' not in text(response)


def test_a_token_without_expiry_never_expires(alice: AbstractBaseUser) -> None:
    assert create_token(session(alice), expires_in_days="").status_code == 201
    assert ApiToken.objects.get(name="laptop").expires_at is None


def test_revoking_a_token_revokes_it_and_its_children(alice: AbstractBaseUser, bob: AbstractBaseUser) -> None:
    from tests.factories import make_token

    secret = make_token(alice, scopes=["publish:*", "tokens"])
    parent = ApiToken.objects.get(prefix=secret[:12])
    child = Client().post(
        "/api/v1/tokens/", {"name": "child", "scopes": ["publish:etcd"]}, "application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )  # fmt: skip
    assert child.status_code == 201
    url = f"/account/tokens/{parent.pk}/revoke/"

    assert goes_to_login(anonymous_post(url), url)
    # bob: not his token (404, nothing revoked); no CSRF token: refused.
    stranger = session(bob)
    assert stranger.post(url, {"csrfmiddlewaretoken": csrf(stranger, TOKENS)}).status_code == 404
    assert session(alice).post(url).status_code == 403
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()

    browser = session(alice)
    done = browser.post(url, {"csrfmiddlewaretoken": csrf(browser, TOKENS)})
    assert done.status_code == 303 and done["Location"] == TOKENS
    assert ApiToken.objects.filter(revoked_at__isnull=False).count() == 2
    page = text(browser.get(TOKENS))
    assert "and every token created with it" in page and 'state-revoked">revoked' in page
    assert AuditEvent.objects.filter(action="token_revoke").count() == 2
    for bad in ("0", "99999999999999999999999", "abc", "9223372036854775808"):
        response = browser.post(f"/account/tokens/{bad}/revoke/", {"csrfmiddlewaretoken": csrf(browser, TOKENS)})
        assert response.status_code == 404, bad


def test_the_tokens_pages_refuse_anonymous_and_csrf_less_requests(alice: AbstractBaseUser) -> None:
    assert goes_to_login(Client().get(TOKENS), TOKENS)
    assert session().post(TOKENS, {"name": "x", "scope": "publish:*"}).status_code == 403  # no CSRF token
    assert goes_to_login(anonymous_post(TOKENS, {"name": "x", "scope": "publish:*"}), TOKENS)
    assert session(alice).post(TOKENS, {"name": "x", "scope": "publish:*"}).status_code == 403
    assert not ApiToken.objects.filter(name="x").exists()


def test_the_tokens_page_costs_few_queries(alice: AbstractBaseUser, django_assert_max_num_queries: Any) -> None:
    from tests.factories import make_token

    for _ in range(5):
        make_token(alice)
    browser = session(alice)
    with django_assert_max_num_queries(4):
        assert browser.get(TOKENS).status_code == 200


# --- publishing from the browser ------------------------------------------------------------------

PUBLISH = "/publish/"


def upload(browser: Client, path: Path | None, kind: str = "package", *, token: str | None = None) -> Any:
    from tests.factories import autocommit_hooks

    form: dict[str, Any] = {"csrfmiddlewaretoken": token or csrf(browser, PUBLISH), "kind": kind}
    with autocommit_hooks():
        if path is None:
            return browser.post(PUBLISH, form)
        with path.open("rb") as handle:
            return browser.post(PUBLISH, {**form, "file": handle})


def test_a_package_uploaded_in_the_browser_is_published_and_lands_on_its_build(
    alice: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import package

    browser = session(alice)
    form = browser.get(PUBLISH)
    assert form.status_code == 200 and private(form) and 'enctype="multipart/form-data"' in text(form)
    response = upload(browser, package(tmp_path, "etcd", "3.6.0"))
    assert response.status_code == 303 and response["Location"].startswith("/builds/")
    build = browser.get(response["Location"])
    assert build.status_code == 200 and "Published" in text(build) and "etcd 3.6.0" in text(build)
    version = Version.objects.get(extension__name="etcd", version="3.6.0")
    assert version.published_by == alice
    assert AuditEvent.objects.filter(action="publish", actor_name="alice", version="3.6.0").exists()


def test_a_source_archive_uploaded_in_the_browser_is_built(bob: AbstractBaseUser, tmp_path: Path) -> None:
    import tarfile

    from tests.factories import write_extension

    source = write_extension(tmp_path / "src", "zookeeper", "3.9.0")
    archive = tmp_path / "zookeeper-source.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=source.name)
    browser = session(bob)
    response = upload(browser, archive, "source")
    assert response.status_code == 303
    page = text(browser.get(response["Location"]))
    assert "from a source archive" in page and "Published" in page
    assert Ownership.objects.filter(extension__name="zookeeper", user=bob).exists()


def test_a_refused_package_shows_the_builds_error_and_publishes_nothing(
    alice: AbstractBaseUser, bob: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import package

    browser = session(bob)  # etcd is alice's
    response = upload(browser, package(tmp_path, "etcd", "9.9.9"))
    assert response.status_code == 303
    page = text(browser.get(response["Location"]))
    assert "The build failed" in page and "not an owner of" in page
    assert not Version.objects.filter(version="9.9.9").exists()


def test_the_publish_form_says_what_is_missing(alice: AbstractBaseUser, tmp_path: Path) -> None:
    from tests.factories import package

    browser = session(alice)
    missing = upload(browser, None)
    assert missing.status_code == 400 and "Choose the file to upload" in text(missing)
    kind = upload(browser, package(tmp_path, "etcd", "3.6.1"), "wheel")
    assert kind.status_code == 400 and "What is the file? Choose one of: package, source." in text(kind)
    assert not Version.objects.filter(version="3.6.1").exists()


def test_the_publish_page_keeps_the_apis_size_limit_and_throttle(
    alice: AbstractBaseUser, tmp_path: Path, settings: Any
) -> None:
    from tests.factories import package

    browser = session(alice)
    path = package(tmp_path, "etcd", "3.6.2")
    settings.REGISTRY_MAX_PACKAGE_BYTES = 100
    too_big = upload(browser, path)
    assert too_big.status_code == 413 and "larger than the limit of 100 bytes" in text(too_big)
    declared = browser.post(PUBLISH, b"", content_type="multipart/form-data; boundary=x", CONTENT_LENGTH="99999999")
    assert declared.status_code == 413
    settings.REGISTRY_MAX_PACKAGE_BYTES = 50 * 1024 * 1024
    cache.clear()  # the refused uploads counted too, as they do in the API
    settings.REGISTRY_RATE_PUBLISH = "1/minute"
    assert upload(browser, path).status_code == 303
    throttled = upload(browser, package(tmp_path / "2", "etcd", "3.6.3"))
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) >= 1
    assert "Too many publishes" in text(throttled)
    assert not Version.objects.filter(version="3.6.3").exists()


def test_the_publish_page_refuses_anonymous_malformed_and_csrf_less_uploads(
    alice: AbstractBaseUser, tmp_path: Path
) -> None:
    from tests.factories import package

    path = package(tmp_path, "etcd", "3.7.0")
    assert goes_to_login(Client().get(PUBLISH), PUBLISH)
    with path.open("rb") as handle:
        assert goes_to_login(session().post(PUBLISH, {"kind": "package", "file": handle}), PUBLISH)
        handle.seek(0)
        assert session(alice).post(PUBLISH, {"kind": "package", "file": handle}).status_code == 403
    browser = session(alice)
    csrf(browser, PUBLISH)
    broken = browser.post(PUBLISH, b"--x\r\nnonsense", content_type="multipart/form-data; boundary=")
    assert broken.status_code == 400 and "not a well-formed multipart form" in text(broken)
    assert browser.post(PUBLISH, b"", CONTENT_LENGTH="many", content_type="multipart/form-data").status_code == 400
    assert not Version.objects.filter(version="3.7.0").exists()


# --- the build page follows a build live ----------------------------------------------------------


def test_a_running_build_page_has_its_script_and_a_fallback_and_its_fragment(
    alice: AbstractBaseUser, django_assert_max_num_queries: Any
) -> None:
    from builds.models import Build

    build = Build.objects.filter(status="succeeded").first()
    assert build is not None
    Build.objects.filter(pk=build.pk).update(status="running")
    page = Client().get(f"/builds/{build.pk}/")
    body = text(page)
    assert 'data-live-url="/builds/' in body and "registry/build-live.js" in body
    assert '<noscript><meta http-equiv="refresh"' in body and ">Reload</a>" in body
    assert page["Cache-Control"] == "no-store"
    with django_assert_max_num_queries(2):
        fragment = Client().get(f"/builds/{build.pk}/live")
    assert fragment.status_code == 200 and fragment["Cache-Control"] == "no-store"
    assert 'data-build-status="running"' in text(fragment) and 'data-build-final="false"' in text(fragment)
    assert "<html" not in text(fragment) and "default-src 'self'" in fragment["Content-Security-Policy"]

    Build.objects.filter(pk=build.pk).update(status="succeeded")
    done = Client().get(f"/builds/{build.pk}/live")
    assert 'data-build-final="true"' in text(done) and "ETag" in done
    final = text(Client().get(f"/builds/{build.pk}/"))
    assert "build-live.js" not in final and "refresh" not in final.split("</head>")[0]
    assert Client().get("/builds/nope/live").status_code == 404


# --- the owners' controls --------------------------------------------------------------------------


def yank(browser: Client, version: str = "3.5.9", *, page: str = EXT, **form: str) -> Any:
    body = {"csrfmiddlewaretoken": csrf(browser, page), "action": "yank", "reason": "data loss", **form}
    return browser.post(f"/extensions/etcd/{version}/yank/", body)


def owners(browser: Client, action: str, username: str) -> Any:
    body = {"csrfmiddlewaretoken": csrf(browser, EXT), "action": action, "username": username}
    return browser.post("/extensions/etcd/owners/", body)


def test_the_controls_are_shown_to_owners_only(
    alice: AbstractBaseUser, bob: AbstractBaseUser, django_assert_max_num_queries: Any
) -> None:
    from tests.factories import make_user

    staff = make_user("root")
    staff.is_staff = staff.is_superuser = True  # type: ignore[attr-defined]
    staff.save()
    for who in (None, bob, staff):
        for url in (EXT, "/extensions/etcd/3.5.9/"):
            assert 'id="owner-controls"' not in text(session(who).get(url)), (who, url)
    owner = session(alice)
    # An owner's page costs what the anonymous page costs (its own bounds are asserted in
    # tests/registry/test_catalog_read_side.py) plus the session and the user: the controls add no
    # query (what they show is already loaded).
    anonymous = {url: count_queries(Client(), url) for url in (EXT, "/extensions/etcd/3.5.9/")}
    owner.get(EXT), owner.get("/extensions/etcd/3.5.9/")
    with django_assert_max_num_queries(anonymous[EXT] + 2):
        page = owner.get(EXT)
    body = text(page)
    assert 'id="owner-controls"' in body and body.count('name="action" value="yank"') == 2
    assert 'action="/extensions/etcd/owners/"' in body and 'href="/extensions/etcd/trusted-publishers/"' in body
    assert "(the last owner cannot be removed)" in body
    with django_assert_max_num_queries(anonymous["/extensions/etcd/3.5.9/"] + 2):
        version_page = text(owner.get("/extensions/etcd/3.5.9/"))
    assert version_page.count('name="action" value="yank"') == 1 and "Add owner" not in version_page


def test_an_owner_yanks_and_unyanks_a_version_with_a_reason(alice: AbstractBaseUser) -> None:
    browser = session(alice)
    done = yank(browser)
    assert done.status_code == 303 and done["Location"] == "/extensions/etcd/#owner-controls"
    row = Version.objects.get(version="3.5.9")
    assert row.yanked and row.yanked_reason == "data loss"
    page = text(browser.get(EXT))
    assert "Yanked etcd 3.5.9" in page and 'value="unyank"' in page
    event = AuditEvent.objects.get(action="yank")
    assert event.actor_name == "alice" and event.details == {"reason": "data loss"}

    body = {"csrfmiddlewaretoken": csrf(browser, EXT), "action": "unyank", "back": "version"}
    undone = browser.post("/extensions/etcd/3.5.9/yank/", body)
    assert undone.status_code == 303 and undone["Location"] == "/extensions/etcd/3.5.9/#owner-controls"
    assert not Version.objects.get(version="3.5.9").yanked
    assert "is no longer yanked" in text(browser.get("/extensions/etcd/3.5.9/"))
    assert AuditEvent.objects.filter(action="unyank", actor_name="alice").count() == 1


@pytest.mark.parametrize(
    ("version", "form", "status", "message"),
    [
        ("3.5.9", {"reason": ""}, 400, "Reason: This field may not be blank."),
        ("3.5.9", {"reason": "x" * 513}, 400, "Reason: Ensure this field has no more than 512 characters."),
        ("3.5.9", {"reason": "a\tb"}, 400, "Reason: This field holds a control character (U+0009); allowed: one"),
        ("3.5.9", {"action": "delete"}, 400, "unknown action"),
        ("9.9.9", {}, 404, "etcd 9.9.9 does not exist"),
        ("not-a-version", {}, 400, "not-a-version"),
    ],
)
def test_a_bad_yank_says_what_is_wrong_and_changes_nothing(
    alice: AbstractBaseUser, version: str, form: dict[str, str], status: int, message: str
) -> None:
    response = yank(session(alice), version, **form)
    assert response.status_code == status, text(response)[:800]
    assert message in text(response).replace("&#x27;", "'") and private(response)
    assert not Version.objects.filter(yanked=True).exists() and not AuditEvent.objects.filter(action="yank").exists()


def test_strangers_and_staff_are_refused_the_controls(alice: AbstractBaseUser, bob: AbstractBaseUser) -> None:
    from tests.factories import make_user

    staff = make_user("root")
    staff.is_staff = staff.is_superuser = True  # type: ignore[attr-defined]
    staff.save()
    for who in (bob, staff):
        refused = yank(session(who))
        assert refused.status_code == 403 and private(refused)
        assert "Only the owners of etcd may do that" in text(refused) and "not an owner of" in text(refused)
        assert owners(session(who), "add", who.get_username()).status_code == 403
    assert not Version.objects.filter(yanked=True).exists()
    assert list(Ownership.objects.values_list("user__username", flat=True)) == ["alice"]
    # anonymous: to the login page; an owner without the CSRF token: refused
    yank_url, owners_url = "/extensions/etcd/3.5.9/yank/", "/extensions/etcd/owners/"
    assert goes_to_login(anonymous_post(yank_url, {"action": "yank", "reason": "x"}), yank_url)
    assert goes_to_login(anonymous_post(owners_url, {"action": "add", "username": "bob"}), owners_url)
    assert session(alice).post("/extensions/etcd/3.5.9/yank/", {"action": "yank", "reason": "x"}).status_code == 403
    assert session(alice).post("/extensions/etcd/owners/", {"action": "add", "username": "bob"}).status_code == 403
    assert not Version.objects.filter(yanked=True).exists() and Ownership.objects.count() == 1
    # a GET is sent back to the page, which has the controls
    back = session(alice).get("/extensions/etcd/3.5.9/yank/")
    assert back.status_code == 302 and back["Location"] == "/extensions/etcd/#owner-controls"


def test_an_owner_adds_and_removes_owners(alice: AbstractBaseUser, bob: AbstractBaseUser) -> None:
    browser = session(alice)
    added = owners(browser, "add", "bob")
    assert added.status_code == 303
    assert sorted(Ownership.objects.values_list("user__username", flat=True)) == ["alice", "bob"]
    assert "bob is now an owner of etcd" in text(browser.get(EXT))
    assert 'id="owner-controls"' in text(session(bob).get(EXT))  # bob now sees the controls

    missing = owners(browser, "add", "carol")
    assert missing.status_code == 404 and "no active user named 'carol'" in text(missing).replace("&#x27;", "'")
    invalid = owners(browser, "add", "bad name!")
    assert invalid.status_code == 400 and "Username: Enter a valid username" in text(invalid)

    removed = owners(session(bob), "remove", "alice")
    assert removed.status_code == 303
    last = owners(session(bob), "remove", "bob")
    assert last.status_code == 400 and "is the last owner of" in text(last)
    assert list(Ownership.objects.values_list("user__username", flat=True)) == ["bob"]
    events = AuditEvent.objects.filter(action__startswith="owner").order_by("id")
    assert list(events.values_list("action", "actor_name")) == [("owner_add", "alice"), ("owner_remove", "bob")]


def test_the_controls_of_a_name_that_cannot_exist_are_a_404(alice: AbstractBaseUser) -> None:
    browser = session(alice)
    token = csrf(browser, EXT)
    for url, action in [
        ("/extensions/NOPE/owners/", "add"),
        ("/extensions/nope/owners/", "add"),
        ("/extensions/nope/1.0.0/yank/", "yank"),
        ("/extensions/" + "x" * 300 + "/1.0.0/yank/", "yank"),
    ]:
        form = {"csrfmiddlewaretoken": token, "action": action, "username": "bob", "reason": "x"}
        assert browser.post(url, form).status_code == 404, url
