"""Content checks: each kind of file is really parsed, and a check that cannot run is skipped."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from extensions.checks import kcl_summary, nushell_summary, run_content_checks, run_extension_tests


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _by_path(report):  # type: ignore[no-untyped-def]
    return {(r.check, r.path): r for r in report.results}


def test_it_passes_well_formed_toml_json_and_templates(tmp_path: Path) -> None:
    _write(tmp_path, "config/a.toml", 'name = "x"\n[table]\nkey = 1\n')
    _write(tmp_path, "schemas/b.json", '{"a": [1, 2]}')
    _write(tmp_path, "templates/c.conf.j2", "{% for s in servers %}{{ s | upper }}\n{% endfor %}")
    report = run_content_checks(tmp_path, kcl=False)
    results = _by_path(report)
    assert report.ok
    assert results[("toml", "config/a.toml")].status == "passed"
    assert results[("json", "schemas/b.json")].status == "passed"
    assert results[("jinja2", "templates/c.conf.j2")].status == "passed"


def test_it_fails_invalid_toml_with_the_line(tmp_path: Path) -> None:
    _write(tmp_path, "bad.toml", 'a = 1\nb = "unterminated\n')
    report = run_content_checks(tmp_path, kcl=False)
    result = _by_path(report)[("toml", "bad.toml")]
    assert not report.ok
    assert result.status == "failed"
    assert "line 2" in result.message


def test_it_fails_invalid_json_with_line_and_column(tmp_path: Path) -> None:
    _write(tmp_path, "bad.json", '{\n  "a": 1,\n}')
    result = _by_path(run_content_checks(tmp_path, kcl=False))[("json", "bad.json")]
    assert result.status == "failed"
    assert "line 3" in result.message


def test_it_fails_a_template_syntax_error(tmp_path: Path) -> None:
    _write(tmp_path, "t.j2", "{% if x %}never closed")
    result = _by_path(run_content_checks(tmp_path, kcl=False))[("jinja2", "t.j2")]
    assert result.status == "failed"
    assert "Jinja2" in result.message


def test_it_fails_a_template_with_an_unknown_filter(tmp_path: Path) -> None:
    _write(tmp_path, "t.j2", "{{ name | no_such_filter }}")
    result = _by_path(run_content_checks(tmp_path, kcl=False))[("jinja2", "t.j2")]
    assert result.status == "failed"
    assert "no_such_filter" in result.message


def test_it_fails_a_non_utf8_template(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_bytes(b"\xff\xfe{{ x }}")
    result = _by_path(run_content_checks(tmp_path, kcl=False))[("jinja2", "t.j2")]
    assert result.status == "failed"
    assert "UTF-8" in result.message


def test_it_reports_kcl_as_skipped_when_kcl_is_not_available(tmp_path: Path) -> None:
    _write(tmp_path, "kcl/a.k", "x = 1 +\n")
    report = run_content_checks(tmp_path, kcl=False)
    result = _by_path(report)[("kcl", "kcl")]
    assert result.status == "skipped"
    assert report.ok  # skipped is not failed ...
    assert report.counts()["passed"] == 0  # ... and never counted as passed


def test_it_reports_nushell_as_skipped_when_nu_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONING_NU", str(tmp_path / "no-such-nu"))
    _write(tmp_path, "nulib/a.nu", "export def f [] { 1 }\n")
    _write(tmp_path, "tests/test_a.nu", "exit 1\n")
    report = run_content_checks(tmp_path, kcl=False)
    assert _by_path(report)[("nushell", "nulib/a.nu")].status == "skipped"
    tests = run_extension_tests(tmp_path)
    assert [r.status for r in tests.results] == ["skipped"]


def test_it_compiles_a_kcl_package_of_several_files(tmp_path: Path, kcl: None) -> None:
    _write(
        tmp_path,
        "kcl/schema.k",
        'schema Node:\n    name: str\n    cpus: int = 2\n    check:\n        cpus >= 1, "cpus must be at least 1"\n',
    )
    _write(tmp_path, "kcl/example.k", 'node = Node { name = "cp-0", cpus = 4 }\n')
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.status == "passed", result.message


def test_it_fails_kcl_syntax_errors_with_the_location(tmp_path: Path, kcl: None) -> None:
    _write(tmp_path, "kcl/a.k", "x = 1 +\n")
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.status == "failed"
    assert "a.k:1" in result.message
    assert "\x1b[" not in result.message  # colour codes are stripped


def test_it_fails_a_kcl_check_block_that_does_not_hold(tmp_path: Path, kcl: None) -> None:
    _write(
        tmp_path,
        "kcl/schema.k",
        'schema Node:\n    cpus: int\n    check:\n        cpus >= 1, "cpus must be at least 1"\n',
    )
    _write(tmp_path, "kcl/example.k", "node = Node { cpus = 0 }\n")
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.status == "failed"
    assert "cpus must be at least 1" in result.message


def test_it_parses_nushell_modules(tmp_path: Path, nu: str) -> None:
    _write(tmp_path, "nulib/ok.nu", 'export def greet [name: string]: nothing -> string { $"hello ($name)" }\n')
    _write(tmp_path, "nulib/bad.nu", "export def f [] {\n  let x = \n}\n")
    results = _by_path(run_content_checks(tmp_path, kcl=False))
    assert results[("nushell", "nulib/ok.nu")].status == "passed"
    bad = results[("nushell", "nulib/bad.nu")]
    assert bad.status == "failed"
    assert "bad.nu:2:" in bad.message


def test_it_does_not_run_export_env_blocks_while_parsing(tmp_path: Path, nu: str) -> None:
    marker = tmp_path / "ran"
    _write(tmp_path, "nulib/m.nu", f'export-env {{ "x" | save "{marker}" }}\nexport def f [] {{ 1 }}\n')
    result = _by_path(run_content_checks(tmp_path, kcl=False))[("nushell", "nulib/m.nu")]
    assert result.status == "passed", result.message
    assert not marker.exists()


def test_it_runs_the_extensions_own_tests_and_reports_failures(tmp_path: Path, nu: str) -> None:
    _write(tmp_path, "nulib/m.nu", "export def double [x: int]: nothing -> int { $x * 2 }\n")
    _write(tmp_path, "tests/test_ok.nu", "use std/assert\nuse ../nulib/m.nu *\nassert equal (double 2) 4\n")
    _write(tmp_path, "tests/test_bad.nu", "use std/assert\nuse ../nulib/m.nu *\nassert equal (double 2) 5\n")
    report = run_extension_tests(tmp_path)
    statuses = {r.path: r.status for r in report.results}
    assert statuses == {"tests/test_bad.nu": "failed", "tests/test_ok.nu": "passed"}
    assert not report.ok


def test_a_parse_error_in_an_imported_file_is_blamed_on_that_file(tmp_path: Path, nu: str) -> None:
    _write(tmp_path, "nulib/mod.nu", "use helper.nu *\nexport def main [] {\n  helper\n}\n")
    _write(tmp_path, "nulib/helper.nu", "export def helper [] {\n  let x = (1 +\n}\n")
    results = _by_path(run_content_checks(tmp_path, kcl=False))
    for rel in ("nulib/mod.nu", "nulib/helper.nu"):
        assert results[("nushell", rel)].status == "failed"
        # the file and line that hold the error, not the importer's (mod.nu has 4 lines)
        assert results[("nushell", rel)].message.startswith("Nushell parse error: nulib/helper.nu:3:1: "), rel


def test_a_script_is_parsed_as_a_script_and_its_errors_are_one_per_line(tmp_path: Path, nu: str) -> None:
    _write(tmp_path, "scripts/ok.nu", 'print "hello"\nlet x = 3\n')
    _write(tmp_path, "scripts/bad.nu", 'print "hello"\nlet x = (1 +\nlet y = [1, 2\n')
    results = _by_path(run_content_checks(tmp_path, kcl=False))
    assert results[("nushell", "scripts/ok.nu")].status == "passed"
    bad = results[("nushell", "scripts/bad.nu")]
    assert bad.status == "failed"
    lines = bad.message.removeprefix("Nushell parse error: ").splitlines()
    assert lines and all(line.startswith("scripts/bad.nu:") for line in lines), bad.message


def test_the_extensions_tests_in_subfolders_run_too(tmp_path: Path, nu: str) -> None:
    """The platform guide's layout: tests/unit/provider_test.nu; helper modules beside are not tests."""
    _write(tmp_path, "tests/unit/provider_test.nu", "use std/assert\nassert equal 1 2\n")
    _write(tmp_path, "tests/unit/test_more.nu", "use std/assert\nassert equal 1 1\n")
    _write(tmp_path, "tests/unit/helpers.nu", "export def help [] { 1 }\n")
    report = run_extension_tests(tmp_path)
    statuses = {r.path: r.status for r in report.results}
    assert statuses == {"tests/unit/provider_test.nu": "failed", "tests/unit/test_more.nu": "passed"}
    assert not report.ok


def test_no_tests_found_is_said(tmp_path: Path) -> None:
    _write(tmp_path, "tests/unit/helpers.nu", "export def help [] { 1 }\n")
    report = run_extension_tests(tmp_path, nu="")
    assert [(r.check, r.path, r.status) for r in report.results] == [("test", "tests/", "skipped")]
    assert report.results[0].message.startswith("no tests found (looked for tests/*.nu")
    assert report.ok


# --- messages: one informative line ------------------------------------------------------------------


def test_a_kcl_type_error_is_one_line_with_file_line_column_and_the_message(tmp_path: Path, kcl: None) -> None:
    _write(tmp_path, "kcl/x.k", 'schema Node:\n    cpus: int\n\nnode = Node {\n    cpus = "x"\n}\n')
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.status == "failed"
    assert result.message == (
        "kcl/x.k:5:5: TypeError: expected int, got str(x); "
        "kcl/x.k:2:5: variable is defined here, its type is int, but got str(x)"
    )


def test_a_kcl_syntax_error_said_twice_is_said_once(tmp_path: Path, kcl: None) -> None:
    _write(tmp_path, "kcl/a.k", "x = 1 +\n")
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.message == (
        'kcl/a.k:1:7: InvalidSyntax: expected one of ["identifier", "literal", "(", "[", "{"] got newline'
    )


def test_a_failed_kcl_check_block_names_the_condition(tmp_path: Path, kcl: None) -> None:
    _write(tmp_path, "kcl/schema.k", 'schema Node:\n    cpus: int\n    check:\n        cpus >= 1, "at least 1"\n')
    _write(tmp_path, "kcl/example.k", "node = Node { cpus = 0 }\n")
    result = _by_path(run_content_checks(tmp_path))[("kcl", "kcl")]
    assert result.message == (
        "kcl/example.k:1:8: EvaluationError: Instance check failed; "
        "kcl/schema.k:4:1: Check failed on the condition: at least 1"
    )


def test_a_failing_nushell_test_shows_the_assertion(tmp_path: Path, nu: str) -> None:
    _write(tmp_path, "nulib/m.nu", "export def double [x: int]: nothing -> int { $x * 2 }\n")
    _write(tmp_path, "tests/test_bad.nu", "use std/assert\nuse ../nulib/m.nu *\nassert equal (double 2) 5\n")
    _write(tmp_path, "tests/test_msg.nu", 'use std/assert\nassert (1 == 2) "one is not two"\n')
    _write(tmp_path, "tests/test_err.nu", 'error make {msg: "custom failure here"}\n')
    _write(tmp_path, "tests/test_quiet.nu", "exit 3\n")
    messages = {r.path: r.message for r in run_extension_tests(tmp_path).results}
    assert messages == {
        "tests/test_bad.nu": "tests/test_bad.nu:3:14: Assertion failed. These are not equal. Left : '4' Right : '5' "
        "(exit 1)",
        "tests/test_msg.nu": "tests/test_msg.nu:2:8: one is not two: It is not true. (exit 1)",
        "tests/test_err.nu": "tests/test_err.nu:1:1: custom failure here: originates from here (exit 1)",
        "tests/test_quiet.nu": "no output (exit 3)",
    }


def test_a_nushell_report_drawn_with_boxes_and_colours_becomes_one_bounded_line() -> None:
    report = (
        "\x1b[31mError:\x1b[0m nu::shell::error\n\n"
        "  \x1b[31m\u00d7\x1b[0m Assertion failed.\n"
        "   ╭─[/ext/tests/test_bad.nu:3:14]\n"
        " 2 │ use ../nulib/m.nu *\n"
        " 3 │ assert equal (double 2) 5\n"
        "   ·              ───┬──\n"
        "   ·                 ╰── These are not equal.\n"
        "   ╰────\n"
        "  help: compare the values\n"
    )
    assert nushell_summary(report, root=Path("/ext")) == (
        "tests/test_bad.nu:3:14: Assertion failed. These are not equal. help: compare the values"
    )
    long = nushell_summary("Error: x\n\n  x " + "very long " * 200 + "\n")
    assert len(long) <= 400 and long.endswith("…") and "\n" not in long


def test_a_tool_message_naming_the_servers_directory_shows_the_extensions_path_only(tmp_path: Path) -> None:
    root = tmp_path / "var" / "tmp" / "build-1" / "content"
    said = f"Failed to load KCL file '{root}/kcl/m.k'. Because 'stream did not contain valid UTF-8'"
    assert kcl_summary(said, root=root) == (
        "Failed to load KCL file 'kcl/m.k'. Because 'stream did not contain valid UTF-8'"
    )
    assert str(tmp_path) not in nushell_summary(f"Error: cannot open {root}/nulib/a.nu\n", root=root)


def test_a_provisioning_nu_that_is_not_an_executable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONING_NU", "/nonexistent")
    _write(tmp_path, "nulib/a.nu", "export def f [] { 1 }\n")
    _write(tmp_path, "tests/test_a.nu", "exit 0\n")
    expected = (
        "PROVISIONING_NU=/nonexistent points at something that is not an executable: set it to the Nushell binary, "
        "or unset it to use nu from PATH"
    )
    assert _by_path(run_content_checks(tmp_path, kcl=False))[("nushell", "nulib/a.nu")].message == expected
    assert [r.message for r in run_extension_tests(tmp_path).results] == [expected]


# --- hostile content: a failed check, never a crash of the caller (the registry's build) --------------


@pytest.mark.parametrize(
    ("rel", "text", "check", "expected"),
    [
        (
            "deep.json",
            "[" * 100_000 + "]" * 100_000,
            "json",
            "invalid JSON: nested too deeply (keep arrays and objects within a few hundred levels)",
        ),
        (
            "deep.toml",
            "a = " + "[" * 100_000 + "]" * 100_000 + "\n",
            "toml",
            "invalid TOML: nested too deeply (keep arrays and inline tables within a few hundred levels)",
        ),
        (
            "deep.j2",
            "{{ " + "(" * 100_000 + "1" + ")" * 100_000 + " }}",
            "jinja2",
            "invalid Jinja2 template: nested too deeply (keep expressions and blocks within a few hundred levels)",
        ),
        (
            "chain.j2",
            "{{ x" + " | upper" * 50_000 + " }}",
            "jinja2",
            "invalid Jinja2 template: nested too deeply (keep expressions and blocks within a few hundred levels)",
        ),
        (
            "loops.j2",
            "{% for a in x %}" * 30 + "{% endfor %}" * 30,
            "jinja2",
            "invalid Jinja2 template: its blocks are nested too deeply to compile (too many statically nested "
            "blocks); nest fewer for, if, macro and other blocks inside each other",
        ),
        (
            "big.json",
            '{"n": ' + "1" * 5000 + "}",
            "json",
            "invalid JSON: holds a number thousands of digits long (an integer may have at most 4300 digits)",
        ),
        (
            "big.toml",
            "n = " + "1" * 5000 + "\n",
            "toml",
            "invalid TOML: holds a number thousands of digits long (an integer may have at most 4300 digits)",
        ),
        (
            "big.j2",
            "{{ " + "1" * 5000 + " }}",
            "jinja2",
            "invalid Jinja2 template: holds a number thousands of digits long (an integer may have at most 4300 "
            "digits)",
        ),
    ],
    ids=[
        "deep-json",
        "deep-toml",
        "deep-j2",
        "long-filter-chain-j2",
        "nested-loops-j2",
        "long-int-json",
        "long-int-toml",
        "long-int-j2",
    ],
)
def test_hostile_content_is_a_failed_check_with_a_clear_message(
    tmp_path: Path, rel: str, text: str, check: str, expected: str
) -> None:
    _write(tmp_path, rel, text)
    _write(tmp_path, "fine.json", '{"a": 1}')
    report = run_content_checks(tmp_path, kcl=False)
    result = _by_path(report)[(check, rel)]
    assert (result.status, result.message) == ("failed", expected)
    assert not report.ok
    assert _by_path(report)[("json", "fine.json")].status == "passed"  # the other checks still ran


def test_content_just_inside_the_limits_passes(tmp_path: Path) -> None:
    _write(tmp_path, "nested.json", "[" * 200 + "]" * 200)
    _write(tmp_path, "number.toml", "n = " + "9" * 4300 + "\n")
    _write(tmp_path, "loops.j2", "{% for a in x %}" * 5 + "{{ a }}" + "{% endfor %}" * 5)
    report = run_content_checks(tmp_path, kcl=False)
    assert [(r.path, r.status) for r in report.results] == [
        ("number.toml", "passed"),
        ("nested.json", "passed"),
        ("loops.j2", "passed"),
    ]


# --- the time budget (deadline) -------------------------------------------------------------------


def _fake_nu(tmp_path: Path, *, sleep: float = 0) -> tuple[str, Path]:
    """A stand-in for nu that records each run in a file (then sleeps, when asked)."""
    calls = tmp_path / "nu-calls.txt"
    script = tmp_path / "bin" / "nu"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n' + (f"exec sleep {sleep}\n" if sleep else ""))
    script.chmod(0o755)
    return str(script), calls


def _runs(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_past_its_deadline_no_check_runs_and_each_is_failed_as_not_run(tmp_path: Path) -> None:
    root = tmp_path / "ext"
    _write(root, "extension.toml", 'a = "x"\n')
    _write(root, "schemas/b.json", "{}")
    _write(root, "templates/c.j2", "{{ x }}")
    _write(root, "kcl/d.k", "x = 1\n")
    _write(root, "nulib/e.nu", "export def f [] { 1 }\n")
    nu, calls = _fake_nu(tmp_path)

    report = run_content_checks(root, nu=nu, kcl=True, deadline=time.monotonic() - 1)
    message = "not run: the content checks ran out of time (0 s budget)"
    assert [(r.check, r.path, r.status, r.message) for r in report.results] == [
        ("toml", "extension.toml", "failed", message),
        ("json", "schemas/b.json", "failed", message),
        ("jinja2", "templates/c.j2", "failed", message),
        ("kcl", "kcl", "failed", message),
        ("nushell", "nulib/e.nu", "failed", message),
    ]
    assert not report.ok
    assert _runs(calls) == 0  # no tool was started

    # With time left, the same tree is checked as without a deadline.
    within = run_content_checks(root, nu=nu, kcl=False, deadline=time.monotonic() + 600)
    assert [(r.check, r.status) for r in within.results] == [
        ("toml", "passed"),
        ("json", "passed"),
        ("jinja2", "passed"),
        ("kcl", "skipped"),
        ("nushell", "passed"),
    ]
    assert _runs(calls) == 1


def test_a_tool_running_at_the_deadline_is_stopped_and_the_rest_are_not_run(tmp_path: Path) -> None:
    root = tmp_path / "ext"
    _write(root, "extension.toml", 'a = "x"\n')
    _write(root, "nulib/a.nu", "export def f [] { 1 }\n")
    _write(root, "nulib/b.nu", "export def g [] { 2 }\n")
    nu, calls = _fake_nu(tmp_path, sleep=60)  # longer than the budget, shorter than the tool timeout would wait

    started = time.monotonic()
    report = run_content_checks(root, nu=nu, kcl=False, deadline=started + 1.04)
    elapsed = time.monotonic() - started
    out_of_time = "the content checks ran out of time (1 s budget)"
    assert [(r.check, r.path, r.status, r.message) for r in report.results] == [
        ("toml", "extension.toml", "passed", ""),
        ("nushell", "nulib/a.nu", "failed", f"Nushell did not finish parsing: {out_of_time}"),
        ("nushell", "nulib/b.nu", "failed", f"not run: {out_of_time}"),
    ]
    assert 1.0 <= elapsed < 10  # the tool's timeout was the budget's remainder, not 60 s
    assert _runs(calls) == 1


# --- templates that would be bombs if Jinja2 folded their constants ---------------------------------

_BOMBS = [
    '{{ "a" * 200000000 }}',
    '{{ "ab" * 1000000000 }}',
    '{{ "a"|center(1000000000) }}',
    "{{ [0] * 1000000000 }}",
    "{{ 2 ** 99999999 }}",
    '{{ "%s" % ("x" * 100000000) }}',
    '{% autoescape "a" * 1000000000 %}x{% endautoescape %}',
    '{{ ("a" ~ "b") * 100000000 }}{{ -(10 ** 10 ** 10) }}',
    '{{ "a"|upper|center(1000000000)|truncate(5) }}',
]


@pytest.mark.parametrize("template", _BOMBS)
def test_a_template_is_compiled_without_folding_its_constants(tmp_path: Path, template: str) -> None:
    import tracemalloc

    _write(tmp_path, "templates/x.j2", template)
    tracemalloc.start()
    started = time.process_time()
    try:
        report = run_content_checks(tmp_path, kcl=False, nu="")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, report.results
    assert peak < 20 * 1024 * 1024
    assert time.process_time() - started < 2


def test_unknown_filters_and_tests_are_still_refused_without_folding(tmp_path: Path) -> None:
    _write(tmp_path, "templates/f.j2", "{{ x | no_such_filter(3) }}")
    _write(tmp_path, "templates/t.j2", "{{ x is no_such_test }}")
    _write(tmp_path, "templates/ok.j2", "{{ x | default('a') | upper }}{% if x is defined %}y{% endif %}")
    results = _by_path(run_content_checks(tmp_path, kcl=False, nu=""))
    assert (
        results[("jinja2", "templates/f.j2")].message
        == "invalid Jinja2 template at line 1: No filter named 'no_such_filter'."
    )
    assert (
        results[("jinja2", "templates/t.j2")].message
        == "invalid Jinja2 template at line 1: No test named 'no_such_test'."
    )
    assert results[("jinja2", "templates/ok.j2")].status == "passed"


def test_checks_announce_each_file_before_checking_it(tmp_path: Path) -> None:
    _write(tmp_path, "a.toml", "a = 1\n")
    _write(tmp_path, "b.json", "{}")
    seen: list[tuple[str, str]] = []
    run_content_checks(tmp_path, kcl=False, nu="", on_check=lambda check, path: seen.append((check, path)))
    assert seen == [("toml", "a.toml"), ("json", "b.json")]


def test_a_tool_stopped_by_its_cpu_timer_fails_the_check_as_past_its_cpu_time(tmp_path: Path) -> None:
    # The build sandbox's tool_preexec starts a CPU timer in the tool's child (SIGPROF past it).
    _write(tmp_path, "nulib/e.nu", "export def f [] { 1 }\n")
    spinning = tmp_path / "bin" / "nu"
    spinning.parent.mkdir()
    spinning.write_text("#!/bin/sh\nwhile :; do :; done\n")
    spinning.chmod(0o755)

    def start_timer() -> None:
        signal.setitimer(signal.ITIMER_PROF, 0.2)

    def preexec() -> Callable[[], None]:
        return start_timer

    report = run_content_checks(tmp_path, nu=str(spinning), kcl=False, tool_preexec=preexec)
    result = _by_path(report)[("nushell", "nulib/e.nu")]
    assert (result.status, result.message) == (
        "failed",
        "Nushell was stopped: it exceeded the CPU time allowed for one check",
    )


def test_the_tools_private_home_is_removed_when_its_run_is_done() -> None:
    from extensions import checks

    home = Path(checks._tool_env()["HOME"])
    assert home.is_dir() and home.name.startswith("provisioning-tools-")
    assert checks._tool_env()["HOME"] == str(home)  # one per process while it runs
    checks.remove_private_home()  # what a sandboxed check run does before its process ends
    assert not home.exists()
    again = Path(checks._tool_env()["HOME"])
    assert again.is_dir() and again != home
    checks.remove_private_home()
    assert not again.exists()


def test_a_sandboxed_check_run_gives_the_tools_the_build_s_home_which_outlives_a_killed_run(tmp_path: Path) -> None:
    """The tools' HOME is the one the build passes (in its work directory, which the worker
    removes), not one in the temporary directory that a run killed by its limits would leave."""
    from extensions.sandbox import SandboxLimitExceeded, SandboxLimits, run_sandboxed

    root = tmp_path / "pkg"
    _write(root, "nulib/e.nu", "export def f [] { 1 }\n")
    seen = tmp_path / "seen-home"
    killing = tmp_path / "bin" / "nu"  # tells its HOME, then kills the sandboxed run, as its limits would
    killing.parent.mkdir()
    killing.write_text(f'#!/bin/sh\necho "$HOME" > {seen}\nkill -9 $PPID\n')
    killing.chmod(0o755)
    home = tmp_path / "work" / "home"
    kwargs = {"root": str(root), "readme": "README.md", "readme_cpu_seconds": 1, "nu": str(killing), "kcl": False,
              "home": str(home)}  # fmt: skip
    with pytest.raises(SandboxLimitExceeded):
        run_sandboxed("extensions.sandboxed_steps.check", kwargs, limits=SandboxLimits(wall_seconds=60))
    assert seen.read_text().strip() == str(home)
    assert home.is_dir()  # the build's own, left for the build's work directory to take with it
