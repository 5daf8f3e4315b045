"""What a caller asks for: a type (either spelling), a name, a version or constraint, and the
runtime's own version."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from clients.errors import UsageError
from extensions.errors import ExtensionError
from extensions.kinds import TYPES as EXTENSION_TYPES
from extensions.kinds import singular
from extensions.names import is_valid_name, suggest_name
from extensions.versions import Constraint, SemVer

# --------------------------------------------------------------------------------------------------
# Types, versions and the runtime's version
# --------------------------------------------------------------------------------------------------


def normalise_type(text: str) -> str:
    """``taskserv`` (also ``Taskserv``, the platform's spelling, and ``taskservs``); UsageError else."""
    value = singular(str(text).strip().lower())
    if value is None:
        raise UsageError(
            f"unknown extension type {str(text)[:40]!r}: use one of {', '.join(EXTENSION_TYPES)}",
            details=[{"path": "type", "allowed": list(EXTENSION_TYPES)}],
        )
    return value


def _exact_version(text: str) -> SemVer:
    try:
        return SemVer.parse(str(text).strip().removeprefix("=").strip()).without_build()
    except ExtensionError as exc:
        raise UsageError(
            f"version {str(text)[:80]!r} is not a version: {exc.message}", details=[{"path": "version"}]
        ) from None


def _check_name(name: str) -> str:
    if not is_valid_name(name):
        suggestion = suggest_name(str(name))
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        raise UsageError(
            f"{str(name)[:80]!r} is not an extension name: lower-case letters, digits and single hyphens, "
            f"starting with a letter, 2 to 64 characters{hint}",
            details=[{"path": "name", "suggestion": suggestion}],
        )
    return name


def runtime_version_from_env(value: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The runtime's version: ``value`` (``--runtime-version``), else ``$PROVISIONING_VERSION``, else
    None (no compatibility filter). UsageError when it is not SemVer."""
    env = os.environ if environ is None else environ
    text = value if value else env.get("PROVISIONING_VERSION") or None
    if text is None:
        return None
    try:
        return str(SemVer.parse(text.strip()))
    except ExtensionError as exc:
        where = "--runtime-version" if value else "PROVISIONING_VERSION"
        raise UsageError(f"{where}: {exc.message}", details=[{"path": where}]) from None


@dataclass(frozen=True)
class _Spec:
    """A requested version: exact, a constraint, or any."""

    exact: SemVer | None
    constraint: Constraint

    @property
    def alias(self) -> str:
        return str(self.constraint)

    @classmethod
    def parse(cls, version: str | None) -> _Spec:
        if version is None or not str(version).strip() or str(version).strip() == "*":
            return cls(None, Constraint.ANY)
        text = str(version).strip().removeprefix("=").strip()
        try:
            exact = SemVer.parse(text).without_build()
        except ExtensionError:
            pass
        else:
            return cls(exact, Constraint.parse(f"={exact}"))
        try:
            return cls(None, Constraint.parse(str(version)))
        except ExtensionError as exc:
            raise UsageError(
                f"version {str(version)[:80]!r} is neither a version nor a constraint: {exc.message}",
                details=[{"path": "version"}],
            ) from None
