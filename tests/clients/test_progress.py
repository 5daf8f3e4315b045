"""Progress bars: drawn on a terminal, absent otherwise."""

from __future__ import annotations

import io

from rich.console import Console

from clients.output import Output
from clients.progress import Progress


def test_bars_are_drawn_on_a_terminal() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=100)
    with Progress(enabled=True, console=console) as bars:
        report = bars.task("etcd 3.5.12")
        report(0, 2048)
        report(2048, 2048)
    text = stream.getvalue()
    assert "etcd 3.5.12" in text
    assert "2.0/2.0 kB" in text


def test_nothing_is_drawn_when_the_output_is_not_a_terminal() -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    out = Output("table", stdout=stdout, stderr=stderr)
    with Progress.for_output(out) as bars:
        assert not bars.enabled
        report = bars.task("etcd 3.5.12")
        report(10, 100)
        report(100, 100)
    assert stdout.getvalue() == "" and stderr.getvalue() == ""


def test_nothing_is_drawn_with_output_json() -> None:
    assert not Progress.for_output(Output("json", stdout=io.StringIO(), stderr=io.StringIO())).enabled


def test_a_bar_description_is_printed_as_written_never_as_markup() -> None:
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=120)
    with Progress(enabled=True, console=console) as bars:
        bars.task("[link=http://evil.example]etcd[/link] [red]3.5.12")(10, 10)
    text = stream.getvalue()
    assert "[link=http://evil.example]etcd[/link] [red]3.5.12" in text
    assert "\x1b]8;" not in text
