"""extensions.provenance (SPEC 6.2): the statement is an in-toto Statement v1 with a SLSA
Provenance v1 predicate (checked against in-toto-attestation's schemas), its DSSE envelope
verifies with the key that signed it, and every tampering is refused with its reason: the payload,
the signature, another key, another subject, not an envelope at all."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.signer import CryptoSigner

from extensions.provenance import (
    BUILD_TYPE,
    MAX_ENVELOPE_BYTES,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    BuildRecord,
    ProvenanceError,
    Publisher,
    ResolvedDependency,
    decode_payload,
    resign,
    sign,
    statement,
    summary,
    verify,
)

PACKAGE = "a" * 64
UPLOAD = "b" * 64
STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def record(**changes: Any) -> BuildRecord:
    base = BuildRecord(
        name="etcd",
        version="3.5.12",
        sha256=PACKAGE,
        kind="source",
        upload_name="etcd-3.5.12-src.tar.gz",
        upload_sha256=UPLOAD,
        upload_size=1234,
        builder_id="https://registry.example/builder",
        builder_version={"provisioning-registry": "1.2.3", "packageFormat": "1"},
        build_id="0b6f",
        started=STARTED,
        finished=STARTED + timedelta(seconds=7),
        publisher=Publisher(
            user="alice",
            via="trusted-publishing",
            token_prefix="pvr_abcd1234",
            trusted_publisher={
                "issuer": "https://token.actions.example",
                "audience": "https://registry.example",
                "claims": {"repository": "acme/etcd", "workflow": "release.yml", "ref": "refs/tags/v3.5.12"},
            },
        ),
        dependencies=(
            ResolvedDependency("base-ext", "1.4.0", "c" * 64, "https://registry.example/dl/base-ext", "^1.2"),
            ResolvedDependency("libc-ext", "2.0.1", "d" * 64, "https://registry.example/dl/libc-ext"),
        ),
        dependency_resolution={"method": "resolver", "requirements": ["base-ext ^1.2"]},
        reproducible=True,
        reproducible_note="built from source by the registry: reproducible by construction",
        build_log_uri="https://registry.example/api/v1/builds/0b6f/",
    )
    return replace(base, **changes)


@pytest.fixture(scope="module")
def signer() -> CryptoSigner:
    return CryptoSigner.generate_ed25519()


@pytest.fixture(scope="module")
def other() -> CryptoSigner:
    return CryptoSigner.generate_ed25519()


def envelope(data: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(data)
    return value


def refused(data: bytes, keys: list[Any], reason: str, **coordinates: str) -> str:
    wanted = {"name": "etcd", "version": "3.5.12", "sha256": PACKAGE, **coordinates}
    with pytest.raises(ProvenanceError) as caught:
        verify(data, keys, **wanted)
    assert caught.value.reason == reason, caught.value.message
    assert caught.value.details == [{"reason": reason}]
    return caught.value.message


# --- the statement ------------------------------------------------------------------------------------


def test_the_statement_is_an_in_toto_v1_statement_with_a_slsa_v1_predicate() -> None:
    value = statement(record())
    # Strict parsing: a field the schemas do not define is an error, not ignored.
    parsed = json_format.ParseDict(value, statement_pb2.Statement(), ignore_unknown_fields=False)
    Statement.copy_from_pb(parsed).validate()
    predicate = json_format.ParseDict(value["predicate"], provenance_pb2.Provenance(), ignore_unknown_fields=False)
    assert value["_type"] == STATEMENT_TYPE and value["predicateType"] == PREDICATE_TYPE
    assert value["subject"] == [{"name": "etcd-3.5.12.tar.gz", "digest": {"sha256": PACKAGE}}]
    build = predicate.build_definition
    assert build.build_type == BUILD_TYPE
    assert build.external_parameters["upload"]["digest"]["sha256"] == UPLOAD
    assert [d.name for d in build.resolved_dependencies] == ["etcd-3.5.12-src.tar.gz", "base-ext", "libc-ext"]
    assert build.resolved_dependencies[0].digest["sha256"] == UPLOAD
    assert build.resolved_dependencies[1].annotations["constraint"] == "^1.2"
    assert build.resolved_dependencies[2].annotations["direct"] is False
    run = predicate.run_details
    assert run.builder.id == "https://registry.example/builder"
    assert dict(run.builder.version) == {"provisioning-registry": "1.2.3", "packageFormat": "1"}
    assert run.metadata.invocation_id == "0b6f"
    assert run.metadata.started_on.ToDatetime(UTC) == STARTED
    assert run.metadata.finished_on.ToDatetime(UTC) == STARTED + timedelta(seconds=7)
    publisher = value["predicate"]["buildDefinition"]["internalParameters"]["publisher"]
    assert publisher["user"] == "alice" and publisher["via"] == "trusted-publishing"
    assert publisher["trustedPublisher"]["claims"]["repository"] == "acme/etcd"


def test_a_naive_time_is_refused_when_the_statement_is_made() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        statement(record(started=datetime(2026, 1, 1)))


def test_the_summary_says_who_from_what_when_and_whether_it_was_reproduced() -> None:
    facts = summary(statement(record(reproducible=False, reproducible_note="2 files differ")))
    assert facts["package"] == "etcd-3.5.12.tar.gz" and facts["sha256"] == PACKAGE
    assert facts["kind"] == "source" and facts["upload"]["digest"] == {"sha256": UPLOAD}
    assert facts["publisher"]["trustedPublisher"]["issuer"] == "https://token.actions.example"
    assert facts["started"] == "2026-01-02T03:04:05Z" and facts["finished"] == "2026-01-02T03:04:12Z"
    assert (facts["reproducible"], facts["reproducible_note"]) == (False, "2 files differ")
    assert [(d["name"], d["version"], d["direct"]) for d in facts["dependencies"]] == [
        ("base-ext", "1.4.0", True),
        ("libc-ext", "2.0.1", False),
    ]
    # A hostile or odd statement summarises to Nones, never raises.
    assert summary({"subject": "x", "predicate": {"buildDefinition": [1], "runDetails": "y"}})["package"] is None


# --- signing and verifying ---------------------------------------------------------------------------------


def test_a_signed_statement_verifies_with_its_key(signer: CryptoSigner) -> None:
    data = sign(statement(record()), signer)
    document = envelope(data)
    assert document["payloadType"] == PAYLOAD_TYPE
    assert [s["keyid"] for s in document["signatures"]] == [signer.public_key.keyid]
    attested = verify(data, [signer.public_key], name="etcd", version="3.5.12", sha256=PACKAGE)
    assert attested.keyid == signer.public_key.keyid
    assert attested.statement == statement(record())
    assert attested.summary()["keyid"] == signer.public_key.keyid
    assert decode_payload(data) == statement(record())


def test_a_changed_payload_is_a_bad_signature(signer: CryptoSigner) -> None:
    document = envelope(sign(statement(record()), signer))
    value = json.loads(base64.b64decode(document["payload"]))
    value["predicate"]["buildDefinition"]["internalParameters"]["publisher"]["user"] = "mallory"
    document["payload"] = base64.b64encode(json.dumps(value).encode()).decode()
    message = refused(json.dumps(document).encode(), [signer.public_key], "bad_signature")
    assert "bad signature" in message and "etcd 3.5.12" in message


def test_a_changed_signature_is_a_bad_signature(signer: CryptoSigner) -> None:
    document = envelope(sign(statement(record()), signer))
    sig = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
    sig[0] ^= 1
    document["signatures"][0]["sig"] = base64.b64encode(sig).decode()
    refused(json.dumps(document).encode(), [signer.public_key], "bad_signature")
    document["signatures"] = []
    assert "name none" in refused(json.dumps(document).encode(), [signer.public_key], "bad_signature")


def test_a_statement_signed_by_another_key_is_refused(signer: CryptoSigner, other: CryptoSigner) -> None:
    data = sign(statement(record()), other)
    message = refused(data, [signer.public_key], "bad_signature")
    assert signer.public_key.keyid[:16] in message and other.public_key.keyid[:16] in message
    # The other key's signature under the expected key's id is no better.
    document = envelope(data)
    document["signatures"][0]["keyid"] = signer.public_key.keyid
    refused(json.dumps(document).encode(), [signer.public_key], "bad_signature")
    refused(data, [], "bad_signature")


def test_re_signing_keeps_the_statement_and_only_the_new_key_verifies(
    signer: CryptoSigner, other: CryptoSigner
) -> None:
    data = sign(statement(record()), signer)
    again = resign(data, other)
    assert envelope(again)["payload"] == envelope(data)["payload"]
    assert (
        verify(again, [other.public_key], name="etcd", version="3.5.12", sha256=PACKAGE).keyid == other.public_key.keyid
    )
    refused(again, [signer.public_key], "bad_signature")


@pytest.mark.parametrize(
    ("coordinates", "shown"),
    [
        ({"sha256": "e" * 64}, "e" * 64),  # another package's bytes
        ({"version": "3.5.13"}, "etcd-3.5.13.tar.gz"),  # another version's statement
        ({"name": "etcd2"}, "etcd2-3.5.12.tar.gz"),  # another extension's
    ],
)
def test_a_statement_of_another_package_is_a_wrong_subject(
    signer: CryptoSigner, coordinates: dict[str, str], shown: str
) -> None:
    data = sign(statement(record()), signer)
    message = refused(data, [signer.public_key], "subject_mismatch", **coordinates)
    assert "wrong subject" in message and shown in message


def test_a_statement_with_two_subjects_is_a_wrong_subject(signer: CryptoSigner) -> None:
    value = statement(record())
    value["subject"].append({"name": "evil.tar.gz", "digest": {"sha256": "f" * 64}})
    refused(sign(value, signer), [signer.public_key], "subject_mismatch")


def test_a_signed_payload_that_is_not_slsa_provenance_is_refused(signer: CryptoSigner) -> None:
    value = statement(record())
    assert "in-toto Statement v1" in refused(
        sign({**value, "_type": "x"}, signer), [signer.public_key], "invalid_provenance"
    )
    other_type = {**value, "predicateType": "https://slsa.dev/provenance/v0.2"}
    assert "SLSA Provenance v1" in refused(sign(other_type, signer), [signer.public_key], "invalid_provenance")


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[]",
        b'{"payload": "eA==", "payloadType": "application/vnd.in-toto+json"}',
        b'{"payload": "eA==", "payloadType": "text/plain", "signatures": []}',
        b'{"payload": "***", "payloadType": "application/vnd.in-toto+json", "signatures": [{"sig": "00"}]}',
        b"[" * 100_000,
        b" " * (MAX_ENVELOPE_BYTES + 1),
    ],
    ids=["not-json", "a-list", "no-signatures", "another-payload-type", "not-base64", "deep", "too-large"],
)
def test_what_is_not_a_dsse_envelope_is_refused_as_such(signer: CryptoSigner, data: bytes) -> None:
    refused(data, [signer.public_key], "invalid_provenance")
