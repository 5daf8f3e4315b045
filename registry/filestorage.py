"""File storage whose objects appear whole or not at all: each file is written to a temporary file
beside its key, flushed to disk, then linked into place with ``os.link``, which fails if the key
exists. A reader (or a concurrent publish of the same bytes) never sees a half-written package,
and nothing is ever overwritten (`replace` aside: the static index's documents and the signed
index's timestamp.json are mutable). ``durable=False`` skips the flushes, for files their owner
can write again from the database when a crash loses them (the signed index's)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from typing import Any

from django.core.files.storage import FileSystemStorage


class AtomicFileSystemStorage(FileSystemStorage):
    def _temporary(self, name: str, chunks: Iterable[bytes | str], durable: bool = True) -> tuple[str, str]:
        """The chunks in a temporary file beside name, flushed to disk: (its path, name's path)."""
        full_path = self.path(name)
        directory = os.path.dirname(full_path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as handle:
                for chunk in chunks:
                    handle.write(chunk if isinstance(chunk, bytes) else chunk.encode())
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
            if self.file_permissions_mode is not None:
                os.chmod(tmp, self.file_permissions_mode)
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp, full_path

    @staticmethod
    def _sync_directory(path: str) -> None:
        # The new directory entry is durable before a row can point at it.
        dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def replace(self, name: str, data: bytes, durable: bool = True) -> None:
        """Write name whole, replacing it if it exists (for the few mutable files: the static
        index, the signed index's timestamp): a temporary file beside it, flushed, then renamed over it."""
        tmp, full_path = self._temporary(name, [data], durable)
        try:
            os.replace(tmp, full_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if durable:
            self._sync_directory(full_path)

    def write_once(self, name: str, data: bytes, durable: bool = True) -> bool:
        """Write name whole unless it exists (False then, nothing written)."""
        tmp, full_path = self._temporary(name, [data], durable)
        try:
            os.link(tmp, full_path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        if durable:
            self._sync_directory(full_path)
        return True

    def _save(self, name: str, content: Any) -> str:
        if hasattr(content, "seek"):
            content.seek(0)
        tmp, full_path = self._temporary(name, content.chunks())
        try:
            while True:
                try:
                    os.link(tmp, full_path)
                    break
                except FileExistsError:
                    name = self.get_available_name(name)
                    full_path = self.path(name)
        finally:
            os.unlink(tmp)
        self._sync_directory(full_path)
        return os.path.relpath(full_path, self.location).replace("\\", "/")
