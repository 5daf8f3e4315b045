"""`extensions.manifest`: parsing and validating `extension.toml` (SPEC 2.2)."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from extensions.errors import ManifestError, Problem
from extensions.manifest import (
    KINDS,
    Dependency,
    Manifest,
    check_manifest,
    load_manifest,
    manifest_schema,
    parse_manifest,
)
from extensions.names import NAME_PATTERN
from extensions.versions import Constraint, Version

REPO = Path(__file__).resolve().parents[2]

# The example of SPEC 2.2, comments and all (URLs filled in).
SPEC_EXAMPLE = """\
[extension]
name = "kubernetes"                 # required
version = "1.28.0"                  # required, SemVer 2.0.0
description = "Kubernetes container orchestrator"   # required, <= 512 chars
type = "taskserv"                   # provider | taskserv | cluster | template; may be omitted
                                    # when [provides] names exactly one kind
author = "Jane Doe <jane@example.com>"   # or authors = [...]
license = "MIT"                     # SPDX expression
homepage = "https://kubernetes.io"  # http(s) URLs only
repository = "https://github.com/kubernetes/kubernetes"
keywords = ["containers", "orchestration"]   # <= 10, each <= 32 chars, [a-z0-9-]
categories = ["taskservs"]
readme = "README.md"                # default README.md

[compatibility]
provisioning_version = ">=1.0.0"    # constraint on the runtime's version
kcl_version = ">=0.11.2"            # informational constraints on tool versions

[provides]
providers = []
taskservs = ["kubernetes"]
clusters = []
templates = []

[dependencies]
extensions = ["containerd ^1.7", "etcd >=3.5, <4"]   # "NAME" or "NAME CONSTRAINT" ("etcd>=3.5" too)
system_packages = ["curl", "jq"]
# equivalent table form:
# [dependencies.extensions]
# containerd = "^1.7"
# etcd = ">=3.5, <4"

[configuration]
required_env = ["KUBECONFIG"]       # [A-Z_][A-Z0-9_]*
optional_env = []

[build]
include = ["kcl/**", "nulib/**", "templates/**", "README.md", "LICENSE"]
exclude = ["tests/**", ".git/**", "*.tmp"]   # gitignore-style patterns
"""

# The publishing example of the platform's extension development guide: no `type`.
PLATFORM_EXAMPLE = """\
[extension]
name = "my-custom-provider"
version = "1.0.0"
description = "Custom cloud provider integration"
author = "Your Name <you@example.com>"
license = "MIT"
homepage = "https://github.com/username/my-custom-provider"
repository = "https://github.com/username/my-custom-provider"
keywords = ["cloud", "provider", "infrastructure"]
categories = ["providers"]

[compatibility]
provisioning_version = ">=1.0.0"
kcl_version = ">=0.11.2"

[provides]
providers = ["custom-cloud"]
taskservs = []
clusters = []

[dependencies]
system_packages = ["curl", "jq"]
extensions = []

[build]
include = ["src/**", "examples/**", "README.md", "LICENSE"]
exclude = ["tests/**", ".git/**", "*.tmp"]
"""

DELETE = object()


def spec_data() -> dict[str, Any]:
    return tomllib.loads(SPEC_EXAMPLE)


def variant(changes: dict[str, Any]) -> str:
    """The SPEC example with dotted keys set (or removed with DELETE), as TOML text."""
    data = spec_data()
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        table = data
        for part in parents:
            table = table.setdefault(part, {})
        if value is DELETE:
            table.pop(last, None)
        else:
            table[last] = value
    return tomli_w.dumps(data)


def problems_of(text: str | bytes) -> list[Problem]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text)
    return caught.value.problems


def errors_of(text: str | bytes) -> list[Problem]:
    return [p for p in problems_of(text) if p.severity == "error"]


def the_error(text: str | bytes) -> Problem:
    errors = errors_of(text)
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# --- a valid manifest ------------------------------------------------------------------------------


def test_it_parses_the_spec_example() -> None:
    manifest = parse_manifest(SPEC_EXAMPLE)
    assert manifest == Manifest(
        name="kubernetes",  # type: ignore[arg-type]
        version=Version.parse("1.28.0"),
        description="Kubernetes container orchestrator",
        type="taskserv",
        authors=("Jane Doe <jane@example.com>",),
        license="MIT",
        homepage="https://kubernetes.io",
        repository="https://github.com/kubernetes/kubernetes",
        keywords=("containers", "orchestration"),
        categories=("taskservs",),
        readme="README.md",
        provisioning_version=Constraint.parse(">=1.0.0"),
        compatibility={"provisioning_version": ">=1.0.0", "kcl_version": ">=0.11.2"},
        provides={"providers": (), "taskservs": ("kubernetes",), "clusters": (), "templates": ()},
        dependencies=(
            Dependency("containerd", Constraint.parse("^1.7")),  # type: ignore[arg-type]
            Dependency("etcd", Constraint.parse(">=3.5, <4")),  # type: ignore[arg-type]
        ),
        system_packages=("curl", "jq"),
        required_env=("KUBECONFIG",),
        optional_env=(),
        build_include=("kcl/**", "nulib/**", "templates/**", "README.md", "LICENSE"),
        build_exclude=("tests/**", ".git/**", "*.tmp"),
    )
    assert manifest.warnings == ()


def test_it_turns_a_manifest_into_json_ready_data_in_a_stable_order() -> None:
    data = parse_manifest(SPEC_EXAMPLE).to_dict()
    assert list(data) == [
        "name",
        "version",
        "description",
        "type",
        "authors",
        "license",
        "homepage",
        "repository",
        "keywords",
        "categories",
        "readme",
        "provisioning_version",
        "compatibility",
        "provides",
        "dependencies",
        "system_packages",
        "required_env",
        "optional_env",
        "build_include",
        "build_exclude",
    ]
    assert data["version"] == "1.28.0"
    assert data["provisioning_version"] == str(Constraint.parse(">=1.0.0"))
    assert data["dependencies"] == [
        {"name": "containerd", "constraint": str(Constraint.parse("^1.7")), "written": "^1.7"},
        {"name": "etcd", "constraint": str(Constraint.parse(">=3.5, <4")), "written": ">=3.5, <4"},
    ]
    assert data["provides"] == {"providers": [], "taskservs": ["kubernetes"], "clusters": [], "templates": []}
    assert json.loads(json.dumps(data)) == data


def test_a_manifest_is_frozen() -> None:
    manifest = parse_manifest(SPEC_EXAMPLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        manifest.name = "other"  # type: ignore[misc]


def test_it_parses_the_platform_guides_example_inferring_the_type() -> None:
    manifest = parse_manifest(PLATFORM_EXAMPLE)
    assert manifest.type == "provider"
    assert manifest.provides == {"providers": ("custom-cloud",), "taskservs": (), "clusters": (), "templates": ()}
    assert manifest.readme == "README.md"
    assert manifest.dependencies == ()


def test_it_fills_in_the_defaults_of_a_minimal_manifest() -> None:
    manifest = parse_manifest(
        '[extension]\nname = "etcd"\nversion = "3.5.9"\ndescription = "A key-value store"\ntype = "taskserv"\n'
    )
    assert manifest.authors == ()
    assert manifest.license is None
    assert manifest.readme == "README.md"
    assert manifest.provisioning_version is None
    assert manifest.compatibility == {}
    assert manifest.provides == dict.fromkeys(KINDS, ())
    assert manifest.dependencies == ()
    assert manifest.build_include == ()


def test_it_accepts_bytes_and_a_byte_order_mark() -> None:
    assert parse_manifest(b"\xef\xbb\xbf" + SPEC_EXAMPLE.encode()) == parse_manifest(SPEC_EXAMPLE)


def test_every_bundled_example_extension_is_valid() -> None:
    found = sorted(REPO.glob("extensions/*/*/*/extension.toml"))
    if not found:
        pytest.skip("no bundled example extensions yet")
    for path in found:
        manifest, problems = check_manifest(path.read_bytes())
        assert manifest is not None, (path, [str(p) for p in problems])


# --- dependencies ----------------------------------------------------------------------------------


def test_the_table_and_list_forms_of_dependencies_give_the_same_manifest() -> None:
    as_table = variant({"dependencies.extensions": {"containerd": "^1.7", "etcd": ">=3.5, <4"}})
    assert parse_manifest(as_table) == parse_manifest(SPEC_EXAMPLE)


def test_a_dependency_without_a_constraint_accepts_any_version() -> None:
    listed = parse_manifest(variant({"dependencies.extensions": ["containerd", "etcd>=3.5"]}))
    tabled = parse_manifest(variant({"dependencies.extensions": {"containerd": "", "etcd": ">=3.5"}}))
    assert listed.dependencies == tabled.dependencies
    assert listed.dependencies[0].constraint == Constraint.ANY
    assert listed.to_dict()["dependencies"][0] == {"name": "containerd", "constraint": "*", "written": "*"}


def test_it_refuses_a_duplicate_dependency() -> None:
    error = the_error(variant({"dependencies.extensions": ["etcd >=3.5", "containerd", "etcd <4"]}))
    assert error.path == "dependencies.extensions[2]"
    assert error.message.startswith("'etcd' is listed twice (first at dependencies.extensions[0])")
    assert "list each extension once" in error.message


def test_it_refuses_a_dependency_on_itself() -> None:
    for deps, path in (
        (["kubernetes ^1"], "dependencies.extensions[0]"),
        ({"kubernetes": "^1"}, "dependencies.extensions.kubernetes"),
    ):
        error = the_error(variant({"dependencies.extensions": deps}))
        assert error.path == path
        assert error.message == "'kubernetes' is this extension itself: an extension cannot depend on itself"


@pytest.mark.parametrize(
    ("deps", "path", "fragment"),
    [
        (["containerd ^1.7", "etcd >>3"], "dependencies.extensions[1]", "'>>' is not an operator"),
        (["containerd ^1.7", "etcd >3, <2"], "dependencies.extensions[1]", "can never match"),
        (["Cert_Manager ^1"], "dependencies.extensions[0]", "did you mean 'cert-manager'?"),
        (["install"], "dependencies.extensions[0]", "'install' is reserved"),
        ({"etcd": ">3, <2"}, "dependencies.extensions.etcd", "can never match"),
        ({"cert_manager": "^1"}, "dependencies.extensions.cert_manager", "did you mean 'cert-manager'?"),
        ({"etcd": 3}, "dependencies.extensions.etcd", "must be a string, not an integer"),
        ([3], "dependencies.extensions[0]", "must be a string, not an integer"),
        ("etcd", "dependencies.extensions", "must be a list or a table, not a string"),
    ],
)
def test_it_refuses_a_bad_dependency_naming_it(deps: Any, path: str, fragment: str) -> None:
    error = the_error(variant({"dependencies.extensions": deps}))
    assert error.path == path
    assert fragment in error.message


# --- the type --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "type_"),
    [("providers", "provider"), ("taskservs", "taskserv"), ("clusters", "cluster"), ("templates", "template")],
)
def test_it_infers_the_type_when_provides_names_one_kind(kind: str, type_: str) -> None:
    empty: dict[str, Any] = {f"provides.{k}": [] for k in KINDS}
    manifest = parse_manifest(variant({**empty, "extension.type": DELETE, f"provides.{kind}": ["thing"]}))
    assert manifest.type == type_


def test_an_invalid_provided_name_without_a_type_is_only_that_error() -> None:
    """The kind still counts (its name has its own error): no claim that [provides] names no kind."""
    empty: dict[str, Any] = {f"provides.{k}": [] for k in KINDS}
    errors = errors_of(variant({**empty, "extension.type": DELETE, "provides.taskservs": ["Bad_Name"]}))
    assert [e.path for e in errors] == ["provides.taskservs[0]"]
    assert "did you mean 'bad-name'?" in errors[0].message


@pytest.mark.parametrize(
    ("provides", "found"),
    [
        ({"provides.providers": ["aws"], "provides.taskservs": ["kubernetes"]}, "names 2 kinds (providers, taskservs)"),
        ({"provides.taskservs": []}, "names no kind"),
    ],
)
def test_it_refuses_an_omitted_type_it_cannot_infer(provides: dict[str, Any], found: str) -> None:
    error = the_error(variant({"extension.type": DELETE, **provides}))
    assert error.path == "extension.type"
    assert found in error.message
    assert "set type to one of 'provider', 'taskserv', 'cluster', 'template'" in error.message


def test_an_explicit_type_needs_no_provides() -> None:
    manifest = parse_manifest(variant({"provides": DELETE}))
    assert manifest.type == "taskserv"
    assert manifest.provides == dict.fromkeys(KINDS, ())


# --- each rule, with its key path and what is allowed ----------------------------------------------

RULES = [
    # (changes, key path, fragment of the message)
    ({"extension.name": "cert_manager"}, "extension.name", "did you mean 'cert-manager'?"),
    ({"extension.name": "x"}, "extension.name", "2 to 64 characters"),
    ({"extension.name": "api"}, "extension.name", "'api' is reserved"),
    ({"extension.name": 42}, "extension.name", "must be a string, not an integer"),
    ({"extension.name": DELETE}, "extension.name", "is required: the extension's name"),
    ({"extension.version": "1.28"}, "extension.version", "use MAJOR.MINOR.PATCH as in SemVer 2.0.0"),
    ({"extension.version": "v1.28.0"}, "extension.version", "drop the 'v' prefix"),
    ({"extension.version": DELETE}, "extension.version", "is required"),
    ({"extension.description": DELETE}, "extension.description", "is required: a one-line summary"),
    ({"extension.description": ""}, "extension.description", "must not be empty"),
    ({"extension.description": "   "}, "extension.description", "must not be blank"),
    ({"extension.description": "x" * 513}, "extension.description", "at most 512 characters are allowed"),
    (
        {"extension.type": "taskservice"},
        "extension.type",
        "'taskservice' is not allowed: use one of 'provider', 'taskserv', 'cluster', 'template'",
    ),
    ({"extension.author": ""}, "extension.author", "must not be empty"),
    ({"extension.authors": ["Jane", 3]}, "extension.authors[1]", "must be a string"),
    ({"extension.license": "MIT/Apache-2.0"}, "extension.license", "write 'MIT OR Apache-2.0'"),
    ({"extension.license": "MIT and Apache-2.0"}, "extension.license", "in upper case ('AND')"),
    ({"extension.license": "MIT OR"}, "extension.license", "SPDX license expression"),
    ({"extension.license": "(MIT OR Apache-2.0"}, "extension.license", "a '(' is not closed"),
    ({"extension.license": "GPL 2"}, "extension.license", "join identifiers with AND or OR"),
    ({"extension.license": "My License!"}, "extension.license", "SPDX license expression"),
    ({"extension.homepage": "javascript:alert(1)"}, "extension.homepage", "use an http:// or https:// URL"),
    ({"extension.homepage": "ftp://example.com/x"}, "extension.homepage", "the scheme 'ftp:' is not allowed"),
    ({"extension.repository": "https://"}, "extension.repository", "use an http:// or https:// URL"),
    ({"extension.repository": "github.com/x/y"}, "extension.repository", "use an http:// or https:// URL"),
    ({"extension.homepage": "https://exa mple.com"}, "extension.homepage", "use an http:// or https:// URL"),
    (
        {"extension.keywords": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]},
        "extension.keywords",
        "has 11 items: at most 10 are allowed",
    ),
    (
        {"extension.keywords": ["ok", "ok2", "x" * 33]},
        "extension.keywords[2]",
        "use lower-case letters, digits and hyphens, at most 32 characters",
    ),
    (
        {"extension.keywords": ["ok", "ok2", "two words", "fine"]},
        "extension.keywords[2]",
        "'two words' is not allowed: use lower-case letters, digits and hyphens",
    ),
    ({"extension.keywords": ["ok", "Containers"]}, "extension.keywords[1]", "lower-case letters"),
    ({"extension.keywords": "containers"}, "extension.keywords", "must be a list, not a string"),
    ({"extension.categories": [""]}, "extension.categories[0]", "must not be empty"),
    ({"extension.readme": "../README.md"}, "extension.readme", "without '..'"),
    ({"extension.readme": "/etc/passwd"}, "extension.readme", "it is absolute"),
    ({"extension.readme": "docs\\README.md"}, "extension.readme", "backslash"),
    ({"extension.readme": "C:/README.md"}, "extension.readme", "it is absolute"),
    ({"compatibility.provisioning_version": ">2, <1"}, "compatibility.provisioning_version", "can never match"),
    ({"compatibility.provisioning_version": "latest"}, "compatibility.provisioning_version", "use forms like ^1.2"),
    ({"compatibility.kcl_version": "0.11.x.y"}, "compatibility.kcl_version", "not a valid constraint"),
    ({"compatibility.nushell_version": 107}, "compatibility.nushell_version", "must be a string"),
    ({"provides.taskservs": ["kubernetes", "Kube_Proxy"]}, "provides.taskservs[1]", "did you mean 'kube-proxy'?"),
    ({"provides.taskservs": ["kubernetes", "kubernetes"]}, "provides.taskservs[1]", "listed twice"),
    ({"provides.clusters": "k8s"}, "provides.clusters", "must be a list, not a string"),
    ({"dependencies.system_packages": ["curl", "j q"]}, "dependencies.system_packages[1]", "use a package name"),
    ({"configuration.required_env": ["kubeconfig"]}, "configuration.required_env[0]", "upper-case letters"),
    ({"configuration.optional_env": ["OK", "1ST"]}, "configuration.optional_env[1]", "not starting with a digit"),
    ({"configuration.optional_env": ["A-B"]}, "configuration.optional_env[0]", "upper-case letters"),
    ({"build.include": ["kcl/**", ""]}, "build.include[1]", "must not be empty"),
    ({"build.include": ["kcl/**", 3]}, "build.include[1]", "must be a string"),
    ({"build.exclude": ["ok/**", "bad\\"]}, "build.exclude[1]", "not a valid gitignore pattern"),
    ({"build.exclude": ["# a comment"]}, "build.exclude[0]", "it matches nothing"),
    ({"build.exclude": "*.tmp"}, "build.exclude", "must be a list, not a string"),
    ({"extension": "kubernetes"}, "extension", "must be a table, not a string"),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES, ids=[r[1] + ":" + r[2][:30] for r in RULES])
def test_it_refuses_each_broken_rule_with_the_key_path_and_what_is_allowed(
    changes: dict[str, Any], path: str, fragment: str
) -> None:
    error = the_error(variant(changes))
    assert error.path == path
    assert fragment in error.message


def test_it_refuses_a_file_without_an_extension_table() -> None:
    error = the_error("[provides]\ntaskservs = ['x1']\n")
    assert error.path == "extension"
    assert error.message.startswith("the [extension] table is required")


@pytest.mark.parametrize(
    "license_",
    [
        "MIT",
        "Apache-2.0",
        "MIT OR Apache-2.0",
        "GPL-2.0-or-later WITH Classpath-exception-2.0",
        "(MIT AND BSD-3-Clause) OR Apache-2.0",
        "LicenseRef-Proprietary",
    ],
)
def test_it_accepts_spdx_looking_licenses(license_: str) -> None:
    assert parse_manifest(variant({"extension.license": license_})).license == license_


def test_it_accepts_http_and_https_urls() -> None:
    manifest = parse_manifest(
        variant({"extension.homepage": "http://example.com", "extension.repository": "HTTPS://example.com/a?b#c"})
    )
    assert manifest.homepage == "http://example.com"


# --- several problems at once ----------------------------------------------------------------------


def test_it_reports_every_error_at_once_in_the_order_of_the_file() -> None:
    text = variant(
        {
            "extension.name": "Kube_Rnetes",
            "extension.version": "1.0",
            "extension.keywords": ["ok", "NOT OK"],
            "dependencies.extensions": ["containerd ^1.7", "etcd >3, <2"],
            "configuration.required_env": ["kubeconfig"],
        }
    )
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text)
    error = caught.value
    assert [(p.path, p.severity) for p in error.problems] == [
        ("extension.name", "error"),
        ("extension.version", "error"),
        ("extension.keywords[1]", "error"),
        ("dependencies.extensions[1]", "error"),
        ("configuration.required_env[0]", "error"),
    ]
    assert error.message.startswith("extension.toml has 5 errors, the first: extension.name: 'Kube_Rnetes'")
    assert error.code == "invalid_manifest"
    assert len(error.errors) == 5
    assert error.details_list()[0] == {
        "path": "extension.name",
        "message": error.problems[0].message,
        "severity": "error",
    }


def test_a_missing_key_is_reported_after_the_keys_of_its_table() -> None:
    text = '[extension]\nname = "Bad_Name"\nversion = "1.0.0"\ntype = "taskserv"\n[build]\ninclude = [""]\n'
    assert [p.path for p in errors_of(text)] == ["extension.name", "extension.description", "build.include[0]"]


def test_a_single_error_is_named_in_the_message() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(variant({"extension.version": "1.0"}))
    assert str(caught.value).startswith("extension.toml has 1 error: extension.version: '1.0' is not a valid version")


# --- unknown keys ----------------------------------------------------------------------------------


def test_unknown_keys_are_warnings_not_errors() -> None:
    text = variant(
        {
            "extension.authour": "Jane",
            "compatibility.kcl": ">=0.11",
            "compatibility.helm_version": ">=3.12",
            "package": {"name": "x"},
            "dependencies.optional": ["x"],
        }
    )
    manifest = parse_manifest(text)
    assert [(w.path, w.severity) for w in manifest.warnings] == [
        ("extension.authour", "warning"),
        ("compatibility.kcl", "warning"),
        ("dependencies.optional", "warning"),
        ("package", "warning"),
    ]
    authour = manifest.warnings[0].message
    assert authour.startswith("unknown key 'authour' is ignored (known keys: name, version, description, type,")
    assert authour.endswith("did you mean 'author'?")
    assert "or any NAME_version" in manifest.warnings[1].message
    assert manifest.compatibility["helm_version"] == ">=3.12"
    assert "kcl" not in manifest.compatibility


def test_warnings_come_with_the_errors_when_the_file_is_invalid() -> None:
    problems = problems_of(variant({"extension.version": "x", "extension.colour": "blue"}))
    assert [(p.path, p.severity) for p in problems] == [
        ("extension.version", "error"),
        ("extension.colour", "warning"),
    ]


def test_both_author_and_authors_are_merged_with_a_warning() -> None:
    manifest = parse_manifest(variant({"extension.authors": ["Bob", "Jane Doe <jane@example.com>"]}))
    assert manifest.authors == ("Jane Doe <jane@example.com>", "Bob")
    assert [(w.path, w.message) for w in manifest.warnings] == [
        ("extension.authors", "both 'author' and 'authors' are set: they are merged; use one of them")
    ]


# --- the file itself -------------------------------------------------------------------------------


def test_it_refuses_an_oversize_file_naming_the_limit() -> None:
    text = SPEC_EXAMPLE + "# " + "x" * (64 * 1024) + "\n"
    error = the_error(text)
    assert error.path == "extension.toml"
    assert error.message.startswith(f"is {len(text.encode()):,} bytes: at most 65,536 bytes (64 KiB) are allowed")


def test_the_size_limit_is_inclusive_and_configurable() -> None:
    data = SPEC_EXAMPLE.encode()
    assert parse_manifest(data, max_bytes=len(data)).name == "kubernetes"
    with pytest.raises(ManifestError, match=f"at most {len(data) - 1:,} bytes"):
        parse_manifest(data, max_bytes=len(data) - 1)


def test_it_checks_the_size_before_anything_else() -> None:
    error = the_error(b"\xff" * 70_000)
    assert "at most 65,536 bytes" in error.message


def test_it_refuses_bytes_that_are_not_utf8_saying_where() -> None:
    error = the_error(b'[extension]\nname = "caf\xe9"\n')
    assert error.path == "extension.toml"
    assert error.message == "is not valid UTF-8 (byte 0xe9 at line 2, column 12): save the file as UTF-8"


def test_it_refuses_a_toml_syntax_error_with_its_line_and_column() -> None:
    error = the_error('[extension]\nname = "kubernetes"\nversion = 1.28.0\n')
    assert error.path == "extension.toml"
    assert error.message.startswith("is not valid TOML at line 3, column 15: expected newline or end of document")
    assert error.message.endswith("the file must be TOML v1.0.0")


def test_it_refuses_a_duplicate_toml_key() -> None:
    error = the_error('[extension]\nname = "a"\nname = "b"\n')
    assert error.message.startswith("is not valid TOML at line 3")


def test_it_refuses_deeply_nested_toml_without_crashing() -> None:
    error = the_error("a = " + "[" * 3000 + "]" * 3000 + "\n")
    assert error.path == "extension.toml"
    assert "nested too deeply" in error.message


def test_check_manifest_returns_problems_instead_of_raising() -> None:
    manifest, problems = check_manifest(variant({"extension.version": "1.0", "extension.x": 1}))
    assert manifest is None
    assert [p.path for p in problems] == ["extension.version", "extension.x"]
    manifest, problems = check_manifest(variant({"extension.x": 1}))
    assert manifest is not None
    assert [p.severity for p in problems] == ["warning"]
    manifest, problems = check_manifest(12)  # type: ignore[arg-type]
    assert manifest is None
    assert problems[0].message == "must be text or bytes, not int"


@given(st.binary(max_size=300) | st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_no_input_makes_it_raise_anything_but_a_manifest_error(data: bytes | str) -> None:
    manifest, problems = check_manifest(data)
    assert manifest is None
    assert problems and all(p.severity in ("error", "warning") for p in problems)


@st.composite
def constraints_with_any_version_length(draw: st.DrawFn) -> tuple[str, int]:
    """A comparator on a full version whose pre-release or build makes it from short to far over
    the 256-character limit of a version; returns the constraint and that version's length."""
    op = draw(st.sampled_from(["", "=", ">=", ">", "<", "<=", "^", "~", "!="]))
    core = ".".join(str(draw(st.integers(min_value=0, max_value=99))) for _ in range(3))
    length = draw(st.integers(min_value=1, max_value=400))
    unit = draw(st.text(alphabet="abz09.", min_size=1, max_size=6).filter(lambda u: u.strip(".")))
    tail = draw(st.sampled_from(["-", "+"])) + (unit * length)[:length]
    version = core + tail
    return op + version, len(version)


POSITIONS = {
    "dependencies.extensions.etcd": lambda c: {"dependencies": {"extensions": {"etcd": c}}},
    "dependencies.extensions[0]": lambda c: {"dependencies": {"extensions": [f"etcd {c}"]}},
    "compatibility.provisioning_version": lambda c: {"compatibility": {"provisioning_version": c}},
    "compatibility.kcl_version": lambda c: {"compatibility": {"kcl_version": c}},
}


@given(constraints_with_any_version_length(), st.sampled_from(sorted(POSITIONS)))
@example((">=1.0.0-" + "a" * 300, 306), "dependencies.extensions.etcd")
@example(("^1.0.0+" + "b" * 300, 306), "compatibility.provisioning_version")
@settings(max_examples=200, deadline=None)
def test_a_constraint_on_an_over_long_version_is_reported_at_its_key_path(case: tuple[str, int], path: str) -> None:
    from extensions.errors import ConstraintError
    from extensions.versions import MAX_VERSION_LENGTH, Constraint

    constraint, length = case
    try:
        Constraint.parse(constraint)
    except ConstraintError as exc:  # the library's error, never VersionError
        assert type(exc) is ConstraintError
        refused = True
    else:
        refused = False
    if length > MAX_VERSION_LENGTH:
        assert refused  # (shorter ones may be refused too, e.g. `<0.0.0-0` can never match)
    data = {
        "extension": {"name": "demo", "version": "1.0.0", "description": "d", "type": "taskserv"},
        **POSITIONS[path](constraint),
    }
    manifest, problems = check_manifest(tomli_w.dumps(data))  # never raises
    errors = [p for p in problems if p.severity == "error"]
    if length > MAX_VERSION_LENGTH:
        assert manifest is None
        assert [p.path for p in errors] == [path]
        assert f"is longer than {MAX_VERSION_LENGTH} characters" in errors[0].message
    else:
        assert (manifest is None) is refused
        assert [p.path for p in errors] == ([path] if refused else [])


# --- loading from disk -----------------------------------------------------------------------------


def test_it_loads_a_manifest_from_a_directory_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "extension.toml").write_text(SPEC_EXAMPLE, encoding="utf-8")
    assert load_manifest(tmp_path) == parse_manifest(SPEC_EXAMPLE)
    assert load_manifest(tmp_path / "extension.toml").name == "kubernetes"


def test_it_says_when_a_directory_has_no_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert caught.value.problems[0].path == "extension.toml"
    assert "an extension's directory must hold extension.toml" in caught.value.problems[0].message


def test_it_refuses_an_oversize_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "extension.toml").write_bytes(b"#" * 200_000)
    with pytest.raises(ManifestError, match="is 200,000 bytes: at most 65,536 bytes"):
        load_manifest(tmp_path)


# --- the JSON Schema -------------------------------------------------------------------------------


def test_the_schema_is_a_valid_draft_2020_12_schema_with_its_own_id() -> None:
    schema = manifest_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://provisioning.dev/schemas/extension.json"
    assert schema["additionalProperties"] is True


def test_the_schema_accepts_the_spec_example_offline() -> None:
    validator = Draft202012Validator(manifest_schema())
    assert list(validator.iter_errors(spec_data())) == []
    assert list(validator.iter_errors(tomllib.loads(PLATFORM_EXAMPLE))) == []


def test_the_schema_holds_the_limits_of_the_spec() -> None:
    schema = manifest_schema()
    extension = schema["properties"]["extension"]["properties"]
    assert schema["$defs"]["name"]["pattern"] == NAME_PATTERN
    assert (schema["$defs"]["name"]["minLength"], schema["$defs"]["name"]["maxLength"]) == (2, 64)
    assert extension["description"]["maxLength"] == 512
    assert extension["keywords"]["maxItems"] == 10
    assert extension["keywords"]["items"]["maxLength"] == 32
    assert extension["keywords"]["items"]["pattern"] == "^[a-z0-9-]+$"
    env = schema["$defs"]["envNames"]["items"]["pattern"]
    assert env == "^[A-Z_][A-Z0-9_]*$"
    assert schema["properties"]["extension"]["required"] == ["name", "version", "description"]


def test_every_property_of_the_schema_has_a_title_and_a_description() -> None:
    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, child in node.get("properties", {}).items():
                assert child.get("description"), f"{path}.{key}"
                assert child.get("title"), f"{path}.{key}"
                walk(child, f"{path}.{key}")
            if "properties" in node:  # unknown keys are warnings, so the schema lets them through
                assert node["additionalProperties"] is True, path

    walk(manifest_schema(), "")


def test_manifest_schema_returns_a_copy() -> None:
    schema = manifest_schema()
    schema["title"] = "changed"
    assert manifest_schema()["title"] == "extension.toml"


def test_a_number_too_long_to_read_is_a_problem_not_a_crash() -> None:
    from extensions.manifest import check_manifest

    manifest, problems = check_manifest('[extension]\nname = "x"\nbig = ' + "9" * 5000 + "\n")
    assert manifest is None
    assert [p.path for p in problems] == ["extension.toml"]
    assert "thousands of digits" in problems[0].message


# --- to_dict / from_dict: the build sandbox hands the manifest back through them ------------------


def test_a_manifest_survives_to_dict_and_from_dict_exactly() -> None:
    manifest = parse_manifest(SPEC_EXAMPLE)
    data = manifest.to_dict()
    again = Manifest.from_dict(json.loads(json.dumps(data)))  # as it crosses the process boundary
    assert again == manifest
    assert again.to_dict() == data
    assert [d.constraint.written for d in again.dependencies] == ["^1.7", ">=3.5, <4"]
    assert data["dependencies"] == [
        {"name": "containerd", "constraint": ">=1.7.0, <2.0.0-0", "written": "^1.7"},
        {"name": "etcd", "constraint": ">=3.5.0, <4.0.0-0", "written": ">=3.5, <4"},
    ]


def test_from_dict_reads_documents_stored_before_the_written_form_was_kept() -> None:
    data = parse_manifest(SPEC_EXAMPLE).to_dict()
    for item in data["dependencies"]:
        del item["written"]
    old = Manifest.from_dict(data)
    assert [str(d.constraint) for d in old.dependencies] == [">=1.7.0, <2.0.0-0", ">=3.5.0, <4.0.0-0"]


def test_from_dict_refuses_a_written_form_that_is_not_the_constraint() -> None:
    data = parse_manifest(SPEC_EXAMPLE).to_dict()
    data["dependencies"][0]["written"] = "^2"
    with pytest.raises(ValueError, match="is not"):
        Manifest.from_dict(data)
