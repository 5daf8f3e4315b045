"""The configuration interface read from an extension's KCL schemas (extensions.interface), with
KCL's own parser: what is read, how it is written, and that hostile files cost bounded time and
space and leave a warning, never a crash of the caller."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from extensions import interface as kcl_interface
from extensions.checks import kcl_available
from extensions.interface import (
    InterfaceLimits,
    clean_text,
    extract_interface,
    interface_files,
    interface_from_dict,
    nesting_depth,
    parse_docstring,
    summary,
)
from extensions.sandbox import SandboxLimitExceeded, SandboxLimits, run_sandboxed
from tests.conftest import require

EXAMPLES = Path(__file__).resolve().parents[2] / "extensions"
MiB = 1024 * 1024

SCHEMAS = '''\
# A package's schemas.
import models.base

protocol Named:
    name: str

mixin Labelled for Named:
    labels: {str:str} = {}

schema Server(base.ServerConfig):
    """One machine of the infra.

    Attributes
    ----------
    name : str, required
        Its host name,
        lower case.
    port : int, default is 22
        The SSH port.
    """
    mixin [Labelled]
    [extra: str]: str

    name: str
    port: int = 22  # not this: the docstring says it
    user?: str = "root"  # who logs in
    zone?: "a" | "b"
    @deprecated(version="1.2", reason="use zone")
    region?: str
    disks: [int] = [
        20,
        100
    ]
    address: str

    check:
        len(name) > 0 and name.islower(), "name must be a lower-case host name"
        port >= 1 and port <= 65535
        regex.match(address, r"^((a*)*b|[0-9.]+)$") if address, "address must be an IPv4 address"
'''


@pytest.fixture(autouse=True)
def _kcl_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    require(kcl_available(), "kcl-lib (KCL's parser)")
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))  # KCL writes ~/.kcl


def tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def one(interface: dict[str, Any], name: str) -> dict[str, Any]:
    schemas = [s for s in interface["schemas"] if s["name"] == name]
    assert len(schemas) == 1, interface
    return dict(schemas[0])


def fields_by_name(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in schema["fields"]}


# --- what is read -------------------------------------------------------------------------------


def test_every_schema_attribute_and_check_is_read_as_written(tmp_path: Path) -> None:
    data = extract_interface(tree(tmp_path, {"kcl/server.k": SCHEMAS}))
    assert data["format"] == 1
    assert str(data["parser"]).startswith("kcl-lib ")
    assert (data["files"], data["truncated"], data["warnings"]) == (["kcl/server.k"], False, [])
    assert [(s["name"], s["kind"]) for s in data["schemas"]] == [
        ("Named", "protocol"),
        ("Labelled", "mixin"),
        ("Server", "schema"),
    ]
    assert one(data, "Labelled")["protocol"] == "Named"
    server = one(data, "Server")
    assert server["file"] == "kcl/server.k"
    assert server["line"] == 10
    assert server["doc"] == "One machine of the infra."  # the Attributes section goes to the fields
    assert server["parent"] == "base.ServerConfig"
    assert server["mixins"] == ["Labelled"]
    assert server["index_signature"] == "[extra: str]: str"
    fields = fields_by_name(server)
    assert list(fields) == ["name", "port", "user", "zone", "region", "disks", "address"]
    assert fields["name"] == {
        "name": "name",
        "type": "str",
        "optional": False,
        "required": True,
        "default": None,
        "doc": "Its host name, lower case.",
        "decorators": [],
        "line": 24,
    }
    port, user = fields["port"], fields["user"]
    assert (port["default"], port["required"], port["doc"]) == ("22", False, "The SSH port.")
    assert (user["optional"], user["default"], user["doc"]) == (True, '"root"', "who logs in")
    assert (fields["zone"]["type"], fields["zone"]["required"]) == ('"a" | "b"', False)
    assert fields["region"]["decorators"] == ['deprecated(version="1.2", reason="use zone")']
    assert fields["disks"]["default"] == "[ 20, 100 ]"  # on one line
    assert fields["address"]["required"] is True
    assert server["checks"] == [
        {
            "rule": "len(name) > 0 and name.islower()",
            "message": "name must be a lower-case host name",
            "condition": None,
            "line": 37,
        },
        {"rule": "port >= 1 and port <= 65535", "message": None, "condition": None, "line": 38},
        {
            # A pattern is text: nothing is evaluated, nothing backtracks.
            "rule": 'regex.match(address, r"^((a*)*b|[0-9.]+)$")',
            "message": "address must be an IPv4 address",
            "condition": "address",
            "line": 39,
        },
    ]
    assert summary(data) == "3 schemas (9 attributes, 3 check rules) from 1 KCL file"


def test_the_files_read_are_the_package_s_not_its_tests_or_examples(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcl/a.k": "schema A:\n    x: int\n",
            "kcl/nested/b.k": "schema B:\n    y: int\n",
            "schemas/c.k": "schema C:\n    z: int\n",
            "kcl/a_test.k": "schema T:\n    t: int\n",
            "tests/t.k": "schema T:\n    t: int\n",
            "examples/e.k": "schema E:\n    e: int\n",
            "kcl/tests/kept.k": "schema K:\n    k: int\n",  # only the package's top tests/ is left out
        },
    )
    os.symlink(root / "kcl" / "a.k", root / "kcl" / "link.k")
    assert [rel for rel, _ in interface_files(root)] == ["kcl/a.k", "kcl/nested/b.k", "kcl/tests/kept.k", "schemas/c.k"]
    assert [s["name"] for s in extract_interface(root)["schemas"]] == ["A", "B", "K", "C"]


def test_a_package_without_kcl_files_has_an_empty_interface(tmp_path: Path) -> None:
    data = extract_interface(tree(tmp_path, {"README.md": "# x\n"}))
    assert (data["files"], data["schemas"], data["truncated"], data["warnings"]) == ([], [], False, [])


def test_without_kcl_the_files_are_listed_as_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kcl_interface, "kcl_parser_version", lambda: None)
    data = extract_interface(tree(tmp_path, {"kcl/a.k": "schema A:\n    x: int\n"}))
    assert (data["parser"], data["schemas"], data["truncated"]) == (None, [], True)
    assert data["warnings"] == ["1 KCL file(s) not read: KCL (kcl-lib) is not installed on the registry"]


def test_a_syntax_error_is_a_warning_and_the_rest_is_read(tmp_path: Path) -> None:
    data = extract_interface(tree(tmp_path, {"kcl/a.k": "schema A:\n    x: int = \n    y: str\n"}))
    assert [f["name"] for f in one(data, "A")["fields"]] == ["x", "y"]
    assert data["warnings"] == ["kcl/a.k: KCL reported 1 syntax error(s); what they affect is missing"]


def test_the_numpydoc_attributes_section_is_split_from_the_schema_s_own_text() -> None:
    own, attributes = parse_docstring(
        "Summary.\n\nMore.\n\nAttributes\n----------\na : int\n    The a.\n    Still a.\nb\n    The b.\n"
        "c : str\n\nExamples\n--------\nS {a = 1}\n"
    )
    assert own == "Summary.\n\nMore.\n\nExamples\n--------\nS {a = 1}"
    assert attributes == {"a": "The a. Still a.", "b": "The b."}


@pytest.mark.parametrize(
    "directory",
    sorted({p.parent.parent for p in EXAMPLES.glob("*/*/*/kcl/*.k")}),
    ids=lambda p: f"{p.parent.name}-{p.name}",
)
def test_every_bundled_example_has_a_useful_interface(directory: Path) -> None:
    data = extract_interface(directory)
    assert data["warnings"] == [] and data["truncated"] is False
    assert data["schemas"], directory
    for schema in data["schemas"]:
        assert schema["doc"], schema["name"]  # every example schema says what it is
        assert schema["fields"], schema["name"]
        assert all(f["type"] for f in schema["fields"])
    assert any(s["checks"] for s in data["schemas"])


def test_the_redis_example_documents_its_attributes() -> None:
    data = extract_interface(EXAMPLES / "taskservs" / "redis" / "7.2.4")
    fields = fields_by_name(one(data, "Redis"))
    assert fields["port"]["doc"] == "The TCP port Redis listens on."
    assert all(f["doc"] for f in fields.values())


# --- bounded ----------------------------------------------------------------------------------------


def test_deep_nesting_is_not_given_to_the_parser(tmp_path: Path) -> None:
    # KCL's parser slows down quadratically with bracket depth and overflows its stack near 10,000.
    deep = "schema A:\n    x: int = " + "(" * 100_000 + "1" + ")" * 100_000 + "\n"
    root = tree(tmp_path, {"kcl/deep.k": deep, "kcl/ok.k": "schema B:\n    y: int\n"})
    started = time.monotonic()
    data = extract_interface(root, limits=InterfaceLimits(max_file_bytes=MiB))
    assert time.monotonic() - started < 5
    assert data["files"] == ["kcl/ok.k"]
    assert [s["name"] for s in data["schemas"]] == ["B"]
    assert data["truncated"] is True
    assert data["warnings"] == ["kcl/deep.k: not read: brackets nest deeper than 64 levels"]


def test_nesting_depth_is_counted_in_one_pass_and_stops_early() -> None:
    assert nesting_depth("a = [1, {b: (2)}]", 10) == 3
    assert nesting_depth(")))(((", 10) == 3
    assert nesting_depth("(" * 1_000_000, 64) == 65


def test_a_huge_docstring_is_cut(tmp_path: Path) -> None:
    doc = "<b>" + "x" * 200_000
    root = tree(tmp_path, {"kcl/a.k": f'schema A:\n    """{doc}"""\n    a: int  # {"y" * 10_000}\n'})
    data = extract_interface(root, limits=InterfaceLimits(max_text=1000))
    schema = one(data, "A")
    assert len(str(schema["doc"])) == 1000 and str(schema["doc"]).endswith("…")
    assert len(str(fields_by_name(schema)["a"]["doc"])) == 1000
    assert data["warnings"] == ["docstrings longer than 1000 characters are cut"]
    assert data["truncated"] is False  # shortened, not left out


def test_a_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    root = tree(tmp_path, {"kcl/big.k": "schema A:\n    a: int\n" + "# padding\n" * 30_000})
    data = extract_interface(root, limits=InterfaceLimits(max_file_bytes=64 * 1024))
    assert (data["files"], data["schemas"], data["truncated"]) == ([], [], True)
    assert data["warnings"] == ["kcl/big.k: not read: larger than 65536 bytes"]


def test_thousands_of_fields_stop_at_the_limit(tmp_path: Path) -> None:
    fields = "".join(f'    f{i}?: str = "v{i}"\n' for i in range(20_000))
    root = tree(tmp_path, {"kcl/a.k": "schema A:\n" + fields, "kcl/b.k": "schema B:\n    b: int\n"})
    started = time.monotonic()
    data = extract_interface(root, limits=InterfaceLimits(max_file_bytes=MiB, max_fields=5000))
    assert time.monotonic() - started < 30
    assert len(one(data, "A")["fields"]) == 5000
    assert [s["name"] for s in data["schemas"]] == ["A"]  # nothing more once the limit is reached
    assert data["truncated"] is True
    assert data["warnings"] == ["only the first 5000 attributes are shown (the limit in all schemas)"]


def test_many_schemas_and_checks_stop_at_their_limits(tmp_path: Path) -> None:
    schema = "schema S{}:\n    a: int = {}\n    check:\n        a >= 0\n        a < 9\n"
    schemas = "".join(schema.format(i, i) for i in range(300))
    data = extract_interface(
        tree(tmp_path, {"kcl/a.k": schemas}), limits=InterfaceLimits(max_schemas=100, max_checks=50)
    )
    assert len(data["schemas"]) == 100
    assert sum(len(s["checks"]) for s in data["schemas"]) == 50
    assert data["warnings"] == [
        "only the first 50 check rules are shown (the limit in all schemas)",
        "only the first 100 schemas are shown",
    ]


def test_the_whole_interface_stays_under_its_size_limit(tmp_path: Path) -> None:
    schemas = "".join(f'schema S{i}:\n    """{"d" * 900}"""\n    a: int\n' for i in range(500))
    limits = InterfaceLimits(max_file_bytes=MiB, max_bytes=64 * 1024)
    data = extract_interface(tree(tmp_path, {"kcl/a.k": schemas}), limits=limits)
    assert len(json.dumps(data["schemas"], ensure_ascii=False)) <= 64 * 1024
    assert 50 < len(data["schemas"]) < 70
    assert data["truncated"] is True
    assert data["warnings"][0].startswith("schemas past 65536 bytes of interface are left out (from kcl/a.k S")


def test_the_source_read_in_all_and_the_number_of_files_are_bounded(tmp_path: Path) -> None:
    files = {f"kcl/f{i:03}.k": f"schema S{i}:\n    a: int\n" + "#" * 2000 + "\n" for i in range(50)}
    data = extract_interface(tree(tmp_path, files), limits=InterfaceLimits(max_source_bytes=20_000))
    assert len(data["files"]) == 9
    assert data["warnings"] == ["KCL files past 20000 bytes in all are not read"]
    data = extract_interface(tmp_path, limits=InterfaceLimits(max_files=3))
    assert len(data["files"]) == 3
    assert data["warnings"] == ["only the first 3 KCL files are read"]


def test_a_file_that_is_not_utf8_is_not_read(tmp_path: Path) -> None:
    latin1 = "schema Café:\n    a: int\n".encode("latin-1")
    root = tree(tmp_path, {"kcl/latin1.k": latin1, "kcl/ok.k": "schema B:\n    b: int\n"})
    data = extract_interface(root)
    assert data["files"] == ["kcl/ok.k"]
    assert data["warnings"] == ["kcl/latin1.k: not read: not UTF-8 (byte 10)"]


def test_control_characters_and_bidi_overrides_never_reach_the_document(tmp_path: Path) -> None:
    doc = "evil\x1b[31m red\u202e txet\x07 end"
    root = tree(tmp_path, {"kcl/a.k": f'schema A:\n    """{doc}"""\n    a: int  # x\x0by\n'})
    schema = one(extract_interface(root), "A")
    assert schema["doc"] == "evil[31m red txet end"
    assert fields_by_name(schema)["a"]["doc"] == "xy"
    assert clean_text("a\x00b\x9fc\ud800d", 100) == "abc?d"


def test_many_warnings_are_summed_up(tmp_path: Path) -> None:
    files = {f"kcl/f{i:02}.k": b"schema \xff:\n" for i in range(40)}
    data = extract_interface(tree(tmp_path, files))
    assert len(data["warnings"]) == 20
    assert data["warnings"][-1] == "... and 21 more warnings"


# --- in the caller -------------------------------------------------------------------------------


def test_what_the_sandbox_sends_back_is_rebuilt_and_checked(tmp_path: Path) -> None:
    data = extract_interface(tree(tmp_path, {"kcl/server.k": SCHEMAS}))
    assert interface_from_dict(json.loads(json.dumps(data))) == data
    sneaky = json.loads(json.dumps(data))
    sneaky["schemas"][0]["doc"] = "a\x00b"
    sneaky["schemas"][0]["extra"] = "dropped"
    rebuilt = interface_from_dict(sneaky)
    assert rebuilt["schemas"][0]["doc"] == "ab"
    assert "extra" not in rebuilt["schemas"][0]
    broken: Any
    for broken in (None, [], {"format": 2}, {**data, "schemas": "x"}, {**data, "schemas": [{"name": "A"}]}):
        with pytest.raises(ValueError, match="malformed interface"):
            interface_from_dict(broken)
    bad_line = json.loads(json.dumps(data))
    bad_line["schemas"][0]["fields"][0]["line"] = "1"
    with pytest.raises(ValueError, match="not an integer"):
        interface_from_dict(bad_line)
    with pytest.raises(ValueError, match="too long"):
        interface_from_dict(data, limits=InterfaceLimits(max_schemas=1))


# --- in the sandbox --------------------------------------------------------------------------------

SANDBOX = SandboxLimits(cpu_seconds=5, memory_bytes=512 * MiB, wall_seconds=60, output_bytes=4 * MiB)


def sandboxed(root: Path, tmp_path: Path, limits: InterfaceLimits | None = None) -> object:
    kwargs = {"root": str(root), "limits": (limits or InterfaceLimits()).to_dict(), "home": str(tmp_path / "home")}
    return run_sandboxed("extensions.sandboxed_steps.interface", kwargs, limits=SANDBOX).value


def test_the_sandboxed_step_answers_the_same_document(tmp_path: Path) -> None:
    root = tree(tmp_path / "pkg", {"kcl/server.k": SCHEMAS})
    assert sandboxed(root, tmp_path) == extract_interface(root)
    assert (tmp_path / "home" / ".kcl").is_dir()  # KCL wrote under the home it was given


def test_a_file_that_crashes_kcl_s_parser_fails_the_step_naming_the_file(tmp_path: Path) -> None:
    # No brackets, but 100,000 operands: KCL's parser overflows its stack (a crash of the child).
    crash = "schema A:\n    x: int = " + "+".join(["1"] * 100_000) + "\n"
    root = tree(tmp_path / "pkg", {"kcl/a.k": "schema Fine:\n    a: int\n", "kcl/crash.k": crash})
    with pytest.raises(SandboxLimitExceeded) as caught:
        sandboxed(root, tmp_path, InterfaceLimits(max_file_bytes=MiB))
    assert str(caught.value).startswith("interface extraction of kcl/crash.k exceeded the memory limit")
    assert (caught.value.code, caught.value.step, caught.value.file) == (
        "invalid_archive",
        "interface extraction",
        "kcl/crash.k",
    )
