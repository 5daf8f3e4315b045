"""End-to-end publish of a 1 MB package to `succeeded`, over HTTP against a real gunicorn registry:
embedded mode (builds in-process) and with Redis and a Celery worker. Median and p95 over 50
publishes each. The baseline, measured in the same run, is the irreducible local work on the same
package: sha256 + safe inspection + safe extraction (`extensions.archive`)."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common import Context, Row, blob_source, median, ms, percentile


def _make_packages(workdir: Path, count: int, name: str = "bench-blob") -> list[Path]:
    from extensions.archive import build_package

    packages = []
    blob = secrets.token_bytes(1024 * 1024)  # incompressible: the package is ~1 MB
    for i in range(count):
        source = blob_source(workdir / "src" / f"v{i}", name, f"1.0.{i}", blob[i:] + blob[:i])
        packages.append(build_package(source, workdir / "dist").path)
    return packages


def _baseline(package: Path, workdir: Path, repeat: int) -> list[float]:
    from extensions.archive import inspect_package, safe_extract

    samples = []
    for i in range(repeat):
        start = time.perf_counter()
        hashlib.sha256(package.read_bytes()).hexdigest()
        inspect_package(package)
        safe_extract(package, workdir / "baseline" / str(i))
        samples.append(time.perf_counter() - start)
    return samples


def _publish_all(url: str, token: str, packages: list[Path]) -> list[float]:
    samples = []
    with httpx.Client(base_url=url, timeout=120) as http:
        for package in packages:
            data = package.read_bytes()
            start = time.perf_counter()
            response = http.post(
                "/api/v1/extensions/",
                files={"file": (package.name, data, "application/gzip")},
                headers={"Authorization": f"Bearer {token}"},
            )
            if response.status_code != 202:
                raise RuntimeError(f"publish of {package.name} answered {response.status_code}: {response.text[:500]}")
            build = response.json()["data"]
            while build["status"] not in ("succeeded", "failed"):
                time.sleep(0.005)
                build = http.get(response.headers["Location"]).json()["data"]
            samples.append(time.perf_counter() - start)
            if build["status"] != "succeeded":
                raise RuntimeError(f"build of {package.name} failed: {build['error']}")
    return samples


def _start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.services import HOST, free_port

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (make services)")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://{HOST}:{port}/0"
    for _ in range(100):
        try:
            import socket

            with socket.create_connection((HOST, port), timeout=0.2):
                return process, url
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def start_worker(env: dict[str, str], root: Path) -> subprocess.Popen[bytes]:
    """A Celery worker (solo pool, quiet) for a live registry's environment."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "registry", "worker", "--pool=solo", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-l", "warning"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def run(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry

    count = 10 if ctx.quick else 50
    packages = _make_packages(ctx.workdir, count)
    size = packages[0].stat().st_size
    baseline = _baseline(packages[0], ctx.workdir, 10 if ctx.quick else 20)
    base = median(baseline)
    rows = [Row("publish 1 MB", "baseline: sha256 + inspect + extract", ms(base))]

    embedded = LiveRegistry(ctx.workdir / "embedded")
    embedded.start(workers=2, threads=4)
    try:
        token = embedded.createtoken("bench")
        # Warm-up: every gunicorn worker past its first request before timing.
        _publish_all(embedded.url, token, _make_packages(ctx.workdir / "warm", 4, name="bench-warm"))
        samples = _publish_all(embedded.url, token, packages)
    finally:
        embedded.stop()
    rows.append(
        Row(
            f"publish {size / 1e6:.2f} MB x{count}, embedded",
            "median / p95",
            f"{ms(median(samples))} / {ms(percentile(samples, 95))}",
            ms(base),
            f"{median(samples) / base:.1f}x",
        )
    )

    redis, broker = _start_redis(ctx.workdir)
    worker: subprocess.Popen[bytes] | None = None
    try:
        distributed = LiveRegistry(ctx.workdir / "distributed", env={"CELERY_BROKER_URL": broker})
        distributed.start(workers=2, threads=4)
        try:
            token = distributed.createtoken("bench")
            worker = start_worker(distributed.env, ctx.root)
            # Warm-up: the worker connected and the web workers past their first request before timing.
            _publish_all(distributed.url, token, _make_packages(ctx.workdir / "warm2", 4, name="bench-warm"))
            samples = _publish_all(distributed.url, token, packages)
        finally:
            distributed.stop()
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(10)
        redis.terminate()
        redis.wait(10)
    rows.append(
        Row(
            f"publish {size / 1e6:.2f} MB x{count}, Redis + worker",
            "median / p95",
            f"{ms(median(samples))} / {ms(percentile(samples, 95))}",
            ms(base),
            f"{median(samples) / base:.1f}x",
        )
    )
    return rows
