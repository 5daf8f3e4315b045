"""The extension types and their plural forms: the one definition everything imports.

An extension has one *type* (singular: ``provider``, ``taskserv``, ``cluster``, ``template``); what
it provides is listed by *kind* (plural: ``[provides] taskservs = [...]``, the discovery directory
``{dir}/taskservs/``, ``GET /api/v1/extensions/taskservs``). The JSON Schema of ``extension.toml``
(``extensions/schema/extension.schema.json``) spells the same lists; a test keeps them equal.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["KINDS", "PLURAL", "SINGULAR", "TYPES", "ExtensionType", "plural", "singular"]

ExtensionType = Literal["provider", "taskserv", "cluster", "template"]

#: the types, singular, in their canonical order
TYPES: tuple[ExtensionType, ...] = get_args(ExtensionType)
#: the kinds, plural, in the same order
KINDS: tuple[str, ...] = tuple(f"{t}s" for t in TYPES)
#: type -> kind (``taskserv`` -> ``taskservs``)
PLURAL: dict[str, str] = dict(zip(TYPES, KINDS, strict=True))
#: kind -> type (``taskservs`` -> ``taskserv``)
SINGULAR: dict[str, ExtensionType] = dict(zip(KINDS, TYPES, strict=True))


def plural(type: str) -> str:
    """The kind of a type (``taskserv`` -> ``taskservs``); KeyError for anything else."""
    return PLURAL[type]


def singular(word: str) -> ExtensionType | None:
    """The type a word names, singular or plural (``taskservs`` or ``taskserv`` -> ``taskserv``);
    None when it names none."""
    return SINGULAR.get(word) or next((t for t in TYPES if t == word), None)
