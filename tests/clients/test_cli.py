"""The CLI as a whole: help texts, argument checking, and how every error is printed (one line,
no traceback), driven as users drive it."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from clients import cli
from tests.clients.client_tools import EXAMPLES, Result, files_under, run

Capsys = pytest.CaptureFixture[str]
ETCD = EXAMPLES / "taskservs" / "etcd" / "3.5.12"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_each_group_description_names_exactly_its_commands(capsys: Capsys) -> None:
    groups = _subcommands(cli.build_parser())
    assert set(groups) == set(cli.GROUPS)
    for name, parser in groups.items():
        commands = set(_subcommands(parser))
        listed = re.match(r"(?:[a-z][a-z-]*, )*[a-z][a-z-]*(?: and [a-z][a-z-]*)?", parser.description or "")
        assert listed is not None, name
        named = set(re.split(r", | and ", listed.group(0)))
        assert named == commands, (name, parser.description)


def test_extension_help_lists_info_and_no_inspect(capsys: Capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["extension", "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    said = " ".join(out.replace("-\n", "-").split())  # argparse may break a line after a hyphen
    assert (
        "validate, test, build, publish, yank, search, info, owners, trusted-publishers, sync and verify extensions"
        in said
    )
    assert "inspect" not in out


# --- file system errors: one line naming the path, nothing installed ----------------------------------

NO_REGISTRY = "http://127.0.0.1:9"  # nothing listens: these errors come before the registry is asked
PROC = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")

HOME_HINT = "(choose another with --home or PROVISIONING_HOME)"


def one_error(result: Result) -> str:
    assert result.code == 1, result
    assert result.out == ""
    assert "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


def test_build_into_a_file_is_one_line(capsys: Capsys, a_file: Path) -> None:
    result = run(capsys, "extension", "build", ETCD, "-o", a_file)
    assert one_error(result) == f"error: cannot write the package into {a_file}: it exists and is not a directory"
    below = run(capsys, "extension", "build", ETCD, "-o", a_file / "dist")
    assert one_error(below) == f"error: cannot write the package into {a_file / 'dist'}: {a_file} is not a directory"


@PROC
def test_build_into_a_directory_that_cannot_be_made_is_one_line(capsys: Capsys) -> None:
    result = run(capsys, "extension", "build", ETCD, "-o", "/proc/nope")
    assert one_error(result) == "error: cannot write the package into /proc/nope: No such file or directory"


def test_create_into_a_file_is_refused_before_anything_is_fetched(capsys: Capsys, a_file: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run(capsys, "--registry", NO_REGISTRY, "--home", home, "taskserv", "create", "etcd", "--infra", a_file)
    assert one_error(result) == (
        f"error: the infrastructure directory {a_file} cannot be used: it is not a directory; "
        f"nothing was installed into {a_file}"
    )
    below = run(capsys, "--registry", NO_REGISTRY, "--home", home, "taskserv", "create", "etcd",
                "--infra", a_file / "x" / "y")  # fmt: skip
    assert one_error(below) == (
        f"error: the infrastructure directory {a_file / 'x/y'} cannot be used: {a_file} is not a directory; "
        f"nothing was installed into {a_file / 'x/y'}"
    )
    assert a_file.read_text() == "not a directory\n"
    assert files_under(home / "store") == []


def test_sync_and_list_of_a_file_are_one_line(capsys: Capsys, a_file: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    synced = run(capsys, "--registry", NO_REGISTRY, "--home", home, "extension", "sync", "--infra", a_file)
    assert one_error(synced) == (
        f"error: the infrastructure directory {a_file} cannot be used: it is not a directory; "
        f"nothing was installed into {a_file}"
    )
    listed = run(capsys, "--home", home, "taskserv", "list", "--infra", a_file)
    assert one_error(listed) == f"error: the infrastructure directory {a_file} cannot be used: it is not a directory"


@PROC
def test_create_into_a_directory_that_cannot_be_made_is_one_line(capsys: Capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run(capsys, "--registry", NO_REGISTRY, "--home", home, "taskserv", "create", "etcd", "--infra", "/proc/x")
    assert one_error(result) == (
        "error: cannot create the infrastructure directory /proc/x: No such file or directory; "
        "nothing was installed into /proc/x"
    )
    assert files_under(home / "store") == []


def test_a_failed_create_removes_the_directories_it_made(capsys: Capsys, tmp_path: Path) -> None:
    infra = tmp_path / "new" / "infra"
    result = run(capsys, "--registry", NO_REGISTRY, "--home", tmp_path / "home", "taskserv", "create", "etcd",
                 "--infra", infra)  # fmt: skip
    assert one_error(result).startswith(f"error: cannot reach the registry at {NO_REGISTRY}")
    assert not (tmp_path / "new").exists()


@PROC
@pytest.mark.parametrize(
    "argv",
    [
        ["taskserv", "create", "etcd", "--infra", "{tmp}/infra"],
        ["extension", "sync", "--infra", "{tmp}/infra"],
        ["module", "load", "taskserv", "etcd"],
    ],
)
def test_a_home_that_cannot_be_made_is_one_line(capsys: Capsys, tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "infra").mkdir()
    if "sync" in argv:
        (tmp_path / "infra" / "extensions.lock").write_text('version = 1\nregistry = ""\n')
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = run(capsys, "--registry", NO_REGISTRY, "--home", "/proc/nope", *args)
    assert one_error(result) == (
        f"error: cannot use /proc/nope as the provisioning home: No such file or directory {HOME_HINT}"
    )
    assert files_under(tmp_path / "infra") == (["extensions.lock"] if "sync" in argv else [])


def test_a_home_that_is_a_file_is_one_line(capsys: Capsys, a_file: Path) -> None:
    result = run(capsys, "--registry", NO_REGISTRY, "--home", a_file, "module", "load", "taskserv", "etcd")
    assert one_error(result) == (
        f"error: cannot use {a_file} as the provisioning home: {a_file} is not a directory {HOME_HINT}"
    )


def test_any_other_file_system_error_is_one_line_not_a_traceback(
    capsys: Capsys, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(tmp_path / "locked"))

    monkeypatch.setattr("clients.authoring.validate_extension", broken)
    result = run(capsys, "extension", "validate", tmp_path)
    assert one_error(result) == f"error: cannot continue: {tmp_path / 'locked'}: Permission denied"


# --- nothing from files or the registry is read as Rich markup ------------------------------------------


def test_file_names_and_check_messages_are_printed_as_written(capsys: Capsys, tmp_path: Path) -> None:
    source = tmp_path / "hello-markup"
    shutil.copytree(ETCD, source)
    (source / "templates" / "[red]x.j2").write_text("{{ name }}\n")  # etcd's [build] includes templates/**
    (source / "templates" / "[bold]link.j2").symlink_to("[red]x.j2")
    result = run(capsys, "extension", "test", source)
    assert result.code == 1
    rows = {line.split()[1]: line for line in result.out.splitlines()[1:]}
    assert "templates/[red]x.j2" in rows, result.out
    assert "templates/[bold]link.j2: is a symbolic link" in rows["."], rows["."]
    assert "or leave it out with [build] exclude" in " ".join(result.out.split())  # the cell may wrap


def test_output_escapes_markup_and_control_characters() -> None:
    import io

    from clients.output import Output

    stdout, stderr = io.StringIO(), io.StringIO()
    out = Output("table", stdout=stdout, stderr=stderr)
    out.table(["[b]name[/b]", "description"], [("[red]x", "see [build] include and :warning: \x1b[31mred\x07")])
    out.line("leave it out with [build] exclude")
    out.warn("[link=http://evil.example]docs[/link]")
    printed = stdout.getvalue()
    assert "[b]name[/b]" in printed and "[red]x" in printed
    assert "see [build] include and :warning: \\x1b[31mred\\x07" in printed
    assert "leave it out with [build] exclude" in printed
    assert stderr.getvalue() == "warning: [link=http://evil.example]docs[/link]\n"
    assert "\x1b" not in printed and "\x07" not in printed


# --- option values are checked by the CLI and named as options ----------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["taskserv", "create", "kubernetes", "--infra", "{tmp}/infra", "--version", "bogus"],
            "argument --version: 'bogus' is neither a version nor a constraint: use a version such as 1.28.6, or a "
            "constraint such as ^1.28, ~1.28.3, >=1.28, <2, 1.*, joined by ',' (and) or '||' (or) "
            "(see `provisioning taskserv create --help`)",
        ),
        (
            ["module", "load", "taskserv", "etcd", "--version", "bogus"],
            "argument --version: 'bogus' is neither a version nor a constraint",
        ),
        (
            ["extension", "search", "--limit", "0"],
            "argument --limit: 0 is out of range: use a whole number from 1 to 100 "
            "(see `provisioning extension search --help`)",
        ),
        (["extension", "search", "--limit", "101"], "argument --limit: 101 is out of range"),
        (["extension", "search", "--offset", "-1"], "argument --offset: -1 is negative: use 0 or more"),
        (["extension", "search", "--type", "widget"], "argument --type: unknown extension type 'widget'"),
        (
            ["extension", "publish", "x.tar.gz", "--timeout", "-5"],
            "argument --timeout: -5 is not allowed: use a number of seconds greater than 0",
        ),
        (["extension", "publish", "x.tar.gz", "--timeout", "nan"], "argument --timeout: nan is not allowed"),
        (["extension", "info", "etcd", "--version", "^3"], "argument --version: '^3' is not a version"),
        (["registry", "login", "-u", "alice", "--expires-in-days", "0"], "argument --expires-in-days: 0 is not"),
    ],
)
def test_bad_option_values_are_usage_errors_naming_the_option(
    capsys: Capsys, tmp_path: Path, argv: list[str], message: str
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = run(capsys, "--registry", NO_REGISTRY, "--home", tmp_path / "home", *args)
    assert result.code == 2
    assert result.err.startswith(f"error: {message}"), result.err
    assert len(result.err.splitlines()) == 1
    assert not (tmp_path / "infra").exists()
    as_json = run(capsys, "--registry", NO_REGISTRY, "--home", tmp_path / "home", "--output", "json", *args)
    assert as_json.code == 2 and json.loads(as_json.out)["error"]["code"] == "usage"


def test_the_library_names_a_bad_version_too(tmp_path: Path) -> None:
    from clients.errors import UsageError
    from clients.install import install
    from clients.registry_client import RegistryClient
    from clients.store import Store

    with RegistryClient(NO_REGISTRY, verify=False) as client, pytest.raises(UsageError) as refused:
        install(client, Store(tmp_path / "home"), type="taskserv", name="etcd", infra=tmp_path / "i", version="bogus")
    assert refused.value.message.startswith("version 'bogus' is neither a version nor a constraint: ")
    assert not (tmp_path / "i").exists()


def test_error_details_print_only_what_the_message_does_not_say_and_always_their_message() -> None:
    import io

    from clients.errors import ClientError
    from clients.output import Output

    stderr = io.StringIO()
    out = Output("table", stdout=io.StringIO(), stderr=stderr)
    out.failure(
        ClientError(
            "cannot resolve x ^9.0: you asked for x ^9.0, but no version of x matches; nothing was installed into aws",
            details=[
                {"path": "you asked for x ^9.0", "message": "you asked for x ^9.0, but no version of x matches"},
                {"path": "you asked for y -> y 1.0.0 -> x ^9.0", "message": "no version of x matches"},
                {"path": "aws", "message": "required environment variable AWS_REGION is not set"},
                {"path": "aws", "message": "extensions/providers/aws/README.md was changed"},
                {"path": "extension.name", "message": "extension.name: must be lower-case"},
                {"path": "provides.taskservs[0]", "message": "'Bad' is not a valid name"},
                {"path": "provides.clusters[0]", "message": "'Bad' is not a valid name"},  # the same message
                {"path": "provides.clusters[0]", "message": "'Bad' is not a valid name"},  # the same line: once
            ],
        )
    )
    assert stderr.getvalue().splitlines()[1:] == [
        "  - you asked for y -> y 1.0.0 -> x ^9.0",  # its message is the error's own: the chain alone
        "  - aws: required environment variable AWS_REGION is not set",
        "  - aws: extensions/providers/aws/README.md was changed",
        "  - extension.name: must be lower-case",
        "  - provides.taskservs[0]: 'Bad' is not a valid name",
        "  - provides.clusters[0]: 'Bad' is not a valid name",
    ]


def test_logout_with_a_home_that_is_a_file_has_nothing_to_forget(capsys: Capsys, a_file: Path) -> None:
    result = run(capsys, "--home", a_file, "registry", "logout")
    assert (result.code, result.out) == (0, f"not logged in: {a_file / 'credentials.toml'} does not exist\n")


@pytest.mark.parametrize("where", ["option", "environment"])
def test_a_registry_url_without_a_scheme_is_a_usage_error(
    capsys: Capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "option":
        result = run(capsys, "--home", tmp_path, "--registry", "127.0.0.1:8000", "extension", "search", "x")
        given = "--registry"
    else:
        monkeypatch.setenv("PROVISIONING_REGISTRY", "127.0.0.1:8000")
        result = run(capsys, "--home", tmp_path, "extension", "search", "x")
        given = "PROVISIONING_REGISTRY"
    assert result.code == 2
    assert result.err == (
        f"error: {given}: registry URL '127.0.0.1:8000' must start with http:// or https:// "
        "(did you mean http://127.0.0.1:8000?)\n"
    )
