"""The hard bound on one resolution: a wall-clock deadline, checked from inside the search (the
resolvelib provider's callbacks and between the complete solver's bounded steps, never only per
round), and an optional probe that says the caller has gone (a client that disconnected), so that
nothing keeps computing an answer nobody waits for."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds one resolution may take, by default (the registry's REGISTRY_RESOLVE_TIMEOUT overrides it).
DEFAULT_TIMEOUT = 2.0

# How many checks pass between two calls of the (costlier) cancellation probe.
_PROBE_EVERY = 64


class OutOfBudget(Exception):
    """The deadline passed (``cancelled`` False) or the caller went away (``cancelled`` True)."""

    def __init__(self, *, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "out of time")
        self.cancelled = cancelled


class Budget:
    """``seconds`` from now (None: no deadline); ``cancelled`` returns True once nobody waits for the
    answer (probed every few checks)."""

    __slots__ = ("_checks", "cancelled", "deadline", "seconds", "started")

    def __init__(self, seconds: float | None = DEFAULT_TIMEOUT, *, cancelled: Callable[[], bool] | None = None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a resolution budget must be a positive number of seconds, not {seconds!r}")
        self.seconds = seconds
        self.started = time.monotonic()
        self.deadline = None if seconds is None else self.started + seconds
        self.cancelled = cancelled
        self._checks = 0

    def check(self) -> None:
        """``OutOfBudget`` once the deadline has passed or the caller has gone."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfBudget(cancelled=False)
        if self.cancelled is not None:
            self._checks += 1
            if self._checks % _PROBE_EVERY == 0 and self.cancelled():
                raise OutOfBudget(cancelled=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started
