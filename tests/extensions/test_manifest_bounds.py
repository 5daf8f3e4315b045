"""The bounds on extension.toml's lists (SPEC 2.4), the reserved-name error class, and the exact
round trip of a manifest through the build sandbox (`Manifest.to_dict` / `Manifest.from_dict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.errors import ManifestError, ReservedManifestNameError
from extensions.manifest import Manifest, ManifestLimits, load_manifest, manifest_schema, parse_manifest

REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {"extension": {"name": "demo", "version": "1.0.0", "description": "d", "type": "taskserv"}}


def text(**tables: Any) -> str:
    return tomli_w.dumps({**BASE, **tables})


DEFAULTS = ManifestLimits()


def errors(data: str, limits: ManifestLimits = DEFAULTS) -> dict[str, str]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(data, limits=limits)
    return {p.path: p.message for p in caught.value.errors}


def names(n: int, prefix: str = "n") -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def test_the_spec_2_4_defaults_accept_exactly_the_bounds() -> None:
    manifest = parse_manifest(
        text(
            provides={"taskservs": names(32)},
            dependencies={"extensions": names(64, "d"), "system_packages": names(64, "p")},
            configuration={"required_env": [f"A{i}" for i in range(32)], "optional_env": [f"B{i}" for i in range(32)]},
            build={"include": [f"kcl{i}/**" for i in range(16)], "exclude": ["*" * 1 + "x" * 255] + ["*.tmp"] * 0},
        )
    )
    assert len(manifest.provides["taskservs"]) == 32 and len(manifest.dependencies) == 64


@pytest.mark.parametrize(
    ("tables", "path", "fragment"),
    [
        ({"provides": {"taskservs": names(4000, "m")}}, "provides.taskservs", "has 4000 items: at most 32"),
        ({"provides": {"taskservs": names(20), "clusters": names(13, "c")}}, "provides", "33 providers"),
        ({"dependencies": {"extensions": names(65)}}, "dependencies.extensions", "has 65 items: at most 64"),
        ({"dependencies": {"extensions": dict.fromkeys(names(65), "^1")}}, "dependencies.extensions", "65 keys"),
        ({"dependencies": {"system_packages": names(65)}}, "dependencies.system_packages", "at most 64"),
        (
            {
                "configuration": {
                    "required_env": [f"A{i}" for i in range(40)],
                    "optional_env": [f"B{i}" for i in range(25)],
                }
            },
            "configuration",
            "65 environment variables",
        ),
        (
            {"build": {"include": [f"d{i}/**" for i in range(20)], "exclude": [f"x{i}" for i in range(13)]}},
            "build",
            "33 patterns",
        ),
        ({"build": {"include": ["a" * 257]}}, "build.include[0]", "at most 256 characters"),
        ({"build": {"include": ["a*a*a*a*a*a*a*a*a*a*a*a*c"]}}, "build.include[0]", "12 wildcards"),
        ({"extension": {**BASE["extension"], "categories": names(17)}}, "extension.categories", "at most 16"),
        ({"compatibility": {f"t{i}_version": "*" for i in range(33)}}, "compatibility", "33 keys"),
    ],
)
def test_every_bound_is_refused_with_its_key_path(tables: dict[str, Any], path: str, fragment: str) -> None:
    found = errors(text(**tables))
    assert path in found, found
    assert fragment in found[path], found[path]


def test_a_run_of_stars_is_one_wildcard() -> None:
    parse_manifest(text(build={"include": ["**/a/**/b/**/c/**/d/**/e/**/f/**/g/**"]}))  # 8 wildcards


def test_limits_are_settings_and_the_schema_carries_them() -> None:
    tight = ManifestLimits(max_provides=2, max_dependencies=1, max_build_patterns=1, max_pattern_wildcards=1)
    found = errors(text(provides={"taskservs": names(3)}, build={"include": ["a*b*"]}), tight)
    assert "provides.taskservs" in found and "build.include[0]" in found
    schema = manifest_schema(tight)
    assert schema["properties"]["provides"]["properties"]["taskservs"]["maxItems"] == 2
    assert schema["properties"]["dependencies"]["properties"]["extensions"]["maxItems"] == 1
    assert manifest_schema()["properties"]["provides"]["properties"]["taskservs"]["maxItems"] == 32
    loose = ManifestLimits(max_provides=100)
    assert len(parse_manifest(text(provides={"taskservs": names(50)}), limits=loose).provides["taskservs"]) == 50


def test_a_reserved_extension_name_is_a_name_clash_with_every_problem() -> None:
    data = tomli_w.dumps({"extension": {"name": "install", "version": "1", "description": "d"}})
    with pytest.raises(ReservedManifestNameError) as caught:
        parse_manifest(data)
    error = caught.value
    assert (error.code, error.name) == ("name_taken", "install")
    assert error.message.startswith("'install' is a reserved name and cannot be used for an extension")
    assert {p.path for p in error.errors} >= {"extension.name", "extension.version"}
    assert isinstance(error, ManifestError)  # the client lists it like any other manifest error


def test_every_bundled_example_survives_the_sandbox_round_trip() -> None:
    for directory in sorted(REPO.glob("extensions/*/*/*/")):
        manifest = load_manifest(directory)
        again = Manifest.from_dict(manifest.to_dict())
        assert again == manifest and again.to_dict() == manifest.to_dict(), directory


_names = st.from_regex(r"[a-z][a-z0-9]{1,8}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    provides=st.lists(_names, unique=True, max_size=5),
    deps=st.dictionaries(_names, st.sampled_from(["*", "^1.2", ">=3.5, <4", "~0.4", "1.*", "=2.0.0"]), max_size=4),
    keywords=st.lists(st.from_regex(r"[a-z0-9-]{1,10}", fullmatch=True), max_size=4),
    runtime=st.sampled_from([None, ">=1.0.0", "^2 || ^3"]),
)
def test_any_valid_manifest_survives_the_round_trip(
    provides: list[str], deps: dict[str, str], keywords: list[str], runtime: str | None
) -> None:
    deps.pop("demo", None)
    extension = {**BASE["extension"], "keywords": keywords, "homepage": "https://example.com/x"}
    data: dict[str, Any] = {
        "extension": extension,
        "provides": {"taskservs": provides},
        "dependencies": {"extensions": deps},
    }
    if runtime is not None:
        data["compatibility"] = {"provisioning_version": runtime, "kcl_version": ">=0.11"}
    manifest = parse_manifest(tomli_w.dumps(data))
    assert Manifest.from_dict(manifest.to_dict()) == manifest


@pytest.mark.parametrize(
    "damage",
    [
        {"type": "widget"},
        {"version": 3},
        {"dependencies": [{"name": "x"}]},
        {"provides": {"taskservs": [1]}},
        {"compatibility": {"a_version": 2}},
        {"keywords": "nope"},
    ],
)
def test_a_malformed_document_from_the_sandbox_is_a_value_error(damage: dict[str, Any]) -> None:
    good = parse_manifest(text()).to_dict()
    with pytest.raises(ValueError, match="manifest field"):
        Manifest.from_dict({**good, **damage})
