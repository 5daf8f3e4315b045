"""`extension publish | yank | search | info`, `registry login | logout`, and the JSON envelope of
every command, against live registries (gunicorn processes started by the tests)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.clients.client_tools import MisbehavingProxy, Result, run

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry


Capsys = pytest.CaptureFixture[str]
PASSWORD = "correct horse battery staple"


def make_source(
    root: Path,
    name: str,
    version: str = "0.1.0",
    *,
    dependencies: str = "[]",
    kind: str = "taskserv",
    description: str | None = None,
) -> Path:
    source = root / f"{name}-{version}-src"
    (source / "nulib").mkdir(parents=True)
    about = description if description is not None else f"A test {kind} published by the client's tests"
    (source / "extension.toml").write_text(
        f"""[extension]
name = "{name}"
version = "{version}"
description = {json.dumps(about)}
type = "{kind}"
license = "MIT"

[provides]
{kind}s = ["{name}"]

[dependencies]
extensions = {dependencies}

[configuration]
required_env = []

[build]
include = ["nulib/**", "templates/**", "README.md"]
""",
        encoding="utf-8",
    )
    (source / "README.md").write_text(f"# {name}\n", encoding="utf-8")
    (source / "nulib" / "main.nu").write_text("export def hello [] { 'hello' }\n", encoding="utf-8")
    return source


def build(capsys: Capsys, root: Path, name: str, version: str = "0.1.0", **kwargs: str | None) -> Path:
    source = make_source(root, name, version, **kwargs)  # type: ignore[arg-type]
    result = run(capsys, "extension", "build", source, "-o", root / "dist")
    assert result.code == 0, result.err
    return root / "dist" / f"{name}-{version}.tar.gz"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRegistry]:
    """A registry for this module's writes (each test uses its own extension names)."""
    from tests.live_registry import LiveRegistry

    live = LiveRegistry(tmp_path_factory.mktemp("publish-registry"))
    live.start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def alice(registry: LiveRegistry) -> str:
    token = registry.createtoken("alice")
    registry.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model as m; u = m().objects.get(username='alice'); "
        f"u.set_password({PASSWORD!r}); u.save()",
    )
    return token


def publish(capsys: Capsys, registry: LiveRegistry, token: str | None, package: Path, *extra: str) -> Result:
    options = ["--token", token] if token else []
    return run(capsys, "--registry", registry.url, *options, "extension", "publish", package, *extra)


# --- publish -----------------------------------------------------------------------------------------


def test_publish_uploads_the_package_and_follows_the_build_to_success(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    package = build(capsys, tmp_path, "hello-publish")
    result = publish(capsys, registry, alice, package, "--wait")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("build ") and lines[0].endswith("/)") and ": succeeded (" in lines[0]
    steps = [re.match(r"  (\S.*?)\s+(passed|skipped)\s+\d+\.\d\d s  ", line) for line in lines[1:-1]]
    assert all(steps), lines
    names = [m.group(1) for m in steps if m]
    assert names[0] == "upload" and names[-1] == "commit" and "check content" in names
    assert lines[-1] == "published hello-publish 0.1.0"
    detail = httpx.get(f"{registry.url}/api/v1/extensions/hello-publish/versions/0.1.0/", timeout=30).json()["data"]
    assert detail["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()


def test_publish_follows_a_queued_build_until_it_ends(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    package = build(capsys, tmp_path, "hello-queued")
    with MisbehavingProxy(registry.url, mode="queued") as proxy:
        result = run(capsys, "--registry", proxy.url, "--token", alice, "extension", "publish", package, "--wait")
        assert proxy.queued == 1
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("build ") and ": queued (" in lines[0]
    steps = [line.split()[0] for line in lines[1:-1]]
    assert steps[0] == "upload" and steps.count("upload") == 1 and steps[-1] == "commit"
    assert lines[-1] == "published hello-queued 0.1.0"


def test_publish_without_wait_prints_the_build_and_its_state(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    package = build(capsys, tmp_path, "hello-nowait")
    result = publish(capsys, registry, alice, package, "--no-wait", "--output", "json")
    assert result.code == 0, result.err
    data = result.json()["data"]
    assert data["status"] in ("queued", "running", "succeeded")
    assert data["filename"] == "hello-nowait-0.1.0.tar.gz"
    assert data["upload"]["size"] == package.stat().st_size


def test_a_refused_package_exits_1_with_the_registrys_error(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    package = build(capsys, tmp_path, "hello-twice")
    assert publish(capsys, registry, alice, package, "--wait").code == 0
    again = publish(capsys, registry, alice, package, "--wait")
    assert again.code == 1
    first = again.err.splitlines()[0]
    assert first.startswith("error: ") and "hello-twice" in first and "0.1.0" in first
    as_json = publish(capsys, registry, alice, package, "--output", "json").json()
    assert as_json["success"] is False and as_json["error"]["code"] == "version_exists"
    assert as_json["error"]["message"] == first.removeprefix("error: ")

    orphan = build(capsys, tmp_path, "hello-orphan", dependencies='["no-such-thing ^1"]')
    refused = publish(capsys, registry, alice, orphan, "--output", "json").json()
    assert refused["error"]["code"] == "unknown_dependency"
    assert any(isinstance(d, dict) and d.get("build") for d in refused["error"]["details"])


def test_a_failed_build_shows_its_log_and_url_in_table_mode(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    orphan = build(capsys, tmp_path, "hello-failing", dependencies='["no-such-thing ^1"]')
    failed = publish(capsys, registry, alice, orphan, "--wait")
    assert failed.code == 1
    first, *steps = failed.out.splitlines()
    found = re.fullmatch(r"build (\S+): failed \((http://\S+/api/v1/builds/\1/)\)", first)
    assert found, first
    assert httpx.get(found.group(2), timeout=30).json()["data"]["status"] == "failed"
    *steps, last = steps
    assert [line.split()[:2] for line in steps] == [
        ["upload", "passed"],
        ["fetch", "passed"],
        ["inspect", "passed"],
        ["rebuild", "passed"],
        ["validate", "failed"],
    ]
    assert steps[-1].endswith("unknown dependency: no extension named 'no-such-thing' in this registry")
    assert last == f"the build log: {found.group(2)}"
    assert failed.err.startswith("error: unknown dependency: no extension named 'no-such-thing' in this registry\n")

    # A registry with a separate worker queues the build; it fails while the client follows it.
    with MisbehavingProxy(registry.url, mode="queued") as proxy:
        followed = run(capsys, "--registry", proxy.url, "--token", alice, "extension", "publish", orphan, "--wait")
        assert proxy.queued == 1
    assert followed.code == 1
    lines = followed.out.splitlines()
    assert lines[0].startswith("build ") and ": queued (" in lines[0]
    assert [line.split()[:2] for line in lines[1:-1]][-1] == ["validate", "failed"]
    build_id = lines[0].split()[1].rstrip(":")
    assert lines[-1] == f"the build log: {registry.url}/api/v1/builds/{build_id}/"
    assert followed.err.startswith("error: unknown dependency: ")


def test_publish_needs_a_token_and_says_where_to_get_one(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    package = build(capsys, tmp_path, "hello-anon")
    result = publish(capsys, registry, None, package)
    assert result.code == 1
    assert result.err == (
        "error: publishing needs an API token: pass --token, set PROVISIONING_TOKEN, "
        "or run `provisioning registry login`\n"
    )
    missing = publish(capsys, registry, "pvr_x", tmp_path / "nothing.tar.gz")
    assert missing.code == 1 and missing.err.startswith(f"error: cannot read {tmp_path / 'nothing.tar.gz'}: ")


MARKUP = "see [build] include and [link=http://evil.example]docs[/link]"


def test_publisher_text_is_printed_as_written_never_as_markup(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = build(capsys, tmp_path, "hello-markup", description=MARKUP)
    assert publish(capsys, registry, alice, package, "--wait").code == 0
    base = ["--registry", registry.url, "--home", tmp_path / "home"]
    for argv in (
        ["extension", "search", "hello-markup"],
        ["extension", "info", "hello-markup"],
        ["taskserv", "list"],
        ["module", "discover", "taskserv"],
        ["module", "discover", "taskserv", "--name", "hello-markup"],
    ):
        result = run(capsys, *base, *argv)
        assert result.code == 0, (argv, result.err)
        assert MARKUP in result.out, (argv, result.out)
    # On a terminal too: no hyperlink escape sequence, the text as written.
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "300")
    terminal = run(capsys, *base, "extension", "search", "hello-markup")
    assert terminal.code == 0
    assert "\x1b]8;" not in terminal.out
    assert MARKUP in terminal.out


# --- yank --------------------------------------------------------------------------------------------


def test_yank_needs_a_reason_and_can_be_undone(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    assert publish(capsys, registry, alice, build(capsys, tmp_path, "hello-yank"), "--wait").code == 0
    base = ["--registry", registry.url, "--token", alice, "extension", "yank", "hello-yank", "0.1.0"]
    no_reason = run(capsys, *base)
    assert no_reason.code == 2
    assert no_reason.err.startswith("error: yanking needs --reason R")
    yanked = run(capsys, *base, "--reason", "broken templates")
    assert yanked.code == 0, yanked.err
    assert yanked.out == "yanked hello-yank 0.1.0: broken templates\n"
    index = httpx.get(f"{registry.url}/api/v1/index/hello-yank", timeout=30).json()["data"]
    assert index["versions"][0]["yanked"] is True
    undone = run(capsys, *base, "--undo", "--output", "json")
    assert undone.code == 0
    assert undone.json() == {
        "success": True,
        "data": {
            "name": "hello-yank",
            "version": "0.1.0",
            "yanked": False,
            "yanked_reason": "",
            "yanked_at": None,
            "changed": True,
        },
    }


def test_yanking_again_says_it_was_already_yanked_and_undo_takes_no_reason(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    assert publish(capsys, registry, alice, build(capsys, tmp_path, "hello-reyank"), "--wait").code == 0
    base = ["--registry", registry.url, "--token", alice, "extension", "yank", "hello-reyank", "0.1.0"]
    assert run(capsys, *base, "--reason", "first reason").out == "yanked hello-reyank 0.1.0: first reason\n"
    again = run(capsys, *base, "--reason", "second reason")
    assert again.code == 0
    day = httpx.get(f"{registry.url}/api/v1/extensions/hello-reyank/versions/0.1.0/", timeout=30).json()["data"]
    assert again.out == f"hello-reyank 0.1.0 was already yanked on {day['yanked_at'][:10]}: first reason\n"
    assert again.err == (
        "warning: the reason was not changed to 'second reason': undo the yank (--undo), "
        "then yank again with the new reason\n"
    )
    assert run(capsys, *base, "--reason", "x", "--output", "json").json()["data"]["changed"] is False
    both = run(capsys, *base, "--undo", "--reason", "foo")
    assert both.code == 2
    assert both.err.startswith("error: --undo takes no --reason: undoing a yank clears the reason")
    still = httpx.get(f"{registry.url}/api/v1/extensions/hello-reyank/versions/0.1.0/", timeout=30).json()["data"]
    assert (still["yanked"], still["yanked_reason"]) == (True, "first reason")  # nothing was undone
    assert run(capsys, *base, "--undo").out == "hello-reyank 0.1.0 is no longer yanked\n"
    assert run(capsys, *base, "--undo").out == "hello-reyank 0.1.0 is not yanked: nothing to undo\n"


def test_a_yanked_version_installed_exactly_is_warned_about_and_listed(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    for version in ("0.1.0", "0.2.0"):
        package = build(capsys, tmp_path / version, "hello-yanked", version)
        assert publish(capsys, registry, alice, package, "--wait").code == 0
    yank = run(capsys, "--registry", registry.url, "--token", alice,
               "extension", "yank", "hello-yanked", "0.2.0", "--reason", "eats data")  # fmt: skip
    assert yank.code == 0
    home, infra = tmp_path / "home", tmp_path / "infra"
    base = ["--registry", registry.url, "--home", home]
    newest = run(capsys, *base, "taskserv", "create", "hello-yanked", "--infra", tmp_path / "other")
    assert newest.code == 0 and "0.1.0" in newest.out and "yanked" not in newest.err  # never chosen by itself
    made = run(capsys, *base, "taskserv", "create", "hello-yanked", "--version", "0.2.0", "--infra", infra)
    assert made.code == 0, made.err
    assert made.err == (
        "warning: hello-yanked 0.2.0 is yanked: eats data (installed because it was pinned exactly; "
        "resolution never chooses a yanked version otherwise)\n"
    )
    listed = run(capsys, "--home", home, "taskserv", "list", "--infra", infra)  # the lockfile's registry
    assert listed.code == 0
    assert [line.split()[:4] for line in listed.out.splitlines()] == [
        ["name", "version", "status", "yanked"],
        ["hello-yanked", "0.2.0", "ok", "yes"],
    ]
    assert listed.err == (
        "warning: hello-yanked 0.2.0 is yanked in the registry: choose another version with "
        f"`provisioning taskserv create hello-yanked --infra {infra} --version V`\n"
    )
    as_json = run(capsys, "--home", home, "--output", "json", "taskserv", "list", "--infra", infra).json()
    assert as_json["data"][0]["yanked"] is True
    unreachable = run(capsys, "--registry", "http://127.0.0.1:9", "--home", home, "taskserv", "list", "--infra", infra)
    assert unreachable.code == 0
    assert [line.split()[:4] for line in unreachable.out.splitlines()][1] == ["hello-yanked", "0.2.0", "ok", "?"]
    assert unreachable.err.startswith(
        "warning: not checked for yanked versions: cannot reach the registry at http://127.0.0.1:9: "
    )


def test_yank_by_someone_who_is_not_an_owner_is_forbidden(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    assert publish(capsys, registry, alice, build(capsys, tmp_path, "hello-owned"), "--wait").code == 0
    bob = registry.createtoken("bob")
    result = run(capsys, "--registry", registry.url, "--token", bob, "--output", "json",
                 "extension", "yank", "hello-owned", "0.1.0", "--reason", "mine now")  # fmt: skip
    assert result.code == 1
    assert result.json()["error"]["code"] == "forbidden"


# --- login / logout ----------------------------------------------------------------------------------


def test_login_with_a_password_stores_a_token_that_later_commands_use(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    login = run(capsys, "--registry", registry.url, "--home", home,
                "registry", "login", "--username", "alice", "--password-stdin", "--scope", "publish:*")  # fmt: skip
    assert login.code == 0, login.err
    credentials = home / "credentials.toml"
    assert (
        login.out
        == f"logged in to {registry.url} as alice; token {_stored_token(credentials)[:12]}… stored in {credentials}\n"
    )
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    package = build(capsys, tmp_path, "hello-login")
    published = run(capsys, "--registry", registry.url, "--home", home, "extension", "publish", package, "--wait")
    assert published.code == 0, published.err
    logout = run(capsys, "--registry", registry.url, "--home", home, "registry", "logout")
    assert logout.code == 0
    assert logout.out.startswith(f"logged out: removed {credentials}")
    assert not credentials.exists()
    again = run(capsys, "--registry", registry.url, "--home", home, "registry", "logout")
    assert again.code == 0 and again.out == f"not logged in: {credentials} does not exist\n"


def test_login_writes_the_token_to_a_new_private_file_even_after_a_leftover_readable_one(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    leftover = home / "credentials.tmp"  # left by an interrupted login of an older client
    leftover.write_text('token = "pvr_old"\n')
    leftover.chmod(0o644)
    login = run(capsys, "--registry", registry.url, "--home", home, "--token", alice, "registry", "login")
    assert login.code == 0, login.err
    credentials = home / "credentials.toml"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert _stored_token(credentials) == alice
    assert sorted(p.name for p in home.iterdir()) == ["credentials.toml"]  # the readable leftover is gone too
    # Logging in again over world-readable credentials leaves them private as well.
    credentials.chmod(0o644)
    again = run(capsys, "--registry", registry.url, "--home", home, "--token", alice, "registry", "login")
    assert again.code == 0, again.err
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert sorted(p.name for p in home.iterdir()) == ["credentials.toml"]


def test_login_keeps_a_working_token_that_cannot_manage_tokens(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    """A publish-only token (no `tokens` scope) is refused by the token listing with 403, which
    still proves it authenticates: login stores it and says it cannot manage tokens."""
    home = tmp_path / "home"
    narrow = registry.createtoken("alice", "publish:*")
    login = run(capsys, "--registry", registry.url, "--home", home, "--output", "json", "--token", narrow,
                "registry", "login")  # fmt: skip
    assert login.code == 0, login.err
    assert login.json()["data"]["token"] == {"prefix": narrow[:12], "tokens_scope": False}
    assert _stored_token(home / "credentials.toml") == narrow


def test_login_with_a_password_works_in_a_shell_that_exports_a_token_and_says_which_one_wins(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's second shell exports PROVISIONING_TOKEN and then logs in with a password:
    that is no `--token` beside `--username`."""
    home = tmp_path / "home"
    monkeypatch.setenv("PROVISIONING_TOKEN", alice)
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    login = run(capsys, "--registry", registry.url, "--home", home,
                "registry", "login", "--username", "alice", "--password-stdin")  # fmt: skip
    assert login.code == 0, login.err
    stored = _stored_token(home / "credentials.toml")
    assert stored.startswith("pvr_") and stored != alice  # a new token, not the exported one
    assert login.out.splitlines()[-1] == (
        "PROVISIONING_TOKEN is set in this shell: commands use it before the stored token (unset it)"
    )
    both = run(capsys, "--registry", registry.url, "--home", home, "--token", alice,
               "registry", "login", "--username", "alice", "--password-stdin")  # fmt: skip
    assert both.code == 2
    assert both.err == (
        "error: give either --username (a new token is created) or --token (an existing one), not both\n"
    )


def _stored_token(path: Path) -> str:
    import tomllib

    return str(tomllib.loads(path.read_text())["token"])


def test_login_with_a_wrong_password_or_a_bad_token_stores_nothing(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setattr("sys.stdin", io.StringIO("wrong\n"))
    wrong = run(capsys, "--registry", registry.url, "--home", home, "--output", "json",
                "registry", "login", "-u", "alice", "--password-stdin")  # fmt: skip
    assert wrong.code == 1
    assert wrong.json()["error"]["code"] == "unauthenticated"
    monkeypatch.setattr("sys.stdin", io.StringIO("wrong\n"))
    wrong = run(capsys, "--registry", registry.url, "--home", home, "registry", "login", "-u", "alice",
                "--password-stdin")  # fmt: skip
    assert wrong.err == f"error: wrong username or password for the registry at {registry.url}\n"
    bad = run(capsys, "--registry", registry.url, "--home", home, "--token", "pvr_not-a-token", "registry", "login")
    assert bad.code == 1
    assert bad.err == (
        "error: the registry refused the token (not a registry token): run 'provisioning registry login' "
        "or pass --token\n"
    )
    unknown = "pvr_" + "A" * 43
    refused = run(capsys, "--registry", registry.url, "--home", home, "--token", unknown, "registry", "login")
    assert refused.err == (
        "error: the registry refused the token (unknown or revoked): run 'provisioning registry login' "
        "or pass --token\n"
    )
    assert not (home / "credentials.toml").exists()
    package = build(capsys, tmp_path, "hello-refused")
    for argv in (["extension", "publish", package], ["extension", "yank", "hello-refused", "0.1.0", "--reason", "r"]):
        if argv[1] == "yank":
            assert publish(capsys, registry, alice, package, "--wait").code == 0
        answer = run(capsys, "--registry", registry.url, "--token", unknown, "--output", "json", *argv)
        error = answer.json()["error"]
        assert (answer.code, error["code"]) == (1, "unauthenticated")
        assert error["message"].startswith("the registry refused the token (unknown or revoked): run ")
        assert "Authorization" not in error["message"]
    good = run(capsys, "--registry", registry.url, "--home", home, "--token", alice, "registry", "login")
    assert good.code == 0, good.err
    assert _stored_token(home / "credentials.toml") == alice
    neither = run(capsys, "--registry", registry.url, "--home", tmp_path / "h2", "registry", "login")
    assert neither.code == 2 and neither.err.startswith("error: give --username U")


# --- search and info ---------------------------------------------------------------------------------


def test_search_prints_a_table_and_info_the_details(capsys: Capsys, examples_registry: LiveRegistry) -> None:
    found = run(capsys, "--registry", examples_registry.url, "extension", "search", "etcd")
    assert found.code == 0
    header, *rows = found.out.splitlines()
    assert header.split() == ["name", "type", "version", "downloads", "description"]
    assert rows[0].split()[:3] == ["etcd", "taskserv", "3.5.12"]
    info = run(capsys, "--registry", examples_registry.url, "extension", "info", "etcd")
    assert info.code == 0
    assert info.out.splitlines()[0] == "etcd 3.5.12 (taskserv)"
    assert "  owners:     provisioning" in info.out
    assert [line.split()[0] for line in info.out.splitlines() if line.startswith("3.5.")] == ["3.5.12", "3.5.9"]
    one = run(capsys, "--registry", examples_registry.url, "extension", "info", "kubernetes", "--version", "1.28.6")
    assert one.code == 0
    assert "  depends on: containerd ^1.7; etcd >=3.5, <4" in one.out  # as written
    plural = run(capsys, "--registry", examples_registry.url, "--output", "json",
                 "extension", "search", "--type", "Taskservs")  # fmt: skip
    assert plural.code == 0, plural.err
    types = {item["type"] for item in plural.json()["data"]["items"]}
    assert types == {"taskserv"}
    unknown = run(capsys, "--registry", examples_registry.url, "extension", "info", "no-such-extension")
    assert unknown.code == 1 and unknown.err.startswith("error: ") and "no-such-extension" in unknown.err


def test_an_unreachable_registry_is_one_clear_line(capsys: Capsys, tmp_path: Path) -> None:
    result = run(capsys, "--registry", "http://127.0.0.1:9", "extension", "search", "x")
    assert result.code == 1
    assert result.err.startswith("error: cannot reach the registry at http://127.0.0.1:9: ")
    assert len(result.err.splitlines()) == 1


# --- every command's --output json -------------------------------------------------------------------

Argv = Callable[[str, Path], list[str]]

COMMANDS: list[tuple[str, Argv, bool]] = [
    ("search", lambda url, tmp: ["extension", "search", "kube"], True),
    ("info", lambda url, tmp: ["extension", "info", "etcd"], True),
    ("info --version", lambda url, tmp: ["extension", "info", "etcd", "--version", "3.5.9"], True),
    ("info unknown", lambda url, tmp: ["extension", "info", "nope-nope"], False),
    ("taskserv list", lambda url, tmp: ["taskserv", "list"], True),
    ("cluster list", lambda url, tmp: ["cluster", "list"], True),
    ("providers list", lambda url, tmp: ["providers", "list"], True),
    ("taskserv create", lambda url, tmp: ["taskserv", "create", "etcd", "--infra", str(tmp / "a")], True),
    ("cluster create", lambda url, tmp: ["cluster", "create", "etcd-cluster", "--infra", str(tmp / "b")], True),
    ("providers create", lambda url, tmp: ["providers", "create", "local", "--infra", str(tmp / "c")], True),
    ("taskserv create unknown", lambda url, tmp: ["taskserv", "create", "nope-nope", "--infra", str(tmp / "d")], False),
    ("taskserv list --infra", lambda url, tmp: ["taskserv", "list", "--infra", str(tmp / "a")], True),
    ("cluster list --infra", lambda url, tmp: ["cluster", "list", "--infra", str(tmp / "b")], True),
    ("providers list --infra", lambda url, tmp: ["providers", "list", "--infra", str(tmp / "c")], True),
    ("providers validate", lambda url, tmp: ["providers", "validate", "--infra", str(tmp / "c")], True),
    ("sync", lambda url, tmp: ["extension", "sync", "--infra", str(tmp / "a")], True),
    ("sync offline", lambda url, tmp: ["extension", "sync", "--infra", str(tmp / "a"), "--offline"], True),
    ("sync no lock", lambda url, tmp: ["extension", "sync", "--infra", str(tmp / "none")], False),
    ("publish no token", lambda url, tmp: ["extension", "publish", str(tmp / "x.tar.gz")], False),
    ("yank no token", lambda url, tmp: ["extension", "yank", "etcd", "3.5.9", "--reason", "r"], False),
    ("logout", lambda url, tmp: ["registry", "logout"], True),
    ("usage", lambda url, tmp: ["taskserv", "create"], False),
]


def test_every_command_prints_the_envelope_with_output_json(
    capsys: Capsys, examples_registry: LiveRegistry, tmp_path: Path
) -> None:
    for label, argv, ok in COMMANDS:
        result = run(capsys, "--registry", examples_registry.url, "--home", tmp_path / "home", "--output", "json",
                     *argv(examples_registry.url, tmp_path))  # fmt: skip
        payload = json.loads(result.out)
        assert payload["success"] is ok, (label, payload)
        if ok:
            assert result.code == 0 and "data" in payload, label
        else:
            assert result.code in (1, 2), label
            assert isinstance(payload["error"]["code"], str) and payload["error"]["message"], label
        assert result.err == "", (label, result.err)


def test_the_write_commands_print_the_envelope_with_output_json(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = build(capsys, tmp_path, "hello-json")
    base = ["--registry", registry.url, "--home", tmp_path / "home", "--output", "json"]
    published = run(capsys, *base, "--token", alice, "extension", "publish", package, "--wait")
    assert published.json()["data"]["status"] == "succeeded"
    assert published.json()["data"]["result"]["version"] == "0.1.0"
    yanked = run(capsys, *base, "--token", alice, "extension", "yank", "hello-json", "0.1.0", "--reason", "test")
    assert yanked.json()["data"]["yanked"] is True
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    login = run(capsys, *base, "registry", "login", "--username", "alice", "--password-stdin")
    data = login.json()["data"]
    assert data["registry"] == registry.url and data["token"]["scopes"]
    assert "token" not in data["token"]  # the secret is stored, not printed


# --- owners, did-you-mean, the step log ----------------------------------------------------------------


def test_owners_are_listed_added_and_removed_from_the_cli(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    assert publish(capsys, registry, alice, build(capsys, tmp_path, "hello-owners"), "--wait").code == 0
    registry.createtoken("bob")
    base = ["--registry", registry.url, "--token", alice, "extension", "owners"]
    added = run(capsys, *base, "add", "hello-owners", "bob")
    assert added.code == 0, added.err
    assert added.out == "bob is an owner of hello-owners; its owners: alice, bob\n"
    listed = run(capsys, "--registry", registry.url, "--output", "json", "extension", "owners", "list", "hello-owners")
    assert [o["username"] for o in listed.json()["data"]["owners"]] == ["alice", "bob"]
    table = run(capsys, "--registry", registry.url, "extension", "owners", "list", "hello-owners")
    assert [line.split()[0] for line in table.out.splitlines()] == ["owner", "alice", "bob"]
    removed = run(capsys, *base, "remove", "hello-owners", "bob")
    assert removed.out == "bob is no longer an owner of hello-owners; its owners: alice\n"
    last = run(capsys, *base, "remove", "hello-owners", "alice")
    assert last.code == 1 and "last owner" in last.err
    usage = run(capsys, *base, "add", "hello-owners")
    assert usage.code == 2 and "owners add needs a USER" in usage.err
    stranger = run(capsys, "--registry", registry.url, "--token", registry.createtoken("carol"),
                   "extension", "owners", "add", "hello-owners", "carol")  # fmt: skip
    assert stranger.code == 1 and "not an owner" in stranger.err


def test_a_misspelt_extension_name_gets_close_names(capsys: Capsys, examples_registry: LiveRegistry) -> None:
    info = run(capsys, "--registry", examples_registry.url, "extension", "info", "kubernets")
    assert info.code == 1
    assert info.err.startswith("error: no extension named 'kubernets' in this registry; did you mean 'kubernetes'")
    yank = run(capsys, "--registry", examples_registry.url, "--token", "pvr_" + "A" * 43,
               "extension", "yank", "kubernets", "1.0.0", "--reason", "r")  # fmt: skip
    assert yank.code == 1 and "did you mean 'kubernetes'" in yank.err


def test_a_publish_that_does_not_wait_prints_the_step_log(
    capsys: Capsys, registry: LiveRegistry, alice: str, tmp_path: Path
) -> None:
    """Not a terminal (as here): no --wait, but the embedded build is already final, and every step
    of its log is printed, not only the first and last lines."""
    result = publish(capsys, registry, alice, build(capsys, tmp_path, "hello-steps"))
    assert result.code == 0, result.err
    steps = [line.split()[0] for line in result.out.splitlines() if line.startswith("  ")]
    assert steps[:2] == ["upload", "fetch"] and "validate" in steps and steps[-1] == "commit"
    assert result.out.splitlines()[-1] == "published hello-steps 0.1.0"
