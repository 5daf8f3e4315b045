"""The registry's one error family. Services raise these; a single DRF exception handler turns
them (and DRF's own and `extensions`' errors) into the SPEC envelope with the right status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
    "length_required": 411,  # a body whose end the server cannot tell (registry.requestbody)
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
    "issuer_unavailable": 503,  # trusted publishing: the OIDC issuer's keys could not be fetched
    "database_unavailable": 503,
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


#: Seconds a client is told to wait (Retry-After) when the database or object storage is down.
UNAVAILABLE_RETRY_AFTER = 5


class StorageUnavailable(RegistryError):
    code = "storage_unavailable"

    def __init__(self, message: str = "", *, details: list[Any] | None = None) -> None:
        super().__init__(
            message or "object storage is unavailable; nothing was published, try again later",
            details=details,
        )


#: PostgreSQL's query_canceled (its statement_timeout, or a cancel) and lock_not_available (its
#: lock_timeout): a statement the database stopped, not a database that is gone.
TIMED_OUT_SQLSTATES = frozenset({"57014", "55P03"})


class DatabaseUnavailable(RegistryError):
    """The database cannot be reached (down, restarting, refusing connections), or it stopped a
    statement for time (``is_database_timeout``): a 503 at once, never a 500 or a hang; the request
    can be sent again."""

    code = "database_unavailable"

    def __init__(self, message: str = "", *, timed_out: bool = False) -> None:
        super().__init__(message or "the registry's database is unavailable right now; try again in a few seconds")
        self.timed_out = timed_out  # it answers, but stopped a statement for time

    @classmethod
    def for_error(cls, exc: BaseException | None) -> DatabaseUnavailable:
        """The 503 for a database error (``is_database_outage``); one the database stopped for
        time says so, and why."""
        if exc is not None and is_database_timeout(exc):
            # PostgreSQL's reason: "canceling statement due to statement timeout" (lock timeout,
            # user request); it names no statement and no data.
            reason = (str(exc.__cause__).splitlines() or ["a statement was stopped"])[0][:200]
            return cls(
                f"the registry's database did not answer in time ({reason}); try again in a few seconds", timed_out=True
            )
        return cls()


def is_database_timeout(exc: BaseException | None) -> bool:
    """Whether exc is a statement the database stopped for time (DATABASE_URL's ``options`` set
    PostgreSQL's statement_timeout and lock_timeout): Django's error, raised from the driver's,
    which has the SQLSTATE. A slow statement may be a bug (a missing index): log it in full."""
    cause = exc.__cause__ if exc is not None else None
    return is_database_outage(exc) and getattr(cause, "sqlstate", None) in TIMED_OUT_SQLSTATES


def is_database_outage(exc: BaseException | None) -> bool:
    """Whether exc means the database cannot be reached or stopped a statement for time: Django's
    OperationalError (refused, dropped or terminated connections, a server shutting down) and
    InterfaceError (a connection already closed)."""
    from django.db import InterfaceError, OperationalError

    return isinstance(exc, OperationalError | InterfaceError)


class RateLimited(RegistryError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# --- one classification of every error --------------------------------------------------------------

#: Codes that are the registry's failure, not the caller's (their message is still safe to show).
PLATFORM_CODES = frozenset({"internal_error", "storage_unavailable", "issuer_unavailable", "database_unavailable"})


@dataclass(frozen=True)
class ErrorInfo:
    """What an error means to the person who caused it: whose fault it is (``author``: the
    request or the uploaded content; ``platform``: ours), the SPEC code, a message that says what
    is wrong and what is allowed, and details."""

    origin: Literal["author", "platform"]
    code: str
    message: str
    details: list[Any] = field(default_factory=list)

    @property
    def status(self) -> int:
        return STATUS_BY_CODE.get(self.code, 400)


def classify_error(exc: BaseException, *, reference: str = "") -> ErrorInfo:
    """The one classification of errors, used by the build log, the build task and the API's
    exception handler. `RegistryError`s and the `extensions` library's errors (including the
    build sandbox's limits) say what is wrong; anything else is ours: a generic message that names
    ``reference`` (e.g. ``build <id>``) so the logged traceback can be found."""
    from extensions.errors import ExtensionError

    if isinstance(exc, RegistryError):
        origin: Literal["author", "platform"] = "platform" if exc.code in PLATFORM_CODES else "author"
        return ErrorInfo(origin, exc.code, exc.message, list(exc.details))
    if isinstance(exc, ExtensionError):
        return ErrorInfo("author", exc.code, str(exc), exc.details_list())
    if is_database_outage(exc):
        outage = DatabaseUnavailable.for_error(exc)
        return ErrorInfo("platform", outage.code, outage.message, [])
    where = f" ({reference})" if reference else ""
    return ErrorInfo(
        "platform",
        "internal_error",
        f"an error on the registry's side; it has been logged{where}",
        [],
    )
