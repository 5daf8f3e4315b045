"""registry.requestbody: a small body sent without a length reaches the application with one;
what cannot be taken is refused saying why, in the envelope under /api/."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from registry.requestbody import with_sized_bodies


class _Seen:
    """The application behind: records the body and length it was given."""

    def __init__(self) -> None:
        self.body: bytes | None = None
        self.length: str | None = None
        self.stream: Any = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.length = environ.get("CONTENT_LENGTH")
        self.stream = environ["wsgi.input"]
        self.body = self.stream.read(int(self.length or 0))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


class _Broken(io.RawIOBase):
    """A body whose client went away after a few bytes."""

    def __init__(self) -> None:
        self.sent = False

    def read(self, size: int = -1) -> bytes:
        if self.sent:
            raise OSError("connection reset by peer")
        self.sent = True
        return b"{"


def _call(
    body: Any, *, path: str = "/api/v1/resolve", terminated: bool = True, **extra: str
) -> tuple[str, dict[str, str], bytes, _Seen]:
    seen = _Seen()
    answer: dict[str, Any] = {}
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": io.BytesIO(body) if isinstance(body, bytes) else body,
        "wsgi.input_terminated": terminated,
        **extra,
    }

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, dict(headers)

    result = with_sized_bodies(seen)(environ, start_response)
    content = b"".join(result)
    getattr(result, "close", lambda: None)()
    return answer["status"], answer["headers"], content, seen


LIMIT = 100_000


@pytest.fixture(autouse=True)
def _small_json_bodies(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT


def test_a_chunked_body_reaches_the_application_with_its_length() -> None:
    body = b"x" * LIMIT  # exactly the limit is taken
    status, _, content, seen = _call(body)
    assert (status, content) == ("200 OK", b"ok")
    assert (seen.length, seen.body) == (str(len(body)), body)


def test_a_body_with_its_length_or_a_read_without_one_is_left_as_it_is() -> None:
    status, _, _, seen = _call(b"{}", CONTENT_LENGTH="2")
    assert (status, seen.length, seen.body) == ("200 OK", "2", b"{}")
    status, _, _, seen = _call(b"", REQUEST_METHOD="GET")
    assert (status, seen.length) == ("200 OK", None)


def test_a_chunked_body_past_what_a_json_body_may_be_is_refused_411_in_the_envelope() -> None:
    # It is read before anyone is authenticated: an upload must say its length, so that the
    # endpoint refuses it unread when it may not be taken.
    status, headers, content, seen = _call(b"x" * (LIMIT + 1))
    assert status == "411 Length Required" and seen.body is None
    error = json.loads(content)["error"]
    assert error["code"] == "length_required"
    assert error["message"] == (
        f"a request body without a Content-Length header may hold at most {LIMIT} bytes: "
        "send a larger one (a package upload) with its Content-Length"
    )
    assert headers["Connection"] == "close" and headers["X-Content-Type-Options"] == "nosniff"


def test_a_body_whose_end_the_server_cannot_tell_is_refused_411() -> None:
    status, headers, content, seen = _call(b"{}", terminated=False)
    assert status == "411 Length Required" and seen.body is None
    assert json.loads(content)["error"]["code"] == "length_required"
    status, headers, content, _ = _call(b"{}", terminated=False, path="/publish/")
    assert status == "411 Length Required" and headers["Content-Type"].startswith("text/plain")
    assert b"send the body with its Content-Length" in content


def test_a_body_cut_short_is_a_400() -> None:
    status, _, content, seen = _call(_Broken())
    assert status == "400 Bad Request" and seen.body is None
    assert json.loads(content)["error"] == {
        "code": "bad_request",
        "message": "the request body was cut short",
        "details": [],
    }


def test_under_v2_the_refusal_is_an_oci_error_document() -> None:
    # This registry takes no writes under /v2/ (OCI pulls only): what an OCI client reads there.
    status, headers, content, seen = _call(b"{}", terminated=False, path="/v2/extensions/etcd/blobs/uploads/")
    assert status == "411 Length Required" and seen.body is None
    [error] = json.loads(content)["errors"]
    assert error["code"] == "UNSUPPORTED" and "Content-Length" in error["message"]
    assert headers["Docker-Distribution-API-Version"] == "registry/2.0" and headers["Connection"] == "close"
