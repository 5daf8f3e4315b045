"""Streaming uploads: the body is written to a temporary file as it arrives (never buffered in
memory), hashed as it goes, and refused as soon as it passes the size limit."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.files.uploadedfile import TemporaryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler, TemporaryFileUploadHandler
from django.http import HttpRequest

from registry.errors import RegistryError


def too_large(limit: int) -> RegistryError:
    return RegistryError(
        f"the upload is larger than the limit of {limit} bytes ({limit // (1024 * 1024)} MiB) for a package",
        code="archive_too_large",
        details=[{"limit": "max_package_bytes", "value": limit}],
    )


class HashingUploadedFile(TemporaryUploadedFile):
    sha256: str = ""


class LimitedHashingUploadHandler(TemporaryFileUploadHandler):
    """Every file goes to a temporary file on disk; its SHA-256 is computed while it streams in;
    more than ``limit`` bytes stops the upload with ``archive_too_large``."""

    chunk_size = 256 * 1024

    def __init__(self, request: HttpRequest, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self._hash = hashlib.sha256()
        self._received = 0

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        # The base class's base class records the field, name and type; the temporary file is ours
        # (TemporaryFileUploadHandler.new_file would open one more and throw it away).
        FileUploadHandler.new_file(self, *args, **kwargs)
        self._hash = hashlib.sha256()
        self._received = 0
        self.file = HashingUploadedFile(
            self.file_name or "upload", self.content_type, 0, self.charset, self.content_type_extra
        )

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        self._received += len(raw_data)
        if self._received > self.limit:
            self.file.close()
            raise too_large(self.limit)
        self._hash.update(raw_data)
        self.file.write(raw_data)

    def file_complete(self, file_size: int) -> HashingUploadedFile:
        uploaded = super().file_complete(file_size)
        uploaded.sha256 = self._hash.hexdigest()  # type: ignore[union-attr]
        return uploaded  # type: ignore[return-value]
