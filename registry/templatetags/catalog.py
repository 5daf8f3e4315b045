"""Template filters of the web catalog."""

from __future__ import annotations

from django import template

from extensions.errors import ExtensionError
from extensions.kinds import PLURAL
from extensions.resolver import describe_constraint
from extensions.versions import Constraint

register = template.Library()


@register.filter
def constraint(text: str, written: str = "") -> str:
    """A stored (normal-form) constraint as its author wrote it (``written``, kept since version
    rows store it), else as people write it: ``>=3.5.0, <4.0.0-0`` -> ``^3.5``."""
    if written:
        return str(written)
    try:
        return describe_constraint(Constraint.parse(str(text), check_satisfiable=False))
    except ExtensionError:
        return str(text)


@register.filter
def kind(type: str) -> str:
    """The plural kind of a type (``taskserv`` -> ``taskservs``; extensions.kinds)."""
    return PLURAL.get(str(type), str(type))
