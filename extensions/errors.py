"""Errors raised by the `extensions` library.

Every error is a `ValueError` subclass carrying a machine-readable ``code`` (the SPEC error code the
registry answers with), a human message that says what is wrong and what is allowed, and, where it
applies, the key path or archive member it is about. Boundaries (the registry's exception handler,
the client's CLI) convert these once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One finding about an input: where (a key path such as ``dependencies.extensions[1]``, or an
    archive member path), what is wrong, and what is allowed."""

    path: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message, "severity": self.severity}


class ExtensionError(ValueError):
    """Base class. ``code`` is the SPEC error code; ``problems`` lists every finding."""

    code: str = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        problems: Iterable[Problem] = (),
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.problems: list[Problem] = list(problems)
        self.details = details

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def details_list(self) -> list[Any]:
        """What goes into the error envelope's ``details``."""
        if self.details is not None:
            return self.details if isinstance(self.details, list) else [self.details]
        return [p.as_dict() for p in self.problems]


class InvalidNameError(ExtensionError):
    """A name breaks the naming rule or is reserved. ``suggestion`` is a valid spelling, if any."""

    code = "invalid_manifest"

    def __init__(self, message: str, *, path: str = "", suggestion: str | None = None) -> None:
        super().__init__(message, path=path)
        self.suggestion = suggestion


class ReservedNameError(InvalidNameError):
    """A name is one of the reserved names (SPEC 2.2): a name clash, not a malformed name."""

    code = "name_taken"

    def __init__(self, message: str, *, path: str = "", name: str = "") -> None:
        super().__init__(message, path=path)
        self.name = name


class VersionError(ExtensionError):
    """A version string is not strict SemVer 2.0.0."""

    code = "invalid_manifest"


class ConstraintError(ExtensionError):
    """A version constraint does not parse, or can never match."""

    code = "invalid_manifest"


class ManifestError(ExtensionError):
    """``extension.toml`` is invalid; ``problems`` holds every error (and the warnings)."""

    code = "invalid_manifest"

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]


class ReservedManifestNameError(ManifestError):
    """``extension.toml`` names a reserved extension name (``name_taken``, SPEC 3.1); ``name`` is it.
    ``problems`` holds every problem of the file, as for any `ManifestError`."""

    code = "name_taken"

    def __init__(self, message: str, *, name: str, problems: Iterable[Problem] = ()) -> None:
        super().__init__(message, problems=problems, details=[{"path": "extension.name", "name": name}])
        self.name = name


class ArchiveError(ExtensionError):
    """A package is not a well-formed extension package (``invalid_archive``)."""

    code = "invalid_archive"


class UnsafeArchiveError(ArchiveError):
    """A package contains something that must never be extracted (``unsafe_archive``)."""

    code = "unsafe_archive"


class ArchiveTooLargeError(ArchiveError):
    """A package exceeds a size limit (``archive_too_large``). ``limit`` names the setting."""

    code = "archive_too_large"

    def __init__(self, message: str, *, path: str = "", limit: str = "", value: int = 0) -> None:
        super().__init__(message, path=path)
        self.limit = limit
        self.value = value


class ResolutionError(ExtensionError):
    """Dependency resolution failed; ``details`` explains which requirements conflict."""

    code = "resolution_failed"


class ResolutionTooComplex(ResolutionError):
    """A resolution ran out of its budget (time or work) before it could decide (``too_complex``);
    ``details[0]`` says what was tried."""

    code = "too_complex"
