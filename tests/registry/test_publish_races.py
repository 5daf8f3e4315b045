"""Publishes that could collide are serialised in the database: confusable names, provided names,
and tokens that disappear while a build waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from extensions.archive import inspect_package
from extensions.manifest import parse_manifest
from registry import services, storage
from registry.errors import NameTaken
from registry.models import Extension, Provide
from registry.tokens import Actor

pytest_plugins = ["tests.factories"]
pytestmark = pytest.mark.usefixtures("private_storage")


def _stored(tmp_path: Path, name: str, **kw: Any) -> tuple[Any, Any, str]:
    from tests.factories import package

    path = package(tmp_path / name, name, "1.0.0", **kw)
    info = inspect_package(path)
    with path.open("rb") as handle:
        key = storage.put_package(info.sha256, handle, info.size)
    return parse_manifest(info.manifest_text), info, key


def _race(first: tuple[Actor, tuple[Any, Any, str]], second: tuple[Actor, tuple[Any, Any, str]]) -> dict[str, str]:
    """The first commit holds its transaction open for a moment after creating its version, while
    the second tries to publish; returns how each ended."""
    created = threading.Event()
    out: dict[str, str] = {}

    def publish(label: str, actor: Actor, item: tuple[Any, Any, str], hold: bool) -> None:
        manifest, info, key = item
        try:
            if not hold:
                created.wait(10)
            with transaction.atomic():
                services.version_create(actor=actor, manifest=manifest, package=info, storage_key=key, readme_html="")
                if hold:
                    created.set()
                    time.sleep(1.0)  # the second publish is now waiting on our locks
            out[label] = "ok"
        except NameTaken as exc:
            out[label] = f"name_taken: {exc.message}"
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            out[label] = repr(exc)
        finally:
            created.set()
            connection.close()

    threads = [
        threading.Thread(target=publish, args=("first", *first, True)),
        threading.Thread(target=publish, args=("second", *second, False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return out


@pytest.mark.django_db(transaction=True)
def test_two_confusable_names_published_at_once_give_one(tmp_path: Path) -> None:
    from tests.factories import make_user

    alice, bob = Actor(user=make_user("alice")), Actor(user=make_user("bob"))
    out = _race((alice, _stored(tmp_path, "foo-bar")), (bob, _stored(tmp_path, "foobar")))
    assert out["first"] == "ok"
    assert out["second"].startswith("name_taken: 'foobar' is too similar to the existing extension 'foo-bar'")
    assert list(Extension.objects.values_list("name", flat=True)) == ["foo-bar"]


@pytest.mark.django_db(transaction=True)
def test_two_extensions_providing_one_name_at_once_give_one(tmp_path: Path) -> None:
    from tests.factories import make_user

    alice, bob = Actor(user=make_user("alice")), Actor(user=make_user("bob"))
    shared = {"taskservs": ["shared"]}
    out = _race(
        (alice, _stored(tmp_path, "alpha", provides=shared)), (bob, _stored(tmp_path, "bravo", provides=shared))
    )
    assert out["first"] == "ok"
    assert "the taskserv 'shared' is already provided by the extension 'alpha'" in out["second"]
    assert list(Provide.objects.values_list("version__extension__name", flat=True)) == ["alpha"]


def test_an_extension_name_cannot_shadow_another_owners_provided_name(client: Any, db: None, tmp_path: Path) -> None:
    from tests.factories import make_token, make_user, package, publish, refusal

    bob = make_token(make_user("bob"))
    assert (
        publish(
            client, bob, package(tmp_path / "a", "k8s-pack", "1.0.0", provides={"taskservs": ["kubernetes"]})
        ).status_code
        == 202
    )
    alice = make_token(make_user("alice"))
    shadow = package(tmp_path / "b", "kubernetes", "1.0.0", provides={"taskservs": ["kubernetes-x"]})
    status, error = refusal(publish(client, alice, shadow))
    assert status == 409, error
    assert error["code"] == "name_taken"
    assert "the taskserv 'kubernetes' provided by the extension 'k8s-pack'" in error["message"]
    assert not Extension.objects.filter(name="kubernetes").exists()


def test_revoking_a_token_revokes_the_tokens_it_created(client: Any, db: None) -> None:
    from registry.models import ApiToken
    from tests.factories import make_user

    user = make_user("alice")
    parent, parent_secret = services.token_create(actor=Actor(user=user), name="ci", scopes=None, expires_in_days=None)
    child, _ = services.token_create(
        actor=Actor(user=user, token=parent), name="child", scopes=None, expires_in_days=None
    )
    grandchild, _ = services.token_create(
        actor=Actor(user=user, token=child), name="grandchild", scopes=None, expires_in_days=None
    )
    sibling, _ = services.token_create(actor=Actor(user=user), name="laptop", scopes=None, expires_in_days=None)
    response = client.delete(f"/api/v1/tokens/{parent.pk}/", HTTP_AUTHORIZATION=f"Bearer {parent_secret}")
    assert response.status_code == 200
    revoked = {t.name: t.revoked_at is not None for t in ApiToken.objects.all()}
    assert revoked == {"ci": True, "child": True, "grandchild": True, "laptop": False}
    assert child.pk and grandchild.pk and sibling.pk


def test_a_build_whose_token_was_deleted_never_falls_back_to_full_rights(
    client: Any, db: None, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builds import services as build_services
    from builds import tasks
    from builds.models import Build
    from registry.models import ApiToken
    from tests.factories import make_token, make_user, package, publish

    user = make_user("alice")
    secret = make_token(user, scopes=("publish:foo",))
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_build, "delay", lambda build_id: sent.append(build_id))
    settings.CELERY_TASK_ALWAYS_EAGER = False
    response = publish(client, secret, package(tmp_path, "bar", "1.0.0"))
    assert response.status_code == 202
    ApiToken.objects.filter(prefix=secret[:12]).delete()  # e.g. from the admin

    build_services.build_run(sent[0])
    build = Build.objects.get(pk=sent[0])
    assert (build.status, build.error_code) == (Build.Status.FAILED, "unauthenticated")
    assert "deleted, revoked or expired" in build.error_message
    assert not Extension.objects.filter(name="bar").exists()
