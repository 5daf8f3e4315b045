"""The client's one error family. The CLI catches `ClientError` at the top and prints one line
(or the error envelope with ``--output json``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from extensions.errors import ExtensionError


class ClientError(Exception):
    """A failure to report to the user. ``code`` follows the registry's error codes where one fits."""

    exit_code = 1

    def __init__(self, message: str, *, code: str = "error", details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details: list[Any] = details or []

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_extension_error(cls, exc: ExtensionError) -> ClientError:
        return cls(str(exc), code=exc.code, details=exc.details_list())


class VerificationError(ClientError):
    """What the client was about to use does not verify against the registry's signed index
    (clients.trust says why: ``reason``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message, code="verification_failed", details=[{"reason": reason}])
        self.reason = reason


class UsageError(ClientError):
    """The command line itself is wrong (exit status 2)."""

    exit_code = 2

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="usage", details=details)


def _not_a_directory(path: Path) -> Path | None:
    """The first of ``path``'s ancestors (or itself) that exists and is not a directory."""
    for candidate in [*reversed(path.parents), path]:
        if os.path.lexists(candidate) and not candidate.is_dir():
            return candidate
    return None


def os_error_message(exc: OSError, *, about: Path | None = None) -> str:
    """An `OSError` as one line naming its path and what is wrong with it:
    ``/etc/passwd is not a directory``, ``/proc/nope: No such file or directory``. When the path is
    ``about`` (already named by the caller's message) only the reason is given."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is None:
        return reason
    path = Path(os.fsdecode(exc.filename))
    if exc.errno == errno.ENOTDIR:
        blocker = _not_a_directory(path)
        if blocker is not None:
            return f"{blocker} is not a directory"
    text = reason if about is not None and path == Path(about) else f"{path}: {reason}"
    if exc.filename2 is not None:
        text += f" ({os.fsdecode(exc.filename2)})"
    return text


def home_unusable(home: Path, exc: OSError) -> ClientError:
    """The error for a provisioning home that cannot be written (missing, unwritable, a file)."""
    return ClientError(
        f"cannot use {home} as the provisioning home: {os_error_message(exc, about=home)} "
        "(choose another with --home or PROVISIONING_HOME)",
        code="home_unusable",
    )
