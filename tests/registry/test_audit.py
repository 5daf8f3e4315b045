"""The audit log (SPEC 3.4): every publish, failed publish, yank, unyank, owner change, token
creation and revocation, and failed authentication writes exactly one event with actor, address
and time, and never a secret; the log is append-only in the model, the queryset, the database and
the admin."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.test import Client, RequestFactory
from django.utils import timezone

from registry.models import ApiToken, AuditEvent

pytest_plugins = ["tests.factories"]  # imported at run time below, so pytest can rewrite its asserts

ADDRESS = "203.0.113.44"
IPV6 = "2001:db8::44"
PASSWORD = "s3cret-passw0rd-value"  # searched for in the log


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


@dataclass
class Scene:
    client: Client
    tmp_path: Path
    token: str  # alice's full token
    secrets: list[str]  # every secret a request carried or a response showed

    def bearer(self, address: str = ADDRESS) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token}", "REMOTE_ADDR": address}


@pytest.fixture
def scene(client: Client, db: None, tmp_path: Path) -> Scene:
    from tests.factories import make_token, make_user, publish_new

    alice = make_user("alice", password=PASSWORD)
    make_user("carol")
    token = make_token(alice)
    publish_new(client, token, tmp_path / "seed", "etcd", "3.5.9")
    return Scene(client, tmp_path, token, [token, PASSWORD])


def post_json(scene: Scene, url: str, body: Any, address: str = ADDRESS) -> Any:
    return scene.client.post(url, body, content_type="application/json", **scene.bearer(address))


def delete_json(scene: Scene, url: str, body: Any = None, address: str = ADDRESS) -> Any:
    return scene.client.delete(url, body, content_type="application/json", **scene.bearer(address))


YANK = "/api/v1/extensions/etcd/versions/3.5.9/yank"
OWNERS = "/api/v1/extensions/etcd/owners/"


def do_publish(scene: Scene, address: str) -> Any:
    from tests.factories import autocommit_hooks, package

    path = package(scene.tmp_path / "new", "etcd", "3.5.10")
    with autocommit_hooks(), path.open("rb") as handle:
        response = scene.client.post("/api/v1/extensions/", {"file": handle}, **scene.bearer(address))
    assert response.status_code == 202
    return response


def do_failed_publish(scene: Scene, address: str) -> Any:
    from tests.factories import autocommit_hooks, package

    path = package(scene.tmp_path / "again", "etcd", "3.5.9")  # already published
    with autocommit_hooks(), path.open("rb") as handle:
        response = scene.client.post("/api/v1/extensions/", {"file": handle}, **scene.bearer(address))
    assert response.status_code == 202 and response.json()["data"]["error"]["code"] == "version_exists"
    return response


def do_yank(scene: Scene, address: str) -> Any:
    response = post_json(scene, YANK, {"reason": "CVE-2024-0001"}, address)
    assert response.status_code == 200
    return response


def prepare_unyank(scene: Scene) -> None:
    assert post_json(scene, YANK, {"reason": "oops"}).status_code == 200


def do_unyank(scene: Scene, address: str) -> Any:
    response = delete_json(scene, YANK, address=address)
    assert response.status_code == 200
    return response


def do_owner_add(scene: Scene, address: str) -> Any:
    response = post_json(scene, OWNERS, {"username": "carol"}, address)
    assert response.status_code == 200
    return response


def prepare_owner_remove(scene: Scene) -> None:
    assert post_json(scene, OWNERS, {"username": "carol"}).status_code == 200


def do_owner_remove(scene: Scene, address: str) -> Any:
    response = delete_json(scene, OWNERS, {"username": "carol"}, address)
    assert response.status_code == 200
    return response


def do_token_create(scene: Scene, address: str) -> Any:
    response = post_json(scene, "/api/v1/tokens/", {"name": "ci", "scopes": ["publish:etcd"]}, address)
    assert response.status_code == 201
    scene.secrets.append(response.json()["data"]["token"])
    return response


def prepare_token_revoke(scene: Scene) -> None:
    from tests.factories import make_token

    scene.secrets.append(make_token(get_user_model().objects.get(username="alice"), ("yank:*",)))


def do_token_revoke(scene: Scene, address: str) -> Any:
    row = ApiToken.objects.get(prefix=scene.secrets[-1][:12])
    response = delete_json(scene, "/api/v1/tokens/", {"id": row.pk}, address)
    assert response.status_code == 200
    return response


def do_auth_failure(scene: Scene, address: str) -> Any:
    guessed = "pvr_" + "Z" * 43
    scene.secrets.append(guessed)
    response = scene.client.get("/api/v1/tokens/", HTTP_AUTHORIZATION=f"Bearer {guessed}", REMOTE_ADDR=address)
    assert response.status_code == 401
    return response


def do_password_failure(scene: Scene, address: str) -> Any:
    wrong = "alice:" + PASSWORD + "-wrong"
    scene.secrets.append(PASSWORD + "-wrong")
    raw = base64.b64encode(wrong.encode()).decode()
    response = scene.client.post(
        "/api/v1/tokens/",
        {"name": "x"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Basic {raw}",
        REMOTE_ADDR=address,
    )
    assert response.status_code == 401
    return response


@dataclass(frozen=True)
class Case:
    act: Callable[[Scene, str], Any]
    action: str
    actor: str  # "" for an anonymous failure
    extension: str = ""
    version: str = ""
    details: Callable[[dict[str, Any]], bool] = lambda d: True
    prepare: Callable[[Scene], None] | None = None


CASES = {
    "publish": Case(
        do_publish,
        "publish",
        "alice",
        "etcd",
        "3.5.10",
        lambda d: d["first_publish"] is False and len(d["sha256"]) == 64,
    ),
    "failed_publish": Case(
        do_failed_publish, "publish_failed", "alice", "etcd", "3.5.9", lambda d: d["code"] == "version_exists"
    ),
    "yank": Case(do_yank, "yank", "alice", "etcd", "3.5.9", lambda d: d == {"reason": "CVE-2024-0001"}),
    "unyank": Case(
        do_unyank, "unyank", "alice", "etcd", "3.5.9", lambda d: d == {"previous_reason": "oops"}, prepare_unyank
    ),
    "owner_add": Case(do_owner_add, "owner_add", "alice", "etcd", "", lambda d: d == {"owner": "carol"}),
    "owner_remove": Case(
        do_owner_remove, "owner_remove", "alice", "etcd", "", lambda d: d == {"owner": "carol"}, prepare_owner_remove
    ),
    "token_create": Case(do_token_create, "token_create", "alice", details=lambda d: d["scopes"] == ["publish:etcd"]),
    "token_revoke": Case(
        do_token_revoke,
        "token_revoke",
        "alice",
        details=lambda d: d["token"].startswith("pvr_") and len(d["token"]) == 12,
        prepare=prepare_token_revoke,
    ),
    "auth_failure": Case(do_auth_failure, "auth_failure", "", details=lambda d: "unknown" in d["reason"]),
    "password_failure": Case(do_password_failure, "auth_failure", "", details=lambda d: "password" in d["reason"]),
}


def all_event_text() -> str:
    """Every stored field of every event, as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {AuditEvent._meta.db_table}")  # noqa: S608 - a constant table name
        return repr(cursor.fetchall())


@pytest.mark.parametrize("address", [ADDRESS, IPV6])
@pytest.mark.parametrize("case", list(CASES))
def test_each_action_writes_one_event_with_actor_address_and_time(scene: Scene, case: str, address: str) -> None:
    spec = CASES[case]
    if spec.prepare is not None:
        spec.prepare(scene)
    last = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    before = timezone.now()

    spec.act(scene, address)

    after = timezone.now()
    events = list(AuditEvent.objects.filter(id__gt=last).order_by("id"))
    assert [(e.action, e.address) for e in events] == [(spec.action, address)]
    event = events[0]
    assert event.actor_name == spec.actor
    if spec.actor:
        assert event.actor is not None and event.actor.get_username() == spec.actor
        assert event.token_prefix == scene.token[:12]
    else:
        assert event.actor is None
    assert (event.extension, event.version) == (spec.extension, spec.version)
    assert isinstance(event.at, datetime) and before <= event.at <= after
    assert spec.details(event.details), event.details
    stored = all_event_text()
    for secret in scene.secrets:
        assert secret not in stored
        assert secret[12:] not in stored  # not even the part after the displayed prefix
    assert json.dumps(event.details)  # plain JSON


def test_a_yank_of_a_yanked_version_writes_no_second_event(scene: Scene) -> None:
    for _ in range(2):
        assert post_json(scene, YANK, {"reason": "broken"}).status_code == 200
    assert AuditEvent.objects.filter(action="yank").count() == 1


def test_a_refused_action_writes_no_success_event(scene: Scene) -> None:
    from tests.factories import make_token, make_user

    bobs = make_token(make_user("bob"))
    response = scene.client.post(
        YANK, {"reason": "mine now"}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {bobs}"
    )
    assert response.status_code == 403
    assert not AuditEvent.objects.filter(action="yank").exists()


def test_a_failed_publish_by_a_stranger_is_recorded_with_the_stranger_as_actor(scene: Scene) -> None:
    from tests.factories import autocommit_hooks, make_token, make_user, package

    bobs = make_token(make_user("bob"))
    path = package(scene.tmp_path / "bob", "etcd", "9.9.9")
    with autocommit_hooks(), path.open("rb") as handle:
        response = scene.client.post(
            "/api/v1/extensions/", {"file": handle}, HTTP_AUTHORIZATION=f"Bearer {bobs}", REMOTE_ADDR=ADDRESS
        )
    assert response.status_code == 202 and response.json()["data"]["error"]["code"] == "forbidden"
    event = AuditEvent.objects.filter(action="publish_failed").get()
    assert (event.actor_name, event.address, event.extension, event.version) == ("bob", ADDRESS, "etcd", "9.9.9")
    assert event.details["code"] == "forbidden"
    assert bobs[12:] not in all_event_text()


# --- append-only ---------------------------------------------------------------------------------


@pytest.fixture
def event(db: None) -> AuditEvent:
    return AuditEvent.objects.create(action="yank", actor_name="alice", extension="etcd", details={"reason": "x"})


def unchanged(event: AuditEvent) -> None:
    row = AuditEvent.objects.get(pk=event.pk)
    assert (row.action, row.actor_name, row.extension, row.details) == ("yank", "alice", "etcd", {"reason": "x"})


def test_saving_an_existing_event_raises(event: AuditEvent) -> None:
    event.actor_name = "mallory"
    with pytest.raises(PermissionError, match="append-only"):
        event.save()
    with pytest.raises(PermissionError, match="append-only"):
        event.save(update_fields=["actor_name"])
    unchanged(event)


def test_deleting_an_event_raises(event: AuditEvent) -> None:
    with pytest.raises(PermissionError, match="append-only"):
        event.delete()
    unchanged(event)


@pytest.mark.parametrize(
    "write",
    [
        lambda: AuditEvent.objects.update(actor_name="mallory"),
        lambda: AuditEvent.objects.filter(action="yank").update(actor_name="mallory"),
        lambda: AuditEvent.objects.all().delete(),
        lambda: AuditEvent.objects.filter(action="yank").delete(),
        lambda: AuditEvent.objects.bulk_update(
            [AuditEvent(pk=AuditEvent.objects.get().pk, actor_name="mallory")], ["actor_name"]
        ),
        lambda: AuditEvent.objects.update_or_create(pk=AuditEvent.objects.get().pk, defaults={"actor_name": "m"}),
    ],
    ids=["update", "filter-update", "delete", "filter-delete", "bulk_update", "update_or_create"],
)
def test_queryset_writes_raise(event: AuditEvent, write: Callable[[], Any]) -> None:
    with pytest.raises(PermissionError, match="append-only"), transaction.atomic():
        write()  # (bulk_update's own atomic block has no savepoint: give it one)
    unchanged(event)


def test_a_raw_sql_update_is_refused_by_the_database(event: AuditEvent) -> None:
    table = AuditEvent._meta.db_table
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET actor_name = %s WHERE id = %s", ["mallory", event.pk])  # noqa: S608
    unchanged(event)


def test_a_raw_sql_delete_is_refused_by_postgresql(event: AuditEvent) -> None:
    if connection.vendor != "postgresql":
        # SQLite keeps DELETE for the test runner's flush (see migration 0002); the model and the
        # queryset refuse it there.
        pytest.skip("raw DELETE is refused by trigger on PostgreSQL only")
    table = AuditEvent._meta.db_table
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [event.pk])  # noqa: S608
    unchanged(event)


def test_inserting_new_events_still_works(event: AuditEvent) -> None:
    AuditEvent.objects.create(action="unyank", actor_name="alice", extension="etcd")
    AuditEvent.objects.bulk_create([AuditEvent(action="auth_failure", address=ADDRESS)])
    assert AuditEvent.objects.count() == 3


# --- the admin -----------------------------------------------------------------------------------


@pytest.fixture
def superuser(db: None) -> Any:
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw")


def test_the_admin_cannot_add_change_or_delete_events(superuser: Any, event: AuditEvent) -> None:
    model_admin = admin.site._registry[AuditEvent]
    request = RequestFactory().get("/admin/registry/auditevent/")
    request.user = superuser
    assert model_admin.has_view_permission(request, event) is True
    assert model_admin.has_add_permission(request) is False
    assert model_admin.has_change_permission(request) is False
    assert model_admin.has_change_permission(request, event) is False
    assert model_admin.has_delete_permission(request) is False
    assert model_admin.has_delete_permission(request, event) is False
    assert "delete_selected" not in model_admin.get_actions(request)


def test_the_admin_pages_refuse_to_change_or_delete_an_event(superuser: Any, event: AuditEvent) -> None:
    client = Client()
    client.force_login(superuser)
    assert client.get("/admin/registry/auditevent/").status_code == 200
    assert client.get(f"/admin/registry/auditevent/{event.pk}/change/").status_code == 200  # view only
    assert client.post(f"/admin/registry/auditevent/{event.pk}/change/", {"actor_name": "mallory"}).status_code == 403
    assert client.post(f"/admin/registry/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/registry/auditevent/add/").status_code == 403
    response = client.post(
        "/admin/registry/auditevent/", {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"}
    )
    assert response.status_code in (200, 302)
    unchanged(event)
