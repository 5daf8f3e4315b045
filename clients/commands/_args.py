"""Argument types shared by the commands: each checks one option's value, so a bad value is a
usage error (exit 2) naming the option (``argument --limit: ...``), never an API name from deeper
down. Imports are made inside the functions: building the parser must stay cheap."""

from __future__ import annotations

import argparse
import math

MAX_PAGE = 100  # the registry's largest page


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def non_negative(text: str) -> int:
    """0 or more (``--offset``)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: use 0 or more")
    return value


def positive(text: str) -> int:
    """1 or more (``--expires-in-days``)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not allowed: use 1 or more")
    return value


def page_size(text: str) -> int:
    """1 to 100 (``--limit``)."""
    value = _whole(text)
    if not 1 <= value <= MAX_PAGE:
        raise argparse.ArgumentTypeError(f"{value} is out of range: use a whole number from 1 to {MAX_PAGE}")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds (``--timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not allowed: use a number of seconds greater than 0")
    return value


def version_or_constraint(text: str) -> str:
    """A version (``1.28.6``) or a constraint (``^1.28``, ``>=1.2, <2``), as given."""
    from extensions.errors import ExtensionError
    from extensions.versions import Constraint

    value = text.strip()
    try:
        Constraint.parse(value)
    except ExtensionError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a version nor a constraint: use a version such as 1.28.6, or a constraint such "
            "as ^1.28, ~1.28.3, >=1.28, <2, 1.*, joined by ',' (and) or '||' (or)"
        ) from None
    return value


def exact_version(text: str) -> str:
    """A version (``1.28.6``)."""
    from extensions.errors import ExtensionError
    from extensions.versions import SemVer

    try:
        return str(SemVer.parse(text.strip()))
    except ExtensionError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version: {exc.message}") from None


def extension_type(text: str) -> str:
    """``provider``, ``taskserv``, ``cluster`` or ``template``; the plural and any case are accepted."""
    from clients.errors import UsageError
    from clients.runtime import normalise_type

    try:
        return normalise_type(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None
