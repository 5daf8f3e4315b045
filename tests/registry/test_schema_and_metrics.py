"""The documents meant for tools: the JSON Schema of extension.toml, /metrics, the OpenAPI document
and its browsable UI."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from drf_spectacular.drainage import GENERATOR_STATS
from jsonschema import Draft202012Validator
from prometheus_client.parser import text_string_to_metric_families

from extensions.manifest import manifest_schema
from registry import downloadcounts, services
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

SCHEMA_URL = "/api/v1/schema/extension.json"


# --- the JSON Schema ------------------------------------------------------------------------------


def test_the_schema_is_served_raw_as_a_valid_json_schema(client: Client, db: None) -> None:
    response = client.get(SCHEMA_URL)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/schema+json"
    document = json.loads(response.content)
    assert "success" not in document  # no envelope
    assert document == manifest_schema()
    Draft202012Validator.check_schema(document)
    assert response["ETag"] == f'"{hashlib.sha256(response.content).hexdigest()}"'
    assert "max-age" in response["Cache-Control"]


def test_the_schema_answers_304_to_its_etag_and_ignores_the_accept_header(client: Client, db: None) -> None:
    etag = client.get(SCHEMA_URL)["ETag"]
    again = client.get(SCHEMA_URL, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == etag
    assert client.get(SCHEMA_URL, HTTP_IF_NONE_MATCH='"stale"').status_code == 200
    assert client.get(SCHEMA_URL, HTTP_ACCEPT="application/schema+json").status_code == 200


# --- metrics --------------------------------------------------------------------------------------


def scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_count_what_the_database_holds(client: Client, publisher: Publisher, user: Any, token: str) -> None:
    from tests.factories import publish

    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    publisher("aws", "1.0.0", type="provider")
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.12", reason="broken")
    refused = publish(client, token, publisher.package("etcd", "3.5.9"))  # already published: a failed build
    assert refused.status_code == 202 and refused.json()["data"]["error"]["code"] == "version_exists"
    for _ in range(2):
        response = client.get("/api/v1/extensions/etcd/versions/3.5.9/download")
        b"".join(response.streaming_content)  # type: ignore[attr-defined]
    downloadcounts.flush()  # counts are written in batches, off the download path

    samples = scrape(client)
    assert samples[("registry_extensions", (("type", "taskserv"),))] == 1
    assert samples[("registry_extensions", (("type", "provider"),))] == 1
    assert samples[("registry_extensions", (("type", "cluster"),))] == 0
    assert samples[("registry_extensions", (("type", "template"),))] == 0
    assert samples[("registry_versions", ())] == 3
    assert samples[("registry_versions_yanked", ())] == 1
    assert samples[("registry_downloads_total", ())] == 2
    assert samples[("registry_builds", (("status", "succeeded"),))] == 3
    assert samples[("registry_builds", (("status", "failed"),))] == 1
    assert samples[("registry_builds", (("status", "queued"),))] == 0
    assert samples[("registry_builds", (("status", "running"),))] == 0
    [info] = [labels for (name, labels) in samples if name == "registry_info"]
    assert dict(info)["storage"] == "files"
    assert dict(info)["database"] in {"sqlite", "postgresql"}


def test_metrics_of_an_empty_registry_are_zero(client: Client, db: None) -> None:
    samples = scrape(client)
    assert samples[("registry_versions", ())] == 0
    assert samples[("registry_downloads_total", ())] == 0
    assert samples[("registry_builds", (("status", "failed"),))] == 0


# --- OpenAPI and its UI ---------------------------------------------------------------------------

READ_PATHS = {
    "/api/v1/extensions/": {"get", "post"},
    "/api/v1/extensions/{name}/": {"get"},
    "/api/v1/extensions/{type}/{name}": {"get"},
    "/api/v1/extensions/{name}/versions/{version}/": {"get"},
    "/api/v1/extensions/{name}/versions/{version}/download": {"get"},
    "/api/v1/extensions/{name}/dependents/": {"get"},
    "/api/v1/extensions/providers": {"get"},
    "/api/v1/extensions/taskservs": {"get"},
    "/api/v1/extensions/clusters": {"get"},
    "/api/v1/extensions/templates": {"get"},
    "/api/v1/schema/extension.json": {"get"},
}


def test_the_openapi_document_lists_the_read_endpoints_without_warnings(client: Client, db: None) -> None:
    GENERATOR_STATS.reset()
    with GENERATOR_STATS.silence():
        response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"].startswith("3.")
    for path, methods in READ_PATHS.items():
        assert path in document["paths"], path
        assert methods <= set(document["paths"][path]), path
    ours = re.compile(r"registry/(apis|selectors|openapi)\.py|ExtensionsApi|ExtensionListApi")
    problems = [m for m in (*GENERATOR_STATS._warn_cache, *GENERATOR_STATS._error_cache) if ours.search(m)]
    assert problems == []
    search = document["paths"]["/api/v1/extensions/"]["get"]
    assert {p["name"] for p in search["parameters"]} == {"q", "type", "keyword", "limit", "offset"}
    envelope = search["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(document["components"]["schemas"][envelope]["properties"]) == {"success", "data"}
    download = document["paths"]["/api/v1/extensions/{name}/versions/{version}/download"]["get"]
    assert set(download["responses"]) >= {"200", "302", "304", "400", "404"}
    assert "application/gzip" in download["responses"]["200"]["content"]


def test_the_docs_page_serves_its_assets_locally(client: Client, db: None) -> None:
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode("utf-8")
    assets = re.findall(r"""<(?:script|link)\b[^>]*?\b(?:src|href)=["']([^"']+)["']""", html)
    assert assets, html
    assert not re.search(r"https?://|//cdn|jsdelivr|unpkg", html)
    for asset in assets:
        assert asset.startswith("/"), asset
        fetched = client.get(asset)
        assert fetched.status_code == 200, asset
        if hasattr(fetched, "streaming_content"):
            b"".join(fetched.streaming_content)


@pytest.mark.parametrize("path", ["/api/v1/extensions/", "/api/v1/extensions/taskservs", SCHEMA_URL])
def test_reads_need_no_token(client: Client, db: None, path: str) -> None:
    assert client.get(path).status_code == 200
