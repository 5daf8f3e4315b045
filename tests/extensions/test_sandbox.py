"""The build sandbox (extensions.sandbox): a child per run with hard limits; every way out of it is
one of a result, the author's error, a limit naming the step and file, or our crash."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from extensions.errors import ExtensionError
from extensions.sandbox import SandboxCrash, SandboxLimitExceeded, SandboxLimits, Zygote, run_sandboxed

MiB = 1024 * 1024
LIMITS = SandboxLimits(cpu_seconds=5, memory_bytes=256 * MiB, wall_seconds=20, output_bytes=1 * MiB, open_files=64)
T = "tests.extensions.sandbox_targets"


def run(name: str, limits: SandboxLimits = LIMITS, **kwargs: object) -> object:
    return run_sandboxed(f"{T}.{name}", kwargs, limits=limits).value


def exceeded(name: str, limits: SandboxLimits = LIMITS, **kwargs: object) -> SandboxLimitExceeded:
    with pytest.raises(SandboxLimitExceeded) as caught:
        run(name, limits, **kwargs)
    return caught.value


def test_a_result_and_the_events_come_back_from_another_process() -> None:
    events: list[dict[str, object]] = []
    result = run_sandboxed(f"{T}.echo", {"value": {"a": [1, "é"]}}, limits=LIMITS, on_event=events.append)
    assert result.value["value"] == {"a": [1, "é"]}
    assert result.value["pid"] != os.getpid()
    assert [e["type"] for e in events] == ["step", "note"]
    assert events[1]["seen"] == {"a": [1, "é"]}
    assert result.max_rss_bytes > 0


def test_a_step_past_its_cpu_budget_is_killed_and_named_with_its_file() -> None:
    started = time.monotonic()
    error = exceeded("spin", budget=1)
    assert str(error).startswith("content check of templates/x.j2 exceeded 1 s of CPU")
    assert (error.code, error.step, error.file) == ("invalid_archive", "content check", "templates/x.j2")
    assert error.limit == "cpu"
    assert time.monotonic() - started < 30  # killed, not left spinning (1 s of CPU, on a busy machine)


def test_a_step_is_stopped_at_its_budget_not_at_the_next_whole_second() -> None:
    # RLIMIT_CPU counts whole seconds: alone, it would let a 0.5 s step spin to 1 s of CPU.
    events: list[dict[str, object]] = []
    with pytest.raises(SandboxLimitExceeded) as caught:
        run_sandboxed(f"{T}.spin_telling_its_cpu", {"budget": 0.5}, limits=LIMITS, on_event=events.append)
    assert str(caught.value).startswith("content check of templates/x.j2 exceeded 0.5 s of CPU")
    used = [float(str(e["cpu"])) for e in events if "cpu" in e]
    assert 0.4 < used[-1] < 0.6, used[-5:]


def test_a_tool_a_step_runs_is_stopped_at_the_step_s_budget_not_at_the_next_whole_second() -> None:
    # Timers are not inherited across fork: the tool's child starts its own before exec.
    ended = run("tool_spinning", budget=0.5)
    assert isinstance(ended, dict)
    assert ended["returncode"] == -signal.SIGPROF
    assert 0.4 < ended["cpu"] < 0.6, ended


def test_catastrophic_backtracking_inside_the_regex_engine_is_stopped_by_the_cpu_limit() -> None:
    error = exceeded("backtrack", SandboxLimits(cpu_seconds=1, wall_seconds=20))
    assert str(error).startswith("[build] pattern matching of build.include[0] exceeded 1 s of CPU")


def test_each_step_gets_its_own_cpu_budget() -> None:
    error = exceeded("steps_then_spin", SandboxLimits(cpu_seconds=1, wall_seconds=20))
    assert error.file == "c.toml"  # a.toml and b.toml took half a second each: within their budgets


def test_memory_past_the_limit_is_the_author_s_error() -> None:
    error = exceeded("hog", SandboxLimits(memory_bytes=128 * MiB, wall_seconds=20))
    assert error.limit in ("memory", "memory_or_crash")
    assert str(error).startswith("README rendering of README.md exceeded the memory limit of 128 MiB")


def test_wall_time_is_bounded_and_the_deadline_cuts_it_further() -> None:
    started = time.monotonic()
    error = exceeded("sleep", SandboxLimits(wall_seconds=1.5), seconds=30)
    assert error.limit == "wall" and "did not finish within 1.5 s" in str(error)
    assert time.monotonic() - started < 10
    started = time.monotonic()
    with pytest.raises(SandboxLimitExceeded):
        run_sandboxed(f"{T}.sleep", {"seconds": 30}, limits=LIMITS, deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 10  # the deadline, plus the grace that lets a step say so itself


def test_a_kill_takes_the_tools_the_child_started(tmp_path: Path) -> None:
    marker = tmp_path / "tool.pid"
    with pytest.raises(SandboxLimitExceeded):
        run("sleep_in_tool", SandboxLimits(wall_seconds=2), marker=str(marker))
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the tool outlived its sandbox")


def test_output_is_bounded() -> None:
    error = exceeded("chatter", SandboxLimits(output_bytes=256 * 1024))
    assert error.limit == "output" and "more than 262144 bytes of results" in str(error)


def test_open_files_and_file_sizes_are_bounded(tmp_path: Path) -> None:
    assert exceeded("many_files", SandboxLimits(open_files=64)).limit == "files"
    target = tmp_path / "huge.bin"
    error = exceeded("big_file", SandboxLimits(file_bytes=4 * MiB), path=str(target))
    assert error.limit == "file_size" and "wrote a file larger than 4 MiB" in str(error)
    assert target.stat().st_size <= 4 * MiB


def test_the_child_runs_with_hard_limits_its_own_session_and_no_stdout() -> None:
    seen = run("limits_seen", SandboxLimits(memory_bytes=300 * MiB, open_files=100, file_bytes=7 * MiB))
    assert seen["as"] == [300 * MiB, 300 * MiB]
    assert seen["nofile"] == [100, 100]
    assert seen["fsize"] == [7 * MiB, 7 * MiB]
    assert seen["core"] == [0, 0]
    assert seen["session_leader"] and seen["stdout_is_devnull"]


def test_the_child_has_no_network() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        result = run_sandboxed(f"{T}.connect", {"port": port}, limits=LIMITS)
        if not result.isolated:
            pytest.skip("this platform does not let the sandbox unshare its network")
        assert str(result.value).startswith("refused")
        open_result = run_sandboxed(f"{T}.connect", {"port": port}, limits=SandboxLimits(isolate_network=False))
        assert open_result.value == "connected" and not open_result.isolated


def test_the_author_s_errors_come_back_with_their_code_path_and_message() -> None:
    with pytest.raises(ExtensionError) as caught:
        run("author_error")
    error = caught.value
    assert (error.code, error.path, error.message) == (
        "invalid_archive",
        "demo-1.0.0/",
        "the package is truncated; allowed: a complete .tar.gz",
    )
    assert not isinstance(error, SandboxLimitExceeded)


def test_our_own_bugs_are_a_crash_with_the_child_s_traceback() -> None:
    with pytest.raises(SandboxCrash) as caught:
        run("bug")
    assert "KeyError" in str(caught.value) and "a bug of ours" in caught.value.details
    with pytest.raises(SandboxCrash) as caught:
        run("exit_silently")
    assert "without a result (exit 3)" in str(caught.value)


def test_an_unknown_target_is_a_crash_not_a_hang() -> None:
    with pytest.raises(SandboxCrash):
        run_sandboxed(f"{T}.no_such_function", {}, limits=LIMITS)


def test_a_dead_zygote_is_replaced() -> None:
    run("echo", value=1)
    zygote = Zygote.get()
    os.kill(zygote.process.pid, signal.SIGKILL)
    zygote.process.wait()
    assert run("echo", value=2)["value"] == 2
    assert Zygote.get() is not zygote


def test_concurrent_runs_each_get_their_own_answer() -> None:
    answers: dict[int, object] = {}

    def one(i: int) -> None:
        answers[i] = run("echo", value=i)["value"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == {i: i for i in range(8)}
