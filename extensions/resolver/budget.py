"""The hard bound on one resolution: a wall-clock deadline, checked from inside the search (the
resolvelib provider's callbacks and between the complete solver's bounded steps, never only per
round), and an optional probe that says the caller has gone (a client that disconnected), so that
nothing keeps computing an answer nobody waits for."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Seconds one resolution may take, by default (the registry's REGISTRY_RESOLVE_TIMEOUT overrides it).
DEFAULT_TIMEOUT = 2.0

# Seconds between two calls of the (costlier) cancellation probe.
PROBE_INTERVAL = 0.05


class OutOfBudget(Exception):
    """The deadline passed (``cancelled`` False) or the caller went away (``cancelled`` True)."""

    def __init__(self, *, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "out of time")
        self.cancelled = cancelled


class Budget:
    """``seconds`` from now (None: no deadline); ``cancelled`` returns True once nobody waits for the
    answer (probed every few checks)."""

    __slots__ = ("_probed", "cancelled", "deadline", "seconds", "started")

    def __init__(self, seconds: float | None = DEFAULT_TIMEOUT, *, cancelled: Callable[[], bool] | None = None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a resolution budget must be a positive number of seconds, not {seconds!r}")
        self.seconds = seconds
        self.started = time.monotonic()
        self.deadline = None if seconds is None else self.started + seconds
        self.cancelled = cancelled
        self._probed = self.started

    def check(self) -> None:
        """``OutOfBudget`` once the deadline has passed or the caller has gone (asked at most every
        ``PROBE_INTERVAL`` seconds)."""
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            raise OutOfBudget(cancelled=False)
        if self.cancelled is not None and now - self._probed >= PROBE_INTERVAL:
            self._probed = now
            if self.cancelled():
                raise OutOfBudget(cancelled=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started
