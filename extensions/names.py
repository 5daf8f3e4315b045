"""Extension names: the naming rule, reserved names, suggestions and confusable names (SPEC 2.2).

A name is lower-case ASCII letters, digits and single hyphens, starts with a letter and is 2 to 64
characters long (``^[a-z][a-z0-9]*(-[a-z0-9]+)*$``). A name that breaks the rule is refused with a
valid spelling suggested (``cert_manager`` -> ``cert-manager``).

Confusable names are detected the way crates.io's typosquatting checks do, with a *skeleton*:

- :func:`confusable_key` folds a name to a skeleton: NFKC, lower case, look-alike letters folded
  to one Latin letter (Cyrillic and Greek homoglyphs, ``0`` -> ``o``, ``1`` -> ``l``, ``5`` ->
  ``s``, ``vv`` -> ``w``, ``rn`` -> ``m``), separators (``-``, ``_``, ``.``, spaces) removed, and
  runs of a doubled letter collapsed to one. So ``cert-manager``/``certmanager``,
  ``etcd``/``etc-d``, ``c0redns``/``coredns`` and ``redis``/``rediss`` share a skeleton.
- :func:`confusable_keys` adds the skeletons one typo away: an adjacent-letter swap
  (``kubernetes``/``kuberentes``), including a swap whose doubled letter then collapses
  (``grafana``/``grafnaa``).

Two names are confusable when the skeleton of one is among the keys of the other. The registry
stores :func:`confusable_key` of every name in an indexed column and looks a new name up with
``key IN confusable_keys(new_name)``; :func:`find_confusable` does the same in memory. The
relation is symmetric (``key(a) in keys(b)`` exactly when ``key(b) in keys(a)``), so the order
in which two names are published does not matter.

Deliberately *not* folded: ``i``/``l`` (a dotted ``i`` is distinct in lower case, and with doubled
letters collapsed it would make ``mail`` and ``mal`` one name), ``8``/``b`` (``8`` resembles an
upper-case ``B``, and names are lower case: ``ku8ernetes`` is not confusable with
``kubernetes``), and other digits: ``etcd3`` is a different name from ``etcd``. Substituted
letters are not confusable (``redis``/``radis``): that would refuse too many honest names.

Known limits: a swap between two doubled letters (``aabb``/``abab``) is two edits apart once
doubles collapse, and a swap that makes an ``rn`` next to an ``m`` (``mnr``/``mrn``) reads as a
dropped letter; neither is reported.

The skeleton is stored by the registry: changing the folding rules needs a data migration that
recomputes the stored keys.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import NewType

from extensions.errors import InvalidNameError, ReservedNameError
from extensions.kinds import KINDS, TYPES

CanonicalName = NewType("CanonicalName", str)

MAX_LENGTH = 64

#: The pattern as written in SPEC 2.2 and in the JSON Schema (which adds the length limits).
NAME_PATTERN = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"

#: The naming rule, length included. ``\Z`` (not ``$``, which also matches before a final newline)
#: so that ``NAME_RE.match(name)`` is a complete check.
NAME_RE: re.Pattern[str] = re.compile(r"^(?=[a-z0-9-]{2,64}\Z)[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")

NAME_RULE = "use lower-case letters, digits and single hyphens, starting with a letter, 2 to 64 characters"

#: Never an extension name: they clash with the registry's URLs and the client's commands.
RESERVED_NAMES: frozenset[str] = frozenset(
    {
        *TYPES,
        *KINDS,
        "loaded",
        "reload",
        "install",
        "publish",
        "search",
        "api",
        "admin",
        "static",
        "new",
        "v2",
    }
)

# Letters that NFKD does not decompose into an ASCII base letter.
_TRANSLITERATIONS = {
    "\N{LATIN SMALL LETTER SHARP S}": "ss",
    "\N{LATIN SMALL LETTER AE}": "ae",
    "\N{LATIN SMALL LIGATURE OE}": "oe",
    "\N{LATIN SMALL LETTER O WITH STROKE}": "o",
    "\N{LATIN SMALL LETTER D WITH STROKE}": "d",
    "\N{LATIN SMALL LETTER ETH}": "d",
    "\N{LATIN SMALL LETTER L WITH STROKE}": "l",
    "\N{LATIN SMALL LETTER THORN}": "th",
    "\N{LATIN SMALL LETTER DOTLESS I}": "i",
}

_SEPARATORS_RE = re.compile(r"[^a-z0-9]+")
_LEADING_RE = re.compile(r"^[^a-z]+")


def _shown(name: str, limit: int = 80) -> str:
    """A name quoted for a message: escaped, and cut short when it is very long."""
    if len(name) > limit:
        return repr(name[:limit]) + "\N{HORIZONTAL ELLIPSIS}"
    return repr(name)


def is_valid_name(name: object) -> bool:
    """Whether ``name`` follows the naming rule (reserved names aside)."""
    return isinstance(name, str) and NAME_RE.match(name) is not None


def suggest_name(name: str) -> str | None:
    """A spelling of ``name`` that follows the naming rule, or None if nothing valid remains.

    Lower-cases, transliterates accented letters (NFKD), turns ``_``, ``.``, spaces and any other
    character into ``-``, collapses repeated hyphens, strips leading digits and hyphens and
    trailing hyphens, and cuts at 64 characters. A valid name is returned unchanged.
    """
    if not isinstance(name, str):
        return None
    text = "".join(_TRANSLITERATIONS.get(ch, ch) for ch in name.lower())
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = "".join(_TRANSLITERATIONS.get(ch, ch) for ch in text).lower()
    text = _SEPARATORS_RE.sub("-", text)
    text = _LEADING_RE.sub("", text)
    text = text[:MAX_LENGTH].rstrip("-")
    return text if is_valid_name(text) else None


def validate_name(name: str, *, path: str = "extension.name", allow_reserved: bool = False) -> CanonicalName:
    """Return ``name`` if it follows the naming rule and is not reserved; else InvalidNameError.

    The error message says what is wrong and what is allowed, and suggests a valid spelling when
    there is one (also in the error's ``suggestion``). ``allow_reserved`` is for names that are
    not extension names (the names an extension provides).
    """
    if not isinstance(name, str):
        raise InvalidNameError(f"a name must be a string, not {type(name).__name__}: {NAME_RULE}", path=path)
    if not is_valid_name(name):
        suggestion = suggest_name(name)
        if suggestion is not None and not allow_reserved and suggestion in RESERVED_NAMES:
            suggestion = None
        what = _shown(name)
        if len(name) > MAX_LENGTH:
            what += f" ({len(name)} characters)"
        message = f"{what} is not a valid name: {NAME_RULE}"
        if suggestion is not None:
            message += f"; did you mean {suggestion!r}?"
        raise InvalidNameError(message, path=path, suggestion=suggestion)
    if not allow_reserved and name in RESERVED_NAMES:
        raise ReservedNameError(
            f"{name!r} is reserved (it would clash with the registry's URLs and the client's "
            f"commands): choose another name; the reserved names are {', '.join(sorted(RESERVED_NAMES))}",
            path=path,
            name=name,
        )
    return CanonicalName(name)


def canonicalize(name: str) -> CanonicalName:
    """The form a name is looked up by: stripped, lower case, ``_`` and ``.`` turned into ``-``.

    It does not validate; ``canonicalize("Cert_Manager") == "cert-manager"``.
    """
    return CanonicalName(name.strip().lower().replace("_", "-").replace(".", "-"))


# --- confusable names ------------------------------------------------------------------------------

#: Single characters folded to the Latin letter they look like. Cyrillic and Greek look-alikes,
#: and the digits 0, 1, 5. Applied after NFKC and lower-casing.
HOMOGLYPHS: dict[str, str] = {
    # digits
    "0": "o",
    "1": "l",
    "5": "s",
    # Cyrillic
    "\N{CYRILLIC SMALL LETTER A}": "a",
    "\N{CYRILLIC SMALL LETTER VE}": "b",
    "\N{CYRILLIC SMALL LETTER SOFT SIGN}": "b",
    "\N{CYRILLIC SMALL LETTER ES}": "c",
    "\N{CYRILLIC SMALL LETTER KOMI DE}": "d",
    "\N{CYRILLIC SMALL LETTER IE}": "e",
    "\N{CYRILLIC SMALL LETTER IO}": "e",
    "\N{CYRILLIC SMALL LETTER SHHA}": "h",
    "\N{CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I}": "i",
    "\N{CYRILLIC SMALL LETTER YI}": "i",
    "\N{CYRILLIC SMALL LETTER JE}": "j",
    "\N{CYRILLIC SMALL LETTER KA}": "k",
    "\N{CYRILLIC SMALL LETTER PALOCHKA}": "l",
    "\N{CYRILLIC SMALL LETTER EM}": "m",
    "\N{CYRILLIC SMALL LETTER PE}": "n",
    "\N{CYRILLIC SMALL LETTER O}": "o",
    "\N{CYRILLIC SMALL LETTER ER}": "p",
    "\N{CYRILLIC SMALL LETTER QA}": "q",
    "\N{CYRILLIC SMALL LETTER DZE}": "s",
    "\N{CYRILLIC SMALL LETTER TE}": "t",
    "\N{CYRILLIC SMALL LETTER U}": "y",
    "\N{CYRILLIC SMALL LETTER IZHITSA}": "v",
    "\N{CYRILLIC SMALL LETTER WE}": "w",
    "\N{CYRILLIC SMALL LETTER HA}": "x",
    # Greek
    "\N{GREEK SMALL LETTER ALPHA}": "a",
    "\N{GREEK SMALL LETTER BETA}": "b",
    "\N{GREEK SMALL LETTER EPSILON}": "e",
    "\N{GREEK SMALL LETTER ETA}": "n",
    "\N{GREEK SMALL LETTER IOTA}": "i",
    "\N{GREEK SMALL LETTER KAPPA}": "k",
    "\N{GREEK SMALL LETTER NU}": "v",
    "\N{GREEK SMALL LETTER OMICRON}": "o",
    "\N{GREEK SMALL LETTER RHO}": "p",
    "\N{GREEK SMALL LETTER TAU}": "t",
    "\N{GREEK SMALL LETTER UPSILON}": "u",
    "\N{GREEK SMALL LETTER CHI}": "x",
    "\N{GREEK SMALL LETTER GAMMA}": "y",
    "\N{GREEK SMALL LETTER OMEGA}": "w",
}

_KEY_DROP_RE = re.compile(r"[\s\-_.]+")


def _fold(name: str) -> str:
    """NFKC, lower case, homoglyphs folded, separators removed, ``vv`` -> ``w``."""
    text = unicodedata.normalize("NFKC", name).lower()
    text = "".join(HOMOGLYPHS.get(ch, ch) for ch in text)
    text = _KEY_DROP_RE.sub("", text)
    return text.replace("vv", "w")


def _collapse(text: str) -> str:
    """Runs of the same character collapsed to one: ``rediss`` -> ``redis``."""
    out: list[str] = []
    for ch in text:
        if not out or out[-1] != ch:
            out.append(ch)
    return "".join(out)


def confusable_key(name: str) -> str:
    """The skeleton of a name: names with the same skeleton look alike.

    Folded (see :data:`HOMOGLYPHS`), doubles collapsed, then ``rn`` read as ``m``:
    ``confusable_key("Cert_Manager") == confusable_key("certrnanager") == "certmanager"``.
    """
    return _collapse(_collapse(_fold(name)).replace("rn", "m"))


def _is_skeleton(text: str) -> bool:
    return confusable_key(text) == text


def _edits(letters: list[str]) -> Iterable[list[str]]:
    """One typo on a sequence of letters: each operation here is undone by another one."""
    for i in range(len(letters) - 1):
        y, x = letters[i], letters[i + 1]
        head, tail = letters[:i], letters[i + 2 :]
        # an adjacent swap: "yx" -> "xy"
        yield [*head, x, y, *tail]
        # a swap next to a letter equal to one of the pair makes a double, which collapses:
        # "grafana" -> "grafnaa" -> "grafna" is "ana" -> "na"; the inverse is "na" -> "ana".
        yield [*head, y, x, y, *tail]
        yield [*head, x, y, x, *tail]
        if tail and tail[0] == y:
            yield [*head, y, x, *tail[1:]]
            yield [*head, x, y, *tail[1:]]


def _neighbours(key: str) -> Iterable[str]:
    """Skeletons one typo away from the skeleton ``key`` (a symmetric relation).

    The typos are taken on the letters of the key, and again with each ``m`` spelt ``rn`` (so
    that ``kuberentes``, a swap in ``kubernetes``, is reached from ``kubemetes``). A result is
    kept only if it is a skeleton and reads back as the same letters, so that the edit undoing
    it applies to it: that is what makes the relation symmetric.
    """
    for spelt in (False, True):
        letters = list(key.replace("m", "rn") if spelt else key)
        for edited in _edits(letters):
            text = "".join(edited)
            if spelt:
                text = text.replace("rn", "m")
            if _is_skeleton(text) and list(text.replace("m", "rn") if spelt else text) == edited:
                yield text


def confusable_keys(name: str) -> set[str]:
    """The skeletons of the names confusable with ``name``: its own and those one typo away.

    The typos are taken on the skeleton ``S``, so that the relation is symmetric (``key(a) in
    keys(b)`` exactly when ``key(b) in keys(a)``) and the registry's one-column lookup finds a
    confusable pair whichever of the two was published first. For each adjacent pair ``y x``
    of ``S``: the swap ``x y``; and, because a swap next to an equal letter makes a double that
    collapses (``grafana`` -> ``grafnaa`` -> ``grafna``), ``y x y`` -> ``y x`` / ``x y`` and
    its inverse ``y x`` -> ``y x y`` / ``x y x``; each on the letters of ``S`` and on ``S`` with
    every ``m`` spelt ``rn``.
    """
    key = confusable_key(name)
    keys = {key}
    keys.update(_neighbours(key))
    return keys


def are_confusable(a: str, b: str) -> bool:
    """Whether two names look alike (or are the same name)."""
    return confusable_key(a) in confusable_keys(b)


def find_confusable(name: str, existing: Iterable[str]) -> str | None:
    """The first of ``existing`` that is confusable with ``name``, other than ``name`` itself.

    This is the registry's query ``confusable_key IN confusable_keys(name)``, done in memory.
    """
    keys = confusable_keys(name)
    for other in existing:
        if other != name and confusable_key(other) in keys:
            return other
    return None
