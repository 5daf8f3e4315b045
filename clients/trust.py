"""Everything the client uses from a registry, verified against its signed index (SPEC 6.1) with
``tuf.ngclient``: index documents and packages are used only when the registry's TUF metadata,
checked from a pinned root, lists them with the same sha256 and length.

Per registry URL, under ``PROVISIONING_HOME/trust/{host_port}/``:

    pin.json         the trust anchor: its fingerprint (sha256 of the root file first trusted),
                     how it was pinned ("explicit": `provisioning trust init --root FILE` or
                     PROVISIONING_TRUST_ROOT; "first use": fetched on first contact, its
                     fingerprint printed once to stderr), when
    metadata/        what ngclient trusts now: root.json (root_history/N.root.json, every rotation
                     followed), timestamp.json, snapshot.json, targets.json, bin-xx.json
    targets/         small targets already verified, by digest (<sha256>.BASENAME): provenance
                     statements and the provenance key (clients.provenance)

A failure is a `VerificationError` (exit 1): one line saying what failed (``details[0]["reason"]``:
``bad_signature``, ``threshold``, ``hash_mismatch``, ``length_mismatch``, ``rollback``,
``version_mismatch``, ``expired``, ``missing_target``, ``no_metadata``, ``invalid_metadata``,
``untrusted_root``). Offline (``--offline``, or an unreachable registry where the command may use
its cache), the cached metadata is verified from the pinned root, signatures and versions, without
the expiry check (freshness needs the registry)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import filelock
import httpx
from tuf.api import exceptions as tuf_errors
from tuf.api.metadata import Metadata, Root, Snapshot, TargetFile, Targets, Timestamp
from tuf.api.serialization import DeserializationError
from tuf.ngclient import Updater, UpdaterConfig
from tuf.ngclient.fetcher import FetcherInterface

from clients.errors import ClientError, VerificationError, os_error_message
from clients.files import atomic_write
from clients.registry_client import ANSWER_SECONDS

__all__ = [
    "Trust",
    "VerificationError",
    "index_target",
    "package_target",
    "pin_root",
    "pinned",
    "registry_folder",
    "root_fingerprint",
]

TRUST_DIR = "trust"
ROOT_ENV = "PROVISIONING_TRUST_ROOT"
MAX_ROOT_BYTES = 512 * 1024
_BAD_METADATA = (tuf_errors.RepositoryError, DeserializationError, ValueError, KeyError, TypeError)
_SIGNED_BY = re.compile(r"signed by (\d+)/(\d+) keys")


def index_target(name: str) -> str:
    return f"index/{name}.json"


def package_target(name: str, version: str) -> str:
    return f"packages/{name}/{name}-{version}.tar.gz"


def registry_folder(base_url: str) -> str:
    """The per-registry folder name (``127.0.0.1_8000``), as the index cache names it."""
    where = base_url.rstrip("/").split("://", 1)[-1]
    return re.sub(r"[^A-Za-z0-9.-]+", "_", where).strip("_") or "registry"


def root_fingerprint(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _check_root(data: bytes, *, what: str) -> Metadata[Root]:
    """A root file: valid metadata of type root, signed by its own root keys."""
    try:
        md = Metadata[Root].from_bytes(data)
        if not isinstance(md.signed, Root):
            raise ValueError(f"it is {md.signed.type} metadata, not root")
        md.signed.verify_delegate("root", md.signed_bytes, md.signatures)
    except tuf_errors.UnsignedMetadataError as exc:
        raise VerificationError("bad_signature", f"{what} is not signed by its own root keys ({exc})") from None
    except _BAD_METADATA as exc:
        raise VerificationError("invalid_metadata", f"{what} is not a TUF root: {exc}") from None
    return md


def trust_folder(home: Path, base_url: str) -> Path:
    return home / TRUST_DIR / registry_folder(base_url)


def pinned(home: Path, base_url: str) -> dict[str, Any] | None:
    """The pin of a registry (pin.json), or None."""
    try:
        data = json.loads((trust_folder(home, base_url) / "pin.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        raise ClientError(f"cannot read the pinned root of {base_url}: {exc}", code="home_unusable") from None
    return data if isinstance(data, dict) else None


def pin_root(home: Path, base_url: str, data: bytes, *, how: str, replace: bool = False) -> dict[str, Any]:
    """Pin ``data`` (a root file) as the trust anchor of ``base_url``. An existing different pin is
    replaced only with ``replace`` (its trusted metadata is dropped with it)."""
    md = _check_root(data, what="the root file")
    folder = trust_folder(home, base_url)
    fingerprint = root_fingerprint(data)
    current = pinned(home, base_url)
    if current is not None and current.get("fingerprint") != fingerprint and not replace:
        raise ClientError(
            f"{base_url} already has a pinned root ({current.get('fingerprint')}); pass --force to replace it "
            "with this one (only when its operator says the root changed)",
            code="conflict",
        )
    metadata = folder / "metadata"
    try:
        if current is not None and current.get("fingerprint") != fingerprint:
            for path in sorted(metadata.rglob("*"), reverse=True) if metadata.exists() else []:
                path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
        (metadata / "root_history").mkdir(parents=True, exist_ok=True)
        atomic_write(metadata / "root_history" / f"{md.signed.version}.root.json", data)
        link = metadata / "root.json"
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        os.symlink(f"root_history/{md.signed.version}.root.json", link)
        pin = {
            "registry": base_url.rstrip("/"),
            "fingerprint": fingerprint,
            "root_version": md.signed.version,
            "how": how,
            "pinned_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        }
        atomic_write(folder / "pin.json", json.dumps(pin, indent=2).encode())
    except OSError as exc:
        raise ClientError(f"cannot pin the root of {base_url}: {os_error_message(exc)}", code="home_unusable") from None
    return pin


class _Fetcher(FetcherInterface):
    """ngclient's downloads through the client's httpx connection pool (same timeouts and agent)."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def _fetch(self, url: str) -> Iterator[bytes]:
        # The bytes as stored, which the signed lengths and hashes are of: no content coding.
        headers = {"Accept": "*/*", "Accept-Encoding": "identity"}
        response = self._http.send(self._http.build_request("GET", url, headers=headers), stream=True)
        if response.status_code != 200:
            response.close()
            raise tuf_errors.DownloadHTTPError(f"GET {url} answered {response.status_code}", response.status_code)
        coding = response.headers.get("Content-Encoding", "identity").strip().lower() or "identity"
        if coding != "identity":
            response.close()
            raise tuf_errors.DownloadError(
                f"GET {url} was answered in the content coding {coding}, which was not asked for "
                "(allowed: identity, the bytes the signed metadata lists)"
            )
        return self._chunks(response)

    @staticmethod
    def _chunks(response: httpx.Response) -> Iterator[bytes]:
        """The body, given up past ANSWER_SECONDS (ngclient bounds the length)."""
        deadline = time.monotonic() + ANSWER_SECONDS
        try:
            for chunk in response.iter_raw():  # as it arrives: a chunk size would wait to fill it
                if time.monotonic() > deadline:
                    raise tuf_errors.DownloadError(
                        f"GET {response.request.url} was not whole after {ANSWER_SECONDS:.0f} s "
                        "(the most one signed metadata file may take)"
                    )
                yield chunk
        except httpx.HTTPError as exc:  # cut short, reset: ngclient's own error, which the commands word
            raise tuf_errors.DownloadError(f"GET {response.request.url}: {exc}") from None
        finally:
            response.close()


class Trust:
    """The signed index of one registry, as this client verifies it. One per command: metadata is
    refreshed once, on first use."""

    def __init__(
        self,
        base_url: str,
        *,
        home: Path,
        http: httpx.Client,
        offline: bool = False,
        fallback_offline: bool = False,
        unreachable: Callable[[BaseException], ClientError] | None = None,
        notice: Callable[[str], None] | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.home = home
        self.folder = trust_folder(home, base_url)
        self.metadata_dir = self.folder / "metadata"
        self.offline = offline
        self.fallback_offline = fallback_offline
        self._http = http
        self._unreachable = unreachable
        self._notice = notice or (lambda text: print(text, file=sys.stderr))
        self._environ = os.environ if environ is None else environ
        self._updater: Updater | None = None
        self._offline_targets: Callable[[str], TargetFile | None] | None = None
        self._unreachable_error: ClientError | None = None  # why the cache is used instead of the registry

    # --- what callers ask -----------------------------------------------------------------------------

    def target(self, path: str, *, cached_if_unreachable: bool = False) -> TargetFile | None:
        """The signed target info of ``path``, or None when the signed index does not list it.
        ``cached_if_unreachable``: an unreachable registry makes the cached metadata answer."""
        if self._offline_targets is None and self._updater is None:
            self._start(cached_if_unreachable=cached_if_unreachable or self.fallback_offline)
        if self._offline_targets is not None:
            return self._offline_targets(path)
        assert self._updater is not None
        with self._translate(f"the metadata listing {path} on {self.base_url}"):
            return self._updater.get_targetinfo(path)

    def index_document(self, name: str, *, cached: bytes | None) -> bytes | None:
        """The index document of ``name`` as the signed index lists it: ``cached`` when it is that
        document, else downloaded by its digest (``/tuf/targets/index/<sha256>.NAME.json``) and
        verified. None when the signed index has no such target."""
        info = self.target(index_target(name))
        if info is None:
            return None
        if cached is not None and _matches(info, cached):
            return cached
        if self._updater is None:
            raise VerificationError(
                "hash_mismatch",
                f"offline: the cached index document of {name!r} is not the one the cached signed metadata of "
                f"{self.base_url} lists (sha256 {_sha256_of(info)}); run once without --offline",
            )
        return self._download(info, f"the index document of {name!r}")

    def _download(self, info: TargetFile, what: str) -> bytes:
        """A target's bytes, downloaded by digest and verified by ngclient (its length bounds the read)."""
        assert self._updater is not None
        fd, tmp = tempfile.mkstemp(prefix=".target-", suffix=".part", dir=self._tmp_dir())
        os.close(fd)
        try:
            with self._translate(f"{what} from {self.base_url}"):
                self._updater.download_target(info, tmp)
            return Path(tmp).read_bytes()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def target_bytes(self, path: str, *, what: str) -> bytes | None:
        """The bytes of the target ``path`` as the signed index lists it (None when it lists no such
        target): from this registry's target cache (``targets/<sha256>.BASENAME``, content-addressed)
        when it holds them, else downloaded by digest and verified, then cached. Offline (or with the
        registry unreachable), from the cache and the cached metadata only."""
        info = self.target(path, cached_if_unreachable=True)
        if info is None:
            return None
        sha256 = _sha256_of(info)
        cached = self.folder / "targets" / f"{sha256}.{path.rsplit('/', 1)[-1]}"
        with contextlib.suppress(OSError):
            data = cached.read_bytes()
            if _matches(info, data):
                return data
        if self._updater is None:
            raise VerificationError(
                "no_metadata",
                f"offline: {what} (sha256 {sha256}) is not cached under {cached.parent}; run once without --offline",
            )
        data = self._download(info, what)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(cached, data)
        except OSError as exc:
            raise ClientError(
                f"cannot keep verified targets in {cached.parent}: {os_error_message(exc)}", code="home_unusable"
            ) from None
        return data

    def check_package(self, name: str, version: str, sha256: str) -> TargetFile:
        """The signed target of NAME VERSION's package, which must have ``sha256`` (VerificationError otherwise)."""
        path = package_target(name, version)
        # A package already verified into the store (sync with the registry down) is checked against
        # the cached metadata: the lockfile's sha256 must be what the registry signed.
        info = self.target(path, cached_if_unreachable=True)
        if info is None:
            raise VerificationError(
                "missing_target",
                f"missing target: {name} {version} is not in the signed metadata of {self.base_url} "
                f"(no target {path}); its package cannot be verified, so it is not used",
            )
        signed = _sha256_of(info)
        if signed != sha256:
            raise VerificationError(
                "hash_mismatch",
                f"hash mismatch: {name} {version} is expected with sha256 {sha256}, but the signed metadata of "
                f"{self.base_url} lists sha256 {signed}: the index, the answer or the lockfile was changed",
            )
        return info

    def missing_index(self, name: str) -> VerificationError:
        return VerificationError(
            "missing_target",
            f"missing target: the registry at {self.base_url} serves an index document for {name!r}, but its signed "
            f"metadata has no target {index_target(name)}; it is not used",
        )

    # --- refreshing -----------------------------------------------------------------------------------

    def _tmp_dir(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def _start(self, *, cached_if_unreachable: bool) -> None:
        try:
            self.metadata_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ClientError(
                f"cannot keep signed metadata in {self.metadata_dir}: {os_error_message(exc)} (choose another home "
                "with --home or PROVISIONING_HOME; in the library, RegistryClient's trust_home)",
                code="home_unusable",
            ) from None
        with filelock.FileLock(self.folder / ".lock"):
            if self.offline:
                self._start_offline()
                return
            try:
                self._start_online()
            except ClientError as exc:
                if not (cached_if_unreachable and exc.code == "registry_unavailable" and self._has_cache()):
                    raise
                self._unreachable_error = exc
                self._start_offline()

    def _has_cache(self) -> bool:
        return (self.metadata_dir / "root.json").exists() and (self.metadata_dir / "timestamp.json").exists()

    def _start_online(self) -> None:
        bootstrap = None if (self.metadata_dir / "root.json").exists() else self._first_root()
        fetcher = _Fetcher(self._http)
        with self._translate(f"the signed metadata of {self.base_url}"):
            updater = Updater(
                metadata_dir=str(self.metadata_dir),
                metadata_base_url=f"{self.base_url}/tuf/metadata/",
                target_base_url=f"{self.base_url}/tuf/targets/",
                fetcher=fetcher,
                config=UpdaterConfig(app_user_agent="provisioning-client"),
                bootstrap=bootstrap,
            )
            updater.refresh()
        self._updater = updater

    def _first_root(self) -> bytes:
        """No root pinned yet: PROVISIONING_TRUST_ROOT's file, else the registry's 1.root.json (trust on first use)."""
        explicit = self._environ.get(ROOT_ENV)
        if explicit:
            try:
                data = Path(explicit).expanduser().read_bytes()
            except OSError as exc:
                raise ClientError(f"{ROOT_ENV}={explicit}: {os_error_message(exc)}", code="bad_request") from None
            pin_root(self.home, self.base_url, data, how="explicit")
            return data
        url = f"{self.base_url}/tuf/metadata/1.root.json"
        with self._translate(f"the root metadata of {self.base_url}", root=True):
            data = _Fetcher(self._http).download_bytes(url, MAX_ROOT_BYTES)
        pin = pin_root(self.home, self.base_url, data, how="first use")
        self._notice(
            f"trusting the registry at {self.base_url} on first use: root fingerprint {pin['fingerprint']}; "
            "compare it with the one its operator publishes (`manage.py trust show`), or pin a root with "
            "`provisioning trust init --root FILE`"
        )
        return data

    def _start_offline(self) -> None:
        """The cached metadata, verified from the trusted root without network (and without expiry)."""
        try:
            root_md = Metadata[Root].from_bytes((self.metadata_dir / "root.json").read_bytes())
        except FileNotFoundError:
            raise VerificationError(
                "no_metadata",
                f"offline: no verified signed metadata of {self.base_url} is cached under {self.metadata_dir}; "
                "run once without --offline (or pass --no-verify)",
            ) from None
        except _BAD_METADATA as exc:
            raise VerificationError(
                "invalid_metadata", f"the cached root of {self.base_url} is not valid: {exc}"
            ) from None
        root = root_md.signed
        cache: dict[str, Metadata[Any]] = {}

        def load(role: str, delegator: Root | Targets, expected_version: int | None) -> Metadata[Any]:
            if role in cache:
                return cache[role]
            with self._translate(f"the cached {role} metadata of {self.base_url}"):
                try:
                    md: Metadata[Any] = Metadata.from_bytes((self.metadata_dir / f"{role}.json").read_bytes())
                except FileNotFoundError:
                    if self._unreachable_error is not None:
                        raise self._unreachable_error from None
                    raise VerificationError(
                        "no_metadata", f"offline: the {role} metadata of {self.base_url} is not cached; run once online"
                    ) from None
                delegator.verify_delegate(role, md.signed_bytes, md.signatures)
                if expected_version is not None and md.signed.version != expected_version:
                    raise tuf_errors.BadVersionNumberError(
                        f"Expected {role} v{expected_version}, got v{md.signed.version}."
                    )
            cache[role] = md
            return md

        timestamp: Timestamp = load("timestamp", root, None).signed
        snapshot: Snapshot = load("snapshot", root, timestamp.snapshot_meta.version).signed
        targets_md = load("targets", root, snapshot.meta["targets.json"].version)

        def find(path: str) -> TargetFile | None:
            targets: Targets = targets_md.signed
            delegations = targets.delegations
            if delegations is None or delegations.succinct_roles is None:
                return targets.targets.get(path)
            role = delegations.succinct_roles.get_role_for_target(path)
            meta = snapshot.meta.get(f"{role}.json")
            if meta is None:
                return None
            bin_md = load(role, targets, meta.version)
            found: TargetFile | None = bin_md.signed.targets.get(path)
            return found

        self._offline_targets = find

    @contextlib.contextmanager
    def _translate(self, what: str, *, root: bool = False) -> Iterator[None]:
        """ngclient's errors as one line naming what failed."""
        url = self.base_url
        try:
            yield
        except VerificationError:
            raise
        except tuf_errors.UnsignedMetadataError as exc:
            match = _SIGNED_BY.search(str(exc))
            if match and 0 < int(match[1]) < int(match[2]):
                raise VerificationError(
                    "threshold",
                    f"threshold not met: {what} is validly signed by {match[1]} of the {match[2]} keys the registry's "
                    f"root requires ({exc}); a single stolen key is not enough, so it is refused",
                ) from None
            raise VerificationError(
                "bad_signature", f"bad signature: {what} does not carry a valid signature from its trusted keys ({exc})"
            ) from None
        except tuf_errors.LengthOrHashMismatchError as exc:
            raise VerificationError(
                "hash_mismatch",
                f"hash or length mismatch: {what} does not match what the signed metadata lists ({exc})",
            ) from None
        except tuf_errors.DownloadLengthMismatchError as exc:
            raise VerificationError(
                "length_mismatch", f"length mismatch: {what} is longer than the signed metadata allows ({exc})"
            ) from None
        except tuf_errors.ExpiredMetadataError as exc:
            raise VerificationError(
                "expired",
                f"expired metadata (freeze): {what} has expired ({exc}); the registry, a mirror or the "
                "network is replaying old answers, or the registry stopped re-signing",
            ) from None
        except tuf_errors.BadVersionNumberError as exc:
            if "must be >=" in str(exc) or "must be >= " in str(exc):
                raise VerificationError(
                    "rollback",
                    f"rollback: {what} is older than what this client already trusts ({exc})",
                ) from None
            raise VerificationError(
                "version_mismatch",
                f"version mismatch (rollback or mix-and-match): {what} is not the version the signed "
                f"metadata names ({exc})",
            ) from None
        except tuf_errors.DownloadHTTPError as exc:
            if root and exc.status_code in (403, 404):
                raise VerificationError(
                    "no_metadata",
                    f"the registry at {url} serves no signed metadata (GET /tuf/metadata/1.root.json answered "
                    f"{exc.status_code}), so nothing from it can be verified; ask its operator to run "
                    "`manage.py trust init`, or pass --no-verify to use it unverified",
                ) from None
            if exc.status_code == 404:
                raise VerificationError(
                    "missing_target", f"missing: {what} is not on the registry at {url} ({exc})"
                ) from None
            raise ClientError(f"cannot fetch {what}: {exc}", code="registry_unavailable") from None
        except tuf_errors.DownloadError as exc:
            cause = exc.__cause__
            if isinstance(cause, httpx.TransportError) and self._unreachable is not None:
                raise self._unreachable(cause) from None
            raise ClientError(f"cannot fetch {what}: {exc}", code="registry_unavailable") from None
        except tuf_errors.RepositoryError as exc:
            raise VerificationError("invalid_metadata", f"invalid signed metadata: {what}: {exc}") from None
        except OSError as exc:
            raise ClientError(
                f"cannot keep signed metadata in {self.metadata_dir}: {os_error_message(exc)}", code="home_unusable"
            ) from None


def _sha256_of(info: TargetFile) -> str:
    return str(info.hashes.get("sha256", ""))


def _matches(info: TargetFile, data: bytes) -> bool:
    return len(data) == info.length and hashlib.sha256(data).hexdigest() == _sha256_of(info)


def describe(home: Path, base_url: str) -> dict[str, Any]:
    """`provisioning trust show`: the pin, and the root trusted now (its keys and expiry), from disk."""
    pin = pinned(home, base_url)
    if pin is None:
        raise ClientError(
            f"no root is pinned for {base_url}: the first command that reads from it pins one (trust on first use), "
            "or pin one with `provisioning trust init --root FILE`",
            code="not_found",
        )
    folder = trust_folder(home, base_url) / "metadata"
    root: Root = Metadata[Root].from_bytes((folder / "root.json").read_bytes()).signed
    roles = {
        name: {"threshold": role.threshold, "keyids": list(role.keyids)} for name, role in sorted(root.roles.items())
    }
    keys = {keyid: {"keytype": key.keytype, "scheme": key.scheme} for keyid, key in sorted(root.keys.items())}
    shown: dict[str, Any] = {
        **pin,
        "trusted_root_version": root.version,
        "root_expires": root.expires.isoformat().replace("+00:00", "Z"),
        "roles": roles,
        "keys": keys,
    }
    with contextlib.suppress(Exception):
        timestamp: Timestamp = Metadata[Timestamp].from_bytes((folder / "timestamp.json").read_bytes()).signed
        shown["timestamp"] = {
            "version": timestamp.version,
            "expires": timestamp.expires.isoformat().replace("+00:00", "Z"),
        }
    return shown
