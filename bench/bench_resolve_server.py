"""Server-side resolution and index documents, against a real gunicorn registry holding the
generated catalogue (300 extensions x 10 versions, bench/catalogue.py) in its database.

- POST /api/v1/resolve for the ten root sets: median and p95 per set, and the ratio to plain
  resolvelib resolving the same graph in memory with packaging-style parsing (same run).
- GET /api/v1/index/{name} under gunicorn with 16 concurrent connections (wrk): requests/s and p99,
  fresh and conditional (If-None-Match -> 304)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import httpx

from bench.common import Context, Row, median, ms, percentile

SMALL_TARGET_SECONDS = 0.050
INDEX_RPS_TARGET = 1000
INDEX_P99_TARGET_MS = 50.0


def _wrk(url: str, seconds: int, headers: dict[str, str]) -> tuple[float, float, dict[str, int]]:
    """requests/s, p99 in ms, and the status counts, from wrk with 16 connections."""
    command = ["wrk", "-t2", "-c16", f"-d{seconds}s", "--latency"]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    out = subprocess.run([*command, url], capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99_value, p99_unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    p99 = float(p99_value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99_unit]
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, p99, {"non_2xx_3xx": int(errors.group(1)) if errors else 0}


def run(ctx: Context) -> list[Row]:
    from bench.baseline_resolver import baseline_index, baseline_resolve
    from bench.catalogue import LARGE_ROOT_SETS, ROOT_SETS, generate_catalogue
    from tests.live_registry import LiveRegistry

    registry = LiveRegistry(ctx.workdir / "registry")
    subprocess.run(
        [sys.executable, "-m", "bench.load_catalogue"], cwd=ctx.root, env=registry.env, check=True, timeout=600
    )
    rows: list[Row] = []
    index = baseline_index(generate_catalogue())
    runs = 3 if ctx.quick else 10
    registry.start(workers=2, threads=1)
    try:
        with httpx.Client(base_url=registry.url, timeout=120) as http:
            for roots in ROOT_SETS:
                body = {"requirements": roots}
                first = http.post("/api/v1/resolve", json=body)  # warm: this process parses the documents once
                first.raise_for_status()
                http.post("/api/v1/resolve", json=body).raise_for_status()  # the other gunicorn worker
                samples = []
                for _ in range(runs):
                    start = time.perf_counter()
                    response = http.post("/api/v1/resolve", json=body)
                    samples.append(time.perf_counter() - start)
                    response.raise_for_status()
                server = {r["name"]: r["version"] for r in response.json()["data"]["resolved"]}
                base_runs = 1 if (ctx.quick and roots in LARGE_ROOT_SETS) else (2 if roots in LARGE_ROOT_SETS else 5)
                base_samples = []
                for _ in range(base_runs):
                    start = time.perf_counter()
                    answer = baseline_resolve(roots, index)
                    base_samples.append(time.perf_counter() - start)
                ours, base = median(samples), median(base_samples)
                small = len(server) <= 20
                ok = ours <= base and (not small or ours <= SMALL_TARGET_SECONDS)
                rows.append(
                    Row(
                        "resolve (server)",
                        f"{'+'.join(roots)}: {len(server)} ext",
                        f"{ms(ours)} (p95 {ms(percentile(samples, 95))})",
                        f"{ms(base)}; {'same answer' if answer == server else 'DIFFERENT answer'}",
                        f"{ours / base:.2f}",
                        "<= 1.0" + (", <= 50 ms" if small else ""),
                        ok and answer == server,
                    )
                )

            if shutil.which("wrk") is None:
                rows.append(Row("index (gunicorn)", "wrk is not installed (make services)", "", ok=False))
                return rows
            url = f"{registry.url}/api/v1/index/ext-042"
            etag = http.get("/api/v1/index/ext-042").headers["ETag"]
        registry.stop()
        registry.start(workers=2, threads=8)
        seconds = 5 if ctx.quick else 10
        _wrk(url, 2, {})  # warm-up
        for label, headers in (("fresh (200)", {}), ("conditional (304)", {"If-None-Match": etag})):
            rps, p99, errors = _wrk(url, seconds, headers)
            rows.append(
                Row(
                    "index (gunicorn, 16 conns)",
                    label,
                    f"{rps:,.0f} req/s, p99 {p99:.1f} ms",
                    "devpi 411 req/s, pypiserver 276 req/s (issue)",
                    f"{rps / 411:.1f}x devpi",
                    f">= {INDEX_RPS_TARGET} req/s, p99 < {INDEX_P99_TARGET_MS:.0f} ms",
                    rps >= INDEX_RPS_TARGET and p99 < INDEX_P99_TARGET_MS and errors["non_2xx_3xx"] == 0,
                )
            )
    finally:
        registry.stop()
    return rows
