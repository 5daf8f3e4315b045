"""No request, however malformed, gets a 500 (SPEC 3.1): random manifests published as proper
packages, random multipart uploads, random JSON (and non-JSON) bodies to the owner endpoints, and
random paths under /api/v1/. Every answer is below 500, and every error is the envelope.

Run it on PostgreSQL too (``pytest --postgres``): PostgreSQL refuses what SQLite silently stores
(NUL characters, strings longer than a column, integers out of range)."""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import string
import tarfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from hypothesis import HealthCheck, event, example, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from extensions.archive import build_package
from extensions.errors import ExtensionError
from registry.errors import STATUS_BY_CODE
from registry.models import ApiToken

pytest_plugins = ["tests.factories"]  # imported at run time below, so pytest can rewrite its asserts

FUZZ = hsettings(
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
CODES = set(STATUS_BY_CODE)
# What a WSGI server can put in a header (PEP 3333: latin-1 code points only).
header_text = st.text(alphabet=st.characters(max_codepoint=255), max_size=60)


class Env:
    """What the fuzzing tests share (a plain class: hypothesis prints dataclasses field by field)."""

    def __init__(self, client: Client, token: str, token_id: int, tmp_path: Path, package: bytes) -> None:
        self.client = client
        self.token = token
        self.token_id = token_id
        self.tmp_path = tmp_path
        self.package = package  # a valid package of fuzz 0.0.1 (never published)
        self.counter = itertools.count()

    def __repr__(self) -> str:
        return "Env(alice with a token, etcd 3.5.9 published)"

    def fresh_dir(self) -> Path:
        path = self.tmp_path / f"ex{next(self.counter)}"
        path.mkdir()
        return path


@pytest.fixture
def env(transactional_db: None, settings: Any, tmp_path: Path) -> Env:
    """Real commits (``transactional_db``), as in production: a database error in one request (which
    PostgreSQL raises where SQLite stores anything) fails that request only, not every later one."""
    from tests.factories import make_token, make_user, package, publish_new

    # Fuzzing sends many requests: throttling would answer 429 before the code under test runs.
    settings.REGISTRY_RATE_PUBLISH = "1000000/minute"
    settings.REGISTRY_RATE_WRITE = "1000000/minute"
    settings.REGISTRY_RATE_AUTH_FAILURE = "1000000/minute"
    cache.clear()
    client = Client(raise_request_exception=False)
    alice = make_user("alice")
    make_user("bob")
    token = make_token(alice)
    publish_new(client, token, tmp_path / "seed", "etcd", "3.5.9")
    valid = package(tmp_path / "valid", "fuzz", "0.0.1").read_bytes()
    return Env(client, token, ApiToken.objects.get().pk, tmp_path, valid)


def assert_not_5xx(response: Any) -> None:
    """Below 500; an error is the envelope with a known code of the same status."""
    event(f"status {response.status_code}")
    assert response.status_code < 500, response.content[:2000]
    if response.status_code >= 400:
        body = response.json()
        assert body["success"] is False, body
        error = body["error"]
        assert set(error) == {"code", "message", "details"}, body
        assert error["code"] in CODES, body
        assert STATUS_BY_CODE[error["code"]] == response.status_code, body
        assert isinstance(error["message"], str) and error["message"]
        assert isinstance(error["details"], list)


# --- (a) random extension.toml, packaged properly ------------------------------------------------

BASE_MANIFEST = [
    ("[extension]", None),
    ("name", '"fuzz"'),
    ("version", '"1.0.0"'),
    ("description", '"A fuzzed extension"'),
    ("type", '"taskserv"'),
    ("author", '"A <a@example.com>"'),
    ("license", '"MIT"'),
    ("repository", '"https://example.com/fuzz"'),
    ("keywords", '["kv"]'),
    ("[compatibility]", None),
    ("provisioning_version", '">=1.0.0"'),
    ("[provides]", None),
    ("taskservs", '["fuzz"]'),
    ("[dependencies]", None),
    ("extensions", '["etcd ^3.5"]'),
]
KEYS = sorted(
    {k for k, v in BASE_MANIFEST if v is not None}
    | {
        "authors",
        "homepage",
        "categories",
        "readme",
        "kcl_version",
        "providers",
        "clusters",
        "templates",
        "system_packages",
        "required_env",
        "optional_env",
        "include",
        "exclude",
        "nu_version",
    }
)
TABLES = [
    "[extension]",
    "[compatibility]",
    "[provides]",
    "[dependencies]",
    "[configuration]",
    "[build]",
    "[dependencies.extensions]",
    "[[extension]]",
    "[x]",
    "[extension.x]",
]


def toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (lone surrogates make it invalid: fine)


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


numbers = st.one_of(st.integers(0, 20), st.integers(0, 2**31 + 10), st.integers(0, 10**40))
identifiers = st.one_of(numbers.map(str), st.from_regex(r"\A[0-9]*[a-zA-Z-][0-9a-zA-Z-]{0,40}\Z"), st.text(max_size=5))
semvers = st.builds(
    lambda major, minor, patch, pre, build: (
        f"{major}.{minor}.{patch}" + (f"-{'.'.join(pre)}" if pre else "") + (f"+{'.'.join(build)}" if build else "")
    ),
    numbers,
    numbers,
    numbers,
    st.lists(identifiers, max_size=30),
    st.lists(st.from_regex(r"\A[0-9a-zA-Z-]{1,40}\Z"), max_size=10),
)
partial_versions = st.one_of(
    semvers, st.from_regex(r"\A[0-9]{1,12}(\.[0-9]{1,3})?(\.(\*|x|[0-9]{1,3}))?\Z"), st.just("*")
)
clauses = st.builds(
    lambda op, v: f"{op}{v}",
    st.sampled_from(["", "=", "==", ">", ">=", "<", "<=", "^", "~", "!=", "~="]),
    partial_versions,
)
constraints = st.lists(st.lists(clauses, min_size=1, max_size=8).map(", ".join), min_size=1, max_size=40).map(
    " || ".join
)
names = st.one_of(
    st.from_regex(r"\A[a-z][a-z0-9]{1,12}(-[a-z0-9]{1,6}){0,2}\Z"),
    st.sampled_from(["etcd", "fuzz", "api", "taskservs", "kubernetes", "a" * 64, "a" * 65]),
    st.text(max_size=10),
)
any_text = st.one_of(
    st.text(max_size=40),
    st.text(min_size=500, max_size=1200),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=100),
    st.sampled_from(["\x00", "a\u0000b", "\u202e", "\ufeff", "\U0001f600" * 200, "x" * 70_000]),
)


def scalar_values() -> st.SearchStrategy[str]:
    return st.one_of(
        any_text.map(toml_str),
        numbers.map(str),
        st.floats().map(lambda f: repr(f).replace("inf", "inf").replace("nan", "nan")),
        st.booleans().map(lambda b: str(b).lower()),
        st.just("1979-05-27T07:32:00Z"),
        st.text(max_size=20),  # TOML-ish garbage
    )


toml_values = st.recursive(
    scalar_values(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5).map(toml_list),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(
            lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=8,
)


def value_for(key: str) -> st.SearchStrategy[str]:
    """Mostly values the schema accepts (so that they reach the registry), some it does not."""
    specific: dict[str, st.SearchStrategy[str]] = {
        "name": names.map(toml_str),
        "version": semvers.map(toml_str),
        "description": any_text.map(toml_str),
        "author": any_text.map(toml_str),
        "license": st.sampled_from(["MIT", "Apache-2.0", "MIT OR Apache-2.0", "x" * 300]).map(toml_str),
        "keywords": st.lists(st.from_regex(r"\A[a-z0-9-]{1,33}\Z"), max_size=12).map(
            lambda xs: toml_list([toml_str(x) for x in xs])
        ),
        "provisioning_version": constraints.map(toml_str),
        "kcl_version": constraints.map(toml_str),
        "taskservs": st.lists(names, max_size=5).map(lambda xs: toml_list([toml_str(x) for x in xs])),
        "providers": st.lists(names, max_size=3).map(lambda xs: toml_list([toml_str(x) for x in xs])),
        "extensions": st.lists(
            st.builds(lambda n, c: f"{n} {c}", st.sampled_from(["etcd", "fuzz", "nope"]), constraints), max_size=3
        ).map(lambda xs: toml_list([toml_str(x) for x in xs])),
        "categories": st.lists(any_text, max_size=3).map(lambda xs: toml_list([toml_str(x) for x in xs])),
        "system_packages": st.lists(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9+._:@/-]{0,130}\Z"), max_size=3).map(
            lambda xs: toml_list([toml_str(x) for x in xs])
        ),
    }
    base = specific.get(key)
    return st.one_of(base, base, base, toml_values) if base is not None else toml_values


@st.composite
def manifests(draw: st.DrawFn) -> str:
    lines = [(k, v) for k, v in BASE_MANIFEST]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["set"] * 8 + ["insert", "insert", "delete", "garbage", "table"]))
        if op == "set":
            index = draw(st.sampled_from([i for i, (_, v) in enumerate(lines) if v is not None] or [0]))
            key = lines[index][0]
            if lines[index][1] is not None:
                lines[index] = (key, draw(value_for(key)))
        elif op == "insert":
            key = draw(st.sampled_from(KEYS) | st.text(max_size=10))
            lines.insert(draw(st.integers(0, len(lines))), (key, draw(value_for(key))))
        elif op == "delete" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
        elif op == "garbage":
            lines.insert(draw(st.integers(0, len(lines))), (draw(st.text(max_size=60)), None))
        else:
            lines.insert(draw(st.integers(0, len(lines))), (draw(st.sampled_from(TABLES)), None))
    return "\n".join(k if v is None else f"{k} = {v}" for k, v in lines) + "\n"


def publish_bytes(env: Env, data: bytes, filename: str = "pkg.tar.gz") -> Any:
    from tests.factories import autocommit_hooks

    upload = io.BytesIO(data)
    upload.name = filename
    with autocommit_hooks():
        return env.client.post("/api/v1/extensions/", {"file": upload}, HTTP_AUTHORIZATION=f"Bearer {env.token}")


BASE_TEXT = "\n".join(k if v is None else f"{k} = {v}" for k, v in BASE_MANIFEST) + "\n"
LONG_VERSION = "1.0.0-" + ".".join(["a" * 40] * 5)  # 210 characters: more than the old 128-character column
# 991 characters that normalise to about 3,600 (each alternative expands to ">=N.0.0, <N+1.0.0-0").
WIDE_CONSTRAINT = " || ".join(str(i) for i in range(0, 400, 2))[:1000].rsplit(" ||", 1)[0]


@hsettings(FUZZ, max_examples=200)
@given(text=manifests())
@example(text=BASE_TEXT.replace('"1.0.0"', toml_str(LONG_VERSION)))
@example(text=BASE_TEXT.replace('"1.0.0"', '"3000000000.0.0"'))
@example(text=BASE_TEXT.replace('">=1.0.0"', toml_str(WIDE_CONSTRAINT)))
@example(text=BASE_TEXT.replace('"etcd ^3.5"', toml_str(f"etcd {WIDE_CONSTRAINT}")))
@example(text=BASE_TEXT.replace("A fuzzed", "A \\u0000 fuzzed"))
@example(text=BASE_TEXT.replace('"MIT"', '"MIT"\ncategories = ["a\\u0000"]'))
def test_a_random_manifest_never_gets_a_500(env: Env, text: str) -> None:
    source = env.fresh_dir() / "src"
    source.mkdir()
    text = text.replace('"1.0.0"', f'"1.0.{source.parent.name[2:]}"')  # a version not yet published
    (source / "extension.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    (source / "README.md").write_text("# fuzz\n", encoding="utf-8")
    try:
        built = build_package(source, source.parent / "dist")
    except ExtensionError:
        event("refused by the builder")
        return  # nothing to publish
    note(text)
    response = publish_bytes(env, built.path.read_bytes(), built.path.name)
    assert_not_5xx(response)
    assert response.status_code in (202, 409, 413, 422), response.content[:2000]


def repack(package: bytes, manifest: bytes) -> bytes:
    """The package with its extension.toml replaced, and a MANIFEST.json that matches again."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            members.append((member, data))
    top = members[0][0].name.split("/")[0]
    contents = {m.name: d for m, d in members if d is not None}
    contents[f"{top}/extension.toml"] = manifest
    files = [
        {"path": name[len(top) + 1 :], "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in sorted(contents.items())
        if not name.endswith("/MANIFEST.json")
    ]
    name, version = top.split("-", 1)
    contents[f"{top}/MANIFEST.json"] = json.dumps(
        {"format": 1, "name": name, "version": version, "files": files}, sort_keys=True
    ).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for member, data in members:
            if data is None:
                tar.addfile(member)
                continue
            content = contents[member.name]
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return out.getvalue()


@FUZZ
@given(manifest=st.one_of(manifests().map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=3000)))
def test_a_package_with_any_manifest_inside_never_gets_a_500(env: Env, manifest: bytes) -> None:
    response = publish_bytes(env, repack(env.package, manifest), "fuzz-0.0.1.tar.gz")
    assert_not_5xx(response)


# --- (b) random multipart uploads ----------------------------------------------------------------

boundaries = st.one_of(
    st.just("b0undary"),
    st.from_regex(r"\A[0-9A-Za-z'()+_,./:=?-]{1,70}\Z"),
    header_text,
)
field_names = st.one_of(
    st.sampled_from(["file", "source"]), st.sampled_from(["files", "FILE", "", "file[]"]), st.text(max_size=20)
)
filenames = st.one_of(
    st.none(),
    st.sampled_from(["fuzz-0.0.1.tar.gz", "", "../../etc/passwd", "a\x00b", "C:\\x.tgz"]),
    st.text(max_size=300),
)


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    content: str  # "valid", "truncated", or "random"
    random: bytes
    headers: tuple[str, ...]


parts = st.builds(
    Part,
    field_names,
    filenames,
    st.sampled_from(["valid", "truncated", "random"]),
    st.binary(max_size=2000),
    st.lists(
        st.sampled_from(
            [
                "Content-Type: application/gzip",
                "Content-Type: text/plain; charset=zlib",
                "Content-Transfer-Encoding: base64",
                "X: \xff",
                "garbage",
            ]
        ),
        max_size=2,
    ).map(tuple),
)


@st.composite
def multipart_requests(draw: st.DrawFn) -> dict[str, Any]:
    boundary = draw(boundaries)
    body_boundary = draw(st.one_of(st.just(boundary), st.just(boundary), boundaries))
    chunks: list[tuple[bytes, str, bytes]] = []  # (head, what the content is, random content)
    for part in draw(st.lists(parts, max_size=4)):
        disposition = f'form-data; name="{part.name}"'
        if part.filename is not None:
            disposition += f'; filename="{part.filename}"'
        head = "\r\n".join([f"Content-Disposition: {disposition}", *part.headers])
        chunks.append(
            (f"--{body_boundary}\r\n{head}\r\n\r\n".encode("utf-8", "surrogatepass"), part.content, part.random)
        )
    if draw(st.booleans()):
        chunks.append((f"--{body_boundary}--\r\n".encode("utf-8", "surrogatepass"), "none", b""))
    content_type = draw(
        st.one_of(
            st.just(f"multipart/form-data; boundary={boundary}"),
            st.just(f'multipart/form-data; boundary="{boundary}"'),
            st.just("multipart/form-data"),
            st.just(f"multipart/mixed; boundary={boundary}"),
            st.sampled_from(["application/json", "application/octet-stream", "", "text/plain"]),
            header_text,
        )
    )
    return {
        "chunks": chunks,
        "content_type": content_type,
        "cut": draw(st.one_of(st.none(), st.integers(0, 5000))),
        "noise": draw(st.one_of(st.none(), st.binary(min_size=1, max_size=500))),
        "content_length": draw(
            st.one_of(st.none(), st.integers(-5, 6000).map(str), st.sampled_from(["abc", "", "1e3", "9" * 30]))
        ),
        "auth": draw(st.sampled_from(["valid", "valid", "valid", "none", "garbage"])),
        "path": draw(st.sampled_from(["/api/v1/extensions/", "/api/v1/builds/"])),
        "extra": draw(
            st.dictionaries(
                st.sampled_from(
                    [
                        "HTTP_X_FORWARDED_FOR",
                        "HTTP_ACCEPT",
                        "HTTP_ACCEPT_ENCODING",
                        "HTTP_TRANSFER_ENCODING",
                        "HTTP_HOST",
                        "HTTP_COOKIE",
                        "HTTP_X_CSRFTOKEN",
                        "HTTP_CONTENT_ENCODING",
                    ]
                ),
                header_text,
                max_size=3,
            )
        ),
    }


def body_of(env: Env, request: dict[str, Any]) -> bytes:
    body = b""
    for head, kind, random in request["chunks"]:
        if kind == "none":
            body += head
            continue
        content = {"valid": env.package, "truncated": env.package[: len(env.package) // 2]}.get(kind, random)
        body += head + content + b"\r\n"
    if request["noise"] is not None:
        body = body[: len(body) // 2] + request["noise"] + body[len(body) // 2 :]
    if request["cut"] is not None:
        body = body[: request["cut"]]
    return body


@FUZZ
@given(request=multipart_requests())
@example(
    request={
        "chunks": [],
        "content_type": "multipart/form-data",
        "cut": None,
        "noise": None,
        "content_length": None,
        "auth": "valid",
        "path": "/api/v1/extensions/",
        "extra": {"HTTP_AUTHORIZATION": " "},
    }
)
@example(  # a well-formed upload: the harness can publish
    request={
        "chunks": [
            (
                b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="fuzz-0.0.1.tar.gz"\r\n\r\n',
                "valid",
                b"",
            ),
            (b"--b0undary--\r\n", "none", b""),
        ],
        "content_type": "multipart/form-data; boundary=b0undary",
        "cut": None,
        "noise": None,
        "content_length": None,
        "auth": "valid",
        "path": "/api/v1/extensions/",
        "extra": {},
    }
)
def test_a_random_upload_never_gets_a_500(env: Env, request: dict[str, Any]) -> None:
    from tests.factories import autocommit_hooks

    body = body_of(env, request)
    extra: dict[str, Any] = {"wsgi.input": io.BytesIO(body)}  # reading past the end gives EOF, as a socket does
    if request["auth"] == "valid":
        extra["HTTP_AUTHORIZATION"] = f"Bearer {env.token}"
    elif request["auth"] == "garbage":
        extra["HTTP_AUTHORIZATION"] = "Bearer pvr_garbage"
    extra.update(request["extra"])
    if request["content_length"] is not None:
        extra["CONTENT_LENGTH"] = request["content_length"]
    note(repr(body[:500]))
    with autocommit_hooks():
        response = env.client.generic("POST", request["path"], body, content_type=request["content_type"], **extra)
    assert_not_5xx(response)


# --- (c) random bodies to the owner endpoints ----------------------------------------------------


@dataclass(frozen=True)
class Nested:
    """A deeply nested JSON document, kept short in hypothesis' reports."""

    open: bytes
    depth: int
    close: bytes
    inner: bytes = b""

    def render(self) -> bytes:
        return self.open * self.depth + self.inner + self.close * self.depth


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
field_values = st.one_of(
    json_values,
    st.sampled_from(
        ["alice", "bob", "nobody", "a\x00", "publish:*", "yank:etcd", ["publish:*"], ["admin:*"], 1, 0, -1]
    ),
    st.integers(-(10**30), 10**30),
    st.text(min_size=100, max_size=2000),
)
objects = st.dictionaries(
    st.one_of(st.sampled_from(["reason", "username", "name", "scopes", "expires_in_days", "id"]), st.text(max_size=8)),
    field_values,
    max_size=5,
)
bodies = st.one_of(
    st.sampled_from(
        [
            {"reason": "broken"},
            {"username": "bob"},
            {"username": "alice"},
            {"name": "t", "scopes": ["yank:etcd"]},
            {"name": "t", "expires_in_days": 3650},
            {"id": 1},
            {"id": 2},
        ]
    ).map(lambda o: json.dumps(o).encode()),
    objects.map(lambda o: json.dumps(o).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.integers(1, 200_000).map(lambda n: Nested(b"[", n, b"]")),
    st.integers(1, 200_000).map(lambda n: Nested(b'{"a":', n, b"}", b"1")),
    st.sampled_from([b"NaN", b'{"id": Infinity}', b'{"id": 1' + b"0" * 5000 + b"}", b"\xef\xbb\xbf{}", b'"\\ud800"']),
)
content_types = st.one_of(
    st.just("application/json"),
    st.sampled_from(
        [
            "application/json; charset=utf-16",
            "application/json; charset=latin-1",
            "application/json; charset=zlib",
            "application/json; charset=idna",
            "text/plain",
            "",
            "multipart/form-data",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
        ]
    ),
    header_text,
)
owner_urls = st.builds(
    lambda name, version, which: {
        "yank": f"/api/v1/extensions/{name}/versions/{version}/yank",
        "owners": f"/api/v1/extensions/{name}/owners/",
        "tokens": "/api/v1/tokens/",
    }[which],
    st.one_of(st.just("etcd"), st.just("etcd"), st.text(max_size=10).map(lambda s: urllib.parse.quote(s, safe=""))),
    st.one_of(st.just("3.5.9"), st.just("3.5.9"), st.text(max_size=10).map(lambda s: urllib.parse.quote(s, safe=""))),
    st.sampled_from(["yank", "owners", "tokens"]),
)


@FUZZ
@given(
    url=owner_urls,
    method=st.sampled_from(["POST", "DELETE"] * 4 + ["PUT", "PATCH"]),
    body=bodies,
    content_type=content_types,
    auth=st.sampled_from(["valid", "valid", "none", "basic", "garbage"]),
)
@example(
    url="/api/v1/extensions/%00/owners/",
    method="POST",
    body=b'{"username": "bob"}',
    content_type="application/json",
    auth="valid",
)
@example(
    url="/api/v1/extensions/%00/versions/1.0.0/yank",
    method="POST",
    body=b'{"reason": "x"}',
    content_type="application/json",
    auth="valid",
)
@example(
    url="/api/v1/tokens/",
    method="POST",
    body=Nested(b"[", 100_000, b"]"),
    content_type="application/json",
    auth="valid",
)
def test_a_random_body_to_an_owner_endpoint_never_gets_a_500(
    env: Env, url: str, method: str, body: bytes | Nested, content_type: str, auth: str
) -> None:
    data = body.render() if isinstance(body, Nested) else body
    headers = {
        "valid": {"HTTP_AUTHORIZATION": f"Bearer {env.token}"},
        "none": {},
        "basic": {"HTTP_AUTHORIZATION": "Basic " + "YWxpY2U6eA=="},
        "garbage": {"HTTP_AUTHORIZATION": "Bearer \x7f"},
    }[auth]
    response = env.client.generic(method, url, data, content_type=content_type, **headers)
    assert_not_5xx(response)
    ApiToken.objects.filter(pk=env.token_id).update(revoked_at=None)  # the fuzz may revoke its own token


# --- (d) random paths under /api/v1/ -------------------------------------------------------------

WORDS = [
    "extensions",
    "builds",
    "index",
    "tokens",
    "versions",
    "download",
    "owners",
    "dependents",
    "schema",
    "extension.json",
    "providers",
    "taskservs",
    "clusters",
    "templates",
    "taskserv",
    "provider",
    "etcd",
    "3.5.9",
    "3.5.9+b",
    "yank",
    "resolve",
    "openapi.json",
    "",
    ".",
    "..",
    "%2e%2e",
    "%2F",
    "%00",
    "%C0%AF",
    "%ZZ",
    "%",
    "00000000-0000-0000-0000-000000000000",
]
segments = st.one_of(
    st.sampled_from(WORDS),
    st.text(max_size=20),
    st.text(max_size=20).map(lambda s: urllib.parse.quote(s, safe="")),
    st.binary(max_size=20).map(lambda b: urllib.parse.quote_from_bytes(b, safe="")),
    st.integers(1000, 20_000).map(lambda n: "a" * n),
    st.text(alphabet=string.printable, max_size=30),
)
queries = st.one_of(
    st.just(""),
    st.dictionaries(
        st.sampled_from(["q", "type", "keyword", "limit", "offset", "format", "x"]),
        st.one_of(st.text(max_size=30), st.integers(-(10**20), 10**20).map(str), st.just("a" * 5000)),
        max_size=4,
    ).map(urllib.parse.urlencode),
    st.text(max_size=50),
)


@FUZZ
@given(parts=st.lists(segments, min_size=1, max_size=6), slash=st.booleans(), query=queries)
@example(parts=["extensions", "%00"], slash=True, query="")
@example(parts=["extensions", "%00", "owners"], slash=True, query="")
@example(parts=["extensions", "etcd", "versions", "99999999999.0.0"], slash=True, query="")
def test_a_random_path_never_gets_a_500(env: Env, parts: list[str], slash: bool, query: str) -> None:
    path = "/api/v1/" + "/".join(parts) + ("/" if slash else "")
    if query:
        path += "?" + query
    response = env.client.get(path)
    assert_not_5xx(response)
    media_type = response.get("Content-Type", "").split(";")[0]
    is_json = media_type == "application/json" or media_type.endswith("+json")  # the OpenAPI document too
    if response.status_code == 304:
        return
    if response.status_code != 200 or is_json:
        assert is_json, (path, response.status_code, media_type)
        response.json()
    else:  # only a download answers with something other than JSON
        assert response["Content-Type"] == "application/gzip", (path, response["Content-Type"])


# --- (e) random client addresses -----------------------------------------------------------------

addresses = st.one_of(
    st.ip_addresses().map(str),
    st.ip_addresses(v=4).map(lambda ip: f"{ip}:{443}"),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]:8443"),
    st.sampled_from(["unknown", "", "1.2.3.4:x", "fe80::1%eth0", "[::1", "::ffff:1.2.3.4", "999.1.1.1"]),
    header_text,
)


@FUZZ
@given(
    proxies=st.integers(0, 3),
    hops=st.lists(addresses, max_size=4),
    remote=addresses,
    valid=st.booleans(),
)
@example(proxies=1, hops=["garbage"], remote="10.0.0.1", valid=True)
@example(proxies=1, hops=["1.2.3.4:5678"], remote="10.0.0.1", valid=False)
@example(proxies=0, hops=[], remote="not an address", valid=False)
def test_any_client_address_never_gets_a_500(
    env: Env, settings: Any, proxies: int, hops: list[str], remote: str, valid: bool
) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": proxies}
    ApiToken.objects.filter(pk=env.token_id).update(last_used_at=None)  # record this use
    token = env.token if valid else "pvr_" + "A" * 43
    extra = {"REMOTE_ADDR": remote, "HTTP_AUTHORIZATION": f"Bearer {token}"}
    if hops:
        extra["HTTP_X_FORWARDED_FOR"] = ", ".join(hops)
    response = env.client.get("/api/v1/tokens/", **extra)
    assert_not_5xx(response)
    assert response.status_code == (200 if valid else 401)


# --- the cases the fuzzing found, kept as plain tests --------------------------------------------


@pytest.mark.parametrize("header", [" ", "\t", "  \t "])
def test_a_blank_authorization_header_is_no_credentials(env: Env, header: str) -> None:
    response = env.client.get("/api/v1/tokens/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert env.client.get("/api/v1/extensions/", HTTP_AUTHORIZATION=header).status_code == 200


def publish_text(env: Env, text: str) -> Any:
    source = env.fresh_dir() / "src"
    source.mkdir()
    (source / "extension.toml").write_text(text, encoding="utf-8")
    (source / "README.md").write_text("# fuzz\n", encoding="utf-8")
    built = build_package(source, source.parent / "dist")
    return publish_bytes(env, built.path.read_bytes(), built.path.name)


def test_the_longest_version_a_package_can_carry_is_stored(env: Env) -> None:
    # 235 characters: "fuzz-VERSION/extension.toml" is then 255 bytes, the longest path a package allows.
    version = "1.0.0-" + ".".join(["a" * 45] * 5)
    assert len(version) == 235
    response = publish_text(env, BASE_TEXT.replace('"1.0.0"', toml_str(version)))
    assert response.status_code == 202, response.content
    detail = env.client.get(f"/api/v1/extensions/fuzz/versions/{version}/")
    assert detail.status_code == 200
    assert detail.json()["data"]["version"] == version


@pytest.mark.parametrize("version", ["3000000000.0.0", "1.2147483648.0", "1.0.99999999999999999999"])
def test_a_version_number_beyond_an_integer_column_is_an_invalid_manifest(env: Env, version: str) -> None:
    from tests.factories import refusal

    status, error = refusal(publish_text(env, BASE_TEXT.replace('"1.0.0"', toml_str(version))))
    assert status == 422, error
    assert error["code"] == "invalid_manifest"
    assert "allowed: version numbers up to 2147483647" in error["message"]
    assert error["details"][0]["path"] == "extension.version"


def test_the_largest_storable_version_number_is_accepted(env: Env) -> None:
    response = publish_text(env, BASE_TEXT.replace('"1.0.0"', '"2147483647.2147483647.2147483647"'))
    assert response.status_code == 202, response.content


def test_constraints_that_expand_beyond_256_characters_are_stored(env: Env) -> None:
    text = BASE_TEXT.replace('">=1.0.0"', toml_str(WIDE_CONSTRAINT)).replace(
        '"etcd ^3.5"', toml_str(f"etcd {WIDE_CONSTRAINT.replace('|| 2 ', '|| 3 ')}")
    )
    response = publish_text(env, text)
    assert response.status_code == 202, response.content
    from registry.models import Dependency, Version

    version = Version.objects.get(extension__name="fuzz")
    assert len(version.provisioning_version) > 1024
    assert len(Dependency.objects.get(version=version).constraint) > 1024


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("A fuzzed", "A \\u0000 fuzzed", "extension.description"),
        ('"MIT"', '"MIT"\ncategories = ["ok", "a\\u0000"]', "extension.categories[1]"),
        ('"A <a@example.com>"', '"A \\u0000 <a@example.com>"', "extension.authors[0]"),
    ],
)
def test_a_nul_character_in_the_manifest_is_an_invalid_manifest(env: Env, old: str, new: str, path: str) -> None:
    from tests.factories import refusal

    status, error = refusal(publish_text(env, BASE_TEXT.replace(old, new)))
    assert status == 422, error
    assert error["code"] == "invalid_manifest"
    assert error["message"] == f"{path} contains a NUL character (\\u0000); allowed: text without NUL characters"
    assert error["details"][0]["path"] == path


@pytest.mark.parametrize("depth", [10_000, 100_000])
def test_json_nested_too_deeply_is_a_bad_request(env: Env, depth: int) -> None:
    for body in (Nested(b"[", depth, b"]"), Nested(b'{"a":', depth, b"}", b"1")):
        response = env.client.post(
            "/api/v1/tokens/", body.render(), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {env.token}"
        )
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "bad_request"
        assert "nested too deeply" in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"name": "ci \\ud800"}',  # a high surrogate alone
        b'{"name": "ci", "scopes": ["publish:*\\uDC00"]}',  # a low one, upper-case escape, in a list
        b'{"name\\ud83d": "ci"}',  # in a member name
        b'{"name": "\\ude00\\ud83d"}',  # a pair in the wrong order
    ],
)
def test_a_lone_surrogate_anywhere_in_a_json_body_is_a_bad_request(env: Env, body: bytes) -> None:
    response = env.client.post(
        "/api/v1/tokens/", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {env.token}"
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "bad_request" and "lone surrogate" in error["message"]


@pytest.mark.parametrize("charset", ["utf-16", "utf-7", "latin-1", "unicode_escape"])
def test_a_json_body_in_another_charset_than_utf8_is_a_bad_request(env: Env, charset: str) -> None:
    # The lone-surrogate check reads the bytes: in UTF-16 (or through \U0000d800 in
    # unicode_escape) a surrogate would pass it unseen; JSON is UTF-8 anyway (RFC 8259).
    text = '{"name": "ci \ud800"}' if charset != "latin-1" else '{"name": "ci \u00e9"}'
    response = env.client.generic(  # the body's bytes as they are (post() would encode them again)
        "POST",
        "/api/v1/tokens/",
        text.encode(charset, "surrogatepass"),
        content_type=f"application/json; charset={charset}",
        HTTP_AUTHORIZATION=f"Bearer {env.token}",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"] == (
        f"JSON parse error - the body's charset is {charset!r}; allowed: utf-8 (RFC 8259)"
    )
    taken = env.client.post(
        "/api/v1/tokens/",
        b'{"name": "ci", "scopes": ["tokens"]}',
        content_type="application/json; charset=UTF-8",
        HTTP_AUTHORIZATION=f"Bearer {env.token}",
    )
    assert taken.status_code == 201, taken.content


def test_a_surrogate_pair_is_text_and_is_taken(env: Env) -> None:
    body = b'{"name": "ci \\ud83d\\ude00", "scopes": ["tokens"]}'
    response = env.client.post(
        "/api/v1/tokens/", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {env.token}"
    )
    assert response.status_code == 201, response.content
    assert response.json()["data"]["name"] == "ci \U0001f600"


def test_too_many_form_fields_or_an_unknown_host_is_a_bad_request_that_says_so(env: Env) -> None:
    fields = {f"f{i}": "x" for i in range(1001)}
    response = env.client.post("/api/v1/extensions/", fields, HTTP_AUTHORIZATION=f"Bearer {env.token}")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == {
        "code": "bad_request",
        "message": "malformed request: too many form fields; allowed: at most 1000",
        "details": [],
    }
    response = env.client.get("/api/v1/extensions/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "malformed request: the Host header names no host this registry serves"
    )
    oci = env.client.get("/v2/", HTTP_HOST="evil.example")  # under /v2, OCI's error document
    assert oci.status_code == 400
    assert oci["Docker-Distribution-API-Version"] == "registry/2.0"
    assert oci.json() == {
        "errors": [
            {
                "code": "UNSUPPORTED",
                "message": "malformed request: the Host header names no host this registry serves",
                "detail": {},
            }
        ]
    }


def test_nul_in_a_path_or_a_username_is_refused_and_still_audited(env: Env) -> None:
    """NUL is an error in PostgreSQL's text and json (the CI's PostgreSQL run asks it): from a
    failed authentication's path, an HTTP Basic username, or the owner named in the URL."""
    from registry.models import AuditEvent

    failed = env.client.get("/api/v1/extensions/a%00b/", HTTP_AUTHORIZATION="Bearer pvr_not-a-real-one")
    assert failed.status_code == 401, failed.content
    row = AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_FAILURE).latest("id")
    assert row.details["path"] == "/api/v1/extensions/a\\u0000b/"  # what was sent, storably
    raw = base64.b64encode(b"ali\x00ce:pw").decode()
    basic = env.client.post(
        "/api/v1/tokens/", {"name": "x"}, content_type="application/json", HTTP_AUTHORIZATION=f"Basic {raw}"
    )
    assert basic.status_code == 401 and basic.json()["error"]["message"].startswith("wrong username or password")
    assert AuditEvent.objects.filter(action=AuditEvent.Action.AUTH_FAILURE).count() == 2  # audited too
    owner = env.client.delete("/api/v1/extensions/etcd/owners/a%00b/", HTTP_AUTHORIZATION=f"Bearer {env.token}")
    assert owner.status_code == 404, owner.content
    assert owner.json()["error"]["message"] == "'a\\x00b' is not an owner of 'etcd'"


def test_the_json_renderer_escapes_a_lone_surrogate_rather_than_failing() -> None:
    from registry.renderers import SafeJSONRenderer

    renderer = SafeJSONRenderer()
    assert renderer.render({"echo": "x\ud800", "t": "\u00e9"}) == b'{"echo":"x\\ud800","t":"\\u00e9"}'
    assert renderer.render({"t": "\u00e9"}) == '{"t":"\u00e9"}'.encode()  # otherwise UTF-8, as DRF's


def test_a_json_body_over_1_mib_is_a_bad_request(env: Env) -> None:
    body = b'{"name": "' + b"x" * (1024 * 1024) + b'"}'
    response = env.client.post(
        "/api/v1/tokens/", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {env.token}"
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "JSON parse error - the body is larger than 1024 KiB"


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", "/api/v1/extensions/%00/owners/", None),
        ("POST", "/api/v1/extensions/%00/owners/", {"username": "bob"}),
        ("DELETE", "/api/v1/extensions/a%00b/owners/", {"username": "bob"}),
        ("POST", "/api/v1/extensions/%00/versions/1.0.0/yank", {"reason": "x"}),
        ("DELETE", "/api/v1/extensions/et%00cd/versions/3.5.9/yank", None),
    ],
)
def test_a_malformed_name_in_an_owner_endpoint_is_404(env: Env, method: str, url: str, body: Any) -> None:
    response = env.client.generic(
        method,
        url,
        json.dumps(body) if body is not None else "",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {env.token}",
    )
    assert response.status_code == 404, response.content
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert "not a valid name" in error["message"]


def test_a_source_build_of_the_longest_version_is_published(env: Env) -> None:
    from tests.factories import autocommit_hooks

    version = "1.0.0-" + ".".join(["b" * 45] * 5)  # fuzz-VERSION/extension.toml: 255 bytes
    source = io.BytesIO()
    with tarfile.open(fileobj=source, mode="w:gz") as tar:
        for name, text in (("extension.toml", BASE_TEXT.replace('"1.0.0"', toml_str(version))), ("README.md", "# f\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    upload = io.BytesIO(source.getvalue())
    upload.name = "source.tar.gz"
    with autocommit_hooks():
        response = env.client.post("/api/v1/builds/", {"source": upload}, HTTP_AUTHORIZATION=f"Bearer {env.token}")
    assert response.status_code == 202, response.content
    assert response.json()["data"]["version"] == version


@pytest.mark.parametrize(
    ("forwarded", "recorded"),
    [
        ("203.0.113.5:40112", "203.0.113.5"),
        ("[2001:db8::5]:443", "2001:db8::5"),
        ("2001:db8::5", "2001:db8::5"),
        ("fe80::5%eth0", "fe80::5"),
        ("garbage", None),
        ("", "10.0.0.1"),  # no hop: the proxy's own view, REMOTE_ADDR
    ],
)
def test_the_address_a_proxy_forwards_is_recorded_only_when_it_is_an_address(
    env: Env, settings: Any, forwarded: str, recorded: str | None
) -> None:
    from registry.models import AuditEvent

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    ApiToken.objects.filter(pk=env.token_id).update(last_used_at=None)
    extra = {"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": forwarded}
    response = env.client.get("/api/v1/tokens/", HTTP_AUTHORIZATION=f"Bearer {env.token}", **extra)
    assert response.status_code == 200
    assert ApiToken.objects.get(pk=env.token_id).last_used_ip == recorded
    response = env.client.get("/api/v1/tokens/", HTTP_AUTHORIZATION="Bearer pvr_" + "B" * 43, **extra)
    assert response.status_code == 401
    event = AuditEvent.objects.filter(action="auth_failure").order_by("-id").first()
    assert event is not None
    assert event.address == recorded
