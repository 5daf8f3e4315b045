"""Streaming uploads: the body is written to a file in REGISTRY_TMP_DIR as it arrives (never
buffered in memory), hashed as it goes, and refused as soon as it passes the size limit. The file
is named by the upload's id (`builds.workspace`), which becomes the build's id, so a file that a
killed process left behind is found and removed by the sweeper."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest

from builds import workspace
from registry.errors import BadRequest, RegistryError

#: Room for the multipart framing around the file, beyond the package limit.
MULTIPART_SLACK = 64 * 1024


def too_large(limit: int) -> RegistryError:
    return RegistryError(
        f"the upload is larger than the limit of {limit} bytes ({limit // (1024 * 1024)} MiB) for a package",
        code="archive_too_large",
        details=[{"limit": "max_package_bytes", "value": limit}],
    )


def check_declared_length(request: HttpRequest, limit: int) -> None:
    """Refuse an upload whose declared Content-Length is past the limit, before reading a byte of
    it (the streaming handler still enforces the limit on what really arrives)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise BadRequest("Content-Length is not a number") from None
    if declared > limit + MULTIPART_SLACK:
        raise too_large(limit)


class HashingUploadedFile(UploadedFile):
    """An uploaded file on disk at a path of ours; removed when the request closes it."""

    def __init__(self, path: Path, name: str, content_type: str | None, charset: str | None, extra: Any) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self._handle = os.fdopen(fd, "w+b")
        super().__init__(self._handle, name, content_type, 0, charset, extra)
        self.path = path
        self.sha256 = ""

    def temporary_file_path(self) -> str:
        return str(self.path)

    def close(self) -> None:
        try:
            self._handle.close()
        finally:
            self.path.unlink(missing_ok=True)


class LimitedHashingUploadHandler(FileUploadHandler):
    """Every file goes to a file of its own under REGISTRY_TMP_DIR; its SHA-256 is computed while it
    streams in; more than ``limit`` bytes stops the upload with ``archive_too_large``.
    ``upload_id`` names the files and is the id the build gets."""

    chunk_size = 256 * 1024

    def __init__(self, request: HttpRequest, *, limit: int, upload_id: uuid.UUID | None = None) -> None:
        super().__init__(request)
        self.limit = limit
        self.upload_id = upload_id or workspace.new_upload_id()
        self._hash = hashlib.sha256()
        self._received = 0
        self._count = 0

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self._hash = hashlib.sha256()
        self._received = 0
        self._count += 1
        self.file = HashingUploadedFile(
            workspace.upload_path(self.upload_id, self._count),
            self.file_name or "upload",
            self.content_type,
            self.charset,
            self.content_type_extra,
        )

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self._received += len(raw_data)
        if self._received > self.limit:
            self.file.close()
            raise too_large(self.limit)
        self._hash.update(raw_data)
        self.file.write(raw_data)
        return None

    def file_complete(self, file_size: int) -> HashingUploadedFile:
        self.file.seek(0)
        self.file.size = file_size
        self.file.sha256 = self._hash.hexdigest()
        return self.file
