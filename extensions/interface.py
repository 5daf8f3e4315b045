"""The configuration interface of an extension, read from its KCL schemas (issue 14).

For every ``schema`` (and ``mixin`` and ``protocol``) in the package's ``.k`` files: its name,
docstring, parent schema, mixins, index signature, its attributes (name, type, optional or not,
default, docstring, decorators) and its ``check:`` rules (the rule, its message, its ``if``
condition). Types, defaults and rules are shown as their author wrote them, on one line.

KCL files are author content, so this runs in the build sandbox (`extensions.sandboxed_steps`),
once per package at build time; the result is stored on the version and never computed on a
request. The parser is KCL's own (``kcl_lib``'s ``ParseFile``: the syntax tree only, no import
resolution, no evaluation), called in the sandboxed process, one file at a time, each file a
sandbox step with its own CPU budget. What goes in and what comes out is bounded
(`InterfaceLimits`):

- a file larger than ``max_file_bytes``, past ``max_source_bytes`` read in all, or past
  ``max_files``, is not read; a file that is not UTF-8, or nests brackets deeper than
  ``max_nesting`` (KCL's parser slows down quadratically with depth and overflows its stack near
  10,000), or whose syntax tree is over `MAX_AST_BYTES`, is not read either;
- at most ``max_schemas`` schemas and ``max_fields`` attributes and ``max_checks`` rules in all;
  docstrings cut at ``max_text`` characters, types, defaults, rules and names at
  ``max_expression``; the whole interface, as JSON, at most ``max_bytes`` (schemas past it are
  left out);

and whatever was left out is said in ``warnings`` (at most `MAX_WARNINGS`) with ``truncated``
set: a package whose interface is too large is published with a truncated interface, never
refused for it. (A file that makes the parser itself go past the sandbox's CPU or memory limit
fails the build, as every sandboxed step does; KCL's compile check, which runs first, refuses
such files already.)

`extract_interface` returns a JSON-able document (`FORMAT` 1)::

    {"format": 1, "parser": "kcl-lib 0.13.2", "files": ["kcl/aws.k"], "truncated": false,
     "warnings": [], "schemas": [{"name", "kind", "file", "line", "doc", "parent", "mixins",
     "protocol", "index_signature", "fields": [{"name", "type", "optional", "required",
     "default", "doc", "decorators", "line"}], "checks": [{"rule", "message", "condition",
     "line"}]}]}

``required`` is what a user must set: not optional and without a default.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "InterfaceLimits",
    "clean_text",
    "extract_interface",
    "interface_files",
    "interface_from_dict",
    "nesting_depth",
    "parse_docstring",
    "summary",
]

FORMAT = 1
MAX_WARNINGS = 20
MAX_DECORATORS = 4  # per attribute
MAX_MIXINS = 16  # per schema
MAX_AST_BYTES = 16 * 1024 * 1024  # KCL's syntax tree of one file, as JSON (about 20 times the source)
#: Where an extension's tests and examples live (SPEC 2.1): their `.k` files are programs, not its interface.
_NOT_INTERFACE = ("tests", "examples")
_SKIP_DIRS = {".git", "__pycache__", "node_modules", "dist", ".venv"}
_KINDS = {(False, False): "schema", (True, False): "mixin", (False, True): "protocol"}
# C0 and C1 controls but tab and newline, and the bidirectional overrides and isolates that could
# make shown text read differently from what it is (PostgreSQL refuses NUL in text, too).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SPACES = re.compile(r"\s+")
_DASHES = re.compile(r"^\s*-{3,}\s*$")
_STRING_PREFIX = re.compile(r"^[rRbB]*")


@dataclass(frozen=True)
class InterfaceLimits:
    """What one package's interface may cost (the registry builds these from REGISTRY_INTERFACE_*)."""

    max_files: int = 200  # .k files read
    max_file_bytes: int = 256 * 1024  # one .k file
    max_source_bytes: int = 4 * 1024 * 1024  # .k files read, in all
    max_nesting: int = 64  # brackets within brackets, in one file
    max_schemas: int = 500
    max_fields: int = 5000  # attributes, in all schemas
    max_checks: int = 2000  # check: rules, in all schemas
    max_text: int = 4000  # characters of a docstring
    max_expression: int = 300  # characters of a name, type, default, rule or message
    max_bytes: int = 1024 * 1024  # the interface as JSON

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InterfaceLimits:
        return cls(**{k: int(v) for k, v in data.items() if k in cls.__dataclass_fields__})


def clean_text(text: str, limit: int) -> str:
    """``text`` fit to show and store: no control characters but tab and newline (nor NUL, nor
    bidirectional overrides), no lone surrogates, at most ``limit`` characters (cut ones end in …)."""
    if len(text) > limit * 4 + 16:
        text = text[: limit * 4 + 16]  # enough to clean, whatever the controls removed
    text = _CONTROLS.sub("", text).encode("utf-8", "replace").decode("utf-8")
    if len(text) > limit:
        text = text[: max(0, limit - 1)].rstrip() + "…"
    return text


def _one_line(text: str, limit: int) -> str:
    """An expression as written, on one line (whitespace runs, newlines included, as one space)."""
    return clean_text(_SPACES.sub(" ", text[: limit * 4 + 16]).strip(), limit)


def nesting_depth(text: str, stop_at: int) -> int:
    """How deep brackets (``(``, ``[``, ``{``) nest in ``text``, in one linear pass; counting stops
    past ``stop_at``. Brackets in strings and comments count too (KCL interpolates expressions in
    strings), so this may overstate the depth of odd text, never understate it."""
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_at:
                    return deepest
        elif char in ")]}" and depth:
            depth -= 1
    return deepest


def interface_files(root: Path) -> Iterator[tuple[str, Path]]:
    """The package's `.k` files that may declare its interface, as (relative path, path), sorted:
    every one but those under ``tests/`` and ``examples/`` and KCL test files (``*_test.k``)."""
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        top = here == root
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not (top and d in _NOT_INTERFACE))
        for filename in sorted(filenames):
            path = here / filename
            wanted = filename.endswith(".k") and not filename.endswith("_test.k")
            if wanted and not path.is_symlink() and path.is_file():
                yield path.relative_to(root).as_posix(), path


# --- docstrings -----------------------------------------------------------------------------------


def _docstring_text(raw: str) -> str:
    """A docstring node's source (``\"\"\"...\"\"\"``) as its text: quotes gone, indentation removed."""
    text = _STRING_PREFIX.sub("", raw.strip())
    for quote in ('"""', "'''", '"', "'"):
        if text.startswith(quote) and text.endswith(quote) and len(text) >= 2 * len(quote):
            text = text[len(quote) : -len(quote)]
            break
    return _cleandoc(text)


def _cleandoc(text: str) -> str:
    """`inspect.cleandoc`: the first line stripped, the common indentation of the others removed."""
    lines = text.expandtabs(4).split("\n")
    rest = [line for line in lines[1:] if line.strip()]
    margin = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    cleaned = [lines[0].strip(), *(line[margin:].rstrip() for line in lines[1:])]
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    while cleaned and not cleaned[0]:
        cleaned.pop(0)
    return "\n".join(cleaned)


def parse_docstring(text: str) -> tuple[str, dict[str, str]]:
    """A schema docstring in KCL's convention (numpydoc: an ``Attributes`` section, underlined
    with dashes, listing ``name : type, ...`` each followed by its indented description) as the
    schema's own text (every other section kept) and each attribute's description. Linear."""
    lines = text.split("\n")
    kept: list[str] = []
    attributes: dict[str, list[str]] = {}
    in_attributes = False
    current: list[str] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _DASHES.match(lines[i + 1]):
            in_attributes = line.strip().lower() in ("attributes", "attrs", "arguments", "args")
            if in_attributes:
                current = None
                i += 2
                continue
        if not in_attributes:
            kept.append(line)
        elif line.strip() and not line[:1].isspace():
            name = line.split(":", 1)[0].strip()
            current = attributes.setdefault(name, []) if name else None
        elif current is not None and line.strip():
            current.append(line.strip())
        i += 1
    own = "\n".join(kept).strip()
    return own, {name: " ".join(words) for name, words in attributes.items() if words}


# --- the syntax tree ------------------------------------------------------------------------------


class _Source:
    """One file's text, to slice by the spans of KCL's syntax tree (lines from 1, columns in
    characters from 0)."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def span(self, node: Mapping[str, Any] | None, limit: int) -> str | None:
        if not isinstance(node, Mapping):
            return None
        try:
            line, column = int(node["line"]), int(node["column"])
            end_line, end_column = int(node["end_line"]), int(node["end_column"])
        except (KeyError, TypeError, ValueError):
            return None
        if not (1 <= line <= end_line <= len(self.lines)):
            return None
        if line == end_line:
            text = self.lines[line - 1][column:end_column]
        else:
            # A long span: only what can be shown is gathered.
            parts = [self.lines[line - 1][column:]]
            size = len(parts[0])
            for number in range(line + 1, end_line):
                if size > limit * 4:
                    break
                parts.append(self.lines[number - 1])
                size += len(parts[-1])
            else:
                parts.append(self.lines[end_line - 1][:end_column])
            text = "\n".join(parts)
        return _one_line(text, limit) or None


def _node(value: Any) -> Mapping[str, Any]:
    """The ``node`` of a syntax tree item (``{"node": ..., "line": ...}``), or an empty mapping."""
    if isinstance(value, Mapping):
        inner = value.get("node")
        if isinstance(inner, Mapping):
            return inner
    return {}


def _name(value: Any) -> str:
    """An identifier node (``{"names": [{"node": "base"}, {"node": "Foo"}]}``) as ``base.Foo``."""
    names = _node(value).get("names")
    if not isinstance(names, list):
        return ""
    return ".".join(str(n.get("node", "")) for n in names if isinstance(n, Mapping))


@dataclass
class _Budget:
    """What is left of the limits as the schemas are gathered."""

    limits: InterfaceLimits
    schemas: int = 0
    fields: int = 0
    checks: int = 0
    size: int = 0
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    said: set[str] = field(default_factory=set)

    def take(self, kind: str, what: str) -> bool:
        """Count one more attribute (``kind`` ``fields``) or rule (``checks``); False, once
        truncated and said, past its limit."""
        limit = getattr(self.limits, f"max_{kind}")
        if getattr(self, kind) >= limit:
            self.truncated = True
            self.warn(f"only the first {limit} {what} are shown (the limit in all schemas)", once=kind)
            return False
        setattr(self, kind, getattr(self, kind) + 1)
        return True

    def warn(self, message: str, *, once: str = "") -> None:
        if once:
            if once in self.said:
                return
            self.said.add(once)
        self.warnings.append(message)


class _Reader:
    """Builds the schemas of one file from its syntax tree, within the budget."""

    def __init__(self, path: str, source: _Source, comments: Mapping[int, str], budget: _Budget) -> None:
        self.path = path
        self.source = source
        self.comments = comments
        self.budget = budget
        self.limits = budget.limits

    def text(self, value: str) -> str:
        if len(value) > self.limits.max_text:
            self.budget.warn(f"docstrings longer than {self.limits.max_text} characters are cut", once="docstring")
        return clean_text(value, self.limits.max_text)

    def expression(self, node: Any) -> str | None:
        return self.source.span(node if isinstance(node, Mapping) else None, self.limits.max_expression)

    def schema(self, item: Mapping[str, Any]) -> dict[str, Any] | None:
        node = _node(item)
        name = clean_text(str(_node_text(node.get("name"))), self.limits.max_expression)
        if not name:
            return None
        raw_doc = _node_text(node.get("doc"))
        own_doc, attribute_docs = parse_docstring(_docstring_text(raw_doc)) if raw_doc else ("", {})
        kind = _KINDS.get((bool(node.get("is_mixin")), bool(node.get("is_protocol"))), "schema")
        mixins = [m for m in (_name(x) for x in (node.get("mixins") or [])[:MAX_MIXINS]) if m]
        return {
            "name": name,
            "kind": kind,
            "file": self.path,
            "line": _line(item),
            "doc": self.text(own_doc),
            "parent": clean_text(_name(node.get("parent_name")), self.limits.max_expression) or None,
            "mixins": [clean_text(m, self.limits.max_expression) for m in mixins],
            "protocol": clean_text(_name(node.get("for_host_name")), self.limits.max_expression) or None,
            "index_signature": self.expression(node.get("index_signature")),
            "fields": self.fields(node.get("body") or [], attribute_docs),
            "checks": self.checks(node.get("checks") or []),
        }

    def fields(self, body: list[Any], docs: Mapping[str, str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for item in body:
            node = _node(item)
            if node.get("type") != "SchemaAttr":
                continue
            if not self.budget.take("fields", "attributes"):
                break
            name = clean_text(str(_node_text(node.get("name"))), self.limits.max_expression)
            optional = bool(node.get("is_optional"))
            value = node.get("value")
            default = self.expression(value) if value is not None and node.get("op") else None
            doc = docs.get(name) or self.comments.get(int(_end_line(item)), "")
            decorators = [d for d in (self.expression(x) for x in (node.get("decorators") or [])[:MAX_DECORATORS]) if d]
            found.append(
                {
                    "name": name,
                    "type": self.expression(node.get("ty")),
                    "optional": optional,
                    "required": not optional and default is None,
                    "default": default,
                    "doc": self.text(doc),
                    "decorators": decorators,
                    "line": _line(item),
                }
            )
        return found

    def checks(self, items: list[Any]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for item in items:
            if not self.budget.take("checks", "check rules"):
                break
            node = _node(item)
            message_node = node.get("msg")
            message = _node(message_node)
            if message.get("type") == "StringLit" and isinstance(message.get("value"), str):
                text: str | None = _one_line(message["value"], self.limits.max_expression)
            else:
                text = self.expression(message_node)
            found.append(
                {
                    "rule": self.expression(node.get("test")) or "",
                    "message": text or None,
                    "condition": self.expression(node.get("if_cond")),
                    "line": _line(item),
                }
            )
        return found


def _node_text(value: Any) -> str:
    """A node whose ``node`` is a string (names, docstrings)."""
    if isinstance(value, Mapping) and isinstance(value.get("node"), str):
        return str(value["node"])
    return ""


def _line(item: Any) -> int:
    value = item.get("line") if isinstance(item, Mapping) else None
    return value if isinstance(value, int) else 0


def _end_line(item: Any) -> int:
    value = item.get("end_line") if isinstance(item, Mapping) else None
    line = _line(item)
    # A span that ends at column 0 of the next line (KCL's way with attributes) ends on the line before.
    if isinstance(value, int) and isinstance(item, Mapping) and item.get("end_column") == 0 and value > line:
        return value - 1
    return value if isinstance(value, int) else line


def _trailing_comments(tree: Mapping[str, Any], source: _Source, limit: int) -> dict[int, str]:
    """Comments that end a line with code before them (``port: int = 22  # the SSH port``), by line."""
    found: dict[int, str] = {}
    for item in tree.get("comments") or []:
        text = _node(item).get("text")
        if not isinstance(text, str) or not isinstance(item, Mapping):
            continue
        line, column = item.get("line"), item.get("column")
        if not isinstance(line, int) or not isinstance(column, int) or not 1 <= line <= len(source.lines):
            continue
        if source.lines[line - 1][:column].strip():
            found[line] = clean_text(text.lstrip("#").strip(), limit)
    return found


# --- one file, then the package -------------------------------------------------------------------

Parse = Callable[[str, str], tuple[str, int]]


def _kcl_parse(path: str, text: str) -> tuple[str, int]:
    """KCL's parser (kcl_lib ParseFile: syntax only): the syntax tree as JSON and how many syntax
    errors it reported (the tree is still built, with the broken parts missing)."""
    from kcl_lib.api import API, ParseFileArgs

    result = API().parse_file(ParseFileArgs(path=path, source=text))
    errors = sum(1 for e in result.errors if e.level == "error" and "InvalidSyntax" in e.code)
    return result.ast_json, errors


def kcl_parser_version() -> str | None:
    """``kcl-lib VERSION`` when KCL's parser can be used here, else None."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.util.find_spec("kcl_lib") is None:
            return None
        return f"kcl-lib {importlib.metadata.version('kcl-lib')}"
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return None


def _read_file(rel: str, path: Path, budget: _Budget) -> str | None:
    limits = budget.limits
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        budget.warn(f"{rel}: not read: larger than {limits.max_file_bytes} bytes")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        budget.warn(f"{rel}: not read: not UTF-8 (byte {exc.start})")
        return None
    depth = nesting_depth(text, limits.max_nesting)
    if depth > limits.max_nesting:
        budget.warn(f"{rel}: not read: brackets nest deeper than {limits.max_nesting} levels")
        return None
    return text


def extract_interface(
    root: Path,
    *,
    limits: InterfaceLimits | None = None,
    on_file: Callable[[str], None] | None = None,
    parse: Parse | None = None,
) -> dict[str, Any]:
    """The interface of the package extracted at ``root`` (see the module). ``on_file(path)`` is
    called before each file is parsed (the sandbox gives each its CPU budget that way). ``parse``
    is KCL's parser unless given; without kcl-lib the `.k` files are listed, not read, and a
    warning says why."""
    limits = limits or InterfaceLimits()
    budget = _Budget(limits)
    parser = "custom" if parse is not None else kcl_parser_version()
    files: list[str] = []
    schemas: list[dict[str, Any]] = []
    candidates = interface_files(Path(root))
    if parser is None:
        unread = [rel for rel, _ in candidates]
        if unread:
            budget.truncated = True
            budget.warn(f"{len(unread)} KCL file(s) not read: KCL (kcl-lib) is not installed on the registry")
        return _document(parser, files, schemas, budget)
    parse = parse or _kcl_parse
    read = 0
    for rel, path in candidates:
        if len(files) >= limits.max_files:
            budget.truncated = True
            budget.warn(f"only the first {limits.max_files} KCL files are read", once="files")
            break
        full = budget.schemas >= limits.max_schemas or budget.fields >= limits.max_fields
        if full or budget.size >= limits.max_bytes:
            budget.truncated = True
            break  # the warning was given when the limit was reached
        size = path.stat().st_size
        if read + min(size, limits.max_file_bytes + 1) > limits.max_source_bytes:
            budget.truncated = True
            budget.warn(f"KCL files past {limits.max_source_bytes} bytes in all are not read", once="source")
            break
        read += min(size, limits.max_file_bytes + 1)
        if on_file is not None:
            on_file(rel)
        text = _read_file(rel, path, budget)
        if text is None:
            budget.truncated = True
            continue
        files.append(rel)
        schemas.extend(_file_schemas(rel, text, parse, budget))
    return _document(parser, files, schemas, budget)


def _file_schemas(rel: str, text: str, parse: Parse, budget: _Budget) -> list[dict[str, Any]]:
    limits = budget.limits
    ast_json, errors = parse(rel, text)
    if len(ast_json) > MAX_AST_BYTES:
        budget.truncated = True
        budget.warn(f"{rel}: not read: its syntax tree is over {MAX_AST_BYTES // (1024 * 1024)} MiB")
        return []
    try:
        tree = json.loads(ast_json)
    except RecursionError:
        budget.truncated = True
        budget.warn(f"{rel}: not read: nested too deeply")
        return []
    del ast_json
    if not isinstance(tree, Mapping):
        return []
    if errors:
        budget.warn(f"{rel}: KCL reported {errors} syntax error(s); what they affect is missing")
    source = _Source(text)
    reader = _Reader(rel, source, _trailing_comments(tree, source, limits.max_text), budget)
    found: list[dict[str, Any]] = []
    for item in tree.get("body") or []:
        if _node(item).get("type") != "Schema":
            continue
        if budget.schemas >= limits.max_schemas:
            budget.truncated = True
            budget.warn(f"only the first {limits.max_schemas} schemas are shown", once="schemas")
            break
        schema = reader.schema(item)
        if schema is None:
            continue
        size = len(json.dumps(schema, ensure_ascii=False)) + 1
        if budget.size + size > limits.max_bytes:
            budget.truncated = True
            budget.size = limits.max_bytes
            budget.warn(
                f"schemas past {limits.max_bytes} bytes of interface are left out (from {rel} {schema['name']} on)",
                once="bytes",
            )
            break
        budget.size += size
        budget.schemas += 1
        found.append(schema)
    return found


def _document(parser: str | None, files: list[str], schemas: list[dict[str, Any]], budget: _Budget) -> dict[str, Any]:
    warnings = budget.warnings
    if len(warnings) > MAX_WARNINGS:
        warnings = [*warnings[: MAX_WARNINGS - 1], f"... and {len(warnings) - MAX_WARNINGS + 1} more warnings"]
    return {
        "format": FORMAT,
        "parser": parser,
        "files": files,
        "truncated": budget.truncated,
        "warnings": [clean_text(w, 500) for w in warnings],
        "schemas": schemas,
    }


def summary(interface: Mapping[str, Any]) -> str:
    """One line for the build log: ``3 schemas (24 attributes, 9 check rules) from 1 KCL file``."""
    schemas = interface.get("schemas") or []
    fields = sum(len(s.get("fields") or []) for s in schemas)
    checks = sum(len(s.get("checks") or []) for s in schemas)
    files = len(interface.get("files") or [])
    line = (
        f"{len(schemas)} schema{'s' * (len(schemas) != 1)} ({fields} attribute{'s' * (fields != 1)}, "
        f"{checks} check rule{'s' * (checks != 1)}) from {files} KCL file{'s' * (files != 1)}"
    )
    if interface.get("truncated"):
        line += " (truncated)"
    warnings = interface.get("warnings") or []
    if warnings:
        line += "; " + "; ".join(str(w) for w in warnings)
    return line


# --- in the caller ---------------------------------------------------------------------------------

_SCHEMA_TEXT = ("name", "kind", "file", "doc")
_SCHEMA_OPTIONAL_TEXT = ("parent", "protocol", "index_signature")
_FIELD_OPTIONAL_TEXT = ("type", "default")


def interface_from_dict(data: Any, *, limits: InterfaceLimits | None = None) -> dict[str, Any]:
    """The interface `extract_interface` sent back from the sandbox, rebuilt key by key with the
    types documented above and every string cleaned again (``ValueError`` if it is malformed or
    larger than ``limits.max_bytes`` allows), so what is stored is what this module promises
    whatever happened in the sandbox."""
    limits = limits or InterfaceLimits()
    text_limit = max(limits.max_text, limits.max_expression) + 1

    def text(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"malformed interface from the sandbox: {type(value).__name__} for text")
        return clean_text(value, text_limit)

    def optional(value: Any) -> str | None:
        return None if value is None else text(value)

    def number(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("malformed interface from the sandbox: a line is not an integer")
        return value

    def items(value: Any, bound: int) -> list[Any]:
        if not isinstance(value, list) or len(value) > bound:
            raise ValueError("malformed interface from the sandbox: a list is missing or too long")
        return value

    try:
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError("malformed interface from the sandbox: not a format-1 document")
        schemas = []
        for schema in items(data.get("schemas"), limits.max_schemas):
            fields = [
                {
                    "name": text(f["name"]),
                    **{key: optional(f[key]) for key in _FIELD_OPTIONAL_TEXT},
                    "optional": bool(f["optional"]),
                    "required": bool(f["required"]),
                    "doc": text(f["doc"]),
                    "decorators": [text(d) for d in items(f["decorators"], MAX_DECORATORS)],
                    "line": number(f["line"]),
                }
                for f in items(schema["fields"], limits.max_fields)
            ]
            checks = [
                {
                    "rule": text(c["rule"]),
                    "message": optional(c["message"]),
                    "condition": optional(c["condition"]),
                    "line": number(c["line"]),
                }
                for c in items(schema["checks"], limits.max_checks)
            ]
            schemas.append(
                {
                    **{key: text(schema[key]) for key in _SCHEMA_TEXT},
                    "line": number(schema["line"]),
                    **{key: optional(schema[key]) for key in _SCHEMA_OPTIONAL_TEXT},
                    "mixins": [text(m) for m in items(schema["mixins"], MAX_MIXINS)],
                    "fields": fields,
                    "checks": checks,
                }
            )
        document = {
            "format": FORMAT,
            "parser": optional(data.get("parser")),
            "files": [text(f) for f in items(data.get("files"), limits.max_files)],
            "truncated": bool(data.get("truncated")),
            "warnings": [text(w) for w in items(data.get("warnings"), MAX_WARNINGS)],
            "schemas": schemas,
        }
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed interface from the sandbox: {exc!r}") from None
    size = len(json.dumps(document, ensure_ascii=False))
    if size > limits.max_bytes + 64 * 1024:  # the schemas are bounded; the rest is small
        raise ValueError(f"interface from the sandbox is {size} bytes; at most {limits.max_bytes}")
    return document
