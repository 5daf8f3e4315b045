"""Each limit of the build sandbox, set through its setting, fails a hostile build as the author's
error naming the step, the file and the limit (SPEC 2.4); the same build passes with the defaults
where the content is merely large. Through the API, with the real sandbox."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from builds.models import Build
from registry.limits import sandbox_limits
from registry.models import Version

pytest_plugins = ["tests.factories"]


def package(tmp_path: Path, name: str, version: str, **kw: Any) -> Path:
    from tests.factories import package as build

    return build(tmp_path, name, version, **kw)


def publish(client: Client, token: str, path: Path) -> Any:
    from tests.factories import publish as post

    return post(client, token, path)


def failed(client: Client, token: str, path: Path) -> tuple[dict[str, Any], Build]:
    from tests.factories import refusal

    _status, error = refusal(publish(client, token, path))
    build = Build.objects.get(pk=next(d["build"] for d in error["details"] if "build" in d))
    assert build.status == Build.Status.FAILED
    return error, build


def test_a_check_past_its_cpu_budget_fails_the_build_naming_the_file(
    client: Client, token: str, tmp_path: Path, settings: Any
) -> None:
    settings.REGISTRY_SANDBOX_CPU_SECONDS = 1
    # 6 MB that takes the TOML parser seconds (4.6 s of CPU on a fast machine here) but gzip (the
    # rebuild step, before it) milliseconds.
    path = package(tmp_path, "heavy", "1.0.0", extra_files={"data/big.toml": "x = [" + "1," * 3_000_000 + "1]\n"})
    started = time.monotonic()
    error, build = failed(client, token, path)
    assert error["code"] == "invalid_archive"
    assert error["message"].startswith("content check of data/big.toml exceeded 1 s of CPU"), error
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("check content", "failed")
    assert time.monotonic() - started < 30
    assert not Version.objects.exists()


def test_a_check_past_the_memory_limit_fails_the_build_naming_the_file(
    client: Client, token: str, tmp_path: Path, settings: Any
) -> None:
    settings.REGISTRY_SANDBOX_MEMORY = 128 * 1024 * 1024
    bomb = "[" + "0," * 20_000_000 + "0]"  # 40 MB of JSON: a list of 20 million items
    error, _ = failed(client, token, package(tmp_path, "fat", "1.0.0", extra_files={"data/big.json": bomb}))
    assert error["message"].startswith("content check of data/big.json exceeded the memory limit of 128 MiB"), error


def test_a_readme_past_its_cpu_budget_fails_the_build(
    client: Client, token: str, tmp_path: Path, settings: Any
) -> None:
    settings.REGISTRY_SANDBOX_README_CPU_SECONDS = 1
    error, build = failed(client, token, package(tmp_path, "brackets", "1.0.0", readme="[" * 500_000))
    assert error["message"].startswith("README rendering of README.md exceeded 1 s of CPU"), error
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("readme", "failed")


def test_the_wall_time_of_the_sandbox_is_bounded(
    client: Client, token: str, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_nu = tmp_path / "bin" / "nu"
    slow_nu.parent.mkdir()
    slow_nu.write_text("#!/bin/sh\nsleep 60\n")
    slow_nu.chmod(0o755)
    monkeypatch.setenv("PROVISIONING_NU", str(slow_nu))
    settings.REGISTRY_SANDBOX_WALL_SECONDS = 5
    started = time.monotonic()
    error, _ = failed(client, token, package(tmp_path, "sleepy", "1.0.0"))
    assert "content check of nulib/sleepy.nu did not finish within 5 s" in error["message"], error
    assert time.monotonic() - started < 15


def test_what_the_sandbox_sends_back_is_bounded(client: Client, token: str, tmp_path: Path, settings: Any) -> None:
    settings.REGISTRY_SANDBOX_OUTPUT = 64 * 1024
    files = {f"data/f{i:04d}-{'x' * 150}.json": "{}" for i in range(600)}  # MANIFEST.json's list is ~120 KB
    error, _ = failed(client, token, package(tmp_path, "wide", "1.0.0", extra_files=files))
    assert "produced more than 65536 bytes of results" in error["message"], error


def test_the_smallest_open_files_setting_still_builds_an_ordinary_extension(
    client: Client, token: str, tmp_path: Path, settings: Any
) -> None:
    """Extraction holds one member open at a time and the tools (KCL, Nushell) start within 32
    descriptors; going past the limit is the sandbox's unit test."""
    settings.REGISTRY_SANDBOX_OPEN_FILES = 32
    files = {f"templates/t{i}.j2": "{{ x }}" for i in range(100)}
    build = publish(client, token, package(tmp_path, "few", "1.0.0", extra_files=files)).json()["data"]
    assert build["status"] == "succeeded", build["error"]


def test_the_settings_make_the_sandbox_s_limits(settings: Any) -> None:
    settings.REGISTRY_SANDBOX_CPU_SECONDS = 7
    settings.REGISTRY_SANDBOX_MEMORY = 300 * 1024 * 1024
    settings.REGISTRY_SANDBOX_WALL_SECONDS = 50
    settings.REGISTRY_SANDBOX_OUTPUT = 2 * 1024 * 1024
    settings.REGISTRY_SANDBOX_OPEN_FILES = 99
    settings.REGISTRY_SANDBOX_ISOLATE_NETWORK = False
    settings.REGISTRY_MAX_UNPACKED_BYTES = 10 * 1024 * 1024
    settings.REGISTRY_MAX_PACKAGE_BYTES = 20 * 1024 * 1024
    limits = sandbox_limits()
    assert (limits.cpu_seconds, limits.memory_bytes, limits.wall_seconds) == (7, 300 * 1024 * 1024, 50)
    assert (limits.output_bytes, limits.open_files, limits.isolate_network) == (2 * 1024 * 1024, 99, False)
    assert limits.file_bytes == 21 * 1024 * 1024  # the largest file a build writes, and a margin


@pytest.mark.parametrize(
    ("setting", "value", "extra", "path", "fragment"),
    [
        (
            "REGISTRY_MAX_PROVIDES",
            2,
            {"provides": {"taskservs": ["a1", "a2", "a3"]}},
            "provides.taskservs",
            "at most 2",
        ),
        ("REGISTRY_MAX_DEPENDENCIES", 0, {"dependencies": ["etcd"]}, "dependencies.extensions", "at most 0"),
    ],
)
def test_the_manifest_bounds_are_settings(
    client: Client,
    token: str,
    tmp_path: Path,
    settings: Any,
    setting: str,
    value: int,
    extra: dict[str, Any],
    path: str,
    fragment: str,
) -> None:
    setattr(settings, setting, value)
    error, build = failed(client, token, package(tmp_path, "bounded", "1.0.0", **extra))
    assert error["code"] == "invalid_manifest"
    assert any(d.get("path") == path and fragment in d.get("message", "") for d in error["details"]), error
    assert (build.log[-1]["step"], build.log[-1]["status"]) == ("inspect", "failed")


def test_the_served_schema_carries_the_manifest_bounds(client: Client, settings: Any) -> None:
    settings.REGISTRY_MAX_PROVIDES = 5
    schema = client.get("/api/v1/schema/extension.json").json()
    assert schema["properties"]["provides"]["properties"]["taskservs"]["maxItems"] == 5
