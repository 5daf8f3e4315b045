"""extensions.kinds: the one definition of the extension types and their plural kinds."""

from __future__ import annotations

import pytest

from extensions.kinds import KINDS, PLURAL, SINGULAR, TYPES, plural, singular
from extensions.manifest import manifest_schema
from extensions.names import RESERVED_NAMES


def test_the_types_and_kinds_are_the_four_of_the_spec_in_order() -> None:
    assert TYPES == ("provider", "taskserv", "cluster", "template")
    assert KINDS == ("providers", "taskservs", "clusters", "templates")
    assert PLURAL["taskserv"] == "taskservs"
    assert SINGULAR["taskservs"] == "taskserv"
    assert list(PLURAL.items()) == list(zip(TYPES, KINDS, strict=True))
    assert list(SINGULAR.items()) == list(zip(KINDS, TYPES, strict=True))


@pytest.mark.parametrize(
    ("word", "expected"), [("taskserv", "taskserv"), ("taskservs", "taskserv"), ("providers", "provider")]
)
def test_singular_reads_either_spelling(word: str, expected: str) -> None:
    assert singular(word) == expected


@pytest.mark.parametrize("word", ["", "s", "taskservss", "Taskserv", "module", "provide"])
def test_singular_refuses_anything_else(word: str) -> None:
    assert singular(word) is None


def test_plural_refuses_a_kind_or_an_unknown_type() -> None:
    assert plural("cluster") == "clusters"
    for word in ("clusters", "module"):
        with pytest.raises(KeyError):
            plural(word)


def test_the_json_schema_spells_the_same_types_and_kinds() -> None:
    schema = manifest_schema()
    assert tuple(schema["properties"]["extension"]["properties"]["type"]["enum"]) == TYPES
    assert tuple(schema["properties"]["provides"]["properties"]) == KINDS


def test_every_type_and_kind_is_a_reserved_name() -> None:
    assert set(TYPES) | set(KINDS) <= RESERVED_NAMES
