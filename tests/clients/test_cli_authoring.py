"""`provisioning extension validate|test|build`, driven as users drive them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clients.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent for p in (ROOT / "extensions").glob("*/*/*/extension.toml"))
KUBERNETES = ROOT / "extensions" / "taskservs" / "kubernetes" / "1.28.6"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


GOOD_TOML = """\
[extension]
name = "hello-world"
version = "0.1.0"
description = "A greeting taskserv"
type = "taskserv"
license = "MIT"

[provides]
taskservs = ["hello-world"]

[build]
include = ["nulib/**", "templates/**", "README.md"]
exclude = ["tests/**"]
"""


@pytest.fixture
def good(tmp_path: Path) -> Path:
    root = tmp_path / "hello-world"
    write(root, "extension.toml", GOOD_TOML)
    write(root, "README.md", "# hello-world\n")
    write(root, "nulib/hello.nu", 'export def greet [name: string]: nothing -> string { $"hello ($name)" }\n')
    write(root, "templates/hello.conf.j2", "greeting = {{ name | default('world') }}\n")
    write(root, "tests/test_hello.nu", 'use std/assert\nuse ../nulib/hello.nu *\nassert equal (greet "x") "hello x"\n')
    return root


def test_validate_accepts_a_valid_extension(capsys: pytest.CaptureFixture[str], good: Path) -> None:
    code, out, err = run(capsys, "extension", "validate", str(good))
    assert code == 0
    assert "hello-world 0.1.0 (taskserv) is valid" in out
    assert err == ""


def test_validate_lists_every_problem_and_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write(
        tmp_path,
        "extension.toml",
        '[extension]\nname = "Bad_Name"\nversion = "1.0"\ndescription = "x"\ntype = "taskserv"\n'
        '[dependencies]\nextensions = ["etcd >>3"]\n',
    )
    code, _out, err = run(capsys, "extension", "validate", str(tmp_path))
    assert code == 1
    assert err.startswith("error: ")
    assert "extension.name" in err and "bad-name" in err  # the suggested spelling
    assert "extension.version" in err
    assert "dependencies.extensions[0]" in err


def test_validate_json_output_is_the_error_envelope(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write(tmp_path, "extension.toml", '[extension]\nname = "ok-name"\nversion = "1.0.0"\n')
    code, out, _ = run(capsys, "extension", "validate", str(tmp_path), "--output", "json")
    body = json.loads(out)
    assert code == 1
    assert body["success"] is False
    assert body["error"]["code"] == "invalid_manifest"
    paths = {d["path"] for d in body["error"]["details"]}
    assert "extension.description" in paths


def test_validate_json_success_envelope_carries_the_manifest(capsys: pytest.CaptureFixture[str], good: Path) -> None:
    code, out, _ = run(capsys, "--output", "json", "extension", "validate", str(good))
    body = json.loads(out)
    assert code == 0
    assert body == {"success": True, "data": body["data"]}
    assert body["data"]["manifest"]["name"] == "hello-world"
    assert body["data"]["warnings"] == []


def test_validate_reports_a_missing_manifest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "extension", "validate", str(tmp_path))
    assert code == 1
    assert "no extension.toml" in err
    assert len(err.strip().splitlines()) == 1


def test_build_prints_the_path_and_sha256_and_is_reproducible(
    capsys: pytest.CaptureFixture[str], good: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "extension", "build", str(good), "-o", str(tmp_path / "a"))
    assert code == 0
    package = tmp_path / "a" / "hello-world-0.1.0.tar.gz"
    assert out.splitlines()[0] == str(package)
    first = package.read_bytes()
    import hashlib

    assert f"sha256:{hashlib.sha256(first).hexdigest()}" in out
    (good / "README.md").touch()  # a new mtime must not change the bytes
    code, _, _ = run(capsys, "extension", "build", str(good), "-o", str(tmp_path / "b"))
    assert code == 0
    assert (tmp_path / "b" / "hello-world-0.1.0.tar.gz").read_bytes() == first


def test_build_json_output(capsys: pytest.CaptureFixture[str], good: Path, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "extension", "build", str(good), "-o", str(tmp_path / "d"), "--output=json")
    data = json.loads(out)["data"]
    assert code == 0
    assert data["name"] == "hello-world" and data["version"] == "0.1.0"
    assert len(data["sha256"]) == 64
    assert data["files"] == 4  # README, module, template, MANIFEST covers them (tests excluded)


def test_build_refuses_an_invalid_extension(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write(tmp_path, "extension.toml", '[extension]\nname = "x"\n')
    code, _, err = run(capsys, "extension", "build", str(tmp_path), "-o", str(tmp_path / "dist"))
    assert code == 1
    assert "extension validate" in err
    assert not (tmp_path / "dist").exists()


def test_test_runs_every_check_and_the_extensions_tests(
    capsys: pytest.CaptureFixture[str], good: Path, nu: str
) -> None:
    code, out, _ = run(capsys, "extension", "test", str(good), "--output", "json")
    data = json.loads(out)["data"]
    assert code == 0
    checks = {(r["check"], r["path"]): r["status"] for r in data["results"]}
    assert checks[("nushell", "nulib/hello.nu")] == "passed"
    assert checks[("jinja2", "templates/hello.conf.j2")] == "passed"
    assert checks[("test", "tests/test_hello.nu")] == "passed"
    assert checks[("package", "hello-world-0.1.0.tar.gz")] == "passed"


def test_test_fails_on_a_broken_template_and_a_failing_test(
    capsys: pytest.CaptureFixture[str], good: Path, nu: str
) -> None:
    write(good, "templates/hello.conf.j2", "{% if x %}unclosed\n")
    write(good, "tests/test_hello.nu", 'use std/assert\nuse ../nulib/hello.nu *\nassert equal (greet "x") "bye"\n')
    code, out, err = run(capsys, "extension", "test", str(good))
    assert code == 1
    assert "1 failed" not in err  # two checks failed
    assert "2 failed" in err
    assert "templates/hello.conf.j2" in out and "tests/test_hello.nu" in out
    test_row = next(line for line in out.splitlines() if line.startswith("test "))
    assert "tests/test_hello.nu:3:" in test_row and "Assertion failed. These are not equal." in test_row


def test_test_reports_missing_nushell_as_skipped_never_passed(
    capsys: pytest.CaptureFixture[str], good: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PROVISIONING_NU", str(tmp_path / "missing-nu"))
    code, out, _ = run(capsys, "extension", "test", str(good), "--output", "json")
    results = json.loads(out)["data"]["results"]
    nushell = [r for r in results if r["check"] in ("nushell", "test")]
    assert code == 0
    assert nushell and all(r["status"] == "skipped" for r in nushell)


@pytest.mark.parametrize("source", EXAMPLES, ids=lambda p: f"{p.parent.name}-{p.name}")
def test_every_bundled_example_passes_extension_test(
    capsys: pytest.CaptureFixture[str], source: Path, nu: str, kcl: None
) -> None:
    code, out, err = run(capsys, "extension", "test", str(source), "--output", "json")
    data = json.loads(out)
    assert code == 0, err or out
    statuses = {r["status"] for r in data["data"]["results"]}
    assert statuses == {"passed"}  # nothing skipped: KCL and Nushell really ran
    assert any(r["check"] == "test" for r in data["data"]["results"])


def test_there_are_bundled_examples_of_every_kind() -> None:
    kinds = {p.parent.parent.name for p in EXAMPLES}
    assert kinds == {"providers", "taskservs", "clusters"}
    assert len(EXAMPLES) >= 17


def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "extension", "frobnicate")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "extension")
    assert code == 2
    assert "command is required" in err


def test_the_console_script_runs_as_users_run_it(good: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "clients.cli", "extension", "validate", str(good), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["success"] is True


@pytest.mark.parametrize("command", ["validate", "test", "build"])
def test_a_path_that_does_not_exist_is_named_as_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for given, shown in (("nope", "nope"), (str(tmp_path / "x" / "nope" / "deeper"), str(tmp_path / "x/nope/deeper"))):
        code, out, err = run(capsys, "extension", command, given)
        assert code == 1
        assert err == (
            f"error: {shown} does not exist: give an extension source directory (one holding extension.toml)\n"
        )
        assert out == ""
    assert not (tmp_path / "dist").exists()


def test_a_directory_without_a_manifest_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "extension", "validate", str(tmp_path))
    assert code == 1
    assert err == (
        f"error: no extension.toml in {tmp_path}: an extension source directory must contain extension.toml\n"
    )
