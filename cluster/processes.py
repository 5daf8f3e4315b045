"""The cluster's processes, told apart by pid *and* start time, so that a stop signals exactly what
the cluster started and never a process that later took a recycled pid.

A `Proc` is a process started in a session of its own (its process group is its pid); its record
(name, pid, start time, log) is what the cluster's state file keeps. Processes are read from
/proc (Linux)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state is [0], ppid [1], pgrp [2],
    utime [11], stime [12], cutime [13], cstime [14], starttime [19]); None if there is no such
    process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks after boot), or None if it does not exist."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _all_stats() -> Iterator[tuple[int, list[bytes]]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                yield int(entry), fields


def descendants(pid: int) -> list[int]:
    """Every live process below pid (children first, then theirs), zombies aside."""
    children: dict[int, list[int]] = {}
    for child, fields in _all_stats():
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of pid and every live process below it, with what each has collected from
    the children it waited for (a sandboxed step that ended is counted through its zygote)."""
    ticks = 0
    for member in [pid, *descendants(pid)]:
        fields = _stat(member)
        if fields is not None:
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / _CLOCK_TICKS


@dataclass
class Proc:
    """One process the cluster started (the leader of its own session)."""

    name: str
    pid: int
    started: int
    log: str
    command: list[str] = field(default_factory=list)
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def spawn(
        cls,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        preexec_fn: Callable[[], None] | None = None,
        user: int | None = None,
        group: int | None = None,
    ) -> Proc:
        log.parent.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {}
        if user is not None:
            extra = {"user": user, "group": group, "extra_groups": []}
        with log.open("ab") as output:
            popen = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env),
                start_new_session=True,
                preexec_fn=preexec_fn,
                **extra,
            )
        started = start_time(popen.pid) or 0
        return cls(name=name, pid=popen.pid, started=started, log=str(log), command=list(command), popen=popen)

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "started": self.started, "log": self.log, "command": self.command}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Proc:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            started=int(data["started"]),
            log=str(data["log"]),
            command=list(data.get("command", [])),
        )

    def alive(self) -> bool:
        """Whether this very process (same pid, same start time) still runs."""
        if self.popen is not None and self.popen.poll() is not None:
            return False
        fields = _stat(self.pid)
        return fields is not None and fields[0] != b"Z" and int(fields[19]) == self.started

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def send(self, signum: int) -> bool:
        """Signal this process (not its children); False when it is gone."""
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)
            return True
        return False

    def wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def kill_tree(self) -> None:
        """SIGKILL the process and every process below it at once, as if its machine died."""
        if not self.alive():
            return
        members = [self.pid, *descendants(self.pid)]
        for member in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        self.wait_gone(10)

    def stop(self, *, signum: int = signal.SIGTERM, timeout: float = 15) -> None:
        """A graceful stop (signum to the process, which stops its own children), then SIGKILL of
        whatever of its tree is left after the timeout."""
        if not self.alive():
            self._reap()
            return
        below = descendants(self.pid)
        self.send(signum)
        if not self.wait_gone(timeout):
            self.kill_tree()
        for member in below:  # children that outlived their parent (none, normally)
            if start_time(member) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(5)

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.pid) if self.alive() else 0.0

    def tail(self, lines: int = 40) -> str:
        try:
            text = Path(self.log).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:])
