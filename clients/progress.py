"""Progress bars for long transfers: rich bars on a terminal, nothing at all otherwise (pipes, CI,
``--output json``), so scripted output stays clean.

    with Progress.for_output(out) as bars:
        client.download(..., progress=bars.task("etcd 3.5.12"))
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.progress import Progress as _RichProgress

from clients.output import safe_text

if TYPE_CHECKING:
    from clients.output import Output

__all__ = ["Progress", "ProgressCallback", "ProgressFactory"]

ProgressCallback = Callable[[int, "int | None"], None]
ProgressFactory = Callable[[str], ProgressCallback]


def _nothing(done: int, total: int | None) -> None:
    return None


class Progress:
    """A set of transfer bars; `task(description)` gives the callback one transfer reports to."""

    def __init__(self, *, enabled: bool, console: Console | None = None) -> None:
        self.enabled = enabled
        self._rich: _RichProgress | None = None
        if enabled:
            self._rich = _RichProgress(
                TextColumn("{task.description}", markup=False),  # descriptions name packages: never markup
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )

    @classmethod
    def for_output(cls, out: Output) -> Progress:
        """Bars on stderr when it is a terminal and the output is for people."""
        return cls(enabled=out.interactive, console=out.err_console)

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._rich is not None:
            self._rich.stop()

    def task(self, description: str) -> ProgressCallback:
        """A callback ``(bytes done, total or None)`` that drives one bar (a no-op when disabled)."""
        rich = self._rich
        if rich is None:
            return _nothing
        task_id: TaskID = rich.add_task(safe_text(description), total=None)

        def update(done: int, total: int | None) -> None:
            rich.update(task_id, completed=done, total=total)

        return update
