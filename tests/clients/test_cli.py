"""The CLI as a whole: help texts, argument checking, and how every error is printed (one line,
no traceback), driven as users drive it."""

from __future__ import annotations

import argparse
import re

import pytest

from clients import cli

Capsys = pytest.CaptureFixture[str]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_each_group_description_names_exactly_its_commands(capsys: Capsys) -> None:
    groups = _subcommands(cli.build_parser())
    assert set(groups) == set(cli.GROUPS)
    for name, parser in groups.items():
        commands = set(_subcommands(parser))
        listed = re.match(r"(?:[a-z]+, )*[a-z]+(?: and [a-z]+)?", parser.description or "")
        assert listed is not None, name
        named = set(re.split(r", | and ", listed.group(0)))
        assert named == commands, (name, parser.description)


def test_extension_help_lists_info_and_no_inspect(capsys: Capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["extension", "--help"])
    assert stopped.value.code == 0
    out = capsys.readouterr().out
    assert "validate, test, build, publish, yank, search, info and sync extensions" in out
    assert "inspect" not in out
