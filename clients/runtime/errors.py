"""The loader's errors: one ClientError subclass per failure SPEC 5 names, each with a "reason"
in its details."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clients.errors import ClientError

# --------------------------------------------------------------------------------------------------
# Errors: one ClientError subclass per failure SPEC 5 names, each with a "reason" in its details
# --------------------------------------------------------------------------------------------------


class LoaderError(ClientError):
    """A load, reload or discovery failed; ``details[0]["reason"]`` says which way."""


class ExtensionNotFoundError(LoaderError):
    """No extension of that type and name, anywhere; ``suggestions`` are close names."""

    def __init__(self, message: str, *, suggestions: Sequence[str] = (), details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)
        self.suggestions = list(suggestions)


class VersionNotFoundError(LoaderError):
    """The extension exists but no version fits; ``available`` lists the versions there are."""

    def __init__(self, message: str, *, available: Sequence[str] = (), details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)
        self.available = list(available)


class DependencyError(LoaderError):
    """Dependencies are missing (``missing``) or no version of some fits every constraint
    (``conflicting``); ``details`` are the resolver's reasons (``unknown``, ``conflict``, ...)."""

    def __init__(
        self,
        message: str,
        *,
        missing: Sequence[str] = (),
        conflicting: Sequence[str] = (),
        details: list[Any] | None = None,
    ) -> None:
        super().__init__(message, code="resolution_failed", details=details)
        self.missing = list(missing)
        self.conflicting = list(conflicting)


class PolicyError(LoaderError):
    """The runtime's policy (mode, allowed and blocked lists) refuses the extension."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="forbidden", details=details)


class NotLoadedError(LoaderError):
    """``reload_extension`` of an extension that is not loaded."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="not_found", details=details)


class LoadCheckError(LoaderError):
    """The extension's Nushell code does not parse; ``details`` are the check results."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(message, code="check_failed", details=details)
