"""Functions the sandbox tests run in the sandbox (importable by the zygote: the tests' sys.path is
passed to it). Each misbehaves in one way."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from typing import Any

from extensions.errors import ArchiveError
from extensions.sandbox import Progress


def echo(*, progress: Progress, value: Any) -> Any:
    progress.step("echoing")
    progress.send({"type": "note", "seen": value})
    return {"value": value, "pid": os.getpid()}


def spin(*, progress: Progress, budget: float) -> None:
    progress.step("content check", "templates/x.j2", cpu_seconds=budget)
    while True:
        pass


def spin_telling_its_cpu(*, progress: Progress, budget: float) -> None:
    """Spins, telling the caller every 20 ms of CPU how much CPU the step has used."""
    progress.step("content check", "templates/x.j2", cpu_seconds=budget)
    started = time.process_time()
    told = started
    while True:
        now = time.process_time()
        if now - told >= 0.02:
            progress.send({"type": "note", "cpu": now - started})
            told = now


# A tool that spins, printing its CPU time every 20 ms of it.
_SPINNING_TOOL = """
import sys, time
told = 0.0
while True:
    now = time.process_time()
    if now - told >= 0.02:
        print(now, flush=True)
        told = now
"""


def tool_spinning(*, progress: Progress, budget: float) -> dict[str, Any]:
    """Runs a spinning tool as a check runs its tools; returns how it ended and its last CPU time."""
    progress.step("content check", "check.nu", cpu_seconds=budget)
    proc = subprocess.run(
        [sys.executable, "-c", _SPINNING_TOOL], preexec_fn=progress.tool_preexec(), capture_output=True, text=True
    )
    told = proc.stdout.split()
    return {"returncode": proc.returncode, "cpu": float(told[-1]) if told else None}


def backtrack(*, progress: Progress) -> None:
    progress.step("[build] pattern matching", "build.include[0]")
    re.match(r"(a*)*b", "a" * 40)  # catastrophic backtracking inside the C regex engine


def steps_then_spin(*, progress: Progress) -> None:
    for name in ("a.toml", "b.toml"):
        progress.step("content check", name, cpu_seconds=1)
        deadline = time.process_time() + 0.5  # each step within its own budget
        while time.process_time() < deadline:
            pass
    progress.step("content check", "c.toml", cpu_seconds=1)
    while True:
        pass


def hog(*, progress: Progress) -> None:
    progress.step("README rendering", "README.md")
    blocks = []
    while True:
        blocks.append(bytearray(8 * 1024 * 1024))


def sleep(*, progress: Progress, seconds: float) -> None:
    progress.step("content check", "nulib/slow.nu")
    time.sleep(seconds)


def sleep_in_tool(*, progress: Progress, marker: str) -> None:
    """Starts a tool that would outlive the step, then hangs: a kill must take the tool too."""
    progress.step("content check", "kcl")
    tool = subprocess.Popen(["sleep", "60"])
    with open(marker, "w") as handle:
        handle.write(str(tool.pid))
    time.sleep(60)


def chatter(*, progress: Progress) -> None:
    progress.step("content checks")
    for _ in range(100_000):
        progress.send({"type": "noise", "data": "x" * 1000})


def many_files(*, progress: Progress) -> None:
    progress.step("archive inspection")
    handles = [open(os.devnull) for _ in range(10_000)]  # noqa: SIM115
    handles.clear()


def big_file(*, progress: Progress, path: str) -> None:
    progress.step("archive inspection", "huge.bin")
    with open(path, "wb") as handle:
        for _ in range(64):
            handle.write(b"x" * 1024 * 1024)


def connect(*, progress: Progress, port: int) -> str:
    progress.step("network")
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError as exc:
            return f"refused: {exc.strerror or exc}"
    return "connected"


def author_error(*, progress: Progress) -> None:
    progress.step("archive inspection")
    raise ArchiveError("the package is truncated; allowed: a complete .tar.gz", path="demo-1.0.0/")


def bug(*, progress: Progress) -> None:
    progress.step("content checks")
    raise KeyError("a bug of ours")


def exit_silently(*, progress: Progress) -> None:
    progress.step("content checks")
    os._exit(3)


def limits_seen(*, progress: Progress) -> dict[str, Any]:
    import resource

    return {
        "as": resource.getrlimit(resource.RLIMIT_AS),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
        "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
        "core": resource.getrlimit(resource.RLIMIT_CORE),
        "session_leader": os.getsid(0) == os.getpid(),
        "stdout_is_devnull": os.path.samestat(os.fstat(1), os.stat(os.devnull)),
    }
