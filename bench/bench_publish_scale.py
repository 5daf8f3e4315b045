"""Publishing cost does not grow with the catalogue (issue 10): the median end-to-end publish of a
1 MB package (a new extension each time) into a registry that already holds 100 extensions, and
into one that holds 10,000 (loaded as rows with their provides and index documents:
bench/load_packages.py), over HTTP against a real gunicorn registry in embedded mode. The ratio
of the two medians is the figure; the target is at most 1.2."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.bench_publish import _publish_all
from bench.bench_trust import BINS
from bench.common import Context, Row, blob_source, median, ms, percentile
from bench.report import machine, now, write_section

SIZES = (100, 10_000)
LETTERS, DIGITS = "bcdfghjkmnpqrstvwxz", "2346789"  # nothing that folds into a look-alike


def spelled(i: int) -> str:
    """A distinct name part for i that no two others are confusable with (letters and digits
    alternate, so nothing doubles; no 0/o, 1/l or 5/s)."""
    out = ""
    while True:
        i, letter = divmod(i, len(LETTERS))
        i, digit = divmod(i, len(DIGITS))
        out += LETTERS[letter] + DIGITS[digit]
        if i == 0:
            return out


def _packages(workdir: Path, count: int) -> list[Path]:
    from extensions.archive import build_package

    blob = secrets.token_bytes(1024 * 1024)  # incompressible: the package is ~1 MB
    packages = []
    for i in range(count):
        source = blob_source(workdir / "src" / str(i), f"probe-{spelled(i)}", "1.0.0", blob[i:] + blob[:i])
        packages.append(build_package(source, workdir / "dist").path)
    return packages


def _registry(ctx: Context, extensions: int) -> Any:
    """A started registry (gunicorn, embedded mode) holding that many extensions as rows, its signed
    index in production's number of bins (the test registries' 16 would put ~1,900 targets in each
    bin at 10,000 extensions, and a publish re-signs up to three of them)."""
    from tests.live_registry import LiveRegistry

    registry = LiveRegistry(ctx.workdir / f"catalogue-{extensions}", trust_args=BINS)
    records = ctx.workdir / f"records-{extensions}.json"
    records.write_text(json.dumps([{"name": f"load-{spelled(i)}", "version": "1.0.0"} for i in range(extensions)]))
    loaded = subprocess.run(
        [sys.executable, "-m", "bench.load_packages", str(records), "--static-index"],
        cwd=ctx.root,
        env=registry.env,
        capture_output=True,
        text=True,
    )
    if loaded.returncode != 0:
        raise RuntimeError(f"loading {extensions} extensions failed:\n{loaded.stderr[-3000:]}")
    registry.start(workers=2, threads=4)
    return registry


def run(ctx: Context) -> list[Row]:
    count = 6 if ctx.quick else 20
    started = now()
    packages = _packages(ctx.workdir / "packages", count + 4)
    results: dict[int, list[float]] = {n: [] for n in SIZES}
    registries: dict[int, Any] = {}
    try:
        for n in SIZES:
            registries[n] = _registry(ctx, n)
        tokens = {n: registries[n].createtoken("bench") for n in SIZES}  # the owner of what is loaded
        for n in SIZES:
            _publish_all(registries[n].url, tokens[n], packages[:4])  # every worker past its first request
        # Interleaved, one publish at a time on each, so both see the same load on a shared machine.
        for package in packages[4:]:
            for n in SIZES:
                results[n] += _publish_all(registries[n].url, tokens[n], [package])
    finally:
        for registry in registries.values():
            registry.stop()
    small, large = (median(results[n]) for n in SIZES)
    ratio = large / small
    ok = ratio <= 1.2
    rows = [
        Row(
            f"publish 1 MB, {n:,} extensions present",
            "median / p95",
            f"{ms(median(results[n]))} / {ms(percentile(results[n], 95))}",
        )
        for n in SIZES
    ]
    rows.append(Row("publish 1 MB", "10,000 / 100 extensions", f"{ratio:.2f}", target="<= 1.2", ok=ok))
    lines = [
        "## Publishing cost against the catalogue's size (`python -m bench publish_scale`)",
        "",
        f"Run {started}{' (--quick)' if ctx.quick else ''}. Machine: {machine()}.",
        "",
        f"{count} publishes of a new 1 MB extension each, end to end over HTTP (gunicorn, embedded mode, "
        "sandboxed build), after 4 warm-up publishes, into two registries running side by side that hold "
        f"the extensions as rows, each with a signed index of {BINS[1]} hashed bins (`trust init`'s default); "
        "the publishes alternate between the two.",
        "",
        "| extensions present | median | p95 | range |",
        "|---:|---:|---:|---:|",
        *(
            f"| {n:,} | {ms(median(results[n]))} | {ms(percentile(results[n], 95))} | "
            f"{ms(min(results[n]))} - {ms(max(results[n]))} |"
            for n in SIZES
        ),
        "",
        f"Ratio of the medians, 10,000 / 100: **{ratio:.2f}** (target <= 1.2: {'met' if ok else 'not met'}).",
    ]
    write_section(ctx.root, "publish-scale", "\n".join(lines))
    return rows
