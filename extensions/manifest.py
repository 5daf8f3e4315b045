"""``extension.toml``: parsing and validation (SPEC 2.2).

:func:`parse_manifest` checks, in order, and reports *every* problem at once:

1. the size limit (64 KiB by default);
2. UTF-8 (a leading byte-order mark is accepted);
3. TOML syntax (with the line and column of the first syntax error);
4. the JSON Schema shipped in ``extensions/schema/extension.schema.json`` (the one the registry
   serves at ``/api/v1/schema/extension.json``), every error rewritten into a message that says
   what is allowed; keys the schema does not know are warnings, never errors;
5. what the schema cannot express: names (with a valid spelling suggested), SemVer versions,
   requirements and constraints (including constraints that can never match), duplicate and
   self dependencies, the extension type (inferred when ``[provides]`` names exactly one kind),
   SPDX-looking licenses, http(s) URLs, a relative README path, gitignore patterns that compile.

Errors raise :class:`~extensions.errors.ManifestError` whose ``problems`` hold the errors and the
warnings, each with its key path (``dependencies.extensions[1]``), sorted in the order the keys
appear in the file. A valid file gives a frozen :class:`Manifest` whose ``warnings`` hold the
warnings.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pathspec
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from extensions.errors import (
    ConstraintError,
    ExtensionError,
    InvalidNameError,
    ManifestError,
    Problem,
    ReservedManifestNameError,
    ReservedNameError,
    VersionError,
)
from extensions.keypaths import key_path
from extensions.kinds import KINDS, SINGULAR, TYPES, ExtensionType
from extensions.names import RESERVED_NAMES, CanonicalName, validate_name
from extensions.versions import Constraint, SemVer, parse_requirement

__all__ = [
    "KEYWORD_RULE",
    "KINDS",
    "MANIFEST_FILENAME",
    "MAX_MANIFEST_BYTES",
    "Dependency",
    "ExtensionType",
    "Manifest",
    "ManifestLimits",
    "check_manifest",
    "load_manifest",
    "manifest_schema",
    "parse_manifest",
]

MANIFEST_FILENAME = "extension.toml"
MAX_MANIFEST_BYTES = 64 * 1024


MAX_KEYWORD_LENGTH = 32


@dataclass(frozen=True)
class ManifestLimits:
    """How long the lists of ``extension.toml`` may be (SPEC 2.4). The JSON Schema carries these
    defaults; the registry builds one from its settings (and serves the schema with them)."""

    max_provides: int = 32  # names in [provides], all kinds together
    max_dependencies: int = 64  # [dependencies] extensions
    max_system_packages: int = 64
    max_env_vars: int = 64  # required_env and optional_env together
    max_build_patterns: int = 32  # [build] include and exclude together
    max_pattern_length: int = 256  # characters of one [build] pattern
    max_pattern_wildcards: int = 8  # '*', '?' and '[...]' in one [build] pattern
    max_authors: int = 32
    max_categories: int = 16
    max_compatibility_keys: int = 32


DEFAULT_MANIFEST_LIMITS = ManifestLimits()

_KEYWORD_RE = re.compile(r"[a-z0-9-]+")
_ENV_RE = re.compile(r"[A-Z_][A-Z0-9_]*")
_SYSTEM_PACKAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._:@/-]*")
_LICENSE_ID_RE = re.compile(r"[A-Za-z0-9.+-]+")
_LICENSE_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
_TOML_POSITION_RE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

KEYWORD_RULE = f"use lower-case letters, digits and hyphens, at most {MAX_KEYWORD_LENGTH} characters"


def is_valid_keyword(keyword: object) -> bool:
    """Whether ``keyword`` is a keyword extension.toml allows (`[a-z0-9-]`, 1 to 32 characters)."""
    return isinstance(keyword, str) and len(keyword) <= MAX_KEYWORD_LENGTH and bool(_KEYWORD_RE.fullmatch(keyword))


_ENV_RULE = "use upper-case letters, digits and underscores, not starting with a digit (e.g. KUBECONFIG)"
_SYSTEM_PACKAGE_RULE = "use a package name: letters, digits and + . _ : @ / -, starting with a letter or digit"
_LICENSE_RULE = (
    "use an SPDX license expression: identifiers such as MIT or Apache-2.0 joined by AND, OR and WITH, "
    "with parentheses, e.g. 'MIT OR Apache-2.0'"
)
_URL_RULE = "use an http:// or https:// URL"
_README_RULE = "use a path relative to the extension's directory, without '..', e.g. README.md"


# --- the result ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dependency:
    """An extension this one needs, with the versions it accepts."""

    name: CanonicalName
    constraint: Constraint

    def __str__(self) -> str:
        return self.name if self.constraint.is_any else f"{self.name} {self.constraint}"


@dataclass(frozen=True)
class Manifest:
    """A valid ``extension.toml``. Optional lists are empty tuples, never None."""

    name: CanonicalName
    version: SemVer
    description: str
    type: ExtensionType
    authors: tuple[str, ...] = ()
    license: str | None = None
    homepage: str | None = None
    repository: str | None = None
    keywords: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    readme: str = "README.md"
    provisioning_version: Constraint | None = None
    #: every ``*_version`` key of ``[compatibility]``, as written (``provisioning_version`` too)
    compatibility: dict[str, str] = field(default_factory=dict, hash=False)
    #: every kind of :data:`KINDS`, empty when not provided
    provides: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    dependencies: tuple[Dependency, ...] = ()
    system_packages: tuple[str, ...] = ()
    required_env: tuple[str, ...] = ()
    optional_env: tuple[str, ...] = ()
    build_include: tuple[str, ...] = ()
    build_exclude: tuple[str, ...] = ()
    warnings: tuple[Problem, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, keys in field order; versions and constraints as their canonical strings,
        each dependency's constraint also as written (``written``: ``^1.7``).

        ``warnings`` are about the file, not its data, and are left out.
        """
        return {
            "name": self.name,
            "version": str(self.version),
            "description": self.description,
            "type": self.type,
            "authors": list(self.authors),
            "license": self.license,
            "homepage": self.homepage,
            "repository": self.repository,
            "keywords": list(self.keywords),
            "categories": list(self.categories),
            "readme": self.readme,
            "provisioning_version": (None if self.provisioning_version is None else str(self.provisioning_version)),
            "compatibility": dict(self.compatibility),
            "provides": {kind: list(self.provides.get(kind, ())) for kind in KINDS},
            "dependencies": [
                {"name": d.name, "constraint": str(d.constraint), "written": d.constraint.written}
                for d in self.dependencies
            ],
            "system_packages": list(self.system_packages),
            "required_env": list(self.required_env),
            "optional_env": list(self.optional_env),
            "build_include": list(self.build_include),
            "build_exclude": list(self.build_exclude),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """The inverse of `to_dict`, for a manifest validated elsewhere (the build sandbox validated
        it, in another process). It checks the shape of every field and parses the version and the
        constraints, not the rules of extension.toml; a malformed document is a `ValueError`."""

        def text(key: str, *, optional: bool = False) -> Any:
            return _string_field(data, key, optional=optional)

        def texts(value: Any, key: str) -> tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ValueError(f"manifest field {key!r} is not a list of strings")
            return tuple(value)

        kind = text("type")
        if kind not in TYPES:
            raise ValueError(f"manifest field 'type' is {kind!r}")
        provides = data.get("provides")
        compatibility = data.get("compatibility")
        dependencies = data.get("dependencies")
        if not isinstance(provides, dict) or not isinstance(compatibility, dict) or not isinstance(dependencies, list):
            raise ValueError("manifest fields 'provides', 'compatibility' or 'dependencies' are malformed")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in compatibility.items()):
            raise ValueError("manifest field 'compatibility' is not a table of strings")
        deps = []
        for item in dependencies:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ValueError("manifest field 'dependencies' is malformed")
            normal = Constraint.parse(_string_field(item, "constraint"))
            written = item.get("written")  # absent in documents stored before it was kept
            if written is not None:
                as_written = Constraint.parse(_string_field(item, "written"), check_satisfiable=False)
                if as_written != normal:
                    raise ValueError(f"manifest dependency {item['name']!r}: {written!r} is not {str(normal)!r}")
                normal = as_written
            deps.append(Dependency(CanonicalName(item["name"]), normal))
        runtime = text("provisioning_version", optional=True)
        return cls(
            name=CanonicalName(text("name")),
            version=SemVer.parse(text("version")),
            description=text("description"),
            type=cast(ExtensionType, kind),
            authors=texts(data.get("authors"), "authors"),
            license=text("license", optional=True),
            homepage=text("homepage", optional=True),
            repository=text("repository", optional=True),
            keywords=texts(data.get("keywords"), "keywords"),
            categories=texts(data.get("categories"), "categories"),
            readme=text("readme"),
            provisioning_version=None if runtime is None else Constraint.parse(runtime),
            compatibility=dict(compatibility),
            provides={kind: texts(provides.get(kind, []), f"provides.{kind}") for kind in KINDS},
            dependencies=tuple(deps),
            system_packages=texts(data.get("system_packages"), "system_packages"),
            required_env=texts(data.get("required_env"), "required_env"),
            optional_env=texts(data.get("optional_env"), "optional_env"),
            build_include=texts(data.get("build_include"), "build_include"),
            build_exclude=texts(data.get("build_exclude"), "build_exclude"),
        )


def _string_field(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"manifest field {key!r} is not a string")
    return value


# --- the schema ------------------------------------------------------------------------------------


@functools.cache
def _schema_text() -> str:
    return resources.files("extensions").joinpath("schema/extension.schema.json").read_text("utf-8")


@functools.cache
def _schema() -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(_schema_text()))


@functools.cache
def _limited_schema(limits: ManifestLimits) -> dict[str, Any]:
    """The schema with the list bounds of ``limits`` (the shipped file carries the defaults)."""
    schema = _schema()
    if limits == DEFAULT_MANIFEST_LIMITS:
        return schema
    schema = copy.deepcopy(schema)
    props = schema["properties"]
    extension = props["extension"]["properties"]
    extension["authors"]["maxItems"] = limits.max_authors
    extension["categories"]["maxItems"] = limits.max_categories
    props["compatibility"]["maxProperties"] = limits.max_compatibility_keys
    for kind in KINDS:
        props["provides"]["properties"][kind]["maxItems"] = limits.max_provides
    dependencies = props["dependencies"]["properties"]
    dependencies["extensions"]["maxItems"] = dependencies["extensions"]["maxProperties"] = limits.max_dependencies
    dependencies["system_packages"]["maxItems"] = limits.max_system_packages
    schema["$defs"]["envNames"]["maxItems"] = limits.max_env_vars
    schema["$defs"]["patterns"]["maxItems"] = limits.max_build_patterns
    schema["$defs"]["patterns"]["items"]["maxLength"] = limits.max_pattern_length
    return schema


@functools.cache
def _validator(limits: ManifestLimits = DEFAULT_MANIFEST_LIMITS) -> Draft202012Validator:
    return Draft202012Validator(_limited_schema(limits))


def manifest_schema(limits: ManifestLimits = DEFAULT_MANIFEST_LIMITS) -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of ``extension.toml`` with the list bounds of ``limits``;
    a copy, free to change."""
    return copy.deepcopy(_limited_schema(limits))


def _resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/x``); sibling keywords other than annotations are unused."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = _schema()
        for part in ref[2:].split("/"):
            target = target[part]
        return cast(Mapping[str, Any], target)
    return node


def _about(node: Mapping[str, Any]) -> str:
    """A schema node's description (the node's own before its ``$ref`` target's)."""
    text = node.get("description") or _resolve(node).get("description") or ""
    return str(text).rstrip(".")


_NAME_P = "^[a-z][a-z0-9]*(-[a-z0-9]+)*$"

# Human explanations of the schema's patterns, keyed by the pattern.
_PATTERN_RULES: dict[str, str] = {
    _NAME_P: ("use lower-case letters, digits and single hyphens, starting with a letter, 2 to 64 characters"),
    "^[a-z0-9-]+$": KEYWORD_RULE,
    "^[A-Z_][A-Z0-9_]*$": _ENV_RULE,
    "^[A-Za-z0-9][A-Za-z0-9+._:@/-]*$": _SYSTEM_PACKAGE_RULE,
    "^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]+": _URL_RULE,
}


# --- key paths and messages ------------------------------------------------------------------------


def _path_of(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = key_path(path, part)
    return path


def _shown(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        return repr(value[:limit]) + "…" if len(value) > limit else repr(value)
    return _type_name(value)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


_TYPE_WORDS = {
    "string": "a string",
    "array": "a list",
    "object": "a table",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class _Collector:
    """Problems found so far, each tagged with where it came from (schema or semantic check)."""

    def __init__(self) -> None:
        self.items: list[tuple[Problem, bool]] = []

    def error(self, path: str, message: str, *, schema: bool = False) -> None:
        self.items.append((Problem(path, message, "error"), schema))

    def warning(self, path: str, message: str) -> None:
        self.items.append((Problem(path, message, "warning"), False))

    def has_error(self) -> bool:
        return any(p.severity == "error" for p, _ in self.items)

    def problems(self, order: _Order) -> list[Problem]:
        """Errors and warnings, a schema error dropped where a semantic check said more at that path."""
        semantic = {p.path for p, from_schema in self.items if p.severity == "error" and not from_schema}
        kept = [p for p, from_schema in self.items if not (from_schema and p.path in semantic)]
        unique = list(dict.fromkeys(kept))
        return sorted(unique, key=order.key)


class _Order:
    """Where each key path appears in the file, to sort problems in reading order.

    A path that is not in the file (a missing required key) sorts after its table's last key.
    """

    _MAX_DEPTH = 8

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.span: dict[str, tuple[int, int]] = {}
        self._counter = 0
        self._visit("", data, 0)

    def _visit(self, path: str, value: Any, depth: int) -> int:
        start = self._counter
        self._counter += 1
        end = start
        if depth < self._MAX_DEPTH:
            children: Iterable[tuple[str | int, Any]] = ()
            if isinstance(value, dict):
                children = value.items()
            elif isinstance(value, list):
                children = enumerate(value)
            for key, child in children:
                end = self._visit(key_path(path, key), child, depth + 1)
        self.span[path] = (start, end)
        return max(end, start)

    def key(self, problem: Problem) -> float:
        path = problem.path
        if path in self.span:
            return self.span[path][0]
        # the nearest enclosing path that exists
        parent = path
        while parent:
            cut = max(parent.rfind("."), parent.rfind("["))
            parent = parent[:cut] if cut > 0 else ""
            if parent in self.span:
                return self.span[parent][1] + 0.5
        return -1.0 if path == MANIFEST_FILENAME else float(self._counter)


# --- step 4: the JSON Schema -------------------------------------------------------------------------


def _schema_message(error: ValidationError) -> tuple[str, str]:
    """(key path, human message) for one jsonschema error."""
    parts = list(error.absolute_path)
    path = _path_of(parts)
    instance: Any = error.instance
    kind: Any = error.validator
    value: Any = error.validator_value
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}

    if "propertyNames" in error.absolute_schema_path:
        # the key itself breaks the rule (the table form of dependencies.extensions)
        return key_path(path, str(instance)), f"{_shown(instance)} is not a valid name: {_PATTERN_RULES[_NAME_P]}"

    if kind == "type":
        expected = value if isinstance(value, list) else [value]
        words = " or ".join(_TYPE_WORDS.get(str(t), str(t)) for t in expected)
        about = _about(schema)
        message = f"must be {words}, not {_type_name(instance)}"
        return path, f"{message} ({about[0].lower()}{about[1:]})" if about else message
    if kind == "required":
        # one error per missing key, whose message starts with the key's repr
        absent = [str(name) for name in value if isinstance(instance, dict) and name not in instance]
        missing = next((name for name in absent if error.message.startswith(repr(name))), absent[0])
        child = cast(Mapping[str, Any], schema.get("properties", {})).get(missing, {})
        about = _about(child)
        where = key_path(path, missing)
        if isinstance(child, Mapping) and _resolve(child).get("type") == "object":
            return where, f"the [{where}] table is required: {about[0].lower()}{about[1:]}"
        return where, f"is required: {about[0].lower()}{about[1:]}" if about else "is required"
    if kind == "pattern":
        # the version's SemVer pattern has no entry: SemVer.parse reports it with more detail
        rule = _PATTERN_RULES.get(str(value)) or _about(schema)
        return path, f"{_shown(instance)} is not allowed: {rule}"
    if kind == "minLength":
        if value == 1:
            return path, "must not be empty"
        return path, f"{_shown(instance)} is too short: at least {_plural(int(value), 'character')}"
    if kind == "maxLength":
        return path, (
            f"is too long ({_plural(len(instance), 'character')}): at most "
            f"{_plural(int(value), 'character')} are allowed"
        )
    if kind == "maxItems":
        return path, f"has {_plural(len(instance), 'item')}: at most {value} are allowed"
    if kind == "maxProperties":
        return path, f"has {_plural(len(instance), 'key')}: at most {value} are allowed"
    if kind == "minItems":
        return path, f"has {_plural(len(instance), 'item')}: at least {value} are needed"
    if kind == "enum":
        allowed = ", ".join(repr(v) for v in value)
        return path, f"{_shown(instance)} is not allowed: use one of {allowed}"
    if kind == "uniqueItems":
        return path, "lists the same item twice: list each item once"
    return path, f"{error.message} ({_about(schema)})" if _about(schema) else error.message


def _unknown_keys(value: Any, node: Mapping[str, Any], path: str, out: _Collector) -> None:
    """Warn about every key that the schema does not know (without descending into it)."""
    node = _resolve(node)
    if isinstance(value, dict) and "properties" in node:
        properties = cast(Mapping[str, Any], node["properties"])
        patterns = cast(Mapping[str, Any], node.get("patternProperties", {}))
        for key, child in value.items():
            where = key_path(path, key)
            if key in properties:
                _unknown_keys(child, properties[key], where, out)
                continue
            matched = next((p for p in patterns if re.search(p, key)), None)
            if matched is not None:
                _unknown_keys(child, patterns[matched], where, out)
                continue
            known = list(properties)
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            extra = " or any NAME_version" if patterns else ""
            out.warning(
                where,
                f"unknown key {key!r} is ignored (known keys: {', '.join(known)}{extra}){hint}",
            )
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for index, child in enumerate(value):
            _unknown_keys(child, node["items"], key_path(path, index), out)


# --- step 5: what the schema cannot express ---------------------------------------------------------


def _check_license(text: str) -> str | None:
    """Why ``text`` is not an SPDX-looking expression, or None."""
    if _CONTROL_RE.search(text):
        return "it contains a control character"
    tokens = _LICENSE_TOKEN_RE.findall(text)
    if not tokens:
        return "it is empty"
    position = 0

    def expression(depth: int) -> str | None:
        nonlocal position
        while True:
            problem = term(depth)
            if problem:
                return problem
            if position < len(tokens) and tokens[position] in ("AND", "OR"):
                position += 1
                continue
            return None

    def term(depth: int) -> str | None:
        nonlocal position
        if position >= len(tokens):
            return "it ends where a license identifier was expected"
        token = tokens[position]
        if token == "(":  # noqa: S105 (a parenthesis, not a password)
            if depth > 20:
                return "it nests parentheses too deeply"
            position += 1
            problem = expression(depth + 1)
            if problem:
                return problem
            if position >= len(tokens) or tokens[position] != ")":
                return "a '(' is not closed"
            position += 1
            return None
        problem = identifier(token)
        if problem:
            return problem
        position += 1
        if position < len(tokens) and tokens[position] == "WITH":
            position += 1
            if position >= len(tokens):
                return "'WITH' must be followed by an exception identifier"
            problem = identifier(tokens[position])
            if problem:
                return problem
            position += 1
        return None

    def identifier(token: str) -> str | None:
        if token in ("AND", "OR", "WITH", ")"):
            return f"{token!r} is where a license identifier was expected"
        if token.upper() in ("AND", "OR", "WITH"):
            return f"write the operator {token!r} in upper case ({token.upper()!r})"
        if "/" in token and all(_LICENSE_ID_RE.fullmatch(p) for p in token.split("/") if p):
            return f"{token!r} uses '/': write {' OR '.join(p for p in token.split('/') if p)!r}"
        if not _LICENSE_ID_RE.fullmatch(token):
            return f"{token!r} is not a license identifier (letters, digits, '.', '+' and '-')"
        return None

    problem = expression(0)
    if problem:
        return problem
    if position < len(tokens):
        token = tokens[position]
        if token.upper() in ("AND", "OR", "WITH"):
            return f"write the operator {token!r} in upper case ({token.upper()!r})"
        return f"{token!r} follows a complete expression: join identifiers with AND or OR"
    return None


def _check_url(text: str) -> str | None:
    if _CONTROL_RE.search(text) or any(ch.isspace() for ch in text):
        return "it contains spaces or control characters"
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError as exc:
        return f"it does not parse ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        scheme = f"the scheme {parts.scheme + ':'!r} is not allowed" if parts.scheme else "it has no scheme"
        return scheme
    if not host:
        return "it has no host"
    return None


def _check_relative_path(text: str) -> str | None:
    if _CONTROL_RE.search(text):
        return "it contains a control character"
    if "\\" in text:
        return "it contains a backslash (use '/')"
    if text.startswith("/") or re.match(r"[A-Za-z]:", text):
        return "it is absolute"
    if ".." in text.split("/"):
        return "it contains '..'"
    if not text.strip("/. "):
        return "it names no file"
    return None


_WILDCARD_RE = re.compile(r"\*+|\?|\[")


def _check_pattern(text: str, limits: ManifestLimits) -> str | None:
    if "\x00" in text:
        return "it contains a NUL character"
    wildcards = len(_WILDCARD_RE.findall(text))  # a run of stars ('**') is one wildcard
    if wildcards > limits.max_pattern_wildcards:
        return f"it has {wildcards} wildcards ('*', '?', '[...]'); at most {limits.max_pattern_wildcards} are allowed"
    try:
        spec = pathspec.GitIgnoreSpec.from_lines([text])
    except (ValueError, TypeError) as exc:
        return f"it is not a valid gitignore pattern ({exc})"
    if not spec.patterns or spec.patterns[0].include is None:
        return "it matches nothing (a blank line, a '#' comment or an unclosed '[')"
    return None


class _Checker:
    """The semantic checks of step 5; gathers the fields of the Manifest as it goes."""

    def __init__(self, data: dict[str, Any], out: _Collector, limits: ManifestLimits) -> None:
        self.data = data
        self.out = out
        self.limits = limits
        self.fields: dict[str, Any] = {}
        self.reserved_name: str | None = None

    @staticmethod
    def _table(value: Any) -> dict[str, Any]:
        return value if isinstance(value, dict) else {}

    @staticmethod
    def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
        """(path, string) for each string of a list (others are the schema's to report)."""
        if isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    yield key_path(path, index), item

    def run(self) -> None:
        self.extension()
        self.compatibility()
        self.provides()
        self.infer_type()
        self.dependencies()
        self.configuration()
        self.build()

    # [extension] ---------------------------------------------------------------------------------

    def extension(self) -> None:
        table = self._table(self.data.get("extension"))
        out = self.out
        name = table.get("name")
        if isinstance(name, str):
            try:
                self.fields["name"] = validate_name(name, path="extension.name")
            except ReservedNameError as exc:
                self.reserved_name = exc.name
                out.error("extension.name", exc.message)
            except InvalidNameError as exc:
                out.error("extension.name", exc.message)
        version = table.get("version")
        if isinstance(version, str):
            try:
                self.fields["version"] = SemVer.parse(version)
            except VersionError as exc:
                out.error("extension.version", exc.message)
        description = table.get("description")
        if isinstance(description, str):
            if description and not description.strip():
                out.error("extension.description", "must not be blank: write a one-line summary")
            self.fields["description"] = description.strip()
        if isinstance(table.get("type"), str):
            self.fields["type"] = table["type"]

        authors: list[tuple[str, str]] = []  # (path, author)
        if isinstance(table.get("author"), str):
            authors.append(("extension.author", table["author"]))
        authors.extend(self._strings(table.get("authors"), "extension.authors"))
        if "author" in table and "authors" in table:
            out.warning(
                "extension.authors",
                "both 'author' and 'authors' are set: they are merged; use one of them",
            )
        for path, author in authors:
            if author and not author.strip():
                out.error(path, "must not be blank: write a name, e.g. 'Jane Doe <jane@example.com>'")
        self.fields["authors"] = tuple(dict.fromkeys(a.strip() for _, a in authors if a.strip()))

        license_ = table.get("license")
        if isinstance(license_, str):
            problem = _check_license(license_)
            if problem:
                out.error("extension.license", f"{_shown(license_)} is not allowed: {problem}; {_LICENSE_RULE}")
            self.fields["license"] = license_
        for key in ("homepage", "repository"):
            url = table.get(key)
            if isinstance(url, str):
                problem = _check_url(url)
                if problem:
                    out.error(f"extension.{key}", f"{_shown(url)} is not allowed: {problem}; {_URL_RULE}")
                self.fields[key] = url

        keywords = []
        for path, keyword in self._strings(table.get("keywords"), "extension.keywords"):
            if not is_valid_keyword(keyword):
                out.error(path, f"{_shown(keyword)} is not allowed: {KEYWORD_RULE}")
            keywords.append(keyword)
        self.fields["keywords"] = tuple(keywords)
        self.fields["categories"] = tuple(c for _, c in self._strings(table.get("categories"), ""))

        readme = table.get("readme", "README.md")
        if isinstance(readme, str):
            problem = _check_relative_path(readme)
            if problem:
                out.error("extension.readme", f"{_shown(readme)} is not allowed: {problem}; {_README_RULE}")
            self.fields["readme"] = readme

    # [compatibility] -----------------------------------------------------------------------------

    def compatibility(self) -> None:
        table = self._table(self.data.get("compatibility"))
        kept: dict[str, str] = {}
        for key, value in table.items():
            if not (key.endswith("_version") and isinstance(value, str)):
                continue
            path = key_path("compatibility", key)
            try:
                constraint = Constraint.parse(value)
            except ConstraintError as exc:
                self.out.error(path, exc.message)
                continue
            kept[key] = value
            if key == "provisioning_version":
                self.fields["provisioning_version"] = constraint
        self.fields["compatibility"] = kept

    # [provides] ----------------------------------------------------------------------------------

    def provides(self) -> None:
        table = self._table(self.data.get("provides"))
        provided: dict[str, tuple[str, ...]] = {}
        for kind in KINDS:
            names: list[str] = []
            first: dict[str, str] = {}
            for path, name in self._strings(table.get(kind), f"provides.{kind}"):
                try:
                    validate_name(name, path=path, allow_reserved=True)
                except InvalidNameError as exc:
                    self.out.error(path, exc.message)
                    continue
                if name in first:
                    self.out.error(path, f"{name!r} is listed twice (first at {first[name]}): list each name once")
                    continue
                first[name] = path
                names.append(name)
            provided[kind] = tuple(names)
        self.fields["provides"] = provided
        total = sum(len(names) for names in provided.values())
        if total > self.limits.max_provides:
            self.out.error(
                "provides",
                f"names {total} providers, taskservs, clusters and templates: at most {self.limits.max_provides} "
                "are allowed in all; split the extension",
            )

    def infer_type(self) -> None:
        table = self._table(self.data.get("extension"))
        if "type" in table:
            return
        provides = cast(dict[str, tuple[str, ...]], self.fields["provides"])
        # A kind counts when it lists anything, even names refused above (they have their own
        # errors): an invalid provided name must not also read as "[provides] names no kind".
        raw = self.data.get("provides")
        listed = raw if isinstance(raw, dict) else {}
        named = [kind for kind in KINDS if provides.get(kind) or (isinstance(listed.get(kind), list) and listed[kind])]
        if len(named) == 1:
            self.fields["type"] = SINGULAR[named[0]]
            return
        if not isinstance(self.data.get("extension"), dict):
            return  # the schema reports the missing table
        found = "names no kind" if not named else f"names {len(named)} kinds ({', '.join(named)})"
        self.out.error(
            "extension.type",
            f"is required because [provides] {found}: set type to one of 'provider', 'taskserv', "
            "'cluster', 'template' (it may be omitted only when [provides] names exactly one kind)",
        )

    # [dependencies] ------------------------------------------------------------------------------

    def dependencies(self) -> None:
        table = self._table(self.data.get("dependencies"))
        entries: list[tuple[str, str, Constraint]] = []  # (path, name, constraint)
        extensions = table.get("extensions")
        if isinstance(extensions, list):
            for path, text in self._strings(extensions, "dependencies.extensions"):
                try:
                    requirement = parse_requirement(text)
                except ExtensionError as exc:  # InvalidNameError or ConstraintError
                    self.out.error(path, exc.message)
                    continue
                entries.append((path, requirement.name, requirement.constraint))
        elif isinstance(extensions, dict):
            for key, value in extensions.items():
                path = key_path("dependencies.extensions", key)
                if not isinstance(value, str):
                    continue
                try:
                    constraint = Constraint.parse(value)
                except ConstraintError as exc:
                    self.out.error(path, exc.message)
                    continue
                entries.append((path, key, constraint))

        own = self.fields.get("name")
        first: dict[str, str] = {}
        dependencies: list[Dependency] = []
        for path, name, constraint in entries:
            try:
                canonical = validate_name(name, path=path)
            except InvalidNameError as exc:
                self.out.error(path, exc.message)
                continue
            if canonical == own:
                self.out.error(path, f"{name!r} is this extension itself: an extension cannot depend on itself")
                continue
            if canonical in first:
                self.out.error(
                    path,
                    f"{name!r} is listed twice (first at {first[canonical]}): list each extension once, "
                    "joining constraints with ',' (e.g. 'etcd >=3.5, <4')",
                )
                continue
            first[canonical] = path
            dependencies.append(Dependency(canonical, constraint))
        self.fields["dependencies"] = tuple(dependencies)

        packages = []
        for path, package in self._strings(table.get("system_packages"), "dependencies.system_packages"):
            if not _SYSTEM_PACKAGE_RE.fullmatch(package):
                self.out.error(path, f"{_shown(package)} is not allowed: {_SYSTEM_PACKAGE_RULE}")
            packages.append(package)
        self.fields["system_packages"] = tuple(packages)

    # [configuration] and [build] -----------------------------------------------------------------

    def configuration(self) -> None:
        table = self._table(self.data.get("configuration"))
        for key in ("required_env", "optional_env"):
            names = []
            for path, name in self._strings(table.get(key), f"configuration.{key}"):
                if not _ENV_RE.fullmatch(name):
                    self.out.error(path, f"{_shown(name)} is not allowed: {_ENV_RULE}")
                names.append(name)
            self.fields[key] = tuple(names)
        total = len(self.fields["required_env"]) + len(self.fields["optional_env"])
        if total > self.limits.max_env_vars:
            self.out.error(
                "configuration",
                f"names {total} environment variables in required_env and optional_env: at most "
                f"{self.limits.max_env_vars} are allowed in all",
            )

    def build(self) -> None:
        table = self._table(self.data.get("build"))
        for key in ("include", "exclude"):
            patterns = []
            for path, pattern in self._strings(table.get(key), f"build.{key}"):
                if pattern:
                    problem = _check_pattern(pattern, self.limits)
                    if problem:
                        self.out.error(
                            path,
                            f"{_shown(pattern)} is not allowed: {problem}; use a gitignore-style pattern",
                        )
                patterns.append(pattern)
            self.fields[f"build_{key}"] = tuple(patterns)
        total = len(self.fields["build_include"]) + len(self.fields["build_exclude"])
        if total > self.limits.max_build_patterns:
            self.out.error(
                "build",
                f"has {total} patterns in include and exclude: at most {self.limits.max_build_patterns} are allowed "
                "in all (a pattern such as 'kcl/**' covers a whole directory)",
            )


# --- the entry points --------------------------------------------------------------------------------


def _fail(problems: list[Problem]) -> ManifestError:
    errors = [p for p in problems if p.severity == "error"]
    count = len(errors)
    first = str(errors[0]) if errors else ""
    if count == 1:
        message = f"{MANIFEST_FILENAME} has 1 error: {first}"
    else:
        message = f"{MANIFEST_FILENAME} has {count} errors, the first: {first}"
    return ManifestError(message, problems=problems)


def _single(message: str) -> ManifestError:
    return _fail([Problem(MANIFEST_FILENAME, message)])


def _decode(data: str | bytes, max_bytes: int) -> str:
    if isinstance(data, str):
        size = len(data.encode("utf-8", "surrogatepass"))
        text = data
    elif isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        size = len(raw)
        text = ""
    else:
        raise _single(f"must be text or bytes, not {type(data).__name__}")
    if size > max_bytes:
        raise _single(
            f"is {size:,} bytes: at most {max_bytes:,} bytes ({max_bytes / 1024:g} KiB) are allowed; "
            "keep long documentation in the README"
        )
    if not isinstance(data, str):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
            raise _single(
                f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at line {line}, column {column}): "
                "save the file as UTF-8"
            ) from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _single("is not valid UTF-8 (it holds a lone surrogate): save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def _load_toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        match = _TOML_POSITION_RE.search(reason)
        where = "at the end of the file"
        if match:
            reason = reason[: match.start()]
            if match.group(1):
                where = f"at line {match.group(1)}, column {match.group(2)}"
        reason = reason[:1].lower() + reason[1:]
        raise _single(f"is not valid TOML {where}: {reason}; the file must be TOML v1.0.0") from None
    except RecursionError:
        raise _single("cannot be read: its arrays or tables are nested too deeply (keep it flat)") from None
    except ValueError:  # an integer literal longer than Python converts (4300 digits)
        raise _single(
            "cannot be read: it holds a number thousands of digits long; use values of a sensible size"
        ) from None


def parse_manifest(
    data: str | bytes, *, max_bytes: int = MAX_MANIFEST_BYTES, limits: ManifestLimits = DEFAULT_MANIFEST_LIMITS
) -> Manifest:
    """Parse and validate ``extension.toml``; :class:`ManifestError` with every problem otherwise
    (`ReservedManifestNameError`, code ``name_taken``, when the extension's name is reserved)."""
    document = _load_toml(_decode(data, max_bytes))
    out = _Collector()
    for error in _validator(limits).iter_errors(document):
        path, message = _schema_message(error)
        out.error(path, message, schema=True)
    _unknown_keys(document, _schema(), "", out)
    checker = _Checker(document, out, limits)
    checker.run()
    problems = out.problems(_Order(document))
    if out.has_error():
        failure = _fail(problems)
        if checker.reserved_name is not None:
            name = checker.reserved_name
            raise ReservedManifestNameError(
                f"{name!r} is a reserved name and cannot be used for an extension; the reserved names are "
                f"{', '.join(sorted(RESERVED_NAMES))}",
                name=name,
                problems=problems,
            )
        raise failure
    fields = checker.fields
    return Manifest(
        name=fields["name"],
        version=fields["version"],
        description=fields["description"],
        type=fields["type"],
        authors=fields["authors"],
        license=fields.get("license"),
        homepage=fields.get("homepage"),
        repository=fields.get("repository"),
        keywords=fields["keywords"],
        categories=fields["categories"],
        readme=fields["readme"],
        provisioning_version=fields.get("provisioning_version"),
        compatibility=fields["compatibility"],
        provides=fields["provides"],
        dependencies=fields["dependencies"],
        system_packages=fields["system_packages"],
        required_env=fields["required_env"],
        optional_env=fields["optional_env"],
        build_include=fields["build_include"],
        build_exclude=fields["build_exclude"],
        warnings=tuple(problems),
    )


def load_manifest(
    path: Path, *, max_bytes: int = MAX_MANIFEST_BYTES, limits: ManifestLimits = DEFAULT_MANIFEST_LIMITS
) -> Manifest:
    """Parse the ``extension.toml`` at ``path``, or in the directory ``path``.

    Reads at most ``max_bytes + 1`` bytes, so a huge file is refused without reading it whole.
    """
    path = Path(path)
    file = path / MANIFEST_FILENAME if path.is_dir() else path
    try:
        with file.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise _single(f"not found at {file}: an extension's directory must hold {MANIFEST_FILENAME}") from None
    except OSError as exc:
        raise _single(f"cannot be read from {file}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        size = file.stat().st_size
        raise _single(
            f"is {size:,} bytes: at most {max_bytes:,} bytes ({max_bytes / 1024:g} KiB) are allowed; "
            "keep long documentation in the README"
        )
    return parse_manifest(data, max_bytes=max_bytes, limits=limits)


def check_manifest(
    data: str | bytes, *, max_bytes: int = MAX_MANIFEST_BYTES, limits: ManifestLimits = DEFAULT_MANIFEST_LIMITS
) -> tuple[Manifest | None, list[Problem]]:
    """Like :func:`parse_manifest`, but returns ``(manifest or None, problems)`` instead of raising."""
    try:
        manifest = parse_manifest(data, max_bytes=max_bytes, limits=limits)
    except ManifestError as exc:
        return None, exc.problems
    return manifest, list(manifest.warnings)
