"""The registry's HTTP API as Python calls (httpx, no Django).

    client = RegistryClient("http://127.0.0.1:8000", token="pvr_...", cache_dir=home / "cache", trust_home=home)
    client.search("kubernetes")                 # the envelope's data
    client.index("etcd")                        # the index document's bytes (ETag-cached), or None
    client.download("etcd", "3.5.12", expected_sha256="...", target=path)

Every answer is unwrapped from the SPEC envelope; an error envelope becomes `RegistryErrorAnswer` (its
``code``, HTTP ``status`` and ``details``), a refused, reset or timed-out connection
`RegistryUnavailable`, a download cut short `DownloadInterrupted`, bytes that do not hash to the
expected digest `IntegrityError`, and what the signed index does not vouch for `VerificationError`.
A token is sent only where the API needs one (publish, yank, tokens), so a stale stored token never
breaks reading the catalog.

It verifies by default (SPEC 6), as the CLI does: index documents, packages and provenance against
the registry's signed index, its root pinned on first contact under ``trust_home`` (default: the
CLI's home, PROVISIONING_HOME or the platform's data directory, so that both pin the same roots; the
fingerprint is printed to stderr once). ``verify=False`` turns it off, for a registry without TUF
metadata.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock
import httpx

from clients.config import Config, home_directory
from clients.errors import ClientError, VerificationError, os_error_message
from clients.files import atomic_write
from extensions.errors import ExtensionError
from extensions.index import IndexCatalogue, parse_index
from extensions.kinds import KINDS, plural
from extensions.names import NAME_RE

if TYPE_CHECKING:
    from clients.provenance import ProvenanceVerifier
    from clients.trust import Trust

__all__ = [
    "DownloadInterrupted",
    "IntegrityError",
    "ProgressCallback",
    "RegistryClient",
    "RegistryErrorAnswer",
    "RegistryUnavailable",
    "file_sha256",
]

ProgressCallback = Callable[[int, "int | None"], None]
"""Called with (bytes done, total bytes or None) as a transfer advances."""

CHUNK = 64 * 1024
UNREACHABLE_RETRY_SECONDS = 30.0  # with cache_fallback, how long an unreachable registry is not asked again
MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024  # far above the registry's package limit: a stream past it is refused
# A JSON answer (decompressed) far above the largest the API gives (an index document of thousands
# of versions is a few MB).
MAX_ANSWER_BYTES = 32 * 1024 * 1024
# How long one answer's body may take as a whole (a read timeout alone lets a server that drips a
# byte at a time hold the client for ever): a JSON answer here, a signed metadata file in clients.trust.
ANSWER_SECONDS = 120.0
# A download may take ANSWER_SECONDS and then one second per this many bytes of its size: slower on
# average, it is given up (a 50 MiB package gets 3 h 35 min).
MIN_DOWNLOAD_RATE = 4 * 1024
USER_AGENT = "provisioning-client/0.1"
_READ_ENCODINGS = (b"content-encoding", b"content-length", b"transfer-encoding")
# The content codings asked for (every request but a download's, which asks for the stored bytes),
# whose decoders the bound on an answer's size sees as they expand.
ANSWER_CODINGS = ("gzip", "deflate")
FINAL_BUILD_STATES = ("succeeded", "failed")
_SHA256_RE = re.compile(r"[0-9a-f]{64}", re.ASCII)
# The registry's reasons for refusing a token (before "; send a valid token as ..."), said shortly.
_TOKEN_REFUSALS = {
    "unknown or revoked token": "unknown or revoked",
    "this token was revoked": "revoked",
    "this token has expired": "expired",
    "this token's user is inactive": "its user is inactive",
    "not a registry token": "not a registry token",
    "malformed authorization header": "malformed",
}


class RegistryErrorAnswer(ClientError):
    """The registry answered with an error envelope (or with something that is not the envelope).
    Not the server's ``registry.errors.RegistryError``, which this client receives as one of these."""

    def __init__(self, message: str, *, code: str = "error", status: int = 0, details: list[Any] | None = None) -> None:
        super().__init__(message, code=code, details=details)
        self.status = status


class RegistryUnavailable(ClientError):
    """The registry could not be reached (connection refused or reset, timeout), or ``offline``
    forbids asking it."""

    def __init__(self, message: str, *, code: str = "registry_unavailable") -> None:
        super().__init__(message, code=code)


class DownloadInterrupted(RegistryUnavailable):
    """A download stopped before its last byte. Nothing was kept; running again retries."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="download_interrupted")


class IntegrityError(ClientError):
    """Bytes that do not hash to the sha256 they must have (a download, a stored package, a tree)."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="integrity_error", details=details)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_sha256(value: str, *, what: str = "sha256") -> str:
    if not isinstance(value, str) or not _SHA256_RE.fullmatch(value):
        raise ClientError(f"{what} {value!r} is not a sha256: use 64 lower-case hexadecimal digits", code="bad_request")
    return value


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class RegistryClient:
    """One registry, over HTTP. Use it as a context manager, or call `close()`."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        cache_dir: Path | None = None,
        timeout: float = 30.0,
        offline: bool = False,
        cache_fallback: bool = False,
        unreachable_hint: str | None = None,
        trust_home: Path | None = None,
        verify: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.offline = offline
        # cache_fallback: when the registry cannot be reached, index documents come from the cache
        # (`unreachable` then says why) and, for a while, the registry is not asked again.
        self.cache_fallback = cache_fallback
        self.unreachable: RegistryUnavailable | None = None
        self._unreachable_until = 0.0
        self.unreachable_hint = unreachable_hint  # appended to "cannot reach" errors (e.g. the --offline a command has)
        self._documents: dict[str, bytes | None] = {}  # index documents this client already has
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                "Accept-Encoding": ", ".join(ANSWER_CODINGS),
            },
        )
        # verify (the default, SPEC 6): index documents, packages and their signed build provenance
        # are checked against the registry's signed index (clients.trust, clients.provenance), with
        # its root pinned under trust_home (default: the CLI's home, PROVISIONING_HOME, so that
        # both pin the same roots). verify=False: none of it, for a registry without TUF metadata.
        # Both are made on first use (`trust`, `provenance`), so that a command that verifies
        # nothing (a search, `module discover`) never imports TUF, nor the cloud signers'
        # SDKs securesystemslib imports with it.
        self._trust_home = home_directory(trust_home) if verify else None
        self._trust: Trust | None = None
        self._provenance: ProvenanceVerifier | None = None

    @property
    def trust(self) -> Trust | None:
        """The registry's signed index, as this client verifies it (None with verify=False)."""
        if self._trust is None and self._trust_home is not None:
            from clients.trust import Trust

            self._trust = Trust(
                self.base_url,
                home=self._trust_home,
                http=self._http,
                offline=self.offline,
                fallback_offline=self.cache_fallback,
                unreachable=self._unavailable,
            )
        return self._trust

    @property
    def provenance(self) -> ProvenanceVerifier | None:
        """Each package's signed build provenance, as this client verifies it (None with verify=False)."""
        trust = self.trust
        if self._provenance is None and trust is not None:
            from clients.provenance import ProvenanceVerifier

            self._provenance = ProvenanceVerifier(trust)
        return self._provenance

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        offline: bool = False,
        registry: str | None = None,
        cache_fallback: bool = False,
        unreachable_hint: str | None = None,
    ) -> RegistryClient:
        """The client for the effective configuration: its registry (or ``registry``), its token,
        the index cache under ``HOME/cache``, and verification against the registry's signed index
        (unless ``config.verify`` is off: ``--no-verify``)."""
        return cls(
            registry or config.registry,
            token=config.token,
            cache_dir=config.home / "cache",
            offline=offline,
            cache_fallback=cache_fallback,
            unreachable_hint=unreachable_hint,
            trust_home=config.home,
            verify=config.verify,
        )

    # --- plumbing ---------------------------------------------------------------------------------

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def download_url(self, name: str, version: str) -> str:
        return self.url(f"api/v1/extensions/{name}/versions/{version}/download")

    def _auth(self, what: str) -> dict[str, str]:
        if not self.token:
            raise ClientError(
                f"{what} needs an API token: pass --token, set PROVISIONING_TOKEN, "
                "or run `provisioning registry login`",
                code="unauthenticated",
            )
        return {"Authorization": f"Bearer {self.token}"}

    def _check_online(self, what: str) -> None:
        if self.offline:
            raise RegistryUnavailable(f"{what} needs the registry, but --offline was given: drop --offline to ask it")

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer, its body read whole but bounded (`_read_bounded`)."""
        self._check_online(f"{method} {path}")
        self._check_reachable()
        try:
            with self._http.stream(method, self.url(path), **kwargs) as streamed:
                return self._read_bounded(streamed, what=f"{method} {path}")
        except httpx.TransportError as exc:
            raise self._unavailable(exc) from None
        except httpx.HTTPError as exc:  # a body that does not decode (bad gzip), too many redirects
            raise RegistryErrorAnswer(
                f"{method} {path}: the answer from the registry at {self.base_url} cannot be read: {_short(exc)}",
                code="bad_response",
            ) from None

    def _read_bounded(self, streamed: httpx.Response, *, what: str) -> httpx.Response:
        """``streamed``'s answer with its body read whole, but bounded: in a content coding this
        client asks for (a decoder it did not ask for, brotli's say, could expand without the bound
        below seeing it), at most MAX_ANSWER_BYTES once decompressed (a gzip bomb is stopped as it
        expands), within ANSWER_SECONDS."""
        codings = [c.strip().lower() for c in streamed.headers.get("Content-Encoding", "").split(",") if c.strip()]
        unasked = [c for c in codings if c not in (*ANSWER_CODINGS, "identity")]
        allowed = ", ".join(ANSWER_CODINGS)
        too = f"encoded as {', '.join(unasked)}, which was not asked for (allowed: {allowed})" if unasked else ""
        body = bytearray()
        deadline = time.monotonic() + ANSWER_SECONDS
        for chunk in () if too else streamed.iter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                too = f"larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB"
            elif time.monotonic() > deadline:
                too = f"not whole after {ANSWER_SECONDS:.0f} s"
            if too:
                break
        if too:
            raise RegistryErrorAnswer(
                f"{what}: the answer from the registry at {self.base_url} is {too}; "
                "nothing was used (a registry in error, or something between it and you)",
                code="bad_response",
                status=streamed.status_code,
            )
        # The body as read (decoded): the answer without its transfer encodings.
        headers = [(k, v) for k, v in streamed.headers.raw if k.lower() not in _READ_ENCODINGS]  # as sent
        return httpx.Response(streamed.status_code, headers=headers, content=bytes(body), request=streamed.request)

    def _check_reachable(self) -> None:
        """With ``cache_fallback``, a registry found unreachable is not asked again for a while (each
        attempt could wait for a timeout); the first failure is raised again instead."""
        if self.unreachable is not None and time.monotonic() < self._unreachable_until:
            raise RegistryUnavailable(self.unreachable.message)

    def _unavailable(self, exc: BaseException) -> RegistryUnavailable:
        hint = f"; {self.unreachable_hint}" if self.unreachable_hint else ""
        error = RegistryUnavailable(
            f"cannot reach the registry at {self.base_url}: {_short(exc)} "
            f"(check --registry or PROVISIONING_REGISTRY{hint})"
        )
        if self.cache_fallback:
            self.unreachable = error
            self._unreachable_until = time.monotonic() + UNREACHABLE_RETRY_SECONDS
        return error

    def _data(self, response: httpx.Response, *, what: str, auth: str | None = None) -> Any:
        """The envelope's ``data``, or the error it carries. ``auth`` says what the request
        authenticated with (``"token"`` or ``"password"``), so a 401 can say what to do about it."""
        body = _json_or_none(response)
        if isinstance(body, dict) and body.get("success") is True and "data" in body and response.is_success:
            return body["data"]
        raise self._error(response, body, what=what, auth=auth)

    def _error(self, response: httpx.Response, body: Any, *, what: str, auth: str | None = None) -> RegistryErrorAnswer:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
            details = list(error.get("details") or []) if isinstance(error.get("details"), list) else []
            if response.status_code == 401 and auth is not None:
                details.append({"registry_message": message})
                message = self._refused(message, auth=auth)
            if response.status_code == 429 and response.headers.get("Retry-After"):
                message += f" (retry after {response.headers['Retry-After']} s)"
            return RegistryErrorAnswer(
                message,
                code=str(error.get("code") or "error"),
                status=response.status_code,
                details=details,
            )
        return RegistryErrorAnswer(
            f"{what}: the registry at {self.base_url} answered HTTP {response.status_code} "
            f"without the JSON envelope (is {self.base_url} a provisioning registry?)",
            code="bad_response",
            status=response.status_code,
        )

    def _refused(self, message: str, *, auth: str) -> str:
        """A 401 in words for the client's users (the registry's own talks about HTTP headers)."""
        reason = message.split(";", 1)[0].strip().rstrip(".")
        if auth == "password":
            if "inactive" in reason.lower():
                return f"the registry at {self.base_url} refused the login: the account is inactive or deleted"
            return f"wrong username or password for the registry at {self.base_url}"
        words = _TOKEN_REFUSALS.get(reason.lower(), reason)
        return f"the registry refused the token ({words}): run 'provisioning registry login' or pass --token"

    def _get(self, path: str, *, params: Mapping[str, Any] | None = None) -> Any:
        response = self._send("GET", path, params={k: v for k, v in (params or {}).items() if v is not None})
        return self._data(response, what=f"GET {path}")

    def call(self, method: str, path: str, *, what: str, json: Any = None, auth: bool = False) -> Any:
        """Any JSON API call (for the client's modules that add calls of their own, such as
        clients.oidc): the envelope's data, or `RegistryErrorAnswer`. ``auth`` sends the token."""
        headers = self._auth(what) if auth else {}
        response = self._send(method, path, json=json, headers=headers)
        return self._data(response, what=what, auth="token" if auth else None)

    # --- reading the catalog ----------------------------------------------------------------------

    def search(
        self, q: str = "", *, type: str | None = None, keyword: str | None = None, limit: int = 20, offset: int = 0
    ) -> dict[str, Any]:
        """``GET /api/v1/extensions/``: ``{"items", "total", "limit", "offset"}``."""
        data: dict[str, Any] = self._get(
            "api/v1/extensions/", params={"q": q, "type": type, "keyword": keyword, "limit": limit, "offset": offset}
        )
        return data

    def extension(self, name: str) -> dict[str, Any]:
        """``GET /api/v1/extensions/{name}/``: metadata, owners, versions."""
        data: dict[str, Any] = self._get(f"api/v1/extensions/{name}/")
        return data

    def version(self, name: str, version: str) -> dict[str, Any]:
        """``GET /api/v1/extensions/{name}/versions/{version}/``: manifest, dependencies, sha256..."""
        data: dict[str, Any] = self._get(f"api/v1/extensions/{name}/versions/{version}/")
        return data

    def lookup(self, type: str, name: str) -> dict[str, Any]:
        """``GET /api/v1/extensions/{type}/{name}``: the extension providing TYPE NAME (``provided_by``)."""
        data = self._get(f"api/v1/extensions/{type}/{name}")
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise RegistryErrorAnswer(
                f"GET api/v1/extensions/{type}/{name}: the registry at {self.base_url} answered no extension "
                "(its data names none)",
                code="bad_response",
            )
        return data

    def provided(self, kind: str) -> list[dict[str, Any]]:
        """``GET /api/v1/extensions/{kind}s``: every provided name of a kind (``taskserv`` or ``taskservs``)."""
        kinds = kind if kind in KINDS else plural(kind)
        data: list[dict[str, Any]] = self._get(f"api/v1/extensions/{kinds}")
        return data

    def resolve(
        self,
        requirements: Sequence[str],
        *,
        runtime_version: str | None = None,
        include_prereleases: bool = False,
        locked: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v1/resolve`` (the registry resolves); a failure is ``RegistryErrorAnswer`` with
        ``code == "resolution_failed"`` and the resolver's details."""
        body: dict[str, Any] = {"requirements": list(requirements), "include_prereleases": include_prereleases}
        if runtime_version is not None:
            body["runtime_version"] = runtime_version
        if locked:
            body["locked"] = dict(locked)
        response = self._send("POST", "api/v1/resolve", json=body)
        data: dict[str, Any] = self._data(response, what="POST api/v1/resolve")
        return data

    # --- index documents --------------------------------------------------------------------------

    @property
    def index_cache(self) -> Path | None:
        """Where this registry's index documents are cached: ``cache_dir/index/{host_port}/``
        (one folder per registry, so documents of two registries never mix)."""
        if self.cache_dir is None:
            return None
        where = self.base_url.split("://", 1)[-1]
        return self.cache_dir / "index" / (re.sub(r"[^A-Za-z0-9.-]+", "_", where).strip("_") or "registry")

    def _index_paths(self, name: str) -> tuple[Path, Path, Path] | None:
        folder = self.index_cache
        if folder is None:
            return None
        return folder / f"{name}.json", folder / f"{name}.etag", folder / ".lock"

    def cached_index(self, name: str) -> bytes | None:
        """The cached index document of ``name`` (no network), or None."""
        paths = self._index_paths(name) if NAME_RE.match(name) else None
        if paths is None:
            return None
        try:
            return paths[0].read_bytes()
        except FileNotFoundError:
            return None

    def cached_names(self) -> list[str]:
        """The names whose index documents are cached."""
        folder = self.index_cache
        if folder is None or not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if NAME_RE.match(p.stem))

    def index(self, name: str) -> bytes | None:
        """The index document of ``name`` (canonical JSON bytes), or None when there is no such
        extension. Cached with its ETag under ``cache_dir/index/{host_port}/``; a cached document is revalidated
        with ``If-None-Match`` (a 304 reuses it); ``offline`` uses the cache only. A client asks
        about each name at most once (it is short-lived: one command)."""
        if not NAME_RE.match(name):
            return None  # cannot exist, and must never become a file name
        if name in self._documents:
            return self._documents[name]
        document = self._index(name)
        self._documents[name] = document
        return document

    def _verified_index(self, trust: Trust, name: str) -> bytes | None:
        """The index document the signed index lists for ``name`` (the cached copy when it is that one)."""
        paths = self._index_paths(name)
        cached = self.cached_index(name)
        try:
            document = trust.index_document(name, cached=cached)
        except RegistryUnavailable as exc:
            if not self.cache_fallback:
                raise
            raise RegistryUnavailable(f"{exc.message}; the index document of {name!r} is not cached either") from None
        except VerificationError as exc:
            if not (self.offline and exc.reason == "no_metadata"):
                raise
            raise RegistryUnavailable(
                f"offline: the index document of {name!r} is not in the cache (nor the signed metadata that lists "
                f"it, under {trust.metadata_dir}); run once without --offline to fetch it"
            ) from None
        if document is None:
            # Cached signed metadata that lists no such document may predate its publication: offline
            # (or with the registry down) that is "not cached", never "no such extension".
            if self.offline:
                raise RegistryUnavailable(
                    f"offline: the index document of {name!r} is not in the cache (the cached signed metadata under "
                    f"{trust.metadata_dir} does not list it); run once without --offline to fetch it"
                )
            # A document the registry (or something in between) serves but the signed index does
            # not list is refused, not taken for "no such extension".
            try:
                response = self._send("GET", f"api/v1/index/{name}")
            except RegistryUnavailable as exc:
                if not self.cache_fallback:
                    return None
                raise RegistryUnavailable(
                    f"{exc.message}; the index document of {name!r} is not cached either"
                ) from None
            if response.status_code == 200:
                raise trust.missing_index(name)
            return None
        self._check_document(name, document)
        if paths is not None and document != cached:
            self._cache_index(paths, document, None)
        return document

    def _check_document(self, name: str, data: bytes | Mapping[str, Any]) -> None:
        try:
            parse_index(data, name=name)
        except ExtensionError as exc:
            raise RegistryErrorAnswer(
                f"the index document of {name!r} from {self.base_url} is not valid: {exc}", code="invalid_index"
            ) from None

    def verify_package(self, name: str, version: str, sha256: str) -> None:
        """With verification on: NAME VERSION's package must be a signed target with ``sha256``, and
        its signed provenance must attest exactly that package."""
        if self.trust is not None:
            self.trust.check_package(name, version, sha256)
        if self.provenance is not None:
            self.provenance.check(name, version, sha256)

    def _index(self, name: str) -> bytes | None:
        if self.trust is not None:
            return self._verified_index(self.trust, name)
        paths = self._index_paths(name)
        cached = self.cached_index(name)
        if self.offline:
            if cached is None:
                raise RegistryUnavailable(
                    f"offline: the index document of {name!r} is not in the cache "
                    f"({paths[0] if paths else 'no cache directory'}); run once without --offline to fetch it"
                )
            return cached
        headers = {}
        if cached is not None and paths is not None and paths[1].exists():
            headers["If-None-Match"] = paths[1].read_text(encoding="ascii").strip()
        try:
            response = self._send("GET", f"api/v1/index/{name}", headers=headers)
        except RegistryUnavailable as exc:
            if not self.cache_fallback:
                raise
            if cached is not None:
                return cached  # the registry is down: the cached document, as `unreachable` says
            raise RegistryUnavailable(f"{exc.message}; the index document of {name!r} is not cached either") from None
        if response.status_code == 304 and cached is not None:
            return cached
        if response.status_code == 404:
            return None
        data = self._data(response, what=f"GET api/v1/index/{name}")
        self._check_document(name, data)
        document = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if paths is not None:
            self._cache_index(paths, document, response.headers.get("ETag"))
        return document

    def _cache_index(self, paths: tuple[Path, Path, Path], document: bytes, etag: str | None) -> None:
        body_path, etag_path, lock_path = paths
        try:
            body_path.parent.mkdir(parents=True, exist_ok=True)
            with filelock.FileLock(lock_path):
                atomic_write(body_path, document)
                if etag:
                    atomic_write(etag_path, etag.encode("ascii", "replace"))
                else:
                    with contextlib.suppress(FileNotFoundError):
                        etag_path.unlink()
        except OSError as exc:
            raise ClientError(
                f"cannot cache index documents in {body_path.parent}: {os_error_message(exc)} (the cache is "
                "under the provisioning home: choose another with --home or PROVISIONING_HOME)",
                code="home_unusable",
            ) from None

    def catalogue(self) -> IndexCatalogue:
        """A resolver catalogue that loads index documents (through `index`) as names come up."""

        def known() -> list[str]:
            names = set(self.cached_names())
            if not self.offline:
                with contextlib.suppress(ClientError):
                    names.update(item["name"] for item in self.search(limit=100)["items"])
            return sorted(names)

        return IndexCatalogue(loader=self.index, known_names=known)

    # --- downloads --------------------------------------------------------------------------------

    def download(
        self,
        name: str,
        version: str,
        *,
        expected_sha256: str,
        target: Path,
        progress: ProgressCallback | None = None,
    ) -> Path:
        """Download NAME VERSION's package to ``target``. The bytes stream into a temporary file
        beside it and are hashed on the way; only a complete file whose sha256 is ``expected_sha256``
        is renamed to ``target``. A 302 to a presigned URL is followed. A cut connection, a short
        body or a wrong digest leaves nothing behind (`DownloadInterrupted`, `IntegrityError`)."""
        check_sha256(expected_sha256)
        what = f"{name} {version}"
        self._check_online(f"downloading {what}")
        signed = self.trust.check_package(name, version, expected_sha256) if self.trust is not None else None
        try:
            self._check_reachable()
        except RegistryUnavailable as exc:
            raise RegistryUnavailable(f"{exc.message}; {what} is not in the local store") from None
        url = self.download_url(name, version)
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        tmp = Path(tmp_name)
        received = 0
        total: int | None = None
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as handle:
                try:
                    # The package's bytes exactly as stored: no content coding is asked for, and a
                    # Content-Encoding a proxy or an object store adds anyway (a .tar.gz labelled
                    # `gzip`) is not undone, since the sha256 and the length are of the stored bytes.
                    with self._http.stream(
                        "GET",
                        url,
                        follow_redirects=True,
                        headers={"Accept": "application/gzip, application/json", "Accept-Encoding": "identity"},
                    ) as response:
                        if response.status_code != 200:
                            answer = self._read_bounded(response, what=f"downloading {what}")
                            raise self._error(answer, _json_or_none(answer), what=f"downloading {what}")
                        announced = (response.headers.get("X-Checksum-Sha256") or "").strip().lower()
                        if announced and announced != expected_sha256:
                            raise IntegrityError(
                                f"{what} from {url} is announced with sha256 {announced}, but {expected_sha256} "
                                "is expected: the registry's package differs from the index or lockfile; "
                                "nothing was downloaded"
                            )
                        length = response.headers.get("Content-Length")
                        total = int(length) if length and length.isdigit() else None
                        if signed is not None and total is not None and total != signed.length:
                            raise _length_mismatch(what, url, f"announced as {total} bytes", signed.length)
                        # No more bytes than the signed metadata lists (or than any package may
                        # have), and no slower than MIN_DOWNLOAD_RATE on average: a server that
                        # sends without end, or drips, is given up.
                        limit = signed.length if signed is not None else MAX_DOWNLOAD_BYTES
                        if total is not None and total > limit:  # unsigned: more than any package may be
                            raise IntegrityError(
                                f"{what} from {url} is announced as {total} bytes, more than any package may be "
                                f"({MAX_DOWNLOAD_BYTES}); nothing was downloaded"
                            )
                        expected = total if total is not None else limit
                        allowed = ANSWER_SECONDS + expected / MIN_DOWNLOAD_RATE
                        started = time.monotonic()
                        if progress is not None:
                            progress(0, total)
                        for chunk in response.iter_raw():
                            received += len(chunk)
                            if received > limit and signed is not None:
                                raise _length_mismatch(what, url, f"more than {limit} bytes", limit)
                            if received > limit:
                                raise IntegrityError(
                                    f"{what} from {url} is larger than {MAX_DOWNLOAD_BYTES} bytes, more than any "
                                    "package may be; nothing was kept"
                                )
                            if received < expected and time.monotonic() - started > allowed:
                                raise DownloadInterrupted(
                                    f"the download of {what} from {url} was given up after {received}"
                                    f"{f' of {total}' if total is not None else ''} bytes: it was not whole after "
                                    f"{allowed:.0f} s (slower than {MIN_DOWNLOAD_RATE // 1024} KiB/s on average); "
                                    "nothing was kept: run the command again to retry"
                                )
                            handle.write(chunk)
                            digest.update(chunk)
                            if progress is not None:
                                progress(received, total)
                except httpx.TransportError as exc:
                    if received == 0 and not isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
                        raise self._unavailable(exc) from None
                    of = f" of {total}" if total is not None else ""
                    why = "the connection was closed" if isinstance(exc, httpx.RemoteProtocolError) else _short(exc)
                    raise DownloadInterrupted(
                        f"the download of {what} from {url} was interrupted after {received}{of} bytes "
                        f"({why}); nothing was kept: run the command again to retry"
                    ) from None
            if total is not None and received != total:
                raise DownloadInterrupted(
                    f"the download of {what} from {url} ended after {received} of {total} bytes; "
                    "nothing was kept: run the command again to retry"
                )
            if signed is not None and received != signed.length:
                raise _length_mismatch(what, url, f"{received} bytes", signed.length)
            actual = digest.hexdigest()
            if actual != expected_sha256:
                raise IntegrityError(
                    f"{what} downloaded from {url} has sha256 {actual}, but {expected_sha256} is expected: "
                    "the bytes were changed on the way or the index/lockfile does not match the registry; "
                    "nothing was kept"
                )
            os.replace(tmp, target)
            return target
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    # --- publishing and builds --------------------------------------------------------------------

    def publish(self, package: Path, *, progress: ProgressCallback | None = None) -> dict[str, Any]:
        """``POST /api/v1/extensions/`` with the package as multipart field ``file``, streamed from
        disk. Answers the build (``202``); a refusal is a `RegistryErrorAnswer` with the registry's code."""
        package = Path(package)
        try:
            size = package.stat().st_size
        except OSError as exc:
            raise ClientError(
                f"cannot read {package}: {exc.strerror}; give a package built by `extension build`"
            ) from None
        if not package.is_file():
            raise ClientError(f"{package} is not a file: give a package NAME-VERSION.tar.gz built by `extension build`")
        headers = self._auth("publishing")
        boundary = secrets.token_hex(16)
        filename = package.name.replace('"', "").replace("\r", "").replace("\n", "")
        head = (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/gzip\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()

        def body() -> Iterator[bytes]:
            yield head
            sent = 0
            if progress is not None:
                progress(0, size)
            with open(package, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    sent += len(chunk)
                    yield chunk
                    if progress is not None:
                        progress(sent, size)
            yield tail

        headers.update(
            {
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + size + len(tail)),
            }
        )
        response = self._send("POST", "api/v1/extensions/", content=body(), headers=headers)
        data: dict[str, Any] = self._data(response, what="publishing", auth="token")
        return data

    def build(self, build_id: str) -> dict[str, Any]:
        """``GET /api/v1/builds/{id}/``: status, log (``[{step, status, seconds, message, at}]``), error, result."""
        data: dict[str, Any] = self._get(f"api/v1/builds/{build_id}/")
        return data

    def wait_for_build(
        self,
        build_id: str,
        *,
        on_log: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.5,
        timeout: float = 900.0,
        first: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Follow a build until it succeeds or fails, calling ``on_log`` once per new log entry.
        ``first`` is an answer already in hand (publish's); ``RegistryUnavailable`` past ``timeout``."""
        seen = 0
        deadline = time.monotonic() + timeout
        data = first if first is not None else self.build(build_id)
        while True:
            log = data.get("log") or []
            if len(log) < seen:  # a new attempt started the log again
                seen = 0
            for entry in log[seen:]:
                if on_log is not None and isinstance(entry, dict):
                    on_log(entry)
            seen = len(log)
            if data.get("status") in FINAL_BUILD_STATES:
                return data
            if time.monotonic() > deadline:
                raise RegistryUnavailable(
                    f"build {build_id} is still {data.get('status')} after {timeout:.0f} s; "
                    f"follow it at {self.url(f'api/v1/builds/{build_id}/')}",
                    code="timeout",
                )
            time.sleep(interval)
            data = self.build(build_id)

    # --- owners' actions and accounts -------------------------------------------------------------

    def yank(self, name: str, version: str, *, reason: str) -> dict[str, Any]:
        """``POST .../yank`` with the reason: ``{name, version, yanked, yanked_reason, yanked_at}``."""
        path = f"api/v1/extensions/{name}/versions/{version}/yank"
        response = self._send("POST", path, json={"reason": reason}, headers=self._auth("yanking"))
        data: dict[str, Any] = self._data(response, what="yanking", auth="token")
        return data

    def unyank(self, name: str, version: str) -> dict[str, Any]:
        """``DELETE .../yank``: the version is chosen by resolution again."""
        path = f"api/v1/extensions/{name}/versions/{version}/yank"
        response = self._send("DELETE", path, headers=self._auth("undoing a yank"))
        data: dict[str, Any] = self._data(response, what="undoing a yank", auth="token")
        return data

    def owners(self, name: str) -> dict[str, Any]:
        """``GET .../owners/`` (public): ``{name, owners: [{username, added_at, added_by}]}``."""
        data: dict[str, Any] = self._get(f"api/v1/extensions/{name}/owners/")
        return data

    def add_owner(self, name: str, username: str) -> dict[str, Any]:
        """``POST .../owners/`` with the username: the owners afterwards."""
        response = self._send(
            "POST",
            f"api/v1/extensions/{name}/owners/",
            json={"username": username},
            headers=self._auth("adding an owner"),
        )
        data: dict[str, Any] = self._data(response, what="adding an owner", auth="token")
        return data

    def remove_owner(self, name: str, username: str) -> dict[str, Any]:
        """``DELETE .../owners/{username}/``: the owners afterwards (the last owner stays)."""
        response = self._send(
            "DELETE", f"api/v1/extensions/{name}/owners/{username}/", headers=self._auth("removing an owner")
        )
        data: dict[str, Any] = self._data(response, what="removing an owner", auth="token")
        return data

    def create_token(
        self,
        *,
        username: str,
        password: str,
        name: str,
        scopes: Sequence[str] | None = None,
        expires_in_days: int | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v1/tokens/`` with HTTP Basic: the new token's row plus ``token``, the secret
        (shown once)."""
        body: dict[str, Any] = {"name": name}
        if scopes:
            body["scopes"] = list(scopes)
        if expires_in_days is not None:
            body["expires_in_days"] = expires_in_days
        response = self._send("POST", "api/v1/tokens/", json=body, auth=(username, password))
        data: dict[str, Any] = self._data(response, what="creating a token", auth="password")
        return data

    def tokens(self) -> list[dict[str, Any]]:
        """``GET /api/v1/tokens/`` with the client's token: its user's tokens (proves the token works)."""
        response = self._send("GET", "api/v1/tokens/", headers=self._auth("listing tokens"))
        data: list[dict[str, Any]] = self._data(response, what="listing tokens", auth="token")
        return data


def _length_mismatch(what: str, url: str, found: str, signed: int) -> VerificationError:
    return VerificationError(
        "length_mismatch",
        f"length mismatch: {what} from {url} is {found}, but the signed metadata lists {signed}; nothing was kept",
    )


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):  # not JSON, nor UTF-8; a number past int's digits; nested too deeply
        return None
