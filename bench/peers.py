"""The peers of the serving benchmark (bench/bench_serving.py), installed by the benchmark into
virtual environments of their own (never project dependencies) and run as private processes:

- pypiserver under ``gunicorn -w4`` (its documented deployment), with watchdog pinned to 2.2.1:
  pypiserver caches its package listing and invalidates the cache with watchdog, and with newer
  watchdog releases that cache is never used (pypiserver issue 502), which would make it
  re-list the directory on every request and understate it;
- devpi-server in ``--offline-mode`` (it never reaches out to PyPI), packages uploaded to an
  index ``root/bench`` through its HTTP API.

The environments are kept under ``BENCH_PEERS_DIR`` (default ``var/bench-peers/`` in the work tree)
and reused while their pins are unchanged. Every server runs in its own process group, so
`cpu_seconds` can add up the CPU time of all its processes."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

PYPISERVER = ["pypiserver==2.4.2", "gunicorn==27.0.1", "watchdog==2.2.1"]
DEVPI = ["devpi-server==6.20.3"]


def peers_dir(root: Path) -> Path:
    return Path(os.environ.get("BENCH_PEERS_DIR") or root / "var" / "bench-peers")


def venv(base: Path, name: str, pins: list[str]) -> Path:
    """A virtual environment with exactly these pins (reused when it already has them)."""
    target = base / name
    marker = target / "bench-pins.txt"
    wanted = "\n".join(pins) + "\n"
    if marker.exists() and marker.read_text() == wanted:
        return target
    shutil.rmtree(target, ignore_errors=True)
    base.mkdir(parents=True, exist_ok=True)
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", str(target)], check=True)
    installed = subprocess.run(
        [str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
        capture_output=True,
        text=True,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"installing {' '.join(pins)} failed:\n{installed.stderr[-3000:]}")
    marker.write_text(wanted)
    return target


@dataclass
class Process:
    """A server process (and everything it forks: one process group)."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    pgids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.pgids = self.pgids or [self.popen.pid]

    def stop(self) -> None:
        from tests.services import stop_process_group

        stop_process_group(self.popen, timeout=15)


def spawn(
    name: str, command: list[str], log: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Process:
    with log.open("ab") as output:
        popen = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Process(name, popen, log)


def wait_http(url: str, process: Process, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            output = process.log.read_text()[-3000:]
            raise RuntimeError(f"{process.name} exited ({process.popen.returncode}):\n{output}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{process.name} did not answer {url} within {timeout} s:\n{process.log.read_text()[-3000:]}")


def start_pypiserver(env_dir: Path, packages: Path, port: int, log: Path) -> Process:
    app = f'pypiserver:app(root="{packages}")'
    command = [str(env_dir / "bin" / "gunicorn"), "-w4", "--bind", f"127.0.0.1:{port}", "--no-control-socket", app]
    process = spawn("pypiserver", command, log)
    wait_http(f"http://127.0.0.1:{port}/simple/", process)
    return process


def start_devpi(env_dir: Path, server_dir: Path, port: int, log: Path) -> Process:
    bin_dir = env_dir / "bin"
    if not (server_dir / ".nodeinfo").exists():
        subprocess.run(
            [str(bin_dir / "devpi-init"), "--serverdir", str(server_dir)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    command = [
        str(bin_dir / "devpi-server"),
        "--serverdir", str(server_dir), "--offline-mode", "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    process = spawn("devpi-server", command, log)
    wait_http(f"http://127.0.0.1:{port}/+api", process)
    return process


def devpi_upload(url: str, files: Iterable[tuple[str, str, Path]]) -> dict[str, str]:
    """Upload (name, version, path) files to the index root/bench; returns each file name's path
    on the server (``/root/bench/+f/…/FILE``)."""
    login = httpx.post(f"{url}/+login", json={"user": "root", "password": ""}, headers={"Accept": "application/json"})
    login.raise_for_status()
    secret = login.json()["result"]["password"]
    headers = {"X-Devpi-Auth": base64.b64encode(f"root:{secret}".encode()).decode(), "Accept": "application/json"}
    created = httpx.put(f"{url}/root/bench", json={"type": "stage", "bases": [], "volatile": True}, headers=headers)
    if created.status_code not in (200, 201, 409):
        raise RuntimeError(f"devpi: creating root/bench answered {created.status_code}: {created.text[:300]}")
    items = list(files)

    def upload(item: tuple[str, str, Path]) -> None:
        name, version, path = item
        with httpx.Client(timeout=60) as http:
            answer = http.post(
                f"{url}/root/bench/",
                data={":action": "file_upload", "name": name, "version": version},
                files={"content": (path.name, path.read_bytes())},
                headers=headers,
            )
        if answer.status_code != 200:
            raise RuntimeError(f"devpi: uploading {path.name} answered {answer.status_code}: {answer.text[:300]}")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(upload, items))
    links: dict[str, str] = {}
    import re

    with httpx.Client(timeout=30) as http:
        for name in sorted({name for name, _, _ in items}):
            page = http.get(f"{url}/root/bench/+simple/{name}/").text
            for href in re.findall(r'href="\.\./\.\./(\+f/[^"#]+)', page):
                links[href.rsplit("/", 1)[-1]] = f"/root/bench/{href}"
    return links


def cpu_seconds(pgids: Iterable[int]) -> float:
    """User + system CPU time of every process in these process groups."""
    wanted = set(pgids)
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in wanted:  # pgrp; then utime and stime are fields 11 and 12 after ')'
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")
