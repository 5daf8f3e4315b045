"""The registry's one error family. Services raise these; a single DRF exception handler turns
them (and DRF's own and `extensions`' errors) into the SPEC envelope with the right status."""

from __future__ import annotations

from typing import Any

# SPEC 3.1: every error code and its HTTP status.
STATUS_BY_CODE: dict[str, int] = {
    "bad_request": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "version_exists": 409,
    "name_taken": 409,
    "archive_too_large": 413,
    "unsupported_media_type": 415,
    "invalid_archive": 422,
    "unsafe_archive": 422,
    "invalid_manifest": 422,
    "unknown_dependency": 422,
    "resolution_failed": 422,
    "too_complex": 422,
    "rate_limited": 429,
    "internal_error": 500,
    "storage_unavailable": 503,
}


class RegistryError(Exception):
    """An error with a SPEC code, a message saying what is wrong and what is allowed, and details."""

    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details: list[Any] = details or []

    @property
    def status(self) -> int:
        return STATUS_BY_CODE.get(self.code, 400)

    def __str__(self) -> str:
        return self.message


class BadRequest(RegistryError):
    code = "bad_request"


class Unauthenticated(RegistryError):
    code = "unauthenticated"


class Forbidden(RegistryError):
    code = "forbidden"


class NotFound(RegistryError):
    code = "not_found"


class VersionExists(RegistryError):
    code = "version_exists"


class NameTaken(RegistryError):
    code = "name_taken"


class UnknownDependency(RegistryError):
    code = "unknown_dependency"


class StorageUnavailable(RegistryError):
    code = "storage_unavailable"

    def __init__(self, message: str = "", *, details: list[Any] | None = None) -> None:
        super().__init__(
            message or "object storage is unavailable; nothing was published, try again later",
            details=details,
        )


class RateLimited(RegistryError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
