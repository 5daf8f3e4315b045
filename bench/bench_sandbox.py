"""The cost of the build sandbox (issue 8): publishing a 1 MB package to `succeeded` over HTTP
against a registry whose pipeline runs every author-facing step in the sandbox, against the same
registry with `REGISTRY_SANDBOX=off` (the same steps in the web process), interleaved in one run;
and the peak memory (VmHWM) of the web processes and of a Celery worker while the bombs of the
issue are published (template bombs, a README of brackets, thousands of provided names, sparse
headers, a ReDoS-shaped [build] pattern)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx

from bench.bench_publish import _make_packages, _publish_all, _start_redis, start_worker
from bench.common import Context, Row, median, ms, percentile
from tests.hostile_archives import tar_gz

MiB = 1024 * 1024


def _manifest(name: str, extra: str = "") -> bytes:
    head = f'[extension]\nname = "{name}"\nversion = "1.0.0"\ndescription = "a bomb"\ntype = "taskserv"\n'
    return f"{head}{extra}\n".encode()


def package(
    workdir: Path, name: str, version: str, *, extra_files: dict[str, str] | None = None, readme: str = ""
) -> Path:
    from extensions.archive import build_package

    source = workdir / "src"
    source.mkdir(parents=True)
    (source / "extension.toml").write_bytes(_manifest(name))
    (source / "README.md").write_text(readme or f"# {name}\n")
    for rel, text in (extra_files or {}).items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    return build_package(source, workdir / "dist").path


def _bombs(workdir: Path) -> list[tuple[str, str, bytes]]:
    """(endpoint, field, bytes) of each bomb."""
    templates = {
        "templates/a.j2": '{{ "a" * 200000000 }}',
        "templates/b.j2": '{{ "ab" * 1000000000 }}',
        "templates/c.j2": '{{ "x"|center(1000000000) }}',
        "templates/d.j2": "{{ [0] * 1000000000 }}",
    }
    names = ", ".join(f'"mfi-{i}"' for i in range(4000))
    return [
        (
            "/api/v1/extensions/",
            "file",
            package(workdir / "j", "bomb-jinja", "1.0.0", extra_files=templates).read_bytes(),
        ),
        (
            "/api/v1/extensions/",
            "file",
            package(workdir / "r", "bomb-readme", "1.0.0", readme="[" * 500_000).read_bytes(),
        ),
        (
            "/api/v1/builds/",
            "source",
            tar_gz({"extension.toml": _manifest("bomb-names", f"[provides]\ntaskservs = [{names}]")}),
        ),
        (
            "/api/v1/extensions/",
            "file",
            tar_gz(
                {"extension.toml": _manifest("bomb-sparse"), "x.bin": b"x"},
                top="bomb-sparse-1.0.0",
                pax={"x.bin": {"GNU.sparse.map": "a,b"}},
            ),
        ),
        (
            "/api/v1/builds/",
            "source",
            tar_gz(
                {"extension.toml": _manifest("bomb-redos", '[build]\ninclude = ["a*a*a*a*a*a*a*a*c"]'), "a" * 200: b"x"}
            ),
        ),
    ]


def _send_bombs(url: str, token: str, bombs: list[tuple[str, str, bytes]]) -> list[str]:
    outcomes = []
    with httpx.Client(base_url=url, timeout=300) as http:
        for endpoint, field, data in bombs:
            response = http.post(
                endpoint, files={field: ("b.tar.gz", data)}, headers={"Authorization": f"Bearer {token}"}
            )
            if response.status_code >= 500:
                raise RuntimeError(f"a bomb got {response.status_code}: {response.text[:300]}")
            build = response.json()["data"]
            while build["status"] not in ("succeeded", "failed"):
                build = http.get(f"/api/v1/builds/{build['id']}/").json()["data"]
            outcomes.append(build["status"])
    return outcomes


def _peak_rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def _workers(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def run(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry

    count = 10 if ctx.quick else 50
    packages = _make_packages(ctx.workdir / "pkgs", count)
    size = packages[0].stat().st_size
    sandboxed = LiveRegistry(ctx.workdir / "sandboxed")
    inline = LiveRegistry(ctx.workdir / "inline", env={"REGISTRY_SANDBOX": "off"})
    rows: list[Row] = []
    samples: dict[str, list[float]] = {"sandbox": [], "inline": []}
    sandboxed.start(workers=2, threads=4)
    inline.start(workers=2, threads=4)
    try:
        tokens = {"sandbox": sandboxed.createtoken("bench"), "inline": inline.createtoken("bench")}
        urls = {"sandbox": sandboxed.url, "inline": inline.url}
        for name in ("sandbox", "inline"):  # warm-up: both workers of each past their first build
            _publish_all(urls[name], tokens[name], _make_packages(ctx.workdir / f"warm-{name}", 4, name="bench-warm"))
        for package in packages:  # interleaved, so that the machine's noise falls on both alike
            for name in ("sandbox", "inline"):
                samples[name] += _publish_all(urls[name], tokens[name], [package])
        bombs = _bombs(ctx.workdir / "bombs")
        outcomes = _send_bombs(sandboxed.url, tokens["sandbox"], bombs)
        assert sandboxed.process is not None
        web_peak = max(_peak_rss(pid) for pid in _workers(sandboxed.process.pid))
    finally:
        sandboxed.stop()
        inline.stop()
    ratio = median(samples["sandbox"]) / median(samples["inline"])
    rows.append(
        Row(
            f"publish {size / 1e6:.2f} MB x{count}, sandboxed",
            "median / p95",
            f"{ms(median(samples['sandbox']))} / {ms(percentile(samples['sandbox'], 95))}",
            f"{ms(median(samples['inline']))} / {ms(percentile(samples['inline'], 95))} in-process",
            f"{ratio:.2f}x",
            "<= 1.3x",
            ratio <= 1.3,
        )
    )
    rows.append(
        Row(
            "bombs, embedded web worker",
            "peak RSS (VmHWM)",
            f"{web_peak / MiB:.0f} MiB",
            "outcomes: " + ", ".join(outcomes),
            "",
            "< 150 MiB",
            web_peak < 150 * MiB,
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
            _publish_all(distributed.url, token, _make_packages(ctx.workdir / "warm-w", 2, name="bench-warm"))
            outcomes = _send_bombs(distributed.url, token, bombs)
            worker_peak = _peak_rss(worker.pid)
            assert distributed.process is not None
            web_peak = max(_peak_rss(pid) for pid in _workers(distributed.process.pid))
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
            "bombs, Celery worker (solo pool)",
            "peak RSS (VmHWM)",
            f"{worker_peak / MiB:.0f} MiB (web {web_peak / MiB:.0f} MiB)",
            "outcomes: " + ", ".join(outcomes),
            "",
            "< 150 MiB",
            worker_peak < 150 * MiB and web_peak < 150 * MiB,
        )
    )
    return rows
