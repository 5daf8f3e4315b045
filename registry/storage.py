"""Package storage: write-once, content-addressed objects (``sha256/ab/<sha256>.tar.gz``) in the
``packages`` storage (files under REGISTRY_DATA_DIR, or S3), and staged uploads in ``uploads/``.

Every storage failure is raised as `StorageUnavailable`, so a publish fails cleanly with
``storage_unavailable`` and nothing half-written stays behind."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages

from registry.errors import StorageUnavailable

log = logging.getLogger(__name__)

PACKAGES_PREFIX = "sha256"
UPLOADS_PREFIX = "uploads"


def package_key(sha256: str) -> str:
    return f"{PACKAGES_PREFIX}/{sha256[:2]}/{sha256}.tar.gz"


def upload_key(build_id: str) -> str:
    return f"{UPLOADS_PREFIX}/{build_id}.tar.gz"


def _transient_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        errors.extend([BotoCoreError, ClientError])
    except ImportError:  # pragma: no cover - boto3 is a server requirement
        pass
    return tuple(errors)


_ERRORS = _transient_errors()


def is_s3() -> bool:
    return settings.REGISTRY_STORAGE == "s3"


def _storage() -> Storage:
    return storages["packages"]


#: What a read of a stored object that failed says (the default message is a publish's).
UNREADABLE = "package storage could not be read; try again later"
DAMAGED = "package storage holds a damaged copy of this file, which was not sent; try again later"


def _call(what: str, func: Any, *args: Any, message: str = "") -> Any:
    try:
        return func(*args)
    except _ERRORS as exc:
        log.warning("storage %s failed: %s", what, exc.__class__.__name__)
        raise StorageUnavailable(message) from exc


def probe() -> None:
    """Raises `StorageUnavailable` unless the packages storage can serve and take objects: S3 must
    answer a HEAD; the files storage's directory must be a directory this process can read and
    write (made, as its first write would, when it is not there yet; not a file in its place, nor
    a read-only mount)."""
    store = _storage()
    if is_s3():
        exists("healthz-probe")
        return
    location = Path(store.location)  # type: ignore[attr-defined]
    _call("probe", os.makedirs, location, 0o777, True)  # as the storage makes it (umask applies)
    if not (location.is_dir() and os.access(location, os.R_OK | os.W_OK | os.X_OK)):
        log.warning("storage probe failed: %s is not a readable and writable directory", location)
        raise StorageUnavailable()


def exists(key: str) -> bool:
    return bool(_call("exists", _storage().exists, key))


def size(key: str) -> int:
    return int(_call("size", _storage().size, key))


class KeyTaken(StorageUnavailable):
    """The key was taken by another writer between the check and the write."""


def put(key: str, fileobj: IO[bytes]) -> None:
    """Store fileobj at key. The key must be free: storage never overwrites or renames."""
    storage = _storage()
    fileobj.seek(0)
    saved = _call("save", storage.save, key, File(fileobj, name=key.rsplit("/", 1)[-1]))
    if saved != key:  # the backend picked another name: the key was taken meanwhile
        _call("delete", storage.delete, saved)
        raise KeyTaken(f"could not store {key}: the key is already taken")


def put_package(sha256: str, fileobj: IO[bytes], size_bytes: int) -> str:
    """Store a package write-once at its content-addressed key; storing the same bytes again is a
    no-op (the key names the content). Returns the key."""
    key = package_key(sha256)
    if exists(key):
        if size(key) == size_bytes:
            return key
        # Same digest, different size: a torn earlier write. Replace it; no row can reference it,
        # because rows are committed only after a complete write.
        log.warning("replacing a torn object at %s", key)
        delete(key)
    try:
        put(key, fileobj)
    except KeyTaken:
        # A concurrent publish of the same bytes stored it first: the key names the content.
        if size(key) != size_bytes:
            raise
    return key


def delete(key: str) -> None:
    _call("delete", _storage().delete, key)


def open_file(key: str) -> IO[bytes]:
    return cast(IO[bytes], _call("open", _storage().open, key, "rb", message=UNREADABLE))


def open_sized(key: str, size_bytes: int) -> IO[bytes]:
    """A stored object's file (files storage), to be sent as it is (``wsgi.file_wrapper``) with
    ``Content-Length: size_bytes``: an object of any other size there (cut short or replaced on the
    disk) is `StorageUnavailable`, never an answer whose body is not its length."""
    handle = cast(IO[bytes], _call("open", open, file_path(key), "rb", message=UNREADABLE))
    try:
        _check_size(key, _call("stat", os.fstat, handle.fileno(), message=UNREADABLE).st_size, size_bytes)
    except BaseException:
        handle.close()
        raise
    return handle


def check_size(key: str, size_bytes: int) -> None:
    """`StorageUnavailable` unless the stored object (files storage) is ``size_bytes`` long: before
    another process (nginx, after X-Accel-Redirect) sends it with the registry's headers."""
    _check_size(key, _call("stat", os.stat, file_path(key), message=UNREADABLE).st_size, size_bytes)


def _check_size(key: str, found: int, size_bytes: int) -> None:
    if found != size_bytes:
        log.error(
            "stored object %s is %d bytes, not the %d recorded: not sent (python manage.py check_integrity)",
            key, found, size_bytes,
        )  # fmt: skip
        raise StorageUnavailable(DAMAGED)


def file_path(key: str) -> str:
    """The local path of an object (files storage only)."""
    return str(_storage().path(key))


def download_to(key: str, target: IO[bytes]) -> None:
    """Copy an object into an open local file, in chunks."""
    with open_file(key) as source:
        try:
            shutil.copyfileobj(source, target, 1024 * 1024)
        except _ERRORS as exc:
            raise StorageUnavailable() from exc
    target.flush()


def read_small(key: str) -> bytes | None:
    """The bytes of a small object, or None if there is none."""
    store = _storage()
    if is_s3():
        from botocore.exceptions import ClientError

        try:
            obj = store.bucket.Object(store._normalize_name(key))  # type: ignore[attr-defined]
            return bytes(_call("get", lambda: obj.get()["Body"].read()))
        except StorageUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
    try:
        with open(store.path(key), "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageUnavailable() from exc


def replace(key: str, data: bytes, *, content_type: str, durable: bool = True) -> None:
    """Write a small mutable object (the static index), replacing what is there: readers see
    the old bytes or the new ones, never a mix. Package objects are never written this way."""
    store = _storage()
    if is_s3():
        obj = store.bucket.Object(store._normalize_name(key))  # type: ignore[attr-defined]
        _call("put", lambda: obj.put(Body=data, ContentType=content_type))
    else:
        _call("replace", store.replace, key, data, durable)  # type: ignore[attr-defined]


def presigned_url(key: str, *, filename: str) -> str:
    """A short-lived URL for the object (S3 only)."""
    storage = _storage()
    params = {"ResponseContentDisposition": f'attachment; filename="{filename}"'}
    return str(_call("url", lambda: storage.url(key, parameters=params)))  # type: ignore[call-arg]


def list_keys(prefix: str) -> Iterator[tuple[str, datetime | None]]:
    """Every key under prefix, with its modification time where the backend knows it."""
    storage = _storage()

    def walk(directory: str) -> Iterator[tuple[str, datetime | None]]:
        try:
            dirs, files = storage.listdir(directory)
        except FileNotFoundError:
            return  # nothing was ever stored under it (files backend), or it was removed meanwhile
        except _ERRORS as exc:
            log.warning("storage listdir failed: %s", exc.__class__.__name__)
            raise StorageUnavailable() from exc
        for name in files:
            key = f"{directory}/{name}"
            try:
                modified = storage.get_modified_time(key)
            except (NotImplementedError, *_ERRORS):  # type: ignore[misc]
                modified = None
            yield key, modified
        for sub in dirs:
            yield from walk(f"{directory}/{sub}")

    yield from walk(prefix)


# --- write-once small objects (the signed index's metadata and targets, registry.trust) -------------


def put_small(key: str, data: bytes, *, content_type: str, durable: bool = True) -> bool:
    """Write a small object once: False (nothing written) when the key is taken. ``durable=False``
    lets the files backend skip the flushes (S3 writes are durable anyway): only for objects the
    caller can write again when a crash loses them."""
    store = _storage()
    if is_s3():
        if exists(key):
            return False
        obj = store.bucket.Object(store._normalize_name(key))  # type: ignore[attr-defined]
        _call("put", lambda: obj.put(Body=data, ContentType=content_type))
        return True
    return bool(_call("save", store.write_once, key, data, durable))  # type: ignore[attr-defined]
