"""The hard bound on one resolution, checked from inside the search (the resolvelib provider's
callbacks and between the complete solver's bounded steps, never only per round), and an optional
probe that says the caller has gone (a client that disconnected), so that nothing keeps computing
an answer nobody waits for.

The bound is on the resolution's own work: ``seconds`` of the resolving thread's CPU time, read
from the wall clock while the machine is quiet (one second of wall time is one second of work).
Two kinds of time are not charged, because charging them would answer ``too_complex`` to an easy
request on a busy machine: waiting for the catalogue (a database read on the registry, a download
of signed metadata on the client, and the parse of what it read) and waiting for a CPU (other
threads and processes running). Neither is free either: the wall clock stops the whole at
``1 + WAIT_ALLOWANCE`` times the budget (by default 2 s of work within 10 s in all)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds one resolution may take, by default (the registry's REGISTRY_RESOLVE_TIMEOUT overrides it).
DEFAULT_TIMEOUT = 2.0

#: How much waiting (for the catalogue, for a CPU) one resolution may be spared, as a multiple of
#: its budget.
WAIT_ALLOWANCE = 4.0

# Seconds between two calls of the (costlier) cancellation probe.
PROBE_INTERVAL = 0.05


class OutOfBudget(Exception):
    """The budget is spent (``cancelled`` False) or the caller went away (``cancelled`` True)."""

    def __init__(self, *, cancelled: bool) -> None:
        super().__init__("cancelled" if cancelled else "out of time")
        self.cancelled = cancelled


class Budget:
    """``seconds`` of work from now (None: no bound); ``cancelled`` returns True once nobody waits
    for the answer (probed every few checks).

    ``deadline`` is the earliest wall-clock time the work can have reached ``seconds``; only when
    it passes is the thread's CPU time read (a system call, so not on every check), and the
    deadline moved on by the time that was not work, up to ``ceiling``."""

    __slots__ = ("_probed", "_started_cpu", "_waited_cpu", "cancelled", "ceiling", "deadline", "seconds", "started")

    def __init__(self, seconds: float | None = DEFAULT_TIMEOUT, *, cancelled: Callable[[], bool] | None = None) -> None:
        if seconds is not None and not seconds > 0:
            raise ValueError(f"a resolution budget must be a positive number of seconds, not {seconds!r}")
        self.seconds = seconds
        self.started = time.monotonic()
        self.deadline = None if seconds is None else self.started + seconds
        self.ceiling = None if seconds is None else self.started + seconds * (1 + WAIT_ALLOWANCE)
        self._started_cpu = time.thread_time()
        self._waited_cpu = 0.0  # CPU time spent inside waiting(): reading the catalogue
        self.cancelled = cancelled
        self._probed = self.started

    def check(self) -> None:
        """``OutOfBudget`` once the work has taken ``seconds``, the wall clock has reached the
        ceiling, or the caller has gone (asked at most every ``PROBE_INTERVAL`` seconds)."""
        now = time.monotonic()
        if self.deadline is not None and now > self.deadline:
            self._move_deadline(now)
        if self.cancelled is not None and now - self._probed >= PROBE_INTERVAL:
            self._probed = now
            if self.cancelled():
                raise OutOfBudget(cancelled=True)

    def _move_deadline(self, now: float) -> None:
        assert self.seconds is not None and self.ceiling is not None
        left = self.seconds - self.work()
        if left <= 0 or now >= self.ceiling:
            raise OutOfBudget(cancelled=False)
        self.deadline = min(now + left, self.ceiling)

    def work(self) -> float:
        """CPU seconds this resolution has spent outside the catalogue's reads."""
        return time.thread_time() - self._started_cpu - self._waited_cpu

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """What happens inside (reading the catalogue) is not charged as work; the wall clock's
        ceiling still counts it."""
        began = time.thread_time()
        try:
            yield
        finally:
            self._waited_cpu += time.thread_time() - began
