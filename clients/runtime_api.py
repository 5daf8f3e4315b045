"""`provisioning runtime serve`: the platform orchestrator's extension API, on loopback only.

    GET  /api/v1/extensions/loaded   -> {"success": true, "data": [{metadata, path, loaded_at, source}]}
    POST /api/v1/extensions/reload   {"extension_type": "taskserv", "name": "kubernetes", "version"?: "1.28.6"}
                                     -> {"success": true, "data": "Extension kubernetes reloaded"}

Several versions of one extension may be loaded at once: a reload without ``version`` reloads every
loaded version and says which (``"Extension etcd reloaded (3.5.9, 3.5.12)"``); ``version`` reloads
only that one (404 ``not_found`` listing the loaded versions when it is not loaded).

Every answer is the SPEC envelope; failures are ``{"success": false, "error": {"code", "message",
"details"}}``: 400 ``bad_request`` (malformed JSON, a missing or wrong field, an unknown type), 403
``forbidden`` (the runtime's policy, or a Host header that is not loopback), 404 ``not_found`` (an
unknown path, or an extension that is not loaded), 405 (another method; ``Allow`` says which), 413
(a body over 64 KiB), 415 ``unsupported_media_type`` (a POST that is not ``application/json``), 422
(an integrity or check failure), 503 ``registry_unavailable``. A body nested too deeply or holding
an integer thousands of digits long is a 400, like any other JSON the runtime cannot read.

The server binds 127.0.0.1 and nothing else. Requests whose ``Host`` is not a loopback name are
refused (a web page cannot reach it through DNS rebinding), and a POST must be
``application/json`` (a page cannot send that cross-origin without a preflight the server never
answers), so only local programs can drive it.

It shares the manager's state file with the CLI: ``GET loaded`` shows what ``provisioning module
load`` loaded in other processes, and a reload here is seen by ``provisioning module list``.
"""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from clients.errors import ClientError, UsageError
from clients.runtime import (
    EXTENSION_TYPES,
    ExtensionManager,
    LoadCheckError,
    NotLoadedError,
    PolicyError,
    normalise_type,
)

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_PORT", "HOST", "LOADED_PATH", "RELOAD_PATH", "RuntimeServer", "make_server"]

HOST = "127.0.0.1"
DEFAULT_PORT = 8082
LOADED_PATH = "/api/v1/extensions/loaded"
RELOAD_PATH = "/api/v1/extensions/reload"
MAX_BODY = 64 * 1024
_LOOPBACK_NAMES = {"127.0.0.1", "localhost", "[::1]"}


class RuntimeServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 holding the manager its handlers use."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, manager: ExtensionManager, port: int) -> None:
        self.manager = manager
        super().__init__((HOST, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def make_server(manager: ExtensionManager, *, port: int = DEFAULT_PORT) -> RuntimeServer:
    """Bind 127.0.0.1:``port`` (0 picks a free port); call ``serve_forever()`` to answer."""
    if not 0 <= port <= 65535:
        raise UsageError(f"port {port} is out of range: use 0 (any free port) to 65535")
    try:
        return RuntimeServer(manager, port)
    except OSError as exc:
        raise ClientError(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; choose another --port (0 picks a free one)",
            code="unavailable",
        ) from None


class _Failure(Exception):
    def __init__(self, status: int, code: str, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []


def _status_of(error: ClientError) -> tuple[int, str]:
    if isinstance(error, UsageError):
        return 400, "bad_request"
    if isinstance(error, NotLoadedError):
        return 404, error.code
    if isinstance(error, PolicyError):
        return 403, error.code
    if isinstance(error, LoadCheckError) or error.code in ("integrity_error", "invalid_manifest"):
        return 422, error.code
    if error.code in ("registry_unavailable", "download_interrupted"):
        return 503, error.code
    if error.code == "not_found":
        return 404, error.code
    return 422, error.code


def _preview(value: Any) -> str:
    """The start of a JSON value, for a message (a value nested deeper than json.dumps can go is …)."""
    try:
        return json.dumps(value)[:40]
    except (RecursionError, ValueError):
        return "…"


class _Handler(BaseHTTPRequestHandler):
    server: RuntimeServer
    server_version = "provisioning-runtime/0.1"
    protocol_version = "HTTP/1.1"
    _body_read = False

    # --- plumbing ---------------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s - %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload, separators=(",", ":"), default=str).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _ok(self, data: Any) -> None:
        self._send(200, {"success": True, "data": data})

    def _fail(self, failure: _Failure, headers: dict[str, str] | None = None) -> None:
        error = {"code": failure.code, "message": failure.message, "details": failure.details}
        self._send(failure.status, {"success": False, "error": error}, headers)

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def _check_host(self) -> None:
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
        if host and name not in _LOOPBACK_NAMES:
            raise _Failure(
                403,
                "forbidden",
                f"Host {host[:100]!r} is not this runtime: it answers only 127.0.0.1, localhost or [::1]",
                [{"path": "Host"}],
            )

    def _handle(self, method: str) -> None:
        self._body_read = False  # one handler serves every request of a kept-alive connection
        try:
            self._check_host()
            route = self._route()
            allowed = {LOADED_PATH: "GET", RELOAD_PATH: "POST"}.get(route)
            if allowed is None:
                raise _Failure(
                    404,
                    "not_found",
                    f"no such endpoint {route[:200]!r}: this runtime serves GET {LOADED_PATH} and POST {RELOAD_PATH}",
                )
            if method != allowed and not (method == "HEAD" and allowed == "GET"):
                self._drain()
                self._fail(
                    _Failure(405, "method_not_allowed", f"{method} is not allowed on {route}: use {allowed}"),
                    {"Allow": allowed},
                )
                return
            if route == LOADED_PATH:
                self._ok([e.to_dict() for e in self.server.manager.list_loaded_extensions()])
            else:
                self._reload()
        except _Failure as failure:
            self._drain()
            self._fail(failure)
        except ClientError as exc:
            self._drain()
            status, code = _status_of(exc)
            self._fail(_Failure(status, code, exc.message, exc.details))
        except Exception:
            log.exception("runtime API: %s %s failed", method, self.path)
            self._drain()
            self._fail(_Failure(500, "internal_error", "the runtime failed to answer; see its log"))

    def _drain(self) -> None:
        """Read an unread body so that the connection stays usable (or close it if it is too big)."""
        if self._body_read:
            return
        self._body_read = True
        length = self.headers.get("Content-Length")
        if length and length.isdigit() and int(length) <= MAX_BODY:
            self.rfile.read(int(length))
        elif length or self.headers.get("Transfer-Encoding"):
            self.close_connection = True

    def _body(self) -> Any:
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            raise _Failure(
                415,
                "unsupported_media_type",
                f"Content-Type {content_type or 'missing'!r} is not accepted: send application/json",
                [{"path": "Content-Type"}],
            )
        if self.headers.get("Transfer-Encoding"):
            raise _Failure(411, "bad_request", "send the body with a Content-Length, not chunked", [])
        length_text = self.headers.get("Content-Length") or ""
        if not length_text.isdigit():
            raise _Failure(411, "bad_request", "a Content-Length header is required for the JSON body", [])
        length = int(length_text)
        if length > MAX_BODY:
            raise _Failure(413, "bad_request", f"the body is {length} bytes: at most {MAX_BODY} are allowed", [])
        self._body_read = True
        raw = self.rfile.read(length)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            why = str(exc)
        except RecursionError:
            why = "it is nested too deeply"
        except ValueError as exc:  # an integer literal over the int/str conversion limit
            if "integer string conversion" not in str(exc):
                raise
            why = "it holds a number thousands of digits long"
        raise _Failure(
            400,
            "bad_request",
            f'the body is not JSON the runtime can read ({why}): send {{"extension_type": "taskserv", "name": "NAME"}}',
            [{"path": "body"}],
        )

    def _reload(self) -> None:
        body = self._body()
        if not isinstance(body, dict):
            raise _Failure(
                400,
                "bad_request",
                'the body must be a JSON object: {"extension_type": "taskserv", "name": "NAME"}',
                [{"path": "body"}],
            )
        problems = []
        for key in ("extension_type", "name"):
            value = body.get(key)
            if not isinstance(value, str) or not value.strip():
                got = "missing" if key not in body else f"{type(value).__name__} {_preview(value)}"
                problems.append({"path": key, "message": f"{key} must be a non-empty string, not {got}"})
        version = body.get("version")
        if version is not None and (not isinstance(version, str) or not version.strip()):
            got = f"{type(version).__name__} {_preview(version)}"
            problems.append({"path": "version", "message": f"version, when given, must be a version string, not {got}"})
        if problems:
            raise _Failure(
                400,
                "bad_request",
                "; ".join(p["message"] for p in problems) + f" (extension_type is one of {', '.join(EXTENSION_TYPES)})",
                problems,
            )
        kind = normalise_type(body["extension_type"])
        result = self.server.manager.reload(kind, body["name"], version)
        client = self.server.manager.client
        if client is not None and client.unreachable is not None:
            log.warning("%s: reloaded from the cached index documents and the local store", client.unreachable)
        self._ok(result.reload_message())

    # --- methods ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")
