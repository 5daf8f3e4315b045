"""A build's log: timed steps appended to the build row, every write conditional on still owning
the build (its attempt), text cleaned so any database can store it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.utils import timezone

from builds.models import Build
from registry.errors import classify_error
from registry.storedtext import nul_escaped

MAX_LOG_MESSAGE = 4000


def now_iso() -> str:
    return timezone.now().isoformat(timespec="milliseconds")


def log_entry(step: str, status: str, message: str = "", seconds: float = 0.0) -> dict[str, Any]:
    message = nul_escaped(message)
    if len(message) > MAX_LOG_MESSAGE:
        message = message[:MAX_LOG_MESSAGE] + " [...]"
    return {"step": step, "status": status, "seconds": round(seconds, 4), "message": message, "at": now_iso()}


class StepLog:
    """Appends timed steps to a build's log; every write is conditional on owning the build."""

    def __init__(self, build: Build, attempt: int) -> None:
        self.build = build
        self.attempt = attempt

    def add(self, step: str, status: str, message: str = "", seconds: float = 0.0) -> None:
        self.build.log = [*self.build.log, log_entry(step, status, message, seconds)]
        Build.objects.filter(pk=self.build.pk, attempts=self.attempt).update(log=self.build.log)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, str]]:
        """Time a step; the body may set ``note["message"]``. A raised error marks the step failed,
        with the message `classify_error` gives it (a generic one for errors on our side)."""
        note: dict[str, str] = {"message": ""}
        start = time.perf_counter()
        try:
            yield note
        except Exception as exc:
            self.add(name, "failed", classify_error(exc).message, time.perf_counter() - start)
            raise
        self.add(name, "passed", note["message"], time.perf_counter() - start)

    @contextlib.contextmanager
    def final_step(self, name: str) -> Iterator[Callable[[str], None]]:
        """The step that makes the build final: the body calls ``passed(message)`` inside the
        transaction that commits the final state, so no reader sees a succeeded build whose log
        lacks this step. If the body fails (its transaction rolled back, the entry with it), the
        step is written as failed."""
        start = time.perf_counter()
        before = self.build.log

        def passed(message: str) -> None:
            self.add(name, "passed", message, time.perf_counter() - start)

        try:
            yield passed
        except Exception as exc:
            self.build.log = before
            self.add(name, "failed", classify_error(exc).message, time.perf_counter() - start)
            raise
