"""The admin is read-only for the catalog: no path around the services that keep index documents
and the audit log in step."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.test import Client, RequestFactory

from registry.models import ApiToken, Extension, Version

pytest_plugins = ["tests.factories"]
pytestmark = pytest.mark.usefixtures("private_storage")


@pytest.fixture
def superuser(db: None) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.com", "pw-long-enough-123")


@pytest.mark.parametrize("model", [Extension, Version, ApiToken])
def test_catalog_rows_have_no_editable_field(superuser: Any, model: Any) -> None:
    request = RequestFactory().get("/admin/")
    request.user = superuser
    model_admin = admin.site._registry[model]
    editable = {f.name for f in model._meta.concrete_fields} - set(model_admin.get_readonly_fields(request))
    assert editable == set()
    assert model_admin.has_add_permission(request) is False
    assert model_admin.has_delete_permission(request) is False


def test_yanking_from_the_admin_changes_nothing(superuser: Any, publisher: Any) -> None:
    publisher("etcd", "3.5.9")
    version = Version.objects.get()
    client = Client()
    client.force_login(superuser)
    url = f"/admin/registry/version/{version.pk}/change/"
    assert client.get(url).status_code == 200
    client.post(url, {"yanked": "on"})
    version.refresh_from_db()
    assert version.yanked is False
    assert '"yanked":false' in Extension.objects.get(name="etcd").index_json
