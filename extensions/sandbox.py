"""A child process with hard limits, for everything that touches an author's bytes (SPEC 2.4).

The registry never reads, matches, checks or renders uploaded content in a web or worker
interpreter: `run_sandboxed` runs a function of this package in a fresh child process and waits
for it, so a ReDoS, a decompression or template bomb, a pathological README or a crashing parser
costs at most the limits below and never stalls, exhausts or crashes the caller.

The child:

- is forked from a small *zygote*: a single-threaded interpreter started once per calling process
  (`Zygote`) with the modules the sandboxed steps need already imported, so a run costs a fork,
  not an interpreter start, and nothing is ever forked from a multi-threaded web or worker
  process;
- leads a session of its own (the tools it runs are in its process group; a kill takes them all);
- has, as hard ``setrlimit`` limits inherited by every tool it starts: an address-space limit
  (``memory_bytes``), a file-size limit (``file_bytes``), an open-files limit (``open_files``) and
  no core dumps; plus a CPU-time limit per *step* (``cpu_seconds``): the function announces each
  step (archive inspection, a content check of one file, README rendering, ...) with
  `Progress.step`, which starts a CPU-time timer of the step's budget (``ITIMER_PROF``: a step
  past its budget is killed by ``SIGPROF``) and moves the soft ``RLIMIT_CPU`` to "CPU used so far
  + the step's budget", rounded up to whole seconds, as a backstop (``SIGXCPU``);
- runs in a network namespace of its own (no network at all) where the platform allows it
  (Linux, with the privilege to unshare); where it cannot, it says so in `SandboxResult.isolated`;
- writes nothing to the caller's standard streams (its own go to ``/dev/null``) and sends back at
  most ``output_bytes``: progress events and one result, over a pipe.

The caller waits at most ``wall_seconds``. Whatever happens (a limit, a crash, an exception), the
child and everything it started are gone when `run_sandboxed` returns, and the outcome is one of:
the function's result; the `ExtensionError` it raised (the author's error, rebuilt with its code,
message, path and details); `SandboxLimitExceeded` (the author's error too: which step, which
file, which limit: ``content check of templates/x.j2 exceeded 10 s of CPU``); or `SandboxCrash`
(the platform's error, with the child's traceback for the log).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import logging
import math
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extensions.errors import ExtensionError, Problem, Severity

__all__ = [
    "Progress",
    "SandboxCrash",
    "SandboxLimitExceeded",
    "SandboxLimits",
    "SandboxResult",
    "run_sandboxed",
]

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Modules every sandboxed step needs, imported once in the zygote rather than in every child.
PRELOAD = ("extensions.sandboxed_steps",)
_CLONE_NEWNET = 0x40000000
_RESERVE_BYTES = 256 * 1024  # freed on MemoryError, so the child can still say what happened


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one sandboxed run (the registry builds one from its REGISTRY_SANDBOX_* settings)."""

    cpu_seconds: float = 10.0  # CPU time of one step (a step may ask for less: Progress.step)
    memory_bytes: int = 512 * MiB  # address space of the child and of each tool it runs
    wall_seconds: float = 300.0  # the whole run
    output_bytes: int = 8 * MiB  # what the run sends back, events and result together
    open_files: int = 256
    file_bytes: int = 256 * MiB  # the largest file the child or a tool may write
    isolate_network: bool = True

    def describe(self) -> str:
        return (
            f"{_seconds(self.cpu_seconds)} of CPU per step, {_bytes(self.memory_bytes)} of memory, "
            f"{_seconds(self.wall_seconds)} in all"
        )


class SandboxLimitExceeded(ExtensionError):
    """A sandboxed step went past a limit: the author's content is to blame (``invalid_archive``,
    or the code the step declared, e.g. ``invalid_manifest``). ``step``, ``file`` and ``limit``
    (``cpu``, ``memory``, ``wall``, ``output``, ``files``) say which."""

    def __init__(self, message: str, *, step: str, file: str, limit: str, code: str = "invalid_archive") -> None:
        super().__init__(message, path=file, details=[{"step": step, "path": file, "limit": limit}])
        self.code = code
        self.step = step
        self.file = file
        self.limit = limit

    def __str__(self) -> str:
        return self.message


class SandboxCrash(RuntimeError):
    """The sandboxed function failed in a way that is not the author's (a bug of ours, a missing
    tool, a child that died without a word). ``details`` holds the child's traceback for the log."""

    def __init__(self, message: str, *, details: str = "") -> None:
        super().__init__(message)
        self.details = details


class _AuthorError(ExtensionError):
    """An `ExtensionError` raised in the child, rebuilt in the caller with its code and details."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        problems = [
            Problem(str(p.get("path", "")), str(p.get("message", "")), _severity(p.get("severity")))
            for p in data.get("problems") or []
            if isinstance(p, dict)
        ]
        super().__init__(
            str(data.get("message", "")),
            path=str(data.get("path", "")),
            problems=problems,
            details=data.get("details"),
        )
        self.code = str(data.get("code") or "invalid_archive")
        self.error_class = str(data.get("class", ""))
        self.extra: dict[str, Any] = dict(data.get("extra") or {})


def _severity(value: object) -> Severity:
    return "warning" if value == "warning" else "error"


@dataclass
class SandboxResult:
    value: Any
    isolated: bool  # whether the child ran without network
    max_rss_bytes: int  # the child's peak resident memory (and its tools')
    cpu_seconds: float  # CPU the child (and its tools) used
    events: list[dict[str, Any]] = field(default_factory=list)


# --- inside the child -------------------------------------------------------------------------------


class _Channel:
    """The child's end of its result pipe: length-prefixed messages."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(struct.pack(">I", len(data)) + data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


class Progress:
    """What a sandboxed function uses to announce its steps and send events to the caller."""

    def __init__(self, conn: _Channel, limits: SandboxLimits) -> None:
        self._conn = conn
        self._limits = limits
        self.current: dict[str, Any] = {"step": "starting", "path": "", "code": "invalid_archive"}

    def step(
        self,
        step: str,
        path: str = "",
        *,
        cpu_seconds: float | None = None,
        code: str = "invalid_archive",
        log: str = "",
    ) -> None:
        """Start a step (``path``: the file it is about, if one): it gets ``cpu_seconds`` of CPU
        (at most the run's ``cpu_seconds``) from now on; past it the child is killed and the caller
        blames this step and file. ``log`` is the caller's name for it (its build log's step)."""
        budget = self._limits.cpu_seconds if cpu_seconds is None else min(cpu_seconds, self._limits.cpu_seconds)
        self.current = {"step": step, "path": path, "code": code, "cpu_seconds": budget, "log": log or step}
        self.send({"type": "step", **self.current})
        _set_cpu_budget(budget)

    def send(self, event: Mapping[str, Any]) -> None:
        self._conn.send_bytes(json.dumps(event, default=str, ensure_ascii=False).encode("utf-8"))

    def tool_preexec(self) -> Callable[[], None]:
        """For ``subprocess``'s ``preexec_fn``: a tool gets the current step's CPU budget of its own
        (its other limits are inherited). As for a step, a timer stops it on time (``SIGPROF``:
        timers are not inherited across fork, so it is started in the tool's child, and an exec
        keeps it) and ``RLIMIT_CPU``, in whole seconds, is the backstop. (A tool that handles
        ``SIGPROF`` itself, as Go's runtime does, runs on to the backstop; Nushell and KCL do not.)"""
        seconds = self.current.get("cpu_seconds") or self._limits.cpu_seconds
        budget = math.ceil(seconds)

        def limit() -> None:
            _, hard = resource.getrlimit(resource.RLIMIT_CPU)
            if hard == resource.RLIM_INFINITY:
                resource.setrlimit(resource.RLIMIT_CPU, (budget, budget + 1))
            else:
                resource.setrlimit(resource.RLIMIT_CPU, (min(budget, hard), hard))
            signal.setitimer(signal.ITIMER_PROF, seconds)

        return limit


#: The signals a process past its CPU budget dies of: the timer's (SIGPROF), the rlimit's (SIGXCPU).
CPU_LIMIT_SIGNALS = frozenset({signal.SIGPROF, signal.SIGXCPU})


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _set_cpu_budget(seconds: float) -> None:
    soft = math.ceil(_cpu_used() + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    # RLIMIT_CPU counts whole seconds, so a step could run up to a second past its budget: a
    # profiling timer, which counts this process's CPU time finely, stops it on time (SIGPROF,
    # whose default action ends the process). The limit stays as the backstop.
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _isolate_network() -> bool:
    """A network namespace of our own: no interface but a loopback that is down."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.unshare(_CLONE_NEWNET) == 0)
    except (OSError, AttributeError):
        return False


def _confine(limits: SandboxLimits) -> bool:
    """Everything the child does before the function runs; returns whether the network is cut."""
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    for sig in (signal.SIGXCPU, signal.SIGPROF, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    isolated = _isolate_network() if limits.isolate_network else False
    total_cpu = math.ceil(limits.wall_seconds) + 1  # a hard cap: the soft limit moves per step
    resource.setrlimit(resource.RLIMIT_CPU, (total_cpu, total_cpu))
    _set_cpu_budget(limits.cpu_seconds)  # the budget until the function announces its first step
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return isolated


def _child_main(conn: _Channel, target: str, kwargs: dict[str, Any], limits: SandboxLimits) -> None:
    """The child's entry point (runs in the child the zygote forked)."""
    reserve = bytearray(_RESERVE_BYTES)
    isolated = False
    progress = Progress(conn, limits)
    try:
        isolated = _confine(limits)
        module_name, _, func_name = target.rpartition(".")
        func = getattr(sys.modules.get(module_name) or __import__(module_name, fromlist=[func_name]), func_name)
        value = func(progress=progress, **kwargs)
        event: dict[str, Any] = {"type": "result", "value": value}
    except MemoryError:
        del reserve
        event = {"type": "limit", "limit": "memory"}
    except ExtensionError as exc:
        event = {
            "type": "author_error",
            "class": type(exc).__name__,
            "code": exc.code,
            "message": exc.message,
            "path": exc.path,
            "details": exc.details_list(),
            "problems": [p.as_dict() for p in exc.problems],
            "extra": {k: v for k, v in vars(exc).items() if k in ("name", "limit", "value", "suggestion")},
        }
    except RecursionError:
        event = {"type": "limit", "limit": "recursion"}
    except OSError as exc:
        if exc.errno == 27:  # EFBIG: past RLIMIT_FSIZE
            event = {"type": "limit", "limit": "file_size"}
        elif exc.errno == 24:  # EMFILE: past RLIMIT_NOFILE
            event = {"type": "limit", "limit": "files"}
        else:
            event = {"type": "crash", "error": repr(exc), "traceback": traceback.format_exc()}
    except BaseException as exc:  # noqa: BLE001 - everything else is ours to log
        event = {"type": "crash", "error": repr(exc), "traceback": traceback.format_exc()}
    own = resource.getrusage(resource.RUSAGE_SELF)
    tools = resource.getrusage(resource.RUSAGE_CHILDREN)
    event["rusage"] = {
        "max_rss_bytes": max(own.ru_maxrss, tools.ru_maxrss) * 1024,
        "cpu_seconds": own.ru_utime + own.ru_stime + tools.ru_utime + tools.ru_stime,
    }
    event["isolated"] = isolated
    try:
        conn.send_bytes(json.dumps(event, default=str, ensure_ascii=False).encode("utf-8"))
    except (ValueError, TypeError):
        conn.send_bytes(b'{"type": "crash", "error": "the result could not be sent"}')
    except OSError:
        pass  # the caller stopped listening (it killed us, or went past output_bytes)


# --- the zygote ---------------------------------------------------------------------------------------
#
# The caller and its zygote share a SOCK_SEQPACKET socket. A job is one message: the JSON of
# {"target", "kwargs", "limits"} with two file descriptors, the write ends of a *result* pipe (the
# child's events and result) and a *status* pipe (the zygote writes the child's pid, then its exit
# status). The zygote forks a child per job and reaps it; it ends, killing the children it has,
# when the caller's end of the socket closes.

_MAX_JOB_BYTES = 64 * 1024
_DEADLINE_GRACE_SECONDS = 2.0
_STATUS = struct.Struct(">qq")  # (pid, wait status or -1 for "started")


def _zygote_main(fd: int) -> None:  # pragma: no cover - runs in the zygote process
    control = socket.socket(fileno=fd)
    setup = control.recv(_MAX_JOB_BYTES)
    sys.path[:] = json.loads(setup)["sys_path"]
    for name in PRELOAD:
        __import__(name)
    # What is loaded now is shared with every child: frozen out of the collector, a child's
    # collections do not touch (and so copy) the zygote's pages.
    gc.collect()
    gc.freeze()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status_fds: dict[int, int] = {}
    try:
        while True:
            ready, _, _ = select.select([control.fileno(), wake_r], [], [])
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            _reap(status_fds)
            if control.fileno() not in ready:
                continue
            message, fds, _, _ = socket.recv_fds(control, _MAX_JOB_BYTES, 2)
            if not message:
                return  # the caller is gone
            if len(fds) != 2:
                for extra in fds:
                    os.close(extra)
                continue
            result_w, status_w = fds
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    control.close()
                    os.close(status_w)
                    os.close(wake_r)
                    os.close(wake_w)
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    job = json.loads(message)
                    _child_main(_Channel(result_w), job["target"], job["kwargs"], SandboxLimits(**job["limits"]))
                except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
                    code = 70
                finally:
                    os._exit(code)
            os.close(result_w)
            with contextlib.suppress(OSError):
                os.write(status_w, _STATUS.pack(pid, -1))
            status_fds[pid] = status_w
    finally:
        for pid in status_fds:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def _reap(status_fds: dict[int, int]) -> None:  # pragma: no cover - runs in the zygote process
    while status_fds:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_fds.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, _STATUS.pack(pid, status))
            os.close(fd)


class Zygote:
    """The zygote of this process: started on first use, restarted if it died or if this process
    is a fork of the one that started it."""

    _lock = threading.Lock()
    _instance: Zygote | None = None

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.control = parent
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from extensions.sandbox import _zygote_main; _zygote_main({child.fileno()})"],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        child.close()
        parent.sendall(json.dumps({"sys_path": sys.path}).encode("utf-8"))

    @classmethod
    def get(cls) -> Zygote:
        with cls._lock:
            zygote = cls._instance
            if zygote is None or zygote.owner != os.getpid() or zygote.process.poll() is not None:
                if zygote is not None and zygote.owner == os.getpid():
                    zygote.close()
                zygote = cls._instance = cls()
            return zygote

    def submit(self, job: bytes, result_w: int, status_w: int) -> None:
        with self._lock:
            socket.send_fds(self.control, [job], [result_w, status_w])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()
        with contextlib.suppress(OSError):
            self.process.wait(timeout=5)


# --- in the caller ------------------------------------------------------------------------------------


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _bytes(value: int) -> str:
    return f"{value // MiB} MiB" if value % MiB == 0 else f"{value} bytes"


def _what(current: Mapping[str, Any]) -> str:
    step = str(current.get("step") or "a sandboxed step")
    path = str(current.get("path") or "")
    return f"{step} of {path}" if path else step


def _exceeded(current: Mapping[str, Any], limit: str, limits: SandboxLimits) -> SandboxLimitExceeded:
    what = _what(current)
    cpu = float(current.get("cpu_seconds") or limits.cpu_seconds)
    messages = {
        "cpu": f"{what} exceeded {_seconds(cpu)} of CPU",
        "memory": f"{what} exceeded the memory limit of {_bytes(limits.memory_bytes)}",
        "memory_or_crash": f"{what} exceeded the memory limit of {_bytes(limits.memory_bytes)} (or crashed)",
        "wall": f"{what} did not finish within {_seconds(limits.wall_seconds)}",
        "output": f"{what} produced more than {_bytes(limits.output_bytes)} of results",
        "file_size": f"{what} wrote a file larger than {_bytes(limits.file_bytes)}",
        "files": f"{what} opened more than {limits.open_files} files",
        "recursion": f"{what} nested too deeply (Python's recursion limit)",
    }
    return SandboxLimitExceeded(
        messages[limit] + "; allowed: content that the registry can check within its limits",
        step=str(current.get("step", "")),
        file=str(current.get("path", "")),
        limit=limit,
        code=str(current.get("code") or "invalid_archive"),
    )


class _Run:
    """The caller's side of one sandboxed run: reads framed events from the result pipe and the
    child's pid and exit status from the status pipe."""

    def __init__(self, result_r: int, status_r: int, limits: SandboxLimits) -> None:
        self.result_r = result_r
        self.status_r = status_r
        self.limits = limits
        self.buffer = bytearray()
        self.received = 0
        self.pid = 0
        self.status: int | None = None
        self.result_open = True
        self._status_buffer = b""

    def read_status(self) -> None:
        data = os.read(self.status_r, 4096)
        if not data:
            if self.status is None:
                self.status = -1  # the zygote died: the child's fate is unknown
            return
        self._status_buffer += data
        while len(self._status_buffer) >= _STATUS.size:
            pid, status = _STATUS.unpack(self._status_buffer[: _STATUS.size])
            self._status_buffer = self._status_buffer[_STATUS.size :]
            self.pid = pid
            if status != -1:
                self.status = status

    def read_events(self) -> list[bytes]:
        """Whole messages read so far; raises OverflowError past output_bytes."""
        data = os.read(self.result_r, 1024 * 1024)
        if not data:
            self.result_open = False
            return []
        self.received += len(data)
        if self.received > self.limits.output_bytes + 4096:
            raise OverflowError
        self.buffer += data
        messages = []
        while len(self.buffer) >= 4:
            (length,) = struct.unpack(">I", self.buffer[:4])
            if length > self.limits.output_bytes:
                raise OverflowError
            if len(self.buffer) < 4 + length:
                break
            messages.append(bytes(self.buffer[4 : 4 + length]))
            del self.buffer[: 4 + length]
        return messages

    def kill(self) -> None:
        if self.pid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    def wait_status(self, timeout: float) -> None:
        ends = time.monotonic() + timeout
        while self.status is None:
            left = ends - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.status_r], [], [], left)
            if ready:
                self.read_status()


def run_sandboxed(
    target: str,
    kwargs: Mapping[str, Any],
    *,
    limits: SandboxLimits,
    deadline: float | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> SandboxResult:
    """Run ``target`` (``"module.function"`` of this package, called as ``function(progress=...,
    **kwargs)``; its arguments and result are JSON-able, the arguments small) in a sandboxed child;
    see the module.

    ``deadline`` (a `time.monotonic` instant) cuts the wall time further. ``on_event`` sees every
    event the function sends (``{"type": "step", "step", "path", "log", ...}`` and its own) as it
    arrives.
    """
    wall = limits.wall_seconds
    if deadline is not None:
        # A little past the caller's deadline: a function that watches the deadline itself (the
        # content checks do) gets to say so first.
        wall = min(wall, max(0.0, deadline - time.monotonic()) + _DEADLINE_GRACE_SECONDS)
    job = json.dumps({"target": target, "kwargs": dict(kwargs), "limits": dataclasses.asdict(limits)}).encode("utf-8")
    if len(job) > _MAX_JOB_BYTES:
        raise ValueError(f"the sandboxed job's arguments are {len(job)} bytes; at most {_MAX_JOB_BYTES}")
    result_r, result_w = os.pipe()
    status_r, status_w = os.pipe()
    run = _Run(result_r, status_r, limits)
    current: dict[str, Any] = {"step": "starting the sandbox", "path": "", "code": "invalid_archive"}
    events: list[dict[str, Any]] = []
    final: dict[str, Any] | None = None
    try:
        try:
            Zygote.get().submit(job, result_w, status_w)
        except OSError:
            Zygote.get().submit(job, result_w, status_w)  # the zygote had died: once more, with a new one
        finally:
            os.close(result_w)
            os.close(status_w)
        ends = time.monotonic() + wall
        while final is None and (run.result_open or run.status is None):
            left = ends - time.monotonic()
            if left <= 0:
                run.wait_status(0.5)  # the pid, if it was not read yet
                run.kill()
                raise _exceeded(current, "wall", dataclasses.replace(limits, wall_seconds=round(wall, 1)))
            watched = ([run.result_r] if run.result_open else []) + ([run.status_r] if run.status is None else [])
            ready, _, _ = select.select(watched, [], [], min(left, 1.0))
            if run.status_r in ready:
                run.read_status()
            if run.result_r not in ready:
                continue
            try:
                messages = run.read_events()
            except OverflowError:
                run.wait_status(0.5)
                run.kill()
                raise _exceeded(current, "output", limits) from None
            for data in messages:
                try:
                    event = json.loads(data)
                except (ValueError, RecursionError):
                    run.kill()
                    raise SandboxCrash("the sandbox sent a malformed message") from None
                if not isinstance(event, dict):
                    continue
                kind = event.get("type")
                if kind in ("result", "author_error", "limit", "crash"):
                    final = event
                    break
                if kind == "step":
                    current = event
                events.append(event)
                if on_event is not None:
                    on_event(event)
        if final is None or final.get("type") != "result":
            run.wait_status(5.0)  # its exit status says why it ended (or confirms it did)
    finally:
        if final is None:
            run.kill()
            run.wait_status(5.0)
        # After a result the child is exiting by itself, its tools done: no need to wait for it
        # (the zygote reaps it).
        os.close(result_r)
        os.close(status_r)
    if final is None:
        status = run.status
        if status is not None and status >= 0 and os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            if number in CPU_LIMIT_SIGNALS:
                raise _exceeded(current, "cpu", limits)
            if number in (signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS):
                raise _exceeded(current, "memory_or_crash", limits)
            if number == signal.SIGXFSZ:
                raise _exceeded(current, "file_size", limits)
        shown = "unknown" if status is None or status < 0 else str(os.waitstatus_to_exitcode(status))
        raise SandboxCrash(f"the sandbox stopped during {_what(current)} without a result (exit {shown})")
    usage = final.get("rusage") or {}
    kind = final["type"]
    if kind == "limit":
        raise _exceeded(current, str(final.get("limit")), limits)
    if kind == "author_error":
        raise _AuthorError(final)
    if kind == "crash":
        raise SandboxCrash(
            f"the sandbox failed on the registry's side during {_what(current)}: {final.get('error', '')}",
            details=str(final.get("traceback", "")),
        )
    return SandboxResult(
        value=final.get("value"),
        isolated=bool(final.get("isolated")),
        max_rss_bytes=int(usage.get("max_rss_bytes") or 0),
        cpu_seconds=float(usage.get("cpu_seconds") or 0.0),
        events=events,
    )
