"""Build provenance through the registry (SPEC 6.2, registry.provenance), in-process: every
publish signs a statement (package and source builds, dependencies, trusted publishing), served at
/api/v1/extensions/{name}/versions/{version}/provenance, listed on the version's document and
catalog page, a target of the signed index (as is the key), an OCI referrer of the version's
manifests; `trust check` finds a stored statement that was changed; `trust rotate provenance`
signs every statement again; `trust init` signs the versions published before it."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from securesystemslib.signer import Key, SSlibKey

from builds.models import Build
from extensions.provenance import ProvenanceError, verify
from registry import services, views
from registry.models import Version
from registry.provenance.integrity import check_provenance
from registry.provenance.models import Provenance, ProvenanceKey
from registry.tokens import Actor
from registry.trust import repository
from registry.trust.integrity import check_integrity
from tests.factories import Publisher, publish, refusal
from tests.registry.oci_tools import MANIFEST_ACCEPT, body_of, sha256_digest
from tests.registry.test_signed_index import make_updater

pytest_plugins = ["tests.factories"]

MEDIA_TYPE = "application/vnd.in-toto+json"


def provenance_url(name: str, version: str) -> str:
    return f"/api/v1/extensions/{name}/versions/{version}/provenance"


@pytest.fixture
def signed(db: None, settings: Any, private_storage: Path, tmp_path: Path) -> Path:
    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    return tmp_path / "keys"


def current_key() -> Key:
    row = ProvenanceKey.objects.get(retired_at__isnull=True)
    return SSlibKey.from_crypto(load_pem_public_key(row.public_pem.encode()))


def fetched(client: Client, name: str, version: str) -> tuple[bytes, dict[str, Any]]:
    response = client.get(provenance_url(name, version))
    assert response.status_code == 200, response.content[:500]
    data = bytes(response.content)
    return data, json.loads(base64.b64decode(json.loads(data)["payload"]))


def predicate(statement: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = statement["predicate"]
    return value


# --- served, linked, signed ---------------------------------------------------------------------------


def test_a_published_package_has_a_signed_statement_of_what_the_registry_did(
    client: Client, signed: Path, publisher: Publisher, token: str
) -> None:
    path = publisher.package("etcd", "3.5.9")
    response = publish(client, token, path)
    build = response.json()["data"]
    assert build["status"] == "succeeded", build
    version = Version.objects.get(extension__name="etcd", version="3.5.9")

    answer = client.get(provenance_url("etcd", "3.5.9"))
    assert answer.status_code == 200
    assert answer["Content-Type"] == MEDIA_TYPE
    data = bytes(answer.content)
    assert answer["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'
    assert int(answer["Content-Length"]) == len(data)
    attested = verify(data, [current_key()], name="etcd", version="3.5.9", sha256=version.sha256)
    statement = attested.statement
    assert statement["subject"] == [{"name": "etcd-3.5.9.tar.gz", "digest": {"sha256": version.sha256}}]
    definition = predicate(statement)["buildDefinition"]
    upload = path.read_bytes()
    assert definition["externalParameters"]["kind"] == "package"
    assert definition["externalParameters"]["upload"]["digest"] == {"sha256": hashlib.sha256(upload).hexdigest()}
    assert definition["externalParameters"]["upload"]["size"] == len(upload)
    publisher_facts = definition["internalParameters"]["publisher"]
    assert publisher_facts == {"user": "alice", "via": "token", "token": token[:12]}
    run = predicate(statement)["runDetails"]
    assert run["builder"]["id"] == "http://localhost/builder" or run["builder"]["id"].endswith("/builder")
    assert run["metadata"]["invocationId"] == build["id"]
    reproducibility = next(b for b in run["byproducts"] if b["name"] == "reproducibility")["annotations"]
    assert reproducibility == {"reproducible": version.reproducible, "note": version.reproducible_note}
    assert version.reproducible is True  # the registry rebuilt the upload from its own files: the same bytes

    # If-None-Match and HEAD, as a cache asks.
    assert client.get(provenance_url("etcd", "3.5.9"), HTTP_IF_NONE_MATCH=answer["ETag"]).status_code == 304
    head = client.head(provenance_url("etcd", "3.5.9"))
    assert head.status_code == 200 and head.content == b"" and head["ETag"] == answer["ETag"]

    # The version's document links it, with the digest the signed index lists.
    link = client.get("/api/v1/extensions/etcd/versions/3.5.9/").json()["data"]["provenance"]
    assert link["url"].endswith(provenance_url("etcd", "3.5.9"))
    assert link["sha256"] == hashlib.sha256(data).hexdigest()
    assert link["target"] == "provenance/etcd/etcd-3.5.9.intoto.json"
    assert link["subject"] == {"name": "etcd-3.5.9.tar.gz", "sha256": version.sha256}
    assert link["keyid"] == current_key().keyid and link["media_type"] == MEDIA_TYPE


def test_the_statement_and_the_key_are_targets_of_the_signed_index(
    client: Client, signed: Path, publisher: Publisher, tmp_path: Path
) -> None:
    publisher("etcd", "3.5.9")
    data, _ = fetched(client, "etcd", "3.5.9")
    updater = make_updater(client, tmp_path / "client")
    info = updater.get_targetinfo("provenance/etcd/etcd-3.5.9.intoto.json")
    assert info is not None and info.hashes["sha256"] == hashlib.sha256(data).hexdigest()
    assert Path(updater.download_target(info, str(tmp_path / "statement"))).read_bytes() == data
    key_info = updater.get_targetinfo("keys/provenance.pub")
    assert key_info is not None
    pem = Path(updater.download_target(key_info, str(tmp_path / "key.pem"))).read_bytes()
    assert SSlibKey.from_crypto(load_pem_public_key(pem)).keyid == current_key().keyid
    assert check_integrity() == [] and check_provenance() == []


def test_a_source_build_attests_the_source_archive_and_is_reproducible(
    client: Client, signed: Path, token: str, tmp_path: Path
) -> None:
    from tests.builds.test_source_builds import author_source, post_source, source_tarball

    archive = source_tarball(author_source(tmp_path, "etcd", "3.5.9"))
    build = post_source(client, token, archive).json()["data"]
    assert build["status"] == "succeeded", build
    version = Version.objects.get(extension__name="etcd", version="3.5.9")
    _, statement = fetched(client, "etcd", "3.5.9")
    definition = predicate(statement)["buildDefinition"]
    assert definition["externalParameters"]["kind"] == "source"
    assert definition["resolvedDependencies"][0]["digest"] == {"sha256": hashlib.sha256(archive).hexdigest()}
    assert definition["resolvedDependencies"][0]["annotations"] == {"role": "source archive"}
    assert statement["subject"][0]["digest"]["sha256"] == version.sha256 != hashlib.sha256(archive).hexdigest()
    reproducibility = next(
        b for b in predicate(statement)["runDetails"]["byproducts"] if b["name"] == "reproducibility"
    )
    assert reproducibility["annotations"]["reproducible"] is True


def test_the_statement_records_what_the_dependencies_resolved_to(
    client: Client, signed: Path, publisher: Publisher
) -> None:
    publisher("base-ext", "1.0.0")
    publisher("base-ext", "1.2.0")
    publisher("base-ext", "2.0.0")
    publisher("app-ext", "1.0.0", dependencies=["base-ext ^1.0"])
    _, statement = fetched(client, "app-ext", "1.0.0")
    definition = predicate(statement)["buildDefinition"]
    dependencies = definition["resolvedDependencies"][1:]
    base = Version.objects.get(extension__name="base-ext", version="1.2.0")
    assert [(d["name"], d["annotations"]["version"], d["digest"]["sha256"]) for d in dependencies] == [
        ("base-ext", "1.2.0", base.sha256)
    ]
    assert dependencies[0]["annotations"]["constraint"] == "^1.0" and dependencies[0]["annotations"]["direct"] is True
    assert dependencies[0]["uri"].endswith("/api/v1/extensions/base-ext/versions/1.2.0/download")
    assert definition["internalParameters"]["dependencyResolution"]["method"] == "resolver"


def test_a_refused_publish_leaves_no_statement(client: Client, signed: Path, publisher: Publisher, token: str) -> None:
    publisher("etcd", "3.5.9")
    again = publish(client, token, publisher.package("etcd", "3.5.9", description="other bytes"))
    assert refusal(again)[0] == 409
    assert Provenance.objects.count() == 1
    assert check_provenance() == [] and check_integrity() == []


# --- what is not there ----------------------------------------------------------------------------------


def test_unknown_extensions_and_versions_are_404s_naming_what_exists(
    client: Client, signed: Path, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")
    unknown = client.get(provenance_url("nothing", "1.0.0"))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    missing = client.get(provenance_url("etcd", "9.9.9"))
    assert missing.status_code == 404
    assert "3.5.9" in missing.json()["error"]["message"]
    bad = client.get(provenance_url("etcd", "not-a-version"))
    assert bad.status_code in (400, 404) and bad.json()["success"] is False
    assert client.get(provenance_url("etcd", "3.5.9+build")).status_code == 200  # build metadata is ignored


def test_a_version_published_before_the_registry_had_a_key_has_none_until_trust_init(
    client: Client, db: None, settings: Any, private_storage: Path, tmp_path: Path, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")  # no signed index yet, so no provenance key
    response = client.get(provenance_url("etcd", "3.5.9"))
    assert response.status_code == 404
    assert "has no provenance" in response.json()["error"]["message"]
    assert client.get("/api/v1/extensions/etcd/versions/3.5.9/").json()["data"]["provenance"] is None

    settings.REGISTRY_TUF_KEYS_DIR = tmp_path / "keys"
    with transaction.atomic():
        done = repository.init(root_key_dir=tmp_path / "root", bit_length=4)
    assert done.provenance_key is not None and done.provenance_key.exists()
    version = Version.objects.get(extension__name="etcd", version="3.5.9")
    data, statement = fetched(client, "etcd", "3.5.9")
    verify(data, [current_key()], name="etcd", version="3.5.9", sha256=version.sha256)
    internal = predicate(statement)["buildDefinition"]["internalParameters"]
    assert internal["recorded"].startswith("after publication")  # said so: attested after the fact
    assert internal["publisher"]["user"] == "alice"
    assert check_integrity() == [] and check_provenance() == []


# --- trusted publishing ----------------------------------------------------------------------------------


def test_a_trusted_publish_records_the_publisher_and_its_verified_claims(
    client: Client, signed: Path, tmp_path: Path, oidc_issuer: Any
) -> None:
    from tests.factories import make_token, make_user, publish_new
    from tests.registry.test_trusted_publishing import CLAIMS, EXCHANGE, add_publisher

    alice = make_user("alice")
    owner_token = make_token(alice)
    publish_new(client, owner_token, tmp_path / "seed", "etcd", "3.5.9")
    assert add_publisher(client, owner_token, "etcd", oidc_issuer.url).status_code == 201
    exchanged = client.post(EXCHANGE, {"token": oidc_issuer.mint(**CLAIMS)}, content_type="application/json")
    assert exchanged.status_code == 201, exchanged.json()
    secret = exchanged.json()["data"]["token"]
    build = publish_new(client, secret, tmp_path / "ci", "etcd", "3.5.10")
    _, statement = fetched(client, "etcd", "3.5.10")
    facts = predicate(statement)["buildDefinition"]["internalParameters"]["publisher"]
    assert facts["user"] == "alice" and facts["via"] == "trusted-publishing" and facts["token"] == secret[:12]
    trusted = facts["trustedPublisher"]
    assert trusted["issuer"] == oidc_issuer.url and trusted["audience"] == "http://testserver"
    assert {k: trusted["claims"][k] for k in CLAIMS} == CLAIMS
    assert trusted["claims"]["iss"] == oidc_issuer.url
    assert Build.objects.get(pk=build["id"]).token.oidc_claims == trusted["claims"]  # type: ignore[union-attr]
    # The catalog page says it came that way.
    page = client.get("/extensions/etcd/3.5.10/").content.decode()
    assert (
        f'Published by acme/kv-store through trusted publishing <span class="muted small">({oidc_issuer.url})</span>'
        in page
    )


# --- the operator's checks ----------------------------------------------------------------------------


def test_trust_check_finds_a_changed_or_missing_statement(client: Client, signed: Path, publisher: Publisher) -> None:
    publisher("etcd", "3.5.9")
    publisher("etcd", "3.5.12")
    call_command("trust", "check")  # all is well
    row = Provenance.objects.get(version__version="3.5.9")
    document = json.loads(row.envelope)
    statement = json.loads(base64.b64decode(document["payload"]))
    statement["predicate"]["buildDefinition"]["internalParameters"]["publisher"]["user"] = "mallory"
    document["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    Provenance.objects.filter(pk=row.pk).update(envelope=json.dumps(document))
    problems = check_provenance()
    assert any("etcd 3.5.9" in p and "bad signature" in p for p in problems), problems
    assert any("not the digest or length recorded" in p for p in problems), problems
    with pytest.raises(CommandError, match="problem"):
        call_command("trust", "check")
    Provenance.objects.filter(version__version="3.5.12").delete()
    assert "etcd 3.5.12 has no provenance" in check_provenance()


def test_rotating_the_provenance_key_signs_every_statement_again(
    client: Client, signed: Path, publisher: Publisher, tmp_path: Path
) -> None:
    publisher("etcd", "3.5.9")
    before, statement = fetched(client, "etcd", "3.5.9")
    old = current_key()
    old_file = signed / "provenance" / f"{old.keyid}.pem"
    assert old_file.exists()
    page = client.get("/extensions/etcd/3.5.9/")
    assert f"Signed by key <code>{old.keyid}</code>" in page.content.decode()
    call_command("trust", "rotate", "provenance")
    new = current_key()
    assert new.keyid != old.keyid and not old_file.exists()
    # The version page shows the new key at once: to a new reader, and as a new ETag to a cache.
    again = client.get("/extensions/etcd/3.5.9/", HTTP_IF_NONE_MATCH=page["ETag"])
    assert again.status_code == 200 and f"Signed by key <code>{new.keyid}</code>" in again.content.decode()
    after, same = fetched(client, "etcd", "3.5.9")
    assert same == statement and after != before  # the same statement, signed again
    sha256 = Version.objects.get(version="3.5.9").sha256
    verify(after, [new], name="etcd", version="3.5.9", sha256=sha256)
    with pytest.raises(ProvenanceError) as caught:
        verify(after, [old], name="etcd", version="3.5.9", sha256=sha256)
    assert caught.value.reason == "bad_signature"
    # A client that follows the signed index gets the new key.
    updater = make_updater(client, tmp_path / "client")
    info = updater.get_targetinfo("keys/provenance.pub")
    assert info is not None
    pem = Path(updater.download_target(info, str(tmp_path / "key.pem"))).read_bytes()
    assert SSlibKey.from_crypto(load_pem_public_key(pem)).keyid == new.keyid
    assert check_integrity() == [] and check_provenance() == []


# --- OCI referrers -------------------------------------------------------------------------------------


def test_the_provenance_is_an_oci_referrer_of_the_versions_manifests(
    client: Client, signed: Path, publisher: Publisher, user: Any
) -> None:
    publisher("etcd", "3.5.9")
    data, _ = fetched(client, "etcd", "3.5.9")
    subject = client.get("/v2/extensions/etcd/manifests/3.5.9", HTTP_ACCEPT=MANIFEST_ACCEPT)
    digest = subject["Docker-Content-Digest"]
    index = json.loads(client.get(f"/v2/extensions/etcd/referrers/{digest}").content)
    assert [d["artifactType"] for d in index["manifests"]] == [MEDIA_TYPE]
    descriptor = index["manifests"][0]
    assert descriptor["annotations"]["in-toto.io/predicate-type"] == "https://slsa.dev/provenance/v1"
    referrer = client.get(f"/v2/extensions/etcd/manifests/{descriptor['digest']}", HTTP_ACCEPT=MANIFEST_ACCEPT)
    assert referrer.status_code == 200 and sha256_digest(referrer.content) == descriptor["digest"]
    body = json.loads(referrer.content)
    assert body["subject"]["digest"] == digest and body["artifactType"] == MEDIA_TYPE
    [layer] = body["layers"]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json" and layer["digest"] == sha256_digest(data)
    blob = client.get(f"/v2/extensions/etcd/blobs/{layer['digest']}")
    assert blob.status_code == 200 and body_of(blob) == data
    config = client.get(f"/v2/extensions/etcd/blobs/{body['config']['digest']}")
    assert config.status_code == 200
    # Another repository does not serve it.
    publisher("redis", "7.0.0")
    assert client.get(f"/v2/extensions/redis/blobs/{layer['digest']}").status_code == 404
    assert (
        client.get(f"/v2/extensions/redis/manifests/{descriptor['digest']}", HTTP_ACCEPT=MANIFEST_ACCEPT).status_code
        == 404
    )

    # A yanked version's manifest has its own referrer, served by digest too.
    services.version_yank(actor=Actor(user=user), name="etcd", version="3.5.9", reason="broken")
    yanked = client.get("/v2/extensions/etcd/manifests/3.5.9", HTTP_ACCEPT=MANIFEST_ACCEPT)["Docker-Content-Digest"]
    assert yanked != digest
    [other] = json.loads(client.get(f"/v2/extensions/etcd/referrers/{yanked}").content)["manifests"]
    assert other["digest"] != descriptor["digest"]
    again = client.get(f"/v2/extensions/etcd/manifests/{other['digest']}", HTTP_ACCEPT=MANIFEST_ACCEPT)
    assert again.status_code == 200 and json.loads(again.content)["subject"]["digest"] == yanked


# --- the catalog ----------------------------------------------------------------------------------------


def test_the_version_page_shows_the_reproducible_mark_and_links_the_statement(
    client: Client, signed: Path, publisher: Publisher
) -> None:
    publisher("etcd", "3.5.9")
    # The version page shows it in its Trust section; the extension page in its sidebar card.
    page = client.get("/extensions/etcd/3.5.9/").content.decode()
    trust = page.split('id="trust"', 1)[1].split("</section>", 1)[0]
    assert '<dt>Reproducible</dt>\n    <dd><span class="badge badge-ok">yes</span>' in trust
    assert f'href="{provenance_url("etcd", "3.5.9")}"' in trust
    assert "provisioning extension verify etcd@3.5.9" in trust
    assert "Published by alice" in trust
    assert "Built by <code>" in trust and "From uploaded package <code" in trust
    assert page.count('id="provenance-title"') == 0  # not twice on one page
    page = client.get("/extensions/etcd/").content.decode()
    assert 'badge badge-latest">reproducible<' in page
    assert "provisioning extension verify etcd@3.5.9" in page
    Version.objects.filter(version="3.5.9").update(reproducible=False, reproducible_note="MANIFEST.json differs")
    Provenance.objects.all().delete()
    views.forget_pages()  # (rows changed by hand, which nothing announces: kept pages last KEPT_PAGE_SECONDS)
    page = client.get("/extensions/etcd/").content.decode()
    assert "not reproducible" in page and "MANIFEST.json differs" in page
    assert "No signed provenance" in page
