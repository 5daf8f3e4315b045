"""The client's one error family. The CLI catches `ClientError` at the top and prints one line
(or the error envelope with ``--output json``)."""

from __future__ import annotations

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


class UsageError(ClientError):
    """The command line itself is wrong (exit status 2)."""

    exit_code = 2

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="usage", details=details)
