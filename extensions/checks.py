"""Content checks of an extension tree (SPEC 3.3 step 4) and the extension's own tests.

Every `.toml` and `.json` file must parse, every Jinja2 `.j2` template must parse and compile, `.k`
files must compile with KCL and `.nu` files must parse with Nushell, where those tools are
installed. A check that cannot run is reported as ``skipped`` with the reason, never as passed.

Nothing here executes the extension's code except :func:`run_extension_tests`, which runs the
author's own ``tests/*.nu`` (the client does that on the author's machine; the registry never
does). Nushell files are parsed with ``nu --ide-check``, which reports diagnostics without
evaluating ``export-env`` blocks; KCL compiles in a child process with a time limit.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Literal, cast

from extensions.sandbox import CPU_LIMIT_SIGNALS

Status = Literal["passed", "failed", "skipped"]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SKIP_DIRS = {".git", "__pycache__", "node_modules", "dist", ".venv"}
_TOOL_TIMEOUT = 60.0
_TEST_TIMEOUT = 300.0
_MAX_LINE = 400  # a condensed one-line tool message
# Box drawing (U+2500-U+257F) and miette's ASCII frame pieces at the start of a frame line.
_BOX = re.compile(r"[\u2500-\u257f]+")


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one file (or directory)."""

    check: str
    path: str
    status: Status
    message: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "path": self.path,
            "status": self.status,
            "message": self.message,
            "seconds": round(self.seconds, 4),
        }


@dataclass
class CheckReport:
    """All results of a run; ``ok`` means nothing failed (skipped checks are not passes)."""

    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(r.status == "failed" for r in self.results)

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "failed"]

    def counts(self) -> dict[str, int]:
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        for result in self.results:
            counts[result.status] += 1
        return counts

    def extend(self, other: CheckReport) -> None:
        self.results.extend(other.results)

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "counts": self.counts(), "results": [r.as_dict() for r in self.results]}


def find_nu() -> str | None:
    """The Nushell binary: ``$PROVISIONING_NU``, then ``nu`` on PATH, then the repository's tools."""
    configured = os.environ.get("PROVISIONING_NU")
    if configured:
        return configured if Path(configured).is_file() and os.access(configured, os.X_OK) else None
    found = shutil.which("nu")
    if found:
        return found
    bundled = Path(__file__).resolve().parent.parent / ".tools" / "bin" / "nu"
    return str(bundled) if bundled.is_file() and os.access(bundled, os.X_OK) else None


def kcl_available() -> bool:
    """Whether the KCL library (``kcl-lib``) is installed for this interpreter (found, not imported:
    KCL compiles in a child process of its own)."""
    import importlib.util

    try:
        return importlib.util.find_spec("kcl_lib") is not None  # the package, without importing it
    except (ImportError, ValueError):
        return False


def _one_line(text: str, limit: int = _MAX_LINE) -> str:
    """Text on one line: ANSI codes and box-drawing characters gone, whitespace collapsed, bounded."""
    text = _BOX.sub(" ", _ANSI.sub("", text))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _root_left_out(output: str, root: Path | None) -> str:
    """A tool's output with the extension root's absolute path left out wherever it names it (a
    message the tools' patterns do not know: "Failed to load KCL file '/abs/kcl/x.k'"), so that
    its paths are the extension's and the server's directories are never shown."""
    if root is None:
        return output
    for prefix in {f"{root}{os.sep}", f"{root.resolve()}{os.sep}"}:
        output = output.replace(prefix, "")
    return output


def _shown_path(path: str, root: Path | None) -> str:
    """A tool's (absolute) path relative to the extension root when it is inside it."""
    if root is not None:
        try:
            return Path(path).resolve().relative_to(root).as_posix()
        except (ValueError, OSError):
            pass
    return path


# KCL diagnostics (colour codes stripped):
#   error[E2G22]: TypeError            (or just "EvaluationError")
#    --> /abs/kcl/x.k:5:5
#     |
#   5 |     cpus = "x"
#     |     ^ expected int, got str(x)
#     |
# and more "-->" blocks for other locations of the same error, "suggestion: ..." lines, and the
# same error again for each file that saw it.
_KCL_HEADER = re.compile(r"^(?:error\[(?P<code>\w+)\]:\s*)?(?P<kind>[A-Z]\w*)\s*$")
_KCL_LOCATION = re.compile(r"^\s*-->\s*(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?\s*$")
_KCL_LABEL = re.compile(r"^\s*\|(?P<text>.*)$")


def kcl_summary(output: str, *, root: Path | None = None) -> str:
    """KCL's error output as one informative line: ``kcl/x.k:5:5: TypeError: expected int, got str(x)``,
    other locations of the first error after ``;``, and how many other errors there were."""
    errors: list[tuple[str, list[tuple[str, str]]]] = []  # (kind, [(location, label)])
    output = _root_left_out(output, root)
    for raw in _ANSI.sub("", output).splitlines():
        line = raw.rstrip()
        header = _KCL_HEADER.match(line)
        if header and not line.startswith(" "):
            errors.append((header.group("kind"), []))
            continue
        location = _KCL_LOCATION.match(line)
        if location:
            if not errors:
                errors.append(("error", []))
            where = f"{_shown_path(location.group('path'), root)}:{location.group('line')}"
            if location.group("col"):
                where += f":{location.group('col')}"
            errors[-1][1].append((where, ""))
            continue
        label = _KCL_LABEL.match(line)
        if label and errors and errors[-1][1]:
            text = label.group("text").strip().lstrip("^").strip()
            where, said = errors[-1][1][-1]
            if text and not said:
                errors[-1][1][-1] = (where, text)
    distinct = list(dict.fromkeys((kind, tuple(places)) for kind, places in errors if places))
    if not distinct:
        return _one_line(output) or "KCL failed without a message"
    kind, places = distinct[0]
    (where, said), *others = places
    text = f"{where}: {kind}: {said}" if said else f"{where}: {kind}"
    extra = [f"{w}: {t}" if t else w for w, t in others]
    if extra:
        text += "; " + "; ".join(extra)
    if len(distinct) > 1:
        text += f" (and {len(distinct) - 1} more error{'s' if len(distinct) > 2 else ''})"
    return _one_line(text)


# Nushell (miette) reports, plain or with box drawing:
#   Error: nu::shell::error
#
#     x Assertion failed.                       (x, or U+00D7 with colours)
#      ,-[/abs/tests/test_bad.nu:3:14]           (,-[ or ╭─[)
#    3 | assert equal (double 2) 5
#      :              ^^^^^^|^^^^^               (: or ·/│)
#      :                    `-| These are not equal.
#      :                      |         Left  : '4'
#      `----
#     help: ...
_NU_HEADLINE = re.compile(r"^\s*[x\u00d7]\s+(?P<text>\S.*)$")
_NU_LOCATION = re.compile(r"[,╭]\s*[-─]+\s*\[(?P<path>.+?):(?P<line>\d+):(?P<col>\d+)\]")
_NU_SOURCE = re.compile(r"^\s*\d+\s*[|│]")
_NU_GUTTER = re.compile(r"^\s*[:·│|]\s?(?P<text>.*)$")
_NU_HELP = re.compile(r"^\s*help:\s*(?P<text>.*)$")
_LABEL_LEAD = " ^|`-─│╰╭┬├┴┼·"


def nushell_summary(output: str, *, root: Path | None = None) -> str:
    """Nushell's error report as one line: ``tests/t.nu:3:14: Assertion failed.: These are not equal.
    Left : '4' Right : '5'`` (location, headline, labels and help; box drawing gone; bounded)."""
    headline = ""
    where = ""
    labels: list[str] = []
    output = _root_left_out(output, root)
    for raw in _ANSI.sub("", output).splitlines():
        line = raw.rstrip()
        if not headline:
            found = _NU_HEADLINE.match(line)
            if found:
                headline = found.group("text").strip()
            continue
        if not where:
            location = _NU_LOCATION.search(line)
            if location:
                path = _shown_path(location.group("path"), root)
                where = f"{path}:{location.group('line')}:{location.group('col')}"
                continue
        if _NU_HEADLINE.match(line) and labels:
            break  # a second error: the first one is enough
        if _NU_SOURCE.match(line):
            continue
        helped = _NU_HELP.match(line)
        if helped:
            labels.append(f"help: {helped.group('text').strip()}")
            continue
        gutter = _NU_GUTTER.match(line)
        if gutter:
            text = gutter.group("text").strip().lstrip(_LABEL_LEAD).strip()
            if text:
                labels.append(text)
    if not headline:
        return _one_line(output)
    text = headline
    if labels:
        text += (" " if headline[-1] in ".!?:" else ": ") + " ".join(labels)
    return _one_line(f"{where}: {text}" if where else text)


_NU_ERROR_START = re.compile(r"^Error:\s+(?P<code>\S+)")


def nushell_errors(output: str, *, root: Path | None = None) -> list[tuple[str, str]]:
    """Every error of a Nushell report, as ``(code, one line)`` (see :func:`nushell_summary`), in
    order, duplicates left out."""
    blocks: list[tuple[str, list[str]]] = []
    for raw in _ANSI.sub("", output).splitlines():
        started = _NU_ERROR_START.match(raw)
        if started:
            blocks.append((started.group("code"), []))
        if blocks:
            blocks[-1][1].append(raw)
    found: dict[str, str] = {}
    for code, lines in blocks:
        text = nushell_summary("\n".join(lines), root=root)
        if text:
            found.setdefault(text, code)
    return [(code, text) for text, code in found.items()]


def _nu_raw_string(text: str) -> str:
    """``text`` as a Nushell raw string literal (r#'...'#, with as many # as it takes)."""
    hashes = "#"
    while f"'{hashes}" in text:
        hashes += "#"
    return f"r{hashes}'{text}'{hashes}"


def nu_unavailable_reason() -> str:
    """Why :func:`find_nu` found no Nushell, in words for the skipped check."""
    configured = os.environ.get("PROVISIONING_NU")
    if configured and not (Path(configured).is_file() and os.access(configured, os.X_OK)):
        return (
            f"PROVISIONING_NU={configured} points at something that is not an executable: set it to the Nushell "
            "binary, or unset it to use nu from PATH"
        )
    return "Nushell (nu) is not installed"


def _files(root: Path, suffix: str) -> Iterator[Path]:
    """Regular files with ``suffix`` under root, sorted, skipping tool and VCS directories."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if filename.endswith(suffix) and path.is_file() and not path.is_symlink():
                yield path


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _timed(check: str, rel: str, func: Callable[[], str]) -> CheckResult:
    start = time.perf_counter()
    try:
        message = func()
    except _CheckFailed as failure:
        return CheckResult(check, rel, "failed", str(failure), time.perf_counter() - start)
    return CheckResult(check, rel, "passed", message or "", time.perf_counter() - start)


class _CheckFailed(Exception):
    pass


# Hostile content the parsers refuse with a Python exception of their own rather than a syntax
# error: nesting deeper than the interpreter's recursion limit (RecursionError) and integer
# literals longer than its int/str conversion limit (ValueError). Both are the author's error.
_TOO_DEEP = "nested too deeply"
_DEPTH_HINT = "within a few hundred levels"


def _is_digit_limit(exc: ValueError) -> bool:
    return "integer string conversion" in str(exc)


def _too_many_digits() -> str:
    return (
        f"holds a number thousands of digits long (an integer may have at most {sys.get_int_max_str_digits()} digits)"
    )


@dataclass(frozen=True)
class _Budget:
    """The time the content checks may take: until ``deadline`` (a `time.monotonic` instant), or
    unbounded when it is None. ``seconds`` is what was left when the checks began."""

    deadline: float | None
    seconds: float = 0.0

    @classmethod
    def until(cls, deadline: float | None) -> _Budget:
        return cls(deadline, max(0.0, deadline - time.monotonic()) if deadline is not None else 0.0)

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def timeout(self, limit: float) -> tuple[float, bool]:
        """A tool's timeout: ``limit``, or what is left of the budget when that is less (and
        whether the budget is what limits it)."""
        if self.deadline is None:
            return limit, False
        left = max(0.0, self.deadline - time.monotonic())
        return (left, True) if left < limit else (limit, False)

    def shown(self) -> str:
        seconds = self.seconds
        return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}".removesuffix(".0")

    def out_of_time(self) -> str:
        return f"the content checks ran out of time ({self.shown()} s budget)"


_UNBOUNDED = _Budget(None)


def _check_toml(path: Path) -> str:
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _CheckFailed(f"not UTF-8 text ({exc.reason}); TOML files must be UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise _CheckFailed(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise _CheckFailed(f"invalid TOML: {_TOO_DEEP} (keep arrays and inline tables {_DEPTH_HINT})") from None
    except ValueError as exc:
        if not _is_digit_limit(exc):
            raise
        raise _CheckFailed(f"invalid TOML: {_too_many_digits()}") from None
    return ""


def _check_json(path: Path) -> str:
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _CheckFailed(f"not UTF-8 text ({exc.reason}); JSON files must be UTF-8") from None
    except json.JSONDecodeError as exc:
        raise _CheckFailed(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _CheckFailed(f"invalid JSON: {_TOO_DEEP} (keep arrays and objects {_DEPTH_HINT})") from None
    except ValueError as exc:
        if not _is_digit_limit(exc):
            raise
        raise _CheckFailed(f"invalid JSON: {_too_many_digits()}") from None
    return ""


@cache
def _template_compiler() -> object:
    """A Jinja2 environment that compiles templates without folding constants.

    Jinja2 evaluates constant expressions while it compiles (``{{ "a" * 200000000 }}``,
    ``{{ "a"|center(10**9) }}``, ``[0] * N``, ``{% autoescape ... %}``), even in its sandbox. Here no
    operator folds (every one is "intercepted", which Jinja2 honours at compile time), the optimizer
    is off, and every filter and test is marked as needing the render context, so that none is run
    at compile time either; unknown filters and tests are still refused. Nothing is ever rendered.
    """
    import jinja2
    from jinja2.nodes import _binop_to_func, _uaop_to_func
    from jinja2.sandbox import SandboxedEnvironment

    class NoFoldEnvironment(SandboxedEnvironment):
        intercepted_binops = frozenset(_binop_to_func)
        intercepted_unops = frozenset(_uaop_to_func)

    def never_folded(name: str) -> Callable[..., object]:
        @jinja2.pass_context
        def placeholder(*args: object, **kwargs: object) -> object:  # pragma: no cover - never rendered
            raise RuntimeError(f"{name} is not rendered by the content checks")

        return placeholder

    env = NoFoldEnvironment(undefined=jinja2.StrictUndefined, autoescape=False, optimized=False)
    env.filters = {name: never_folded(name) for name in env.filters}
    env.tests = {name: never_folded(name) for name in env.tests}
    return env


def _check_jinja(path: Path) -> str:
    import jinja2

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _CheckFailed(f"not UTF-8 text ({exc.reason}); templates must be UTF-8") from None
    env = cast(jinja2.Environment, _template_compiler())
    try:
        # Compiling (not only parsing) also catches unknown filters and tests; nothing is rendered,
        # and nothing is evaluated while compiling (_template_compiler).
        env.compile(text)
    except jinja2.TemplateSyntaxError as exc:
        raise _CheckFailed(f"invalid Jinja2 template at line {exc.lineno}: {exc.message}") from None
    except RecursionError:
        raise _CheckFailed(
            f"invalid Jinja2 template: {_TOO_DEEP} (keep expressions and blocks {_DEPTH_HINT})"
        ) from None
    except SyntaxError as exc:
        # Python refused the code Jinja2 generated: blocks nested deeper than it allows (too many
        # statically nested blocks, or levels of indentation).
        raise _CheckFailed(
            f"invalid Jinja2 template: its blocks are {_TOO_DEEP} to compile ({exc.msg}); nest fewer "
            "for, if, macro and other blocks inside each other"
        ) from None
    except ValueError as exc:
        if not _is_digit_limit(exc):
            raise
        raise _CheckFailed(f"invalid Jinja2 template: {_too_many_digits()}") from None
    return ""


def _offset_to_line_col(data: bytes, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(data)))
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1


def _run_nu(
    nu: str, args: list[str], path: Path, budget: _Budget, preexec: _Preexec, home: Path | None
) -> subprocess.CompletedProcess[bytes]:
    """One bounded Nushell run for a check: the tool environment, the caller's preexec (the
    sandbox's limits) and what is left of the time budget."""
    timeout, by_budget = budget.timeout(_TOOL_TIMEOUT)
    if by_budget and timeout <= 0:
        raise _CheckFailed(f"not run: {budget.out_of_time()}")
    try:
        proc = subprocess.run(
            [nu, "--no-config-file", *args],
            capture_output=True,
            timeout=timeout,
            cwd=path.parent,
            env=_tool_env(home),
            preexec_fn=preexec() if preexec is not None else None,
        )
    except subprocess.TimeoutExpired:
        if by_budget:
            raise _CheckFailed(f"Nushell did not finish parsing: {budget.out_of_time()}") from None
        raise _CheckFailed(f"Nushell did not finish parsing within {_TOOL_TIMEOUT:.0f} s") from None
    _tool_death("Nushell", proc.returncode)
    return proc


def _check_nu(
    path: Path,
    nu: str,
    budget: _Budget = _UNBOUNDED,
    preexec: _Preexec = None,
    root: Path | None = None,
    home: Path | None = None,
) -> str:
    """A module parses when ``use FILE`` does (``nu -c``: it exits 1 naming the file, line and
    column of each error, in the file that holds it, an imported one too). The ``use`` sits in a
    block that never runs, so the module is parsed but its ``export-env`` is not run. A script (a
    file ``use`` refuses for its top-level code) is parsed with ``--ide-check`` instead. Errors
    one per line."""
    proc = _run_nu(nu, ["-c", f"if false {{ use {_nu_raw_string(str(path))} }}"], path, budget, preexec, home)
    if proc.returncode == 0:
        return ""
    found = nushell_errors(proc.stderr.decode("utf-8", "replace"), root=root)
    script = (
        bool(found)
        and found[0][0] == "nu::parser::expected_keyword"
        and (found[0][1].startswith(_shown_path(str(path), root) + ":"))
    )
    if found and not script:
        raise _CheckFailed("Nushell parse error: " + "\n".join(text for _, text in found))
    if not found:
        said = nushell_summary(proc.stderr.decode("utf-8", "replace"), root=root)
        raise _CheckFailed(f"Nushell could not parse the file: {said or f'exit {proc.returncode}'}")
    proc = _run_nu(nu, ["--ide-check", "100", str(path)], path, budget, preexec, home)
    data = path.read_bytes()
    errors = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if item.get("type") == "diagnostic" and item.get("severity") == "Error":
            span = item.get("span") or {}
            start = int(span.get("start", 0))
            if start > len(data):
                continue  # in a file the script imports (their spans follow its own)
            lineno, col = _offset_to_line_col(data, start)
            errors.append(f"{_shown_path(str(path), root)}:{lineno}:{col}: {item.get('message', 'parse error')}")
    if errors:
        raise _CheckFailed("Nushell parse error: " + "\n".join(dict.fromkeys(errors)))
    if proc.returncode != 0:
        said = nushell_summary(proc.stderr.decode("utf-8", "replace"), root=root)
        raise _CheckFailed(f"Nushell could not parse the file: {said or f'exit {proc.returncode}'}")
    return ""


# For subprocess's preexec_fn: a function that returns the function the tool's child runs before
# exec (the build sandbox gives each tool the current check's CPU budget that way).
_Preexec = Callable[[], Callable[[], None]] | None


def _tool_death(tool: str, returncode: int) -> None:
    """A tool killed by a signal: by a resource limit (CPU, memory) or a crash; never a pass."""
    if returncode >= 0:
        return
    number = -returncode
    if number in CPU_LIMIT_SIGNALS:
        raise _CheckFailed(f"{tool} was stopped: it exceeded the CPU time allowed for one check")
    name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else f"signal {number}"
    raise _CheckFailed(f"{tool} was stopped by {name}: it exceeded the memory allowed for one check, or crashed")


def _tool_env(home: Path | None = None) -> dict[str, str]:
    """A child environment with a HOME of the tools' own, so they write nowhere that matters:
    ``home``, or else one this process makes (`_private_home`)."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT"}}
    env["HOME"] = str(home) if home is not None else _private_home()
    env["NO_COLOR"] = "1"
    return env


_HOMES: dict[int, str] = {}  # by process: a forked child makes (and removes) its own


def _private_home() -> str:
    home = _HOMES.get(os.getpid())
    if home is None:
        home = _HOMES[os.getpid()] = tempfile.mkdtemp(prefix="provisioning-tools-")
    return home


def remove_private_home() -> None:
    """Remove this process's private HOME for the tools, if it made one: at exit, and by a
    sandboxed run, which ends with os._exit (atexit does not run there) and is a process per build.
    For a single-threaded process (a tool of another thread could be using it)."""
    home = _HOMES.pop(os.getpid(), None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


atexit.register(remove_private_home)


def _check_kcl_dir(
    directory: Path,
    files: list[Path],
    root: Path | None = None,
    budget: _Budget = _UNBOUNDED,
    preexec: _Preexec = None,
    home: Path | None = None,
) -> str:
    """Compile all ``.k`` files of one directory (one KCL package) together, in a child process."""
    timeout, by_budget = budget.timeout(_TOOL_TIMEOUT)
    if by_budget and timeout <= 0:
        raise _CheckFailed(f"not run: {budget.out_of_time()}")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "extensions._kcl_compile", str(directory), *[f.name for f in files]],
            capture_output=True,
            timeout=timeout,
            cwd=directory,
            env={**_tool_env(home), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
            preexec_fn=preexec() if preexec is not None else None,
        )
    except subprocess.TimeoutExpired:
        if by_budget:
            raise _CheckFailed(f"KCL did not finish compiling: {budget.out_of_time()}") from None
        raise _CheckFailed(f"KCL did not finish compiling within {_TOOL_TIMEOUT:.0f} s") from None
    _tool_death("KCL", proc.returncode)
    if proc.returncode != 0:
        output = proc.stdout.decode("utf-8", "replace") or proc.stderr.decode("utf-8", "replace")
        raise _CheckFailed(kcl_summary(output, root=root))
    return ""


def run_content_checks(
    root: Path,
    *,
    nu: str | None = None,
    kcl: bool | None = None,
    deadline: float | None = None,
    on_check: Callable[[str, str], None] | None = None,
    tool_preexec: _Preexec = None,
    home: Path | None = None,
) -> CheckReport:
    """Check every `.toml`, `.json`, `.j2`, `.k` and `.nu` file under root.

    ``nu`` defaults to :func:`find_nu` (``""``: there is none); ``kcl`` defaults to whether
    kcl-lib imports. Checks that
    cannot run are reported as skipped, with the reason.

    ``deadline`` (a `time.monotonic` instant) bounds the run: once it has passed, no check starts
    (no tool process either) and every remaining one is ``failed`` with ``not run: the content
    checks ran out of time (N s budget)``; a tool's timeout never reaches past it.

    ``on_check(check, path)`` is called as each check starts (the build sandbox gives every check
    a CPU budget of its own that way); ``tool_preexec`` is passed to the tools' processes.

    ``home`` (an existing directory) is the tools' HOME; by default they get one of this process's
    own in the temporary directory (`remove_private_home`). A build passes one in its work
    directory, which goes with the build even when the sandbox kills the run.
    """
    root = Path(root).resolve()
    budget = _Budget.until(deadline)
    nu = find_nu() if nu is None else (nu or None)  # "" says: no Nushell
    kcl = kcl_available() if kcl is None else kcl
    # Every check, in order: (check, path, what runs it) or (check, path, the skip reason).
    planned: list[tuple[str, str, Callable[[], str] | str]] = []
    parsers: tuple[tuple[str, str, Callable[[Path], str]], ...] = (
        ("toml", ".toml", _check_toml),
        ("json", ".json", _check_json),
        ("jinja2", ".j2", _check_jinja),
    )
    for check, suffix, parse in parsers:
        for path in _files(root, suffix):
            planned.append((check, _rel(root, path), partial(parse, path)))
    kcl_dirs: dict[Path, list[Path]] = {}
    for path in _files(root, ".k"):
        kcl_dirs.setdefault(path.parent, []).append(path)
    for directory, files in sorted(kcl_dirs.items()):
        rel = _rel(root, directory) if directory != root else "."
        run: Callable[[], str] | str = (
            partial(_check_kcl_dir, directory, files, root, budget, tool_preexec, home)
            if kcl
            else "KCL (kcl-lib) is not installed"
        )
        planned.append(("kcl", rel, run))
    for path in _files(root, ".nu"):
        rel = _rel(root, path)
        if rel.startswith("tests/"):
            continue  # the extension's own tests run in run_extension_tests
        planned.append(
            (
                "nushell",
                rel,
                partial(_check_nu, path, nu, budget, tool_preexec, root, home)
                if nu is not None
                else nu_unavailable_reason(),
            )
        )
    report = CheckReport()
    for check, rel, run in planned:
        if budget.expired():
            report.results.append(CheckResult(check, rel, "failed", f"not run: {budget.out_of_time()}"))
        elif isinstance(run, str):
            report.results.append(CheckResult(check, rel, "skipped", run))
        else:
            if on_check is not None:
                on_check(check, rel)
            report.results.append(_timed(check, rel, run))
    return report


#: Where an extension's own tests are: every ``tests/*.nu``, and in subfolders (the platform
#: guide's ``tests/unit/provider_test.nu``) the files named as tests, so helper modules beside
#: them are not run as tests.
TEST_FILE_RULE = "tests/*.nu, or tests/**/*_test.nu and tests/**/test_*.nu in subfolders"


def find_extension_tests(root: Path) -> list[Path]:
    """The extension's test files (TEST_FILE_RULE), sorted by path; symbolic links are not followed."""
    tests_dir = Path(root) / "tests"
    if not tests_dir.is_dir() or tests_dir.is_symlink():
        return []
    found = []
    for path in tests_dir.rglob("*.nu"):
        if not path.is_file() or path.is_symlink():
            continue
        nested = path.parent != tests_dir
        if nested and not (path.name.endswith("_test.nu") or path.name.startswith("test_")):
            continue
        found.append(path)
    return sorted(found, key=lambda p: p.relative_to(tests_dir).as_posix())


def run_extension_tests(root: Path, *, nu: str | None = None, timeout: float = _TEST_TIMEOUT) -> CheckReport:
    """Run the extension's own tests (TEST_FILE_RULE) with Nushell (`nu -n FILE` from the extension
    root); none found is said as a skipped ``test`` result, never as silence."""
    root = Path(root).resolve()
    nu = find_nu() if nu is None else (nu or None)  # "" says: no Nushell
    report = CheckReport()
    tests = find_extension_tests(root)
    if not tests:
        report.results.append(CheckResult("test", "tests/", "skipped", f"no tests found (looked for {TEST_FILE_RULE})"))
    for path in tests:
        rel = _rel(root, path)
        if nu is None:
            report.results.append(CheckResult("test", rel, "skipped", nu_unavailable_reason()))
            continue
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [nu, "--no-config-file", str(path)],
                capture_output=True,
                timeout=timeout,
                cwd=root,
                env={**os.environ, "NO_COLOR": "1"},
            )
        except subprocess.TimeoutExpired:
            report.results.append(
                CheckResult("test", rel, "failed", f"timed out after {timeout:.0f} s", time.perf_counter() - start)
            )
            continue
        elapsed = time.perf_counter() - start
        if proc.returncode == 0:
            report.results.append(CheckResult("test", rel, "passed", "", elapsed))
        else:
            output = proc.stderr.decode("utf-8", "replace") or proc.stdout.decode("utf-8", "replace")
            said = nushell_summary(output, root=root) or "no output"
            report.results.append(CheckResult("test", rel, "failed", f"{said} (exit {proc.returncode})", elapsed))
    return report
