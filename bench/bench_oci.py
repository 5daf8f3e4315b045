"""OCI blob pulls against the download endpoint, for the same packages, in the same run.

A gunicorn registry holds two packages of random (incompressible) data, about 50 KB and 5 MB. For
each, wrk fetches ``GET /v2/extensions/NAME/blobs/sha256:…`` (the layer) and
``GET /api/v1/extensions/NAME/versions/V/download`` (the package) with 8 connections, in interleaved
rounds (the order alternating), and the medians of requests/s are compared: the target is a blob
pull at least 0.9x as fast as a download. Both answers are the package streamed from storage (a
FileResponse sent with sendfile) and count a download, so the difference is the request handling
around them."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import statistics
import subprocess

import httpx

from bench.common import Context, Row, blob_source

TARGET = 0.9
SIZES = (("50 KB", 50 * 1024), ("5 MB", 5 * 1024 * 1024))


def _wrk(url: str, seconds: int) -> float:
    """Requests/s of wrk with 2 threads and 8 connections; every answer must be a 200."""
    command = ["wrk", "-t2", "-c8", f"-d{seconds}s", url]
    out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if errors:
        raise RuntimeError(f"wrk got {errors.group(1)} failed answers from {url}:\n{out}")
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise RuntimeError(f"no requests/s in wrk's output:\n{out}")
    return float(found.group(1))


def run(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry

    if shutil.which("wrk") is None:
        return [Row("oci blobs (gunicorn)", "wrk is not installed (make services)", "", ok=False)]
    registry = LiveRegistry(ctx.workdir / "registry")
    registry.start(workers=2, threads=4)
    rows: list[Row] = []
    try:
        urls: dict[str, tuple[str, str]] = {}
        for label, size in SIZES:
            name = f"bench-oci-{size // 1024}k"
            source = blob_source(ctx.workdir / "src" / name, name, "1.0.0", secrets.token_bytes(size))
            registry.manage("publish", str(source))
            package = httpx.get(f"{registry.url}/api/v1/extensions/{name}/versions/1.0.0/download", timeout=60)
            package.raise_for_status()
            digest = f"sha256:{hashlib.sha256(package.content).hexdigest()}"
            blob = httpx.get(f"{registry.url}/v2/extensions/{name}/blobs/{digest}", timeout=60)
            if blob.status_code != 200 or blob.content != package.content:
                raise RuntimeError(f"the blob {digest} of {name} is not its package ({blob.status_code})")
            urls[label] = (
                f"{registry.url}/v2/extensions/{name}/blobs/{digest}",
                f"{registry.url}/api/v1/extensions/{name}/versions/1.0.0/download",
            )
            ctx.notes.append(f"{label}: the package is {len(package.content):,} bytes")
        rounds, seconds = (2, 2) if ctx.quick else (5, 5)
        for label, (blob_url, download_url) in urls.items():
            _wrk(blob_url, 1)  # warm both workers and the page cache
            _wrk(download_url, 1)
            blobs: list[float] = []
            downloads: list[float] = []
            for i in range(rounds):
                order = [(blob_url, blobs), (download_url, downloads)]
                for url, samples in order if i % 2 == 0 else order[::-1]:
                    samples.append(_wrk(url, seconds))
            ratios = [b / d for b, d in zip(blobs, downloads, strict=True)]
            ours, base = statistics.median(blobs), statistics.median(downloads)
            rows.append(
                Row(
                    f"oci blob pull, {label} (gunicorn, 8 conns)",
                    f"median req/s of {rounds} rounds of {seconds} s",
                    f"{ours:,.0f} req/s (range {min(blobs):,.0f}-{max(blobs):,.0f})",
                    f"download endpoint {base:,.0f} req/s (range {min(downloads):,.0f}-{max(downloads):,.0f})",
                    f"{ours / base:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})",
                    f">= {TARGET}x",
                    ours / base >= TARGET,
                )
            )
    finally:
        registry.stop()
    ctx.notes.append(f"load average after the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return rows
