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
    "/api/v1/index/{name}": {"get"},
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
    assert {p["name"] for p in search["parameters"]} == {
        "q",
        "type",
        "keyword",
        "category",
        "runtime_version",
        "sort",
        "limit",
        "offset",
    }
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


def _openapi(client: Client) -> dict[str, Any]:
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return dict(json.loads(response.content))


def test_only_operations_that_need_a_token_carry_a_lock(client: Client, db: None) -> None:
    """Swagger draws a lock on an operation with security requirements: exactly the writes (and
    the token listing), never a public read, resolve or install plan."""
    document = _openapi(client)
    locked = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("security")
    }
    public = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if not operation.get("security")
    }
    assert ("GET", "/api/v1/tokens/") in locked
    assert ("POST", "/api/v1/extensions/") in locked
    assert ("DELETE", "/api/v1/extensions/{name}/owners/{username}/") in locked
    assert ("GET", "/api/v1/extensions/") in public
    assert ("GET", "/api/v1/extensions/{name}/owners/") in public
    assert ("POST", "/api/v1/resolve") in public
    assert ("POST", "/api/v1/extensions/{kinds}/install") in public
    assert all(method in ("GET", "POST") for method, path in public if path != "/api/v1/openapi.json")
    for path, operations in document["paths"].items():
        for operation in operations.values():
            assert {} not in operation.get("security", []), path  # no anonymous alternative on a lock


def test_every_operation_documents_its_errors_in_the_envelope(client: Client, db: None) -> None:
    document = _openapi(client)
    for path, operations in document["paths"].items():
        if path == "/api/v1/openapi.json":
            continue
        for method, operation in operations.items():
            if path != "/api/v1/index/{name}":  # asks for no token, is never throttled (the fast path)
                assert {"401", "429"} <= set(operation["responses"]), (method, path)
            if "{" in path:
                assert "404" in operation["responses"], (method, path)
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/ErrorEnvelope"), (method, path, status)
    created = document["paths"]["/api/v1/tokens/"]["post"]["responses"]["201"]["content"]["application/json"]
    envelope = document["components"]["schemas"][created["schema"]["$ref"].rsplit("/", 1)[1]]
    assert set(envelope["properties"]) == {"success", "data"}
    data = document["components"]["schemas"][envelope["properties"]["data"]["$ref"].rsplit("/", 1)[1]]
    assert {"token", "id", "prefix", "scopes"} <= set(data["properties"])


def test_author_urls_are_not_declared_as_uris(client: Client, db: None) -> None:
    """extension.toml takes any http(s) URL text (quotes and angle brackets included), which is
    not always a valid URI: the API documents homepage and repository as plain strings."""
    schemas = _openapi(client)["components"]["schemas"]
    for shape in ("ExtensionItem", "ExtensionDetail", "ExtensionLookup"):
        for field in ("homepage", "repository"):
            if field in schemas[shape]["properties"]:
                assert "format" not in schemas[shape]["properties"][field], (shape, field)


def test_parameters_carry_the_bounds_the_api_enforces(client: Client, db: None) -> None:
    document = _openapi(client)
    search = {p["name"]: p["schema"] for p in document["paths"]["/api/v1/extensions/"]["get"]["parameters"]}
    assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 100)
    assert search["offset"]["minimum"] == 0
    assert "" in search["type"]["enum"] and "taskserv" in search["type"]["enum"]
    version = document["paths"]["/api/v1/extensions/{name}/versions/{version}/"]["get"]["parameters"]
    assert {p["name"]: "pattern" in p["schema"] for p in version} == {"name": True, "version": True}
    assert client.get("/api/v1/extensions/?limit=0").status_code == 400
    assert client.get("/api/v1/extensions/?limit=101").status_code == 400
    assert client.get("/api/v1/extensions/?type=").status_code == 200  # documented: every type


@pytest.mark.parametrize(
    "path", ["/api/v1/extensions/", "/api/v1/tokens/", "/api/v1/resolve", SCHEMA_URL, "/api/v1/openapi.json"]
)
def test_options_is_a_405_in_the_envelope(client: Client, db: None, path: str) -> None:
    response = client.options(path)
    assert response.status_code == 405
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == "method_not_allowed"
    assert "OPTIONS" not in response["Allow"]


@pytest.mark.parametrize("method", ["options", "post", "put", "patch", "delete"])
def test_the_docs_page_answers_other_methods_with_a_405(client: Client, db: None, method: str) -> None:
    response = getattr(client, method)("/api/docs/")
    assert response.status_code == 405
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


def test_text_inputs_refuse_other_json_types(client: Client, token: str) -> None:
    """No coercion: a number where a string is documented is a 400, as is "1" for a number."""
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for body in ({"name": 0}, {"name": "x", "expires_in_days": "1"}, {"name": "x", "scopes": [1]}):
        response = client.post("/api/v1/tokens/", body, content_type="application/json", **headers)
        assert response.status_code == 400, (body, response.content)
    resolve = client.post(
        "/api/v1/resolve", {"requirements": ["etcd"], "include_prereleases": 1}, content_type="application/json"
    )
    assert resolve.status_code == 400
