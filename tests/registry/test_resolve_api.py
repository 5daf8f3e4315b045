"""Resolution through the API: the index document (canonical, cached, invalidated by publish, yank
and unyank), POST /api/v1/resolve, install plans, and the same answers from the client's side."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from django.test import Client

from extensions.index import IndexCatalogue
from extensions.resolver import resolve
from registry import resolution, services
from registry.tokens import Actor

if TYPE_CHECKING:
    from tests.factories import Publisher
    from tests.live_registry import LiveRegistry

pytest_plugins = ["tests.factories"]
pytestmark = pytest.mark.usefixtures("private_storage")


def _index(client: Client, name: str, **headers: str) -> Any:
    return client.get(f"/api/v1/index/{name}", **headers)


# --- the index document -------------------------------------------------------------------------------


def test_the_index_document_lists_every_version_in_canonical_bytes(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12", keywords=("kv",))
    response = _index(client, "etcd")
    assert response.status_code == 200
    body = response.content
    doc = json.loads(body)["data"]
    assert [v["version"] for v in doc["versions"]] == ["3.5.9", "3.5.12"]  # precedence, not text order
    entry = doc["versions"][1]
    assert set(entry) == {
        "version", "sha256", "size", "yanked", "type", "dependencies", "compatibility", "provides", "published_at",
    }  # fmt: skip
    assert entry["yanked"] is False and entry["type"] == "taskserv"
    assert entry["provides"] == {"taskservs": ["etcd"]}
    assert entry["compatibility"] == {"provisioning_version": ">=1.0.0"}
    inner = body[len(b'{"success":true,"data":') : -1]
    assert response["ETag"] == f'"{hashlib.sha256(inner).hexdigest()}"'
    assert json.dumps(json.loads(inner), sort_keys=True, separators=(",", ":")).encode() == inner  # canonical
    assert response["Cache-Control"] == "public, max-age=0, must-revalidate"
    assert _index(client, "etcd").content == body  # identical data, identical bytes


def test_if_none_match_answers_304_and_head_has_no_body(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    etag = _index(client, "etcd")["ETag"]
    not_modified = _index(client, "etcd", HTTP_IF_NONE_MATCH=etag)
    assert not_modified.status_code == 304
    assert not_modified.content == b"" and not_modified["ETag"] == etag
    assert _index(client, "etcd", HTTP_IF_NONE_MATCH=f'"other", W/{etag}').status_code == 304
    assert _index(client, "etcd", HTTP_IF_NONE_MATCH='"stale"').status_code == 200
    head = client.head("/api/v1/index/etcd")
    assert head.status_code == 200 and head.content == b"" and head["ETag"] == etag


def test_an_unknown_index_is_a_404_envelope(client: Client, db: None) -> None:
    response = _index(client, "nope")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert client.post("/api/v1/index/nope").status_code == 405


def test_publish_yank_and_unyank_invalidate_the_cached_document(
    client: Client, publisher: Publisher, user: Any
) -> None:
    publisher("etcd", "3.5.9")
    first = _index(client, "etcd")
    publisher("etcd", "3.5.12")
    second = _index(client, "etcd", HTTP_IF_NONE_MATCH=first["ETag"])
    assert second.status_code == 200  # the old ETag no longer matches: the cache was refreshed
    assert [v["version"] for v in second.json()["data"]["versions"]] == ["3.5.9", "3.5.12"]

    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.12", reason="broken TLS defaults")
    yanked = _index(client, "etcd", HTTP_IF_NONE_MATCH=second["ETag"])
    assert yanked.status_code == 200
    assert [v["yanked"] for v in yanked.json()["data"]["versions"]] == [False, True]

    services.version_unyank(actor=Actor(user=user), name="etcd", version="3.5.12")
    restored = _index(client, "etcd", HTTP_IF_NONE_MATCH=yanked["ETag"])
    assert restored.status_code == 200
    assert restored.content == second.content  # back to the same data, so the same bytes and ETag
    assert restored["ETag"] == second["ETag"]


# --- POST /api/v1/resolve (embedded, through the test client) --------------------------------------------


def _resolve(client: Client, body: Any) -> Any:
    return client.post("/api/v1/resolve", data=json.dumps(body), content_type="application/json")


def test_resolve_picks_the_newest_versions_that_satisfy_every_constraint(client: Client, publisher: Publisher) -> None:
    publisher("containerd", "1.7.13")
    publisher("containerd", "2.0.2")
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    publisher("kubernetes", "1.28.6", dependencies=("containerd ^1.7", "etcd >=3.5, <4"))
    response = _resolve(client, {"requirements": ["kubernetes ^1.28"]})
    assert response.status_code == 200, response.content
    data = response.json()["data"]
    assert data["install_order"] == ["containerd", "etcd", "kubernetes"]
    chosen = {r["name"]: r["version"] for r in data["resolved"]}
    assert chosen == {"containerd": "1.7.13", "etcd": "3.5.12", "kubernetes": "1.28.6"}
    kubernetes = data["resolved"][-1]
    assert kubernetes["download_url"].endswith("/api/v1/extensions/kubernetes/versions/1.28.6/download")
    assert kubernetes["dependencies"] == ["containerd ^1.7", "etcd >=3.5, <4"]  # as written
    download = client.get(kubernetes["download_url"].split("testserver", 1)[1])
    assert hashlib.sha256(b"".join(download.streaming_content)).hexdigest() == kubernetes["sha256"]


def test_yanked_versions_are_chosen_only_when_pinned_or_locked(client: Client, publisher: Publisher, user: Any) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.12", reason="data loss")
    assert _resolve(client, {"requirements": ["etcd"]}).json()["data"]["resolved"][0]["version"] == "3.5.9"
    pinned = _resolve(client, {"requirements": ["etcd =3.5.12"]}).json()["data"]["resolved"][0]
    assert (pinned["version"], pinned["yanked"]) == ("3.5.12", True)
    locked = _resolve(client, {"requirements": ["etcd"], "locked": {"etcd": "3.5.12"}}).json()["data"]
    assert locked["resolved"][0]["version"] == "3.5.12"


def test_prereleases_runtime_and_locked_pins(client: Client, publisher: Publisher) -> None:
    publisher("cilium", "1.15.1")
    publisher("cilium", "1.16.0-rc.1")
    publisher("kube", "1.28.6")
    publisher("kube", "1.29.1", provisioning_version=">=1.2.0")
    assert _resolve(client, {"requirements": ["cilium"]}).json()["data"]["resolved"][0]["version"] == "1.15.1"
    pre = _resolve(client, {"requirements": ["cilium"], "include_prereleases": True}).json()["data"]
    assert pre["resolved"][0]["version"] == "1.16.0-rc.1"
    old_runtime = _resolve(client, {"requirements": ["kube"], "runtime_version": "1.1.0"}).json()["data"]
    assert old_runtime["resolved"][0]["version"] == "1.28.6"
    new_runtime = _resolve(client, {"requirements": ["kube"], "runtime_version": "1.4.0"}).json()["data"]
    assert new_runtime["resolved"][0]["version"] == "1.29.1"
    held = _resolve(client, {"requirements": ["kube"], "locked": {"kube": "1.28.6"}}).json()["data"]
    assert held["resolved"][0]["version"] == "1.28.6" and held["locked_ignored"] == []
    dropped = _resolve(client, {"requirements": ["kube ^1.29"], "locked": {"kube": "1.28.6"}}).json()["data"]
    assert dropped["resolved"][0]["version"] == "1.29.1"
    assert [item["name"] for item in dropped["locked_ignored"]] == ["kube"]


def test_a_conflict_is_a_422_that_explains_it(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.12")
    publisher("etcd", "4.0.1")
    publisher("kubernetes", "1.28.0", dependencies=("etcd >=3.5, <4",))
    publisher("cilium", "1.15.0", dependencies=("etcd ^4.0",))
    response = _resolve(client, {"requirements": ["kubernetes", "cilium"]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "resolution_failed"
    assert "kubernetes 1.28.0 requires etcd" in error["message"]
    assert "cilium 1.15.0 requires etcd ^4.0" in error["message"]
    conflict = next(d for d in error["details"] if d["reason"] == "conflict")
    assert conflict["name"] == "etcd"
    assert conflict["available"] == ["3.5.12", "4.0.1"]


def test_unknown_names_and_cycles_are_explained(client: Client, publisher: Publisher) -> None:
    publisher("alpha", "1.0.0")
    publisher("beta", "1.0.0", dependencies=("alpha",))
    publisher("alpha", "2.0.0", dependencies=("beta",))  # alpha 2 -> beta 1 -> alpha (any): a cycle
    unknown = _resolve(client, {"requirements": ["alpah"]})
    assert unknown.status_code == 422
    assert "did you mean 'alpha'" in unknown.json()["error"]["message"]
    cycle = _resolve(client, {"requirements": ["alpha ^2"]})
    assert cycle.status_code == 422
    error = cycle.json()["error"]
    assert "alpha -> beta -> alpha" in error["message"]
    assert error["details"][0]["cycle"] == ["alpha", "beta", "alpha"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"requirements": []},
        {"requirements": "kubernetes"},
        {"requirements": [["etcd"]]},
        {"requirements": ["x"] * 201},
        {"requirements": ["etcd"], "locked": ["etcd"]},
        {"requirements": ["etcd"], "include_prereleases": "sometimes"},
        [],
    ],
)
def test_malformed_resolve_requests_are_400(client: Client, db: None, body: Any) -> None:
    response = _resolve(client, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "bad_request"


@pytest.mark.parametrize(
    ("path", "body", "field", "said"),
    [
        ("/api/v1/resolve", {"requirements": ["etcd"], "locked": {"etcd": "3.5.9\x1b[2J"}}, "locked", "U+001B"),
        ("/api/v1/extensions/taskservs/install", {"name": "etcd", "version": "3.5\x07.9"}, "version", "U+0007"),
    ],
)
def test_control_characters_in_a_locked_version_or_an_install_s_version_are_refused(
    client: Client, db: None, path: str, body: Any, field: str, said: str
) -> None:
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    error = json.dumps(response.json()["error"])
    assert field in error and said in error and "allowed: one line of text without control characters" in error


def test_bad_requirements_and_versions_are_422_naming_the_input(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    bad = _resolve(client, {"requirements": ["etcd >>3"]})
    assert bad.status_code == 422
    assert "requirements[0]" in json.dumps(bad.json()["error"])
    runtime = _resolve(client, {"requirements": ["etcd"], "runtime_version": "one"})
    assert runtime.status_code == 422
    assert "runtime_version" in json.dumps(runtime.json()["error"])


def test_a_resolve_after_a_publish_sees_the_new_version(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    assert _resolve(client, {"requirements": ["etcd"]}).json()["data"]["resolved"][0]["version"] == "3.5.9"
    publisher("etcd", "3.5.12")
    assert _resolve(client, {"requirements": ["etcd"]}).json()["data"]["resolved"][0]["version"] == "3.5.12"


# --- install plans and client/server parity, on a live registry with every bundled example -------------


def test_the_install_plan_lists_the_set_in_order_with_what_the_host_needs(examples_registry: LiveRegistry) -> None:
    response = httpx.post(
        f"{examples_registry.url}/api/v1/extensions/taskservs/install", json={"name": "kubernetes"}, timeout=30
    )
    assert response.status_code == 200, response.text
    plan = response.json()["data"]
    assert plan["install_order"] == ["containerd", "etcd", "kubernetes"]
    versions = {e["name"]: e["version"] for e in plan["extensions"]}
    assert versions["containerd"].startswith("1.7.")  # ^1.7, although 2.0.2 is newer
    assert versions["kubernetes"] in ("1.28.6", "1.29.1")
    assert "conntrack" in plan["system_packages"]
    for entry in plan["extensions"]:
        package = httpx.get(entry["download_url"], timeout=30)
        assert hashlib.sha256(package.content).hexdigest() == entry["sha256"]
    pinned = httpx.post(
        f"{examples_registry.url}/api/v1/extensions/taskservs/install",
        json={"name": "kubernetes", "version": "1.28.6"},
        timeout=30,
    ).json()["data"]
    assert pinned["version"] == "1.28.6"
    missing = httpx.post(
        f"{examples_registry.url}/api/v1/extensions/taskservs/install", json={"name": "kubernetse"}, timeout=30
    )
    assert missing.status_code == 404
    assert "did you mean 'kubernetes'" in missing.json()["error"]["message"]


@pytest.mark.parametrize(
    "request_body",
    [
        {"requirements": ["kubernetes-ha"]},
        {"requirements": ["kubernetes-ha"], "runtime_version": "1.1.0"},
        {"requirements": ["kubernetes-single", "buildkit"]},
        {"requirements": ["cilium"], "include_prereleases": True, "runtime_version": "1.4.0"},
        {"requirements": ["grafana", "etcd-cluster"], "locked": {"etcd": "3.5.9"}},
        {"requirements": ["kubernetes ^1.29", "cilium <1.15"], "runtime_version": "1.4.0"},
        {"requirements": ["kubernetes ^1.29"], "runtime_version": "1.1.0"},
    ],
)
def test_the_client_and_the_server_resolve_alike(examples_registry: LiveRegistry, request_body: dict[str, Any]) -> None:
    server = httpx.post(f"{examples_registry.url}/api/v1/resolve", json=request_body, timeout=30)

    def load(name: str) -> Any:
        response = httpx.get(f"{examples_registry.url}/api/v1/index/{name}", timeout=30)
        return response.json()["data"] if response.status_code == 200 else None

    try:
        local = resolve(
            request_body["requirements"],
            IndexCatalogue(load),
            runtime_version=request_body.get("runtime_version"),
            include_prereleases=request_body.get("include_prereleases", False),
            locked=request_body.get("locked"),
        )
    except Exception as exc:  # noqa: BLE001 - compared with the server's failure below
        assert server.status_code == 422
        assert server.json()["error"]["message"] == str(exc)
        return
    assert server.status_code == 200, server.text
    data = server.json()["data"]
    assert data["install_order"] == local.install_order
    assert {r["name"]: (r["version"], r["sha256"]) for r in data["resolved"]} == {
        name: (str(c.version), c.sha256) for name, c in local.resolved.items()
    }


def test_every_bundled_example_resolves(examples_registry: LiveRegistry, tmp_path: Path) -> None:
    names = sorted({p.parts[-3] for p in Path("extensions").glob("*/*/*/extension.toml")})
    for name in names:
        response = httpx.post(f"{examples_registry.url}/api/v1/resolve", json={"requirements": [name]}, timeout=30)
        assert response.status_code == 200, (name, response.text)


def test_the_install_plan_checks_the_kind_and_takes_constraints(examples_registry: LiveRegistry) -> None:
    def plan(kinds: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{examples_registry.url}/api/v1/extensions/{kinds}/install", json=body, timeout=30)

    wrong = plan("taskservs", {"name": "etcd-cluster"})
    assert wrong.status_code == 404
    assert wrong.json()["error"]["message"] == (
        "'etcd-cluster' is a cluster, not a taskserv: use POST /api/v1/extensions/clusters/install"
    )
    assert plan("clusters", {"name": "etcd-cluster"}).json()["data"]["kind"] == "cluster"
    assert plan("providers", {"name": "kubernetes"}).status_code == 404
    ranged = plan("taskservs", {"name": "kubernetes", "version": "~1.28"})
    assert ranged.status_code == 200
    assert ranged.json()["data"]["version"] == "1.28.6"
    bad = plan("taskservs", {"name": "kubernetes", "version": "bad"})  # as resolve answers a bad requirement
    assert bad.status_code == 422
    error = bad.json()["error"]
    assert error["code"] == "resolution_failed"
    assert error["message"].startswith("version: 'bad' is not a valid constraint")
    assert error["details"][0]["reason"] == "invalid_requirement" and error["details"][0]["path"] == "version"


def test_json_endpoints_take_no_uploads_and_resolution_is_throttled(
    client: Client, db: None, settings: Any, tmp_path: Path
) -> None:
    upload = client.post("/api/v1/resolve", {"requirements": "x", "blob": io.BytesIO(b"x" * 4096)})
    assert upload.status_code == 415
    assert upload.json()["error"]["code"] == "unsupported_media_type"
    settings.REGISTRY_RATE_RESOLVE = "3/minute"  # the refused upload above counts too
    statuses = [_resolve(client, {"requirements": ["nothing"]}).status_code for _ in range(3)]
    assert statuses == [422, 422, 429]


def test_the_install_plan_refuses_a_version_that_does_not_provide_the_name(
    client: Client, publisher: Publisher
) -> None:
    """The lookup finds `gateway` in gateway-pack's latest version; a version asked for, or the newest
    that fits the runtime, that does not provide it is a 422 naming the versions that do (as the
    client's `taskserv create` says), not a plan that installs something else."""
    both = {"taskservs": ["gateway-pack", "gateway"]}
    publisher("gateway-pack", "1.0.0", provides={"taskservs": ["gateway-pack"]})
    publisher("gateway-pack", "1.1.0", provides=both, provisioning_version=">=1.2.0")
    publisher("gateway-pack", "1.2.0", provides=both, provisioning_version=">=1.2.0")

    def plan(name: str = "gateway", **body: str) -> Any:
        data = json.dumps({"name": name, **body})
        return client.post("/api/v1/extensions/taskservs/install", data=data, content_type="application/json")

    assert plan().json()["data"]["version"] == "1.2.0"
    assert plan(version=">=1.1.0, <1.2.0").json()["data"]["version"] == "1.1.0"
    pinned = plan(version="1.0.0")
    assert pinned.status_code == 422, pinned.content
    error = pinned.json()["error"]
    assert error["code"] == "resolution_failed"
    assert error["message"] == (
        "version: '1.0.0' chooses gateway-pack 1.0.0, which does not provide taskserv 'gateway'; "
        "its versions from 1.1.0 do: ask for version '>=1.1.0'"
    )
    assert error["details"][0] == {
        "reason": "not_provided",
        "extension": "gateway-pack",
        "version": "1.0.0",
        "provided_since": "1.1.0",
        "message": error["message"].removeprefix("version: "),
    }
    older_runtime = plan(runtime_version="1.1.0")
    assert older_runtime.status_code == 422, older_runtime.content
    assert older_runtime.json()["error"]["message"] == (
        "1.0.0, the newest version of gateway-pack that fits runtime_version 1.1.0 and the dependencies' "
        "constraints, does not provide taskserv 'gateway'; its versions from 1.1.0 do, but none of them fits "
        "runtime_version 1.1.0 and the dependencies' constraints"
    )
    # A version that admits the providing ones, which the runtime rules out: no suggestion that fails too.
    ruled_out = plan(version="^1", runtime_version="1.1.0")
    assert ruled_out.status_code == 422, ruled_out.content
    assert ruled_out.json()["error"]["message"] == (
        "version: '^1' chooses gateway-pack 1.0.0, which does not provide taskserv 'gateway'; its versions from "
        "1.1.0 do, but none of them fits runtime_version 1.1.0 and the dependencies' constraints"
    )
    # The extension by its own name is what it is, at any version.
    assert plan("gateway-pack", version="1.0.0").json()["data"]["version"] == "1.0.0"


def test_the_install_plan_suggests_nothing_when_its_budget_is_spent(
    client: Client, publisher: Publisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check of the suggested fix shares the plan's budget: with none left it is not run (a
    resolution given no time is refused by the resolver), and the answer names the versions only."""
    monkeypatch.setattr(resolution, "MIN_CHECK_SECONDS", 1e9)
    publisher("gateway-pack", "1.0.0", provides={"taskservs": ["gateway-pack"]})
    publisher("gateway-pack", "1.1.0", provides={"taskservs": ["gateway-pack", "gateway"]})
    body = json.dumps({"name": "gateway", "version": "1.0.0"})
    answer = client.post("/api/v1/extensions/taskservs/install", data=body, content_type="application/json")
    assert answer.status_code == 422, answer.content
    assert answer.json()["error"]["message"] == (
        "version: '1.0.0' chooses gateway-pack 1.0.0, which does not provide taskserv 'gateway'; "
        "its versions from 1.1.0 do"
    )


def test_the_install_plan_refuses_a_version_of_another_type(client: Client, publisher: Publisher) -> None:
    """An extension that was a cluster in 1.0.0 and is a taskserv from 2.0.0: taskserv NAME at
    1.0.0 would install a cluster."""
    publisher("shifty", "1.0.0", type="cluster")
    publisher("shifty", "2.0.0", type="taskserv")

    def plan(kinds: str, **body: str) -> Any:
        data = json.dumps({"name": "shifty", **body})
        return client.post(f"/api/v1/extensions/{kinds}/install", data=data, content_type="application/json")

    assert plan("taskservs").json()["data"]["extensions"][0]["type"] == "taskserv"
    old = plan("taskservs", version="1.0.0")
    assert old.status_code == 422, old.content
    assert old.json()["error"]["message"] == (
        "version: '1.0.0' chooses shifty 1.0.0, a cluster, which does not provide taskserv 'shifty'; "
        "its versions from 2.0.0 do: ask for version '>=2.0.0'"
    )
