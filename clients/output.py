"""How the CLI prints: human text and tables on a terminal, or the SPEC envelope with --output json.

Text printed for people is never interpreted: publisher-controlled strings (descriptions, file
names, build logs, error messages that quote them) may contain ``[link=...]``-style Rich markup,
``:emoji:`` codes or terminal escape sequences, so everything goes out as plain `rich.text.Text`
(no markup, no emoji, no highlighting) and control characters are shown escaped (``\\x1b``)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from clients.errors import ClientError

# C0 controls but tab and newline, DEL, C1 controls: a terminal acts on them, so they are shown escaped.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe_text(value: object) -> str:
    """``value`` as text a terminal only displays: control characters escaped (``\\x1b``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", "" if value is None else str(value))


def plain(value: object, *, style: str = "") -> Text:
    """``value`` as a Rich `Text` that is printed exactly as written (never parsed as markup)."""
    return Text(safe_text(value), style=style)


def _detail_text(detail: dict[str, Any], shown: Sequence[str]) -> str | None:
    """An error detail as ``PATH: MESSAGE`` (the path left out when the message starts with it),
    with its message even when an earlier detail had the same one (two key paths with the same
    problem). Only what the error's own message (``shown[0]``) already says is left out: a resolver
    detail repeating it adds its path (the requirement chain) alone, or nothing. None when the
    line would add nothing."""
    message = str(detail["message"]).strip()
    where = str(detail.get("path") or "").strip()
    first = message.splitlines()[0] if message else ""
    headline = shown[0] if shown else ""
    if first and first in headline:
        return where if where and where not in " ".join(shown) else None
    text = message if not where or message.startswith(where) else f"{where}: {message}"
    if not text or text in shown:
        return None
    return text


def _console(file: TextIO, **options: Any) -> Console:
    return Console(file=file, markup=False, emoji=False, highlight=False, soft_wrap=True, **options)


class Output:
    """Everything a command prints goes through here, so ``--output json`` is uniform."""

    def __init__(self, mode: str = "table", *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.mode = mode
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.console = _console(self.stdout)
        self.err_console = _console(self.stderr)
        if not self.console.is_terminal:
            # Piped output: no wrapping or truncation at an imagined 80 columns.
            self.console = _console(self.stdout, width=200)

    @property
    def json(self) -> bool:
        return self.mode == "json"

    @property
    def interactive(self) -> bool:
        """Whether progress bars and live output make sense (a terminal, not --output json)."""
        return not self.json and self.err_console.is_terminal

    def success(self, data: Any) -> None:
        """The successful result: the envelope in JSON mode (human text is printed by the command)."""
        if self.json:
            self._write_json({"success": True, "data": data})

    def failure(self, error: ClientError) -> None:
        if self.json:
            body: dict[str, Any] = {"code": error.code, "message": error.message, "details": error.details}
            self._write_json({"success": False, "error": body})
            return
        self.err_console.print(plain(f"error: {error.message}"))
        shown = [error.message]
        for detail in error.details:
            if not isinstance(detail, dict) or "message" not in detail:
                continue
            if detail.get("status") not in (None, "failed"):
                continue  # check results that passed or were skipped are in the table already
            text = _detail_text(detail, shown)
            if text is None:
                continue
            shown.append(text)
            prefix = "warning" if detail.get("severity") == "warning" else "-"
            first, *more = text.splitlines()
            self.err_console.print(plain(f"  {prefix} {first}"))
            for line in more:  # one problem per line (e.g. every Nushell parse error of a file)
                self.err_console.print(plain(f"      {line.strip()}"))

    def line(self, text: str = "", *, err: bool = False) -> None:
        """Human text; silent in JSON mode."""
        if self.json:
            return
        (self.err_console if err else self.console).print(plain(text))

    def warn(self, text: str) -> None:
        if not self.json:
            self.err_console.print(plain(f"warning: {text}"))

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, title: str | None = None) -> None:
        if self.json:
            return
        table = Table(
            title=plain(title) if title is not None else None,
            show_edge=False,
            pad_edge=False,
            box=None,
            header_style="bold",
        )
        for column in columns:
            table.add_column(plain(column))
        for row in rows:
            table.add_row(*[plain(cell) for cell in row])
        self.console.print(table)

    def _write_json(self, payload: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
        self.stdout.flush()
