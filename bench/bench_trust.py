"""The signed index's cost (SPEC 6.1), each against a baseline measured in the same run:

- publish (a small package, over HTTP, embedded mode) to a registry that signs (``trust init``)
  against one that does not (no signed index: nothing is signed); publishes alternate between
  the two; target <= 1.2x or + 20 ms;
- ``taskserv create kubernetes`` and ``cluster create kubernetes-ha`` (5 extensions) into a fresh
  directory with a warm home (packages in the store, metadata cached), verified against
  ``--no-verify``, in-process as the CLI runs; target <= 1.3x;
- with 100 and with 10,000 extensions in the catalogue (rows loaded by bench.load_catalogue, then
  ``trust init``): the size of the snapshot and of the bins, and the publish time; target: the
  publish time at 10,000 within 1.2x of the one at 100."""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import Context, Row, blob_source, median, ms

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry

# Production's number of hashed bins (the test registries use 16).
BINS = ("--bins", "256")


def _spread(samples: list[float]) -> str:
    return f"{ms(median(samples))} ({ms(min(samples))}-{ms(max(samples))})"


def _packages(workdir: Path, name: str, count: int) -> list[Path]:
    """Small packages (4 KiB of content), as most extensions are: the signing is a larger share."""
    from extensions.archive import build_package

    blob = os.urandom(4096)
    return [
        build_package(blob_source(workdir / "src" / f"v{i}", name, f"1.0.{i}", blob), workdir / "dist").path
        for i in range(count)
    ]


def _publish_one(url: str, token: str, package: Path) -> float:
    from bench.bench_publish import _publish_all

    return _publish_all(url, token, [package])[0]


def _publish_signing(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry

    count = 8 if ctx.quick else 30
    signed = LiveRegistry(ctx.workdir / "signed", trust_args=BINS)
    plain = LiveRegistry(ctx.workdir / "plain", signed=False)
    packages = _packages(ctx.workdir / "pkgs", "bench-sign", count + 3)
    with_signing: list[float] = []
    without: list[float] = []
    signed.start(workers=1, threads=2)
    plain.start(workers=1, threads=2)
    try:
        tokens = {id(signed): signed.createtoken("bench"), id(plain): plain.createtoken("bench")}
        for i, package in enumerate(packages):
            for registry, samples in ((signed, with_signing), (plain, without)):
                seconds = _publish_one(registry.url, tokens[id(registry)], package)
                if i >= 3:  # the first three warm the workers up
                    samples.append(seconds)
    finally:
        signed.stop()
        plain.stop()
    ratio = median(with_signing) / median(without)
    delta = median(with_signing) - median(without)
    return [
        Row(
            f"publish x{count}, signing vs not",
            "median (min-max)",
            _spread(with_signing),
            _spread(without),
            f"{ratio:.2f}x (+{ms(delta)})",
            "<= 1.2x or +20 ms",
            ratio <= 1.2 or delta <= 0.020,
        )
    ]


def _cli(*argv: str | Path) -> int:
    from clients.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main([str(a) for a in argv])


def _create_verified(ctx: Context) -> list[Row]:
    from tests.live_registry import EXAMPLES, LiveRegistry

    repeat = 4 if ctx.quick else 12
    registry = LiveRegistry(ctx.workdir / "examples", trust_args=BINS)
    registry.start(workers=2, threads=4)
    rows = []
    try:
        registry.manage("publish", "--skip-existing", *EXAMPLES)
        for group, name in (("taskserv", "kubernetes"), ("cluster", "kubernetes-ha")):
            homes = {"verified": ctx.workdir / f"home-v-{name}", "unverified": ctx.workdir / f"home-u-{name}"}
            extra = {"verified": (), "unverified": ("--no-verify",)}
            samples: dict[str, list[float]] = {"verified": [], "unverified": []}
            installed = 0
            for i in range(repeat + 1):
                for mode in ("verified", "unverified"):
                    infra = ctx.workdir / f"infra-{mode}-{name}-{i}"
                    start = time.perf_counter()
                    code = _cli("--registry", registry.url, "--home", homes[mode], *extra[mode],
                                group, "create", name, "--infra", infra, "--runtime-version", "1.4.0")  # fmt: skip
                    seconds = time.perf_counter() - start
                    if code != 0:
                        raise RuntimeError(f"{group} create {name} ({mode}) exited {code}")
                    if i > 0:  # the first run fills the store and the caches
                        samples[mode].append(seconds)
                    lock = (infra / "extensions.lock").read_text()
                    installed = lock.count("[[extension]]")
            ratio = median(samples["verified"]) / median(samples["unverified"])
            rows.append(
                Row(
                    f"{group} create {name} ({installed} extensions), warm home x{repeat}",
                    "verified vs --no-verify, median (min-max)",
                    _spread(samples["verified"]),
                    _spread(samples["unverified"]),
                    f"{ratio:.2f}x",
                    "<= 1.3x",
                    ratio <= 1.3,
                )
            )
    finally:
        registry.stop()
    return rows


def _load(ctx: Context, extensions: int) -> LiveRegistry:
    """A registry whose catalogue has ``extensions`` extensions (rows), signed by `trust init`."""
    from tests.live_registry import LiveRegistry

    data = ctx.workdir / f"catalogue-{extensions}"
    data.mkdir()
    records = [{"name": f"cat-{i:05d}", "version": "1.0.0", "dependencies": {}} for i in range(extensions)]
    (data / "records.json").write_text(json.dumps(records))
    registry = LiveRegistry(data / "registry", signed=False)
    subprocess.run(
        [sys.executable, "-m", "bench.load_catalogue", "--records", str(data / "records.json")],
        cwd=ctx.root, env={**registry.env, "PYTHONPATH": str(ctx.root)}, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    started = time.perf_counter()
    registry.manage("trust", "init", *BINS)
    ctx.notes.append(f"trust init signed {extensions} extensions in {time.perf_counter() - started:.1f} s")
    return registry


def _sizes(registry: LiveRegistry) -> dict[str, float]:
    metadata = registry.data_dir / "packages" / "tuf" / "metadata"
    latest: dict[str, tuple[int, int]] = {}
    for path in metadata.glob("*.json"):
        version, _, role = path.name.removesuffix(".json").partition(".")
        if version.isdigit() and (role not in latest or latest[role][0] < int(version)):
            latest[role] = (int(version), path.stat().st_size)
    bins = [size for role, (_, size) in latest.items() if role.startswith("bin-")]
    return {
        "snapshot": float(latest["snapshot"][1]),
        "bin_mean": statistics.mean(bins),
        "bin_max": float(max(bins)),
        "bins": float(len(bins)),
    }


def _catalogue_size(ctx: Context) -> list[Row]:
    large = 2000 if ctx.quick else 10_000
    count = 6 if ctx.quick else 20
    registries = {100: _load(ctx, 100), large: _load(ctx, large)}
    samples: dict[int, list[float]] = {100: [], large: []}
    tokens = {}
    for registry in registries.values():
        registry.start(workers=1, threads=2)
    try:
        for size, registry in registries.items():
            tokens[size] = registry.createtoken("bench")
        packages = _packages(ctx.workdir / "catalogue-pkgs", "bench-new", count + 2)
        for i, package in enumerate(packages):  # alternating, so both see the same machine
            for size, registry in registries.items():
                seconds = _publish_one(registry.url, tokens[size], package)
                if i >= 2:
                    samples[size].append(seconds)
    finally:
        for registry in registries.values():
            registry.stop()
    rows = []
    for size, registry in registries.items():
        sizes = _sizes(registry)
        rows.append(
            Row(
                f"signed index, {size} extensions ({2 * size} targets, {int(sizes['bins'])} bins)",
                "snapshot / bin mean / bin max",
                f"{sizes['snapshot'] / 1024:.1f} KiB / {sizes['bin_mean'] / 1024:.1f} KiB / "
                f"{sizes['bin_max'] / 1024:.1f} KiB",
            )
        )
    ratio = median(samples[large]) / median(samples[100])
    rows.append(
        Row(
            f"publish x{count} with {large} extensions vs 100",
            "median (min-max)",
            _spread(samples[large]),
            _spread(samples[100]),
            f"{ratio:.2f}x",
            "<= 1.2x",
            ratio <= 1.2,
        )
    )
    return rows


def run(ctx: Context) -> list[Row]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    return [*_publish_signing(ctx), *_create_verified(ctx), *_catalogue_size(ctx)]
