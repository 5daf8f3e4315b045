"""The hard bound on one resolution: a wall-clock deadline, checked from inside the search (the
resolvelib provider's callbacks and between the complete solver's bounded steps, never only per
round), and an optional probe that says the caller has gone (a client that disconnected), so that
nothing keeps computing an answer nobody waits for.

The deadline bounds the resolution's own work. Time spent waiting for the catalogue (a database
read on the registry, a download of signed metadata on the client) moves it on by as much, up to
WAIT_ALLOWANCE times the budget in all: charging those waits would answer ``too_complex`` to an
easy request on a slow network or a busy database, and the allowance keeps a hard bound on the
whole (by default 2 s of work and 8 s of waiting)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds one resolution may take, by default (the registry's REGISTRY_RESOLVE_TIMEOUT overrides it).
DEFAULT_TIMEOUT = 2.0

#: How much waiting for the catalogue one resolution may be spared, as a multiple of its budget.
WAIT_ALLOWANCE = 4.0

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

    __slots__ = ("_probed", "_spared", "cancelled", "deadline", "seconds", "started")

    def __init__(self, seconds: float | None = DEFAULT_TIMEOUT, *, cancelled: Callable[[], bool] | None = None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a resolution budget must be a positive number of seconds, not {seconds!r}")
        self.seconds = seconds
        self._spared = 0.0 if seconds is None else seconds * WAIT_ALLOWANCE  # waiting still to spare
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

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Time spent inside is not charged (until WAIT_ALLOWANCE is used up): the deadline moves
        on by as much."""
        began = time.monotonic()
        try:
            yield
        finally:
            if self.deadline is not None:
                spared = min(time.monotonic() - began, self._spared)
                self._spared -= spared
                self.deadline += spared

    def elapsed(self) -> float:
        return time.monotonic() - self.started
