"""`provisioning module discover|load|list|reload`, driven as users drive them, against the
session's live registry (every bundled example published)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from clients import cli
from tests.clients.client_tools import ROOT, Result, run

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry


Capsys = pytest.CaptureFixture[str]


@pytest.fixture(autouse=True)
def _runtime_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No discovery directory but the test's own, no policy or runtime version from outside."""
    for name in (
        "PROVISIONING_EXTENSIONS_PATH",
        "PROVISIONING_EXTENSION_MODE",
        "PROVISIONING_ALLOWED_EXTENSIONS",
        "PROVISIONING_BLOCKED_EXTENSIONS",
        "PROVISIONING_VERSION",
        "PROVISIONING_REGISTRY",
        "PROVISIONING_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def cli_args(examples_registry: LiveRegistry, tmp_path: Path) -> list[str]:
    return ["--registry", examples_registry.url, "--home", str(tmp_path / "home")]


def envelope(result: Result, *, success: bool = True) -> Any:
    """The JSON envelope of a command's stdout; its data (or error)."""
    body = json.loads(result.out)
    assert body["success"] is success, body
    if success:
        assert set(body) == {"success", "data"}
        assert result.code == 0
        return body["data"]
    assert set(body) == {"success", "error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert result.code != 0
    return body["error"]


# --- discover -----------------------------------------------------------------------------------------


def test_discover_lists_what_the_registry_offers_of_a_kind(capsys: Capsys, cli_args: list[str]) -> None:
    data = envelope(run(capsys, *cli_args, "module", "discover", "taskserv", "--output", "json"))
    by_name = {item["name"]: item for item in data}
    assert {"kubernetes", "etcd", "containerd", "cilium", "redis"} <= set(by_name)
    assert by_name["kubernetes"] | {"description": ""} == {
        "type": "taskserv",
        "name": "kubernetes",
        "extension": "kubernetes",
        "version": "1.29.1",
        "description": "",
    }
    assert all(item["type"] == "taskserv" for item in data)
    assert [i["name"] for i in data] == sorted(i["name"] for i in data)
    table = run(capsys, *cli_args, "module", "discover", "providers")
    assert table.code == 0
    assert table.out.splitlines()[0].split() == ["name", "extension", "version", "description"]
    assert {line.split()[0] for line in table.out.splitlines()[1:]} == {"aws", "local", "upcloud"}


@pytest.mark.parametrize(
    ("runtime", "compatible"),
    [
        ("1.1.0", (False, True)),
        # A pre-release runtime is placed by precedence (extensions.versions.runs_on), as the resolver does:
        ("1.2.0-rc.1", (False, True)),  # before 1.2.0: not >=1.2.0
        ("1.3.0-rc.1", (True, True)),  # after 1.2.0: >=1.2.0 although the constraint names no pre-release
    ],
)
def test_discover_with_a_name_gives_its_versions_and_compatibility(
    capsys: Capsys, cli_args: list[str], runtime: str, compatible: tuple[bool, bool]
) -> None:
    data = envelope(
        run(
            capsys,
            *cli_args,
            "module",
            "discover",
            "taskserv",
            "--name",
            "kubernetes",
            "--runtime-version",
            runtime,
            "--output",
            "json",
        )
    )
    assert len(data) == 1
    item = data[0]
    assert [(v["version"], v["compatible"], v["provisioning_version"]) for v in item["versions"]] == [
        ("1.29.1", compatible[0], ">=1.2.0"),
        ("1.28.6", compatible[1], ">=1.0.0"),
    ]
    assert item["dependencies"] == ["containerd ^1.7", "etcd ^3.5"]


def test_discover_of_an_unknown_name_suggests_close_ones(capsys: Capsys, cli_args: list[str]) -> None:
    error = envelope(
        run(capsys, *cli_args, "module", "discover", "taskserv", "--name", "kubernets", "--output", "json"),
        success=False,
    )
    assert error["code"] == "not_found"
    assert error["details"][0]["suggestions"][0] == "kubernetes"
    human = run(capsys, *cli_args, "module", "discover", "taskserv", "--name", "kubernets")
    assert human.code == 1
    assert human.err.startswith("error: the registry offers no taskserv named kubernets; did you mean 'kubernetes'")


# --- load, list, reload -------------------------------------------------------------------------------


def test_load_list_and_reload_act_on_the_runtime_state(capsys: Capsys, cli_args: list[str], tmp_path: Path) -> None:
    loaded = envelope(
        run(
            capsys,
            *cli_args,
            "module",
            "load",
            "taskserv",
            "kubernetes",
            "--runtime-version",
            "1.1.0",
            "--output",
            "json",
        )
    )
    ext = loaded["extension"]
    assert ext["metadata"] | {"description": ""} == {
        "name": "kubernetes",
        "version": "1.28.6",
        "description": "",
        "extension_type": "taskserv",
        "dependencies": ["containerd", "etcd"],
        "author": "Provisioning Team <team@provisioning.dev>",
        "repository": "https://github.com/provisioning/extensions",
    }
    assert ext["path"] == str(tmp_path / "home" / "store" / "trees" / "taskserv" / "kubernetes" / "1.28.6")
    assert ext["source"] == "registry" and ext["loaded_at"].endswith("Z")
    assert loaded["cached"] is False
    assert loaded["loaded"] == ["taskserv:containerd:1.7.13", "taskserv:etcd:3.5.12", "taskserv:kubernetes:1.28.6"]

    listed = envelope(run(capsys, *cli_args, "module", "list", "--output", "json"))
    assert [(e["metadata"]["name"], e["metadata"]["version"]) for e in listed] == [
        ("containerd", "1.7.13"),
        ("etcd", "3.5.12"),
        ("kubernetes", "1.28.6"),
    ]
    assert set(listed[0]) == {"metadata", "path", "loaded_at", "source"}

    again = envelope(
        run(capsys, *cli_args, "module", "load", "taskserv", "kubernetes", "--version", "1.28.6", "--output", "json")
    )
    assert again["cached"] is True and again["loaded"] == []

    reloaded = envelope(run(capsys, *cli_args, "module", "reload", "taskserv", "kubernetes", "--output", "json"))
    assert reloaded["message"] == "Extension kubernetes reloaded"
    assert reloaded["extension"]["loaded_at"] > ext["loaded_at"]
    assert reloaded["loaded"] == ["taskserv:kubernetes:1.28.6"]

    table = run(capsys, *cli_args, "module", "list")
    lines = table.out.splitlines()
    assert lines[0].split() == ["type", "name", "version", "source", "loaded", "at", "path"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["taskserv", "containerd", "1.7.13", "registry"],
        ["taskserv", "etcd", "3.5.12", "registry"],
        ["taskserv", "kubernetes", "1.28.6", "registry"],
    ]


def test_load_prints_what_it_loaded_and_the_nushell_step(
    capsys: Capsys, cli_args: list[str], tmp_path: Path, nu: str
) -> None:
    result = run(capsys, *cli_args, "module", "load", "taskserv", "etcd", "--version", "3.5.12")
    assert result.code == 0
    tree = tmp_path / "home" / "store" / "trees" / "taskserv" / "etcd" / "3.5.12"
    assert result.out == f"loaded taskserv etcd 3.5.12 (registry): {tree}\n"
    assert result.err.startswith("nushell nulib/etcd.nu: passed (")
    again = run(capsys, *cli_args, "module", "load", "taskserv", "etcd", "--version", "3.5.12")
    assert again.out == f"taskserv etcd 3.5.12 is already loaded (registry): {tree}\n"


def test_module_list_in_a_new_process_shows_what_module_load_loaded(
    examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    env = {**os.environ, "PROVISIONING_HOME": str(tmp_path / "home"), "PROVISIONING_REGISTRY": examples_registry.url}

    def cli_process(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", *argv],
            cwd=tmp_path / "work",
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    load = cli_process("module", "load", "provider", "aws", "--output", "json")
    assert load.returncode == 0, load.stderr
    listed = cli_process("module", "list", "--output", "json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)["data"]
    assert [(e["metadata"]["extension_type"], e["metadata"]["name"], e["metadata"]["version"]) for e in data] == [
        ("provider", "aws", "1.0.0")
    ]
    assert data[0]["loaded_at"] == json.loads(load.stdout)["data"]["extension"]["loaded_at"]


def test_reload_of_an_extension_loaded_in_two_versions_reports_each(
    capsys: Capsys, cli_args: list[str], tmp_path: Path
) -> None:
    for version in ("3.5.9", "3.5.12"):
        assert run(capsys, *cli_args, "module", "load", "taskserv", "etcd", "--version", version).code == 0
    trees = tmp_path / "home" / "store" / "trees" / "taskserv" / "etcd"
    both = run(capsys, *cli_args, "module", "reload", "taskserv", "etcd")
    assert both.code == 0, both.err
    assert both.out == (
        f"reloaded taskserv etcd 3.5.9 (registry): {trees / '3.5.9'}\n"
        f"reloaded taskserv etcd 3.5.12 (registry): {trees / '3.5.12'}\n"
    )
    data = envelope(run(capsys, *cli_args, "module", "reload", "taskserv", "etcd", "--output", "json"))
    assert data["message"] == "Extension etcd reloaded (3.5.9, 3.5.12)"
    assert data["reloaded"] == ["taskserv:etcd:3.5.9", "taskserv:etcd:3.5.12"]
    one = run(capsys, *cli_args, "module", "reload", "taskserv", "etcd", "--version", "3.5.12")
    assert one.out == f"reloaded taskserv etcd 3.5.12 (registry): {trees / '3.5.12'}\n"
    missing = run(capsys, *cli_args, "module", "reload", "taskserv", "etcd", "--version", "3.5.1")
    assert missing.code == 1
    assert missing.err == (
        "error: taskserv etcd 3.5.1 is not loaded, so it cannot be reloaded "
        "(loaded versions: 3.5.9, 3.5.12; leave out --version to reload them all)\n"
    )
    bad = run(capsys, *cli_args, "module", "reload", "taskserv", "etcd", "--version", "^3")
    assert bad.code == 2 and bad.err.startswith("error: argument --version: '^3' is not a version")


def test_reload_of_an_extension_that_is_not_loaded_fails_with_the_envelope(capsys: Capsys, cli_args: list[str]) -> None:
    error = envelope(run(capsys, *cli_args, "module", "reload", "taskserv", "redis", "--output", "json"), success=False)
    assert error["code"] == "not_found"
    assert error["details"][0]["reason"] == "not_loaded"


def test_load_errors_are_specific_with_the_envelope(capsys: Capsys, cli_args: list[str]) -> None:
    missing = envelope(
        run(capsys, *cli_args, "module", "load", "taskserv", "kubernetes", "--version", "1.30.0", "--output", "json"),
        success=False,
    )
    assert missing["message"] == "taskserv kubernetes has no version 1.30.0 (available: 1.28.6, 1.29.1)"
    unknown = envelope(run(capsys, *cli_args, "module", "load", "taskserv", "etc", "--output", "json"), success=False)
    assert unknown["details"][0]["reason"] == "extension_not_found"
    assert "etcd" in unknown["details"][0]["suggestions"]


def test_the_policy_comes_from_the_environment(
    capsys: Capsys, cli_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVISIONING_EXTENSION_MODE", "restricted")
    monkeypatch.setenv("PROVISIONING_ALLOWED_EXTENSIONS", "kubernetes")
    error = envelope(
        run(capsys, *cli_args, "module", "load", "taskserv", "kubernetes", "--output", "json"), success=False
    )
    assert error["code"] == "forbidden"
    assert (error["details"][0]["reason"], error["details"][0]["name"]) == ("not_allowed", "containerd")
    monkeypatch.setenv("PROVISIONING_EXTENSION_MODE", "sometimes")
    usage = run(capsys, *cli_args, "module", "load", "taskserv", "redis")
    assert usage.code == 2
    assert usage.err.startswith("error: PROVISIONING_EXTENSION_MODE='sometimes' is not a mode")


def test_provisioning_version_is_the_runtime_version(
    capsys: Capsys, cli_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVISIONING_VERSION", "1.1.0")
    data = envelope(run(capsys, *cli_args, "module", "load", "taskserv", "kubernetes", "--output", "json"))
    assert data["extension"]["metadata"]["version"] == "1.28.6"
    data = envelope(
        run(
            capsys,
            *cli_args,
            "module",
            "reload",
            "taskserv",
            "kubernetes",
            "--runtime-version",
            "x",
            "--output",
            "json",
        ),
        success=False,
    )
    assert data["code"] == "usage"


@pytest.mark.parametrize(
    ("argv", "code", "exit_status"),
    [
        (["module", "discover", "widget"], "usage", 2),
        (["module", "load", "taskserv"], "usage", 2),
        (["module", "load", "taskserv", "Bad_Name"], "usage", 2),
        (["module", "load", "taskserv", "redis", "--version", ">>1"], "usage", 2),
        (["module", "list", "extra"], "usage", 2),
        (["module", "reload", "cluster", "no-such"], "not_found", 1),
        (["module"], "usage", 2),
    ],
)
def test_every_failure_carries_the_error_envelope(
    capsys: Capsys, cli_args: list[str], argv: list[str], code: str, exit_status: int
) -> None:
    result = run(capsys, *cli_args, *argv, "--output", "json")
    error = envelope(result, success=False)
    assert (error["code"], result.code) == (code, exit_status)


@pytest.mark.parametrize(
    "argv",
    [
        ["module", "discover", "cluster"],
        ["module", "discover", "taskservs", "--name", "etcd"],
        ["module", "load", "taskserv", "redis"],
        ["module", "list"],
    ],
)
def test_every_command_output_json_parses_and_carries_the_envelope(
    capsys: Capsys, cli_args: list[str], argv: list[str]
) -> None:
    data = envelope(run(capsys, *cli_args, "--output", "json", *argv))
    assert data is not None


def test_an_unreachable_registry_is_one_clear_error(capsys: Capsys, tmp_path: Path) -> None:
    from tests.services import free_port

    url = f"http://127.0.0.1:{free_port()}"
    result = run(capsys, "--registry", url, "--home", tmp_path / "home", "module", "load", "taskserv", "redis")
    assert result.code == 1
    assert result.err.startswith(f"error: cannot reach the registry at {url}")
    assert len(result.err.strip().splitlines()) == 1


# --- the CLI's imports ------------------------------------------------------------------------------


def test_the_command_groups_of_each_module_are_what_it_registers() -> None:
    """`clients.cli.COMMAND_GROUPS` must list every group a module adds to (the CLI imports only the
    modules of the group it runs)."""
    import importlib

    for module in cli.COMMAND_MODULES:
        commands = cli.Commands()
        importlib.import_module(f"clients.commands.{module}").register(commands)
        assert set(commands._groups) == set(cli.COMMAND_GROUPS[module]), module


def _run_and_list_imported(options: list[str], modules: tuple[str, ...]) -> str:
    """``"STATUS [MODULES...]"``: the CLI's exit status for options, run in a new interpreter, and
    which of modules it had imported by then."""
    code = (
        f"import sys; from clients.cli import main; status = main({options!r}); "
        f"heavy = sorted(m for m in {modules!r} if m in sys.modules); print(status, heavy, file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return proc.stderr.strip().splitlines()[-1]


def test_module_commands_do_not_import_the_authoring_tools(tmp_path: Path) -> None:
    options = ["--home", str(tmp_path / "home"), "module", "list", "--output", "json"]
    authoring = ("clients.authoring", "jsonschema", "clients.install", "extensions.archive")
    assert _run_and_list_imported(options, authoring) == "0 []"


def test_discover_imports_no_tuf_and_load_verifies(live_registry: LiveRegistry, tmp_path: Path) -> None:
    """`module discover` verifies nothing, so it does not pay for importing TUF (and the cloud SDKs
    securesystemslib's signers import with it: a tenth of a second); `module load` does verify."""
    live_registry.manage("publish", str(ROOT / "extensions" / "taskservs" / "etcd" / "3.5.12"))
    base = ["--registry", live_registry.url, "--home", str(tmp_path / "home")]
    tuf = ("tuf", "securesystemslib", "clients.trust")

    assert _run_and_list_imported([*base, "module", "discover", "taskserv"], tuf) == "0 []"
    loaded = _run_and_list_imported([*base, "module", "load", "taskserv", "etcd"], tuf)
    assert loaded == "0 ['clients.trust', 'securesystemslib', 'tuf']"
    assert (tmp_path / "home" / "trust").is_dir()  # the root pinned on first use


# --- the registry unreachable -------------------------------------------------------------------------


def test_load_and_reload_fall_back_to_the_store_and_cache_when_the_registry_is_down(
    capsys: Capsys, live_registry: LiveRegistry, tmp_path: Path
) -> None:
    live_registry.manage("publish", str(ROOT / "extensions" / "taskservs" / "etcd" / "3.5.12"))
    base = ["--registry", live_registry.url, "--home", str(tmp_path / "home")]
    tree = tmp_path / "home" / "store" / "trees" / "taskserv" / "etcd" / "3.5.12"
    assert run(capsys, *base, "module", "load", "taskserv", "etcd").code == 0
    live_registry.stop()

    down = f"cannot reach the registry at {live_registry.url}: "
    used = ": used the cached index documents and the local store"
    known = run(capsys, *base, "module", "load", "taskserv", "etcd")
    assert known.code == 0, known.err
    assert known.out == f"taskserv etcd 3.5.12 is already loaded (registry): {tree}\n"
    (tmp_path / "home" / "runtime" / "state.json").unlink()  # a fresh runtime: the tree is only in the store
    loaded = run(capsys, *base, "module", "load", "taskserv", "etcd")
    assert loaded.code == 0, loaded.err
    assert loaded.out == f"loaded taskserv etcd 3.5.12 (local store): {tree}\n"  # its real source
    warning = next(line for line in loaded.err.splitlines() if line.startswith("warning: "))
    assert warning.startswith(f"warning: {down}") and warning.endswith(used)
    assert "--offline" not in loaded.err
    as_json = envelope(run(capsys, *base, "--output", "json", "module", "load", "taskserv", "etcd", "--version", "^3"))
    assert as_json["registry_unreachable"].startswith(down)

    reloaded = run(capsys, *base, "module", "reload", "taskserv", "etcd")
    assert reloaded.code == 0, reloaded.err
    assert f"reloaded taskserv etcd 3.5.12 (local store): {tree}" in reloaded.out
    assert used in reloaded.err and "--offline" not in reloaded.err

    (tmp_path / "home" / "runtime" / "state.json").unlink()
    offline = run(capsys, *base, "module", "load", "taskserv", "etcd", "--offline")
    assert offline.code == 0, offline.err
    assert offline.out == f"loaded taskserv etcd 3.5.12 (local store): {tree}\n"
    listed = envelope(run(capsys, *base, "--output", "json", "module", "list"))
    assert [(e["metadata"]["name"], e["source"]) for e in listed] == [("etcd", "store")]
    assert "warning" not in offline.err  # --offline never asks, so there is nothing to warn about
    again = run(capsys, *base, "module", "reload", "taskserv", "etcd", "--offline")
    assert again.code == 0, again.err

    never = run(capsys, *base, "module", "load", "taskserv", "redis")
    assert never.code == 1
    assert never.err.startswith(f"error: {down}")
    assert "the index document of 'redis' is not cached either" in never.err
    offline_never = run(capsys, *base, "module", "load", "taskserv", "redis", "--offline")
    assert offline_never.code == 1 and "offline: the index document of 'redis' is not in the cache" in offline_never.err

    # Commands without --offline never suggest it.
    for argv in (["module", "discover", "taskserv"], ["extension", "search", "etcd"], ["extension", "info", "etcd"]):
        result = run(capsys, *base, *argv)
        assert result.code == 1, argv
        assert result.err.startswith(f"error: {down}"), argv
        assert "--offline" not in result.err, (argv, result.err)
    # taskserv create has it, and says so.
    create = run(capsys, *base, "taskserv", "create", "etcd", "--infra", str(tmp_path / "infra"))
    assert "--offline works from the local store and cache" in create.err


# --- discovery directories ----------------------------------------------------------------------------


def _local_extension(root: Path, name: str, version: str) -> Path:
    root.mkdir(parents=True)
    (root / "extension.toml").write_text(
        f'[extension]\nname = "{name}"\nversion = "{version}"\ndescription = "installed by hand"\n'
        f'type = "taskserv"\n\n[provides]\ntaskservs = ["{name}"]\n',
        encoding="utf-8",
    )
    return root


def test_the_documented_discovery_layouts_load_and_a_flat_one_is_pointed_out(
    capsys: Capsys, cli_args: list[str], tmp_path: Path
) -> None:
    found = Path.cwd() / ".provisioning" / "extensions"
    one = _local_extension(found / "taskservs" / "chrony-local", "chrony-local", "4.5.0")
    loaded = run(capsys, *cli_args, "module", "load", "taskserv", "chrony-local")
    assert loaded.code == 0, loaded.err
    assert loaded.out == f"loaded taskserv chrony-local 4.5.0 (local): {one}\n"
    side = _local_extension(found / "taskservs" / "ntp-local" / "1.0.0", "ntp-local", "1.0.0")
    loaded = run(capsys, *cli_args, "module", "load", "taskserv", "ntp-local")
    assert loaded.out == f"loaded taskserv ntp-local 1.0.0 (local): {side}\n"

    flat = _local_extension(found / "flat-local", "flat-local", "1.0.0")
    missing = run(capsys, *cli_args, "module", "load", "taskserv", "flat-local")
    assert missing.code == 1
    assert missing.err == (
        "error: taskserv flat-local not found in the discovery directories or the registry; "
        f"{flat / 'extension.toml'} is not looked at: an installed taskserv lives in "
        f"{found / 'taskservs' / 'flat-local'}/ (or .../flat-local/VERSION/)\n"
    )


def test_a_misspelt_name_is_answered_with_names_of_the_kind_asked_for(capsys: Capsys, cli_args: list[str]) -> None:
    """`taskserv kubernets` means the taskserv kubernetes, never the cluster kubernetes-ha."""
    result = run(capsys, *cli_args, "module", "load", "taskserv", "kubernets")
    assert result.code == 1
    assert "did you mean 'kubernetes'?" in result.err
    assert "kubernetes-ha" not in result.err
    cluster = run(capsys, *cli_args, "module", "load", "cluster", "kubernets-ha")
    assert "did you mean 'kubernetes-ha'?" in cluster.err
