"""Test factories: users, tokens, extension sources, built packages, and publishing through the API.

Stable API (other test modules import these; keep the signatures):

    make_user(username="alice", password=None) -> User
    make_token(user, scopes=("publish:*", "yank:*", "owners:*"), expires_in_days=None) -> str
    write_extension(root, name, version, *, type="taskserv", dependencies=(), provides=None,
                    description=None, readme=None, extra_files=None,
                    provisioning_version=">=1.0.0", keywords=()) -> Path
    package(tmp_path, name, version, **write_extension_kwargs) -> Path      # NAME-VERSION.tar.gz
    publish(client, token, path) -> HttpResponse                            # POST /api/v1/extensions/
    publish_new(client, token, tmp_path, name, version, **kw) -> dict        # asserts 202, the build
    autocommit_hooks() -> context manager                                   # see below

On-commit hooks under pytest-django's ``db`` fixture: every test runs inside one transaction that
is rolled back, so ``transaction.on_commit`` callbacks (the enqueueing of the build, index cache
refreshes) would never run, and a publish would stay ``queued``. `publish` therefore runs the
request inside `autocommit_hooks()`, which behaves as production's autocommit does: a callback
registered outside any transaction of the code under test runs at once (so the in-process build
runs during the request and the response carries its final status, as in production), and one
registered inside a transaction of the code runs when the request is over. With
``transactional_db`` the hooks are real and the context manager changes nothing.

Fixtures (opt in with ``pytest_plugins = ["tests.factories"]`` in the test module; import this
module's names at run time only inside tests, or under ``if TYPE_CHECKING:`` at the top, so that
pytest can still rewrite its asserts when it loads it as a plugin):

    user  -> a user "alice";  token -> a token of "alice" with every scope
    publisher -> a `Publisher` bound to the test's client, token and tmp_path:
                 ``publisher("etcd", "3.5.9", keywords=("kv",))`` publishes and returns the build

All of these need the database (pytest-django's ``db`` fixture or ``@pytest.mark.django_db``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.http import HttpResponse
from django.test import Client, TestCase

from extensions.archive import build_package
from registry.services import token_create
from registry.tokens import DEFAULT_SCOPES, Actor

_KIND_OF_TYPE = {"provider": "providers", "taskserv": "taskservs", "cluster": "clusters", "template": "templates"}
_token_names = itertools.count(1)

PUBLISH_URL = "/api/v1/extensions/"


def make_user(username: str = "alice", password: str | None = None) -> AbstractBaseUser:
    """A user (an unusable password unless one is given)."""
    users = get_user_model()
    user = users.objects.create_user(username=username, email=f"{username}@example.com")
    if password is None:
        user.set_unusable_password()
    else:
        user.set_password(password)
    user.save()
    return user


def make_token(
    user: AbstractBaseUser,
    scopes: Iterable[str] = DEFAULT_SCOPES,
    expires_in_days: int | None = None,
) -> str:
    """A new API token secret (``pvr_...``) for the user, created through the token service."""
    _, secret = token_create(
        actor=Actor(user=user),
        name=f"test-token-{next(_token_names)}",
        scopes=list(scopes),
        expires_in_days=expires_in_days,
    )
    return secret


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


def write_extension(
    root: Path,
    name: str,
    version: str,
    *,
    type: str = "taskserv",
    dependencies: Iterable[str] = (),
    provides: Mapping[str, Iterable[str]] | None = None,
    description: str | None = None,
    readme: str | None = None,
    extra_files: Mapping[str, str] | None = None,
    provisioning_version: str | None = ">=1.0.0",
    keywords: Iterable[str] = (),
    categories: Iterable[str] = (),
) -> Path:
    """Write a minimal valid extension source directory ``root/NAME-VERSION`` and return it.

    ``dependencies`` are SPEC strings (``"etcd ^3.5"``); ``provides`` maps a kind (``"taskservs"``)
    to names, by default the extension provides itself under its type's kind. ``extra_files`` maps
    relative paths to text (included by the default ``[build]`` rules)."""
    source = Path(root) / f"{name}-{version}"
    source.mkdir(parents=True, exist_ok=False)
    if provides is None:
        provides = {_KIND_OF_TYPE[type]: [name]}
    description = description if description is not None else f"The {name} {type} for tests"
    lines = [
        "[extension]",
        f"name = {_toml_string(name)}",
        f"version = {_toml_string(version)}",
        f"description = {_toml_string(description)}",
        f"type = {_toml_string(type)}",
        'author = "Test Author <test@example.com>"',
        'license = "MIT"',
        f'repository = "https://example.com/{name}"',
        f"keywords = {_toml_list(keywords)}",
        f"categories = {_toml_list(categories)}",
        "",
        "[compatibility]",
    ]
    if provisioning_version is not None:
        lines.append(f"provisioning_version = {_toml_string(provisioning_version)}")
    lines += ["", "[provides]"]
    lines += [f"{kind} = {_toml_list(names)}" for kind, names in provides.items()]
    lines += ["", "[dependencies]", f"extensions = {_toml_list(dependencies)}", ""]
    (source / "extension.toml").write_text("\n".join(lines), encoding="utf-8")
    readme_text = readme if readme is not None else f"# {name}\n\nThe **{name}** {type}, version {version}.\n"
    (source / "README.md").write_text(readme_text, encoding="utf-8")
    (source / "nulib").mkdir()
    (source / "nulib" / f"{name}.nu").write_text(
        f'# The {name} module\nexport def version [] {{ "{version}" }}\n', encoding="utf-8"
    )
    (source / "templates").mkdir()
    (source / "templates" / f"{name}.conf.j2").write_text(
        f"# {name} configuration\nname = {{{{ name | default('{name}') }}}}\n", encoding="utf-8"
    )
    for rel, text in (extra_files or {}).items():
        target = source / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return source


def package(tmp_path: Path, name: str, version: str, **kw: Any) -> Path:
    """Write an extension source under tmp_path and build its package; returns the .tar.gz path."""
    source = write_extension(Path(tmp_path) / "src", name, version, **kw)
    return build_package(source, Path(tmp_path) / "dist").path


@contextlib.contextmanager
def autocommit_hooks() -> Iterator[None]:
    """Run ``transaction.on_commit`` callbacks as production's autocommit would, even inside the
    test's own transaction (see the module docstring)."""
    original = transaction.on_commit

    def on_commit(func: Callable[[], Any], using: str | None = None, robust: bool = False) -> None:
        conn = transaction.get_connection(using)
        if all(getattr(block, "_from_testcase", False) for block in conn.atomic_blocks):
            func()  # no transaction of the code under test is open: autocommit runs it now
        else:
            original(func, using, robust)

    transaction.on_commit = on_commit  # type: ignore[assignment]
    try:
        if connection.in_atomic_block:
            with TestCase.captureOnCommitCallbacks(execute=True):
                yield
        else:
            yield
    finally:
        transaction.on_commit = original


def publish(client: Client, token: str, path: Path) -> HttpResponse:
    """POST a package to /api/v1/extensions/ (multipart field ``file``) with the bearer token."""
    with autocommit_hooks(), Path(path).open("rb") as handle:
        return client.post(PUBLISH_URL, {"file": handle}, HTTP_AUTHORIZATION=f"Bearer {token}")  # type: ignore[return-value]


def refusal(response: Any) -> tuple[int, dict[str, Any]]:
    """``(status, error)`` of a refused request, whichever way it was refused (SPEC 3.1, 3.2): an
    error envelope with its HTTP status, or, for a publish, ``202`` with a build that failed (in
    embedded mode the build ran before the answer); then the status is the one SPEC 3.1 gives the
    build's error code, and the error's details name the build (``{"build", "url"}``), as the
    envelope of a refused request would."""
    from registry.errors import STATUS_BY_CODE

    body = response.json()
    if response.status_code == 202:
        assert body["success"] is True, body
        build = body["data"]
        assert build["status"] == "failed", build
        error = dict(build["error"])
        assert set(error) == {"code", "message", "details"}, error
        error["details"] = [*error["details"], {"build": build["id"], "url": build["url"]}]
        return STATUS_BY_CODE[error["code"]], error
    assert body["success"] is False, body
    return int(response.status_code), dict(body["error"])


def publish_new(client: Client, token: str, tmp_path: Path, name: str, version: str, **kw: Any) -> dict[str, Any]:
    """Build and publish NAME VERSION; asserts the 202 and returns the build (the envelope's data)."""
    response = publish(client, token, package(tmp_path, name, version, **kw))
    assert response.status_code == 202, response.content.decode("utf-8", "replace")
    body = response.json()
    assert body["success"] is True
    data: dict[str, Any] = body["data"]
    assert data["status"] == "succeeded", data
    return data


class Publisher:
    """Publishes packages with one client and token; each package is built in its own directory."""

    def __init__(self, client: Client, token: str, tmp_path: Path) -> None:
        self.client = client
        self.token = token
        self.tmp_path = Path(tmp_path)
        self._count = itertools.count(1)

    def __call__(self, name: str, version: str, **kw: Any) -> dict[str, Any]:
        return publish_new(self.client, self.token, self.tmp_path / f"p{next(self._count)}", name, version, **kw)

    def package(self, name: str, version: str, **kw: Any) -> Path:
        return package(self.tmp_path / f"p{next(self._count)}", name, version, **kw)


@pytest.fixture
def user(db: None) -> AbstractBaseUser:
    return make_user("alice")


@pytest.fixture
def token(user: AbstractBaseUser) -> str:
    return make_token(user)


@pytest.fixture
def publisher(client: Client, token: str, tmp_path: Path) -> Publisher:
    return Publisher(client, token, tmp_path)
