"""Index documents: canonical bytes, round trips into resolver candidates, refusal of bad documents,
and the lazily loading catalogue the client resolves over."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from extensions.errors import ResolutionError
from extensions.index import INDEX_FORMAT, IndexCatalogue, IndexDocumentError, parse_index, render_index
from extensions.resolver import MemoryCatalogue, resolve
from extensions.versions import Constraint, Requirement, Version

SHA_A = "a" * 64
SHA_B = "b" * 64


def entry(version: str = "1.0.0", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": version,
        "sha256": SHA_A,
        "size": 1234,
        "yanked": False,
        "type": "taskserv",
        "dependencies": {},
        "compatibility": {},
        "provides": {"taskservs": ["etcd"]},
    }
    base.update(overrides)
    return base


# -- rendering ------------------------------------------------------------------------------------


def test_it_renders_compact_sorted_json_with_versions_in_precedence_order() -> None:
    data = render_index(
        "etcd",
        [
            entry("3.5.12", dependencies={"containerd": "^1.7"}),
            entry("3.5.9", published_at="2024-03-01T12:00:00Z"),
            entry("3.5.10-rc.1"),
            entry("3.10.0"),
        ],
    )
    document = json.loads(data)
    assert document["format"] == INDEX_FORMAT == 1
    assert document["name"] == "etcd"
    assert [v["version"] for v in document["versions"]] == ["3.5.9", "3.5.10-rc.1", "3.5.12", "3.10.0"]
    assert data.startswith(b'{"format":1,"name":"etcd","versions":[{"compatibility":{},"dependencies":{},')
    assert b" " not in data.replace(b"T12:00:00Z", b"")
    assert document["versions"][0]["published_at"] == "2024-03-01T12:00:00Z"
    assert "published_at" not in document["versions"][1]
    assert document["versions"][2]["dependencies"] == {"containerd": "^1.7"}


def test_the_same_data_gives_the_same_bytes_whatever_the_input_order() -> None:
    one = render_index(
        "etcd",
        [
            entry("1.0.0", provides={"taskservs": ["b", "a"]}, dependencies={"zz": "*", "aa": "^1"}),
            entry("2.0.0", sha256=SHA_B),
        ],
    )
    two = render_index(
        "etcd",
        [
            entry("2.0.0", sha256=SHA_B),
            {**entry("1.0.0", provides={"taskservs": ["a", "b"]}, dependencies={"aa": "^1", "zz": "*"}), "extra": 1},
        ],
    )
    assert one == two


def test_it_accepts_versions_constraints_requirements_and_datetimes_as_objects() -> None:
    data = render_index(
        "etcd",
        [
            entry(
                Version.parse("1.0.0"),
                dependencies=[Requirement("containerd", Constraint.parse("^1.7")), {"name": "dd", "constraint": None}],
                compatibility={"provisioning_version": Constraint.parse(">=1.0")},
                published_at=datetime(2024, 3, 1, 13, 0, tzinfo=timezone(timedelta(hours=1))),
            )
        ],
    )
    (version,) = json.loads(data)["versions"]
    assert version["dependencies"] == {"containerd": ">=1.7.0, <2.0.0-0", "dd": "*"}
    assert version["compatibility"] == {"provisioning_version": ">=1.0.0"}
    assert version["published_at"] == "2024-03-01T12:00:00Z"


def test_it_keeps_non_ascii_text_as_utf8() -> None:
    data = render_index("etcd", [entry(provides={"taskservs": ["é"]})])
    assert "é".encode() in data


@pytest.mark.parametrize(
    ("versions", "path", "message"),
    [
        ([entry("1.0")], "versions[0].version", "'1.0' is not a valid version"),
        ([entry("1.0.0"), entry("1.0.0+build")], "versions[1].version", "listed twice"),
        ([entry(sha256="ABC")], "versions[0].sha256", "64 lower-case hexadecimal digits"),
        ([entry(size=-1)], "versions[0].size", "whole number of bytes"),
        ([entry(yanked="no")], "versions[0].yanked", "not true or false"),
        ([entry(dependencies={"Bad_Name": "*"})], "versions[0].dependencies.Bad_Name", "not an extension name"),
        ([entry(dependencies={"etcd": ">2, <1"})], "versions[0].dependencies.etcd", "can never match"),
        ([entry(published_at="yesterday")], "versions[0].published_at", "ISO 8601"),
        ([entry(published_at=datetime(2024, 1, 1))], "versions[0].published_at", "aware datetime"),
        ([{"version": "1.0.0"}], "versions[0]", "needs sha256, size, yanked, type"),
    ],
)
def test_it_refuses_to_render_bad_data_naming_the_key(versions: list[dict[str, Any]], path: str, message: str) -> None:
    with pytest.raises(IndexDocumentError) as caught:
        render_index("etcd", versions)
    assert caught.value.path == path
    assert message in caught.value.message
    assert caught.value.code == "invalid_index"


def test_it_refuses_to_render_a_bad_name() -> None:
    with pytest.raises(IndexDocumentError, match="not an extension name"):
        render_index("Etcd", [])


# -- parsing --------------------------------------------------------------------------------------


def test_a_rendered_document_parses_back_into_candidates() -> None:
    data = render_index(
        "kubernetes",
        [
            entry(
                "1.28.0",
                dependencies={"etcd": ">=3.5, <4", "containerd": "^1.7"},
                compatibility={"provisioning_version": ">=1.0.0", "kcl_version": ">=0.11.2"},
                provides={"taskservs": ["kubernetes"]},
                published_at="2024-03-01T12:00:00Z",
            ),
            entry("1.29.0-rc.1", yanked=True, sha256=SHA_B, size=99),
        ],
    )
    name, candidates = parse_index(data, name="kubernetes")
    assert name == "kubernetes"
    assert [str(c.version) for c in candidates] == ["1.28.0", "1.29.0-rc.1"]
    first, second = candidates
    assert {(r.name, str(r.constraint)) for r in first.dependencies} == {
        ("etcd", ">=3.5.0, <4.0.0-0"),
        ("containerd", ">=1.7.0, <2.0.0-0"),
    }
    assert first.provisioning_version == Constraint.parse(">=1.0.0")
    assert first.type == "taskserv"
    assert (first.sha256, first.size, first.yanked) == (SHA_A, 1234, False)
    assert first.extra == {
        "compatibility": {"provisioning_version": ">=1.0.0", "kcl_version": ">=0.11.2"},
        "provides": {"taskservs": ["kubernetes"]},
        "published_at": "2024-03-01T12:00:00Z",
    }
    assert (second.yanked, second.sha256, second.size, second.provisioning_version) == (True, SHA_B, 99, None)
    assert parse_index(json.loads(data)) == (name, candidates)
    assert parse_index(data.decode()) == (name, candidates)


def test_parsing_ignores_keys_it_does_not_know() -> None:
    document = json.loads(render_index("etcd", [entry()]))
    document["mirrors"] = ["x"]
    document["versions"][0]["signature"] = "..."
    name, (candidate,) = parse_index(document)
    assert (name, str(candidate.version)) == ("etcd", "1.0.0")


def _doc(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(render_index("etcd", [entry()]))
    document.update(overrides)
    return document


def _with_entry(**overrides: Any) -> dict[str, Any]:
    document = _doc()
    document["versions"][0].update(overrides)
    return document


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        (b"\xff", "", "not UTF-8 JSON"),
        (b"{", "", "not UTF-8 JSON"),
        (b"[]", "", "must be a JSON object, not list"),
        (_doc(format=2), "format", "format 2 is not supported"),
        ({k: v for k, v in _doc().items() if k != "format"}, "format", "format None is not supported"),
        (_doc(name="Etcd"), "name", "not an extension name"),
        (_doc(versions={}), "versions", "must be a list"),
        (_doc(versions=["1.0.0"]), "versions[0]", "must be an object"),
        (_with_entry(version=1), "versions[0].version", "must be a string"),
        (_with_entry(version="01.0.0"), "versions[0].version", "leading zero"),
        (_with_entry(sha256="sha256:" + SHA_A), "versions[0].sha256", "64 lower-case hexadecimal digits"),
        (_with_entry(size=True), "versions[0].size", "whole number of bytes"),
        (_with_entry(size="12"), "versions[0].size", "whole number of bytes"),
        (_with_entry(yanked=0), "versions[0].yanked", "not true or false"),
        (_with_entry(type=None), "versions[0].type", "not a string"),
        (_with_entry(dependencies=["etcd"]), "versions[0].dependencies", "must map extension names"),
        (_with_entry(dependencies={"etcd": 3}), "versions[0].dependencies.etcd", "must be a string"),
        (_with_entry(dependencies={"etcd": "~>1"}), "versions[0].dependencies.etcd", "not a valid constraint"),
        (_with_entry(dependencies={"e": "*"}), "versions[0].dependencies.e", "not an extension name"),
        (
            _with_entry(compatibility={"provisioning_version": ">=x"}),
            "versions[0].compatibility.provisioning_version",
            "not a valid constraint",
        ),
        (_with_entry(compatibility={"kcl_version": 1}), "versions[0].compatibility.kcl_version", "not a string"),
        (_with_entry(provides={"taskservs": "etcd"}), "versions[0].provides.taskservs", "lists of names"),
        (_with_entry(published_at="soon"), "versions[0].published_at", "ISO 8601"),
        ({**_doc(), "versions": [entry("1.0.0"), entry("1.0.0+b")]}, "versions[1].version", "listed twice"),
    ],
)
def test_it_refuses_a_bad_document_naming_the_key(data: Any, path: str, message: str) -> None:
    with pytest.raises(IndexDocumentError) as caught:
        parse_index(data)
    assert caught.value.path == path
    assert message in caught.value.message


def test_it_refuses_each_missing_required_key() -> None:
    for key in ("version", "sha256", "size", "yanked", "type"):
        document = _doc()
        del document["versions"][0][key]
        with pytest.raises(IndexDocumentError) as caught:
            parse_index(document)
        assert caught.value.path == f"versions[0].{key}"


def test_it_refuses_a_document_about_another_extension() -> None:
    with pytest.raises(IndexDocumentError, match="about 'etcd', not 'kubernetes'"):
        parse_index(render_index("etcd", [entry()]), name="kubernetes")


# -- the catalogue ----------------------------------------------------------------------------------


def _documents() -> dict[str, bytes]:
    return {
        "kubernetes": render_index(
            "kubernetes",
            [
                entry("1.28.0", dependencies={"etcd": ">=3.5, <4"}, provides={"taskservs": ["kubernetes"]}),
                entry(
                    "1.29.0",
                    dependencies={"etcd": "^3.6"},
                    compatibility={"provisioning_version": ">=1.5"},
                    provides={"taskservs": ["kubernetes"]},
                ),
            ],
        ),
        "etcd": render_index("etcd", [entry("3.5.9"), entry("3.5.12", yanked=True), entry("3.6.0")]),
    }


def test_the_catalogue_loads_each_name_once_and_only_when_asked() -> None:
    documents = _documents()
    asked: list[str] = []

    def loader(name: str) -> bytes | None:
        asked.append(name)
        return documents.get(name)

    catalogue = IndexCatalogue(loader, known_names=lambda: ["kubernetes", "etcd", "cilium"])
    assert [str(c.version) for c in catalogue.versions("kubernetes")] == ["1.29.0", "1.28.0"]
    catalogue.versions("kubernetes")
    assert catalogue.versions("nope") == ()
    catalogue.versions("nope")
    assert asked == ["kubernetes", "nope"]
    assert sorted(catalogue.loaded) == ["kubernetes", "nope"]
    assert list(catalogue.names()) == ["cilium", "etcd", "kubernetes"]


def test_resolving_over_index_documents_gives_the_same_answer_as_over_memory() -> None:
    documents = _documents()
    index = IndexCatalogue(documents.get)
    memory = MemoryCatalogue(c for data in documents.values() for c in parse_index(data)[1])
    for runtime in (None, "1.4.0"):
        over_index = resolve(["kubernetes"], index, runtime_version=runtime)
        over_memory = resolve(["kubernetes"], memory, runtime_version=runtime)
        assert over_index == over_memory
    assert {n: str(c.version) for n, c in resolve(["kubernetes"], index).resolved.items()} == {
        "etcd": "3.6.0",
        "kubernetes": "1.29.0",
    }
    assert {n: str(c.version) for n, c in resolve(["kubernetes"], index, runtime_version="1.4.0").resolved.items()} == {
        "etcd": "3.6.0",
        "kubernetes": "1.28.0",
    }


def test_the_catalogue_takes_documents_up_front_and_suggests_loaded_names() -> None:
    catalogue = IndexCatalogue(documents=_documents().values())
    assert sorted(catalogue.names()) == ["etcd", "kubernetes"]
    with pytest.raises(ResolutionError, match="did you mean 'kubernetes'"):
        resolve(["kubernets"], catalogue)


def test_a_loader_that_answers_with_another_extension_is_refused() -> None:
    catalogue = IndexCatalogue(lambda name: render_index("etcd", [entry()]))
    with pytest.raises(IndexDocumentError, match="about 'etcd', not 'kubernetes'"):
        catalogue.versions("kubernetes")


def test_render_index_output_is_utc_for_datetimes() -> None:
    data = render_index("etcd", [entry(published_at=datetime(2024, 1, 1, tzinfo=UTC))])
    assert json.loads(data)["versions"][0]["published_at"] == "2024-01-01T00:00:00Z"
