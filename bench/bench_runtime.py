"""The runtime loader (SPEC 5) against a real gunicorn registry on loopback:

- cached ``load_extension``: p50 and p99 of 20,000 hits (target p99 < 1 ms, the orchestrator's own
  figure for a cached load);
- cold load of a 1 MB package (incompressible data): resolve (index document), download, verify
  (sha256, MANIFEST.json), unpack into a fresh store, record the runtime state, with
  ``verify=False``; median against, in the same run and interleaved, ``curl -s -o`` + ``sha256sum``
  + ``tar xzf`` of the same download URL as three processes (targets: at most 2x that, and under
  100 ms); and the same load as a default client verifies it (the signed index's target and the
  signed provenance too), against the unverified one (no target). Each registry client is made once
  (as a runtime keeps one); every load has a fresh home, so no package is cached;
- ``provisioning module discover taskserv`` over the bundled examples: median wall time of the whole
  command as a new process, interpreter start included (target < 300 ms). Measured with bytecode
  caches (``PYTHONPYCACHEPREFIX`` in the scratch directory), as an installed client has them; the
  same without any bytecode cache (``PYTHONDONTWRITEBYTECODE=1``, every module compiled on every
  run) is shown for information.
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import Context, Row, blob_source, median, ms, percentile


def _blob_source(workdir: Path, name: str = "bench-blob") -> Path:
    return blob_source(workdir / "src" / name, name, "1.0.0", secrets.token_bytes(1024 * 1024))


def _curl_baseline(url: str, target: Path) -> float:
    target.mkdir(parents=True)
    package = target / "package.tar.gz"
    unpacked = target / "unpacked"
    unpacked.mkdir()
    start = time.perf_counter()
    subprocess.run(["curl", "-s", "-f", "-o", str(package), url], check=True)
    subprocess.run(["sha256sum", str(package)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["tar", "xzf", str(package), "-C", str(unpacked)], check=True)
    return time.perf_counter() - start


@dataclass
class ColdLoads:
    unverified: list[float]  # sha256 and MANIFEST.json checked (verify=False)
    verified: list[float]  # the default: also the signed index's target and the signed provenance
    curl: list[float]
    manager: object  # the last unverified load's manager (for the cached loads)


def _cold_loads(ctx: Context, url: str, repeat: int) -> ColdLoads:
    from clients.registry_client import RegistryClient
    from clients.runtime import ExtensionManager, LoadPolicy

    # Each client is made once, as a runtime keeps one: the verified one refreshes the signed index
    # once (in the warm-up), then checks each package's target and provenance.
    clients = {
        "unverified": RegistryClient(url, verify=False),
        "verified": RegistryClient(url, trust_home=ctx.workdir / "trust-home"),
    }
    download = clients["unverified"].download_url("bench-blob", "1.0.0")
    samples: dict[str, list[float]] = {"unverified": [], "verified": [], "curl": []}
    managers: dict[str, ExtensionManager] = {}

    def load(kind: str, i: int) -> float:
        home = ctx.workdir / "cold" / kind / str(i)
        client = clients[kind]
        client.cache_dir = home / "cache"
        manager = managers[kind] = ExtensionManager(
            home=home, client=client, runtime_version="1.0.0", search_paths=[], policy=LoadPolicy(), persist=True
        )
        start = time.perf_counter()
        ext = manager.load_extension("taskserv", "bench-blob")
        elapsed = time.perf_counter() - start
        assert ext.metadata.version == "1.0.0" and ext.source == "registry"
        return elapsed

    def curl(i: int) -> float:
        elapsed = _curl_baseline(download, ctx.workdir / "curl" / str(i))
        shutil.rmtree(ctx.workdir / "curl" / str(i), ignore_errors=True)
        return elapsed

    try:
        for i in range(repeat + 1):  # the first of each is a warm-up
            order = ["unverified", "verified", "curl"]
            order = order[i % 3 :] + order[: i % 3]  # each kind first, second and third in turn
            for kind in order:
                elapsed = curl(i) if kind == "curl" else load(kind, i)
                if i:
                    samples[kind].append(elapsed)
    finally:
        for client in clients.values():
            client.close()
    return ColdLoads(samples["unverified"], samples["verified"], samples["curl"], managers["unverified"])


def _cached_loads(manager: object, count: int) -> list[float]:
    from clients.runtime import ExtensionManager

    assert isinstance(manager, ExtensionManager)
    load = manager.load_extension
    clock = time.perf_counter_ns
    samples = []
    for _ in range(count):
        start = clock()
        load("taskserv", "bench-blob")
        samples.append((clock() - start) / 1e9)
    assert manager.metrics.cache_hits >= count
    return samples


def _discover(ctx: Context, url: str, repeat: int, *, bytecode: bool) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU (user + system) seconds of each run of the whole command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVISIONING_")}
    env["PROVISIONING_HOME"] = str(ctx.workdir / "discover-home")
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(ctx.workdir / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    command = [sys.executable, "-m", "clients.cli", "module", "discover", "taskserv", "--registry", url]
    samples: list[float] = []
    cpu: list[float] = []
    for i in range(repeat + 2):  # two warm-ups (the first writes the bytecode cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=ctx.root, env=env, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0 or "kubernetes" not in proc.stdout:
            raise RuntimeError(f"module discover failed ({proc.returncode}): {proc.stderr[-2000:]}")
        if i >= 2:
            samples.append(elapsed)
            cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return samples, cpu


def run(ctx: Context) -> list[Row]:
    from tests.live_registry import EXAMPLES, LiveRegistry

    if shutil.which("curl") is None or shutil.which("sha256sum") is None:
        raise RuntimeError("the cold-load baseline needs curl and sha256sum")
    registry = LiveRegistry(ctx.workdir / "registry")
    registry.start(workers=2, threads=4)
    try:
        registry.manage("publish", str(_blob_source(ctx.workdir)))
        registry.manage("publish", "--skip-existing", *EXAMPLES)
        loads = _cold_loads(ctx, registry.url, 8 if ctx.quick else 25)
        cached = _cached_loads(loads.manager, 5_000 if ctx.quick else 20_000)
        discover, discover_cpu = _discover(ctx, registry.url, 5 if ctx.quick else 10, bytecode=True)
        uncompiled, uncompiled_cpu = _discover(ctx, registry.url, 3 if ctx.quick else 5, bytecode=False)
    finally:
        registry.stop()

    size = (ctx.workdir / "src" / "bench-blob" / "data" / "blob.bin").stat().st_size
    p99 = percentile(cached, 99)
    ours, baseline = loads.unverified, loads.curl
    cold, base, verified = median(ours), median(baseline), median(loads.verified)
    ratio = cold / base
    found = median(discover)
    ctx.notes.append(
        f"cold load: {len(ours)} runs, p95 {ms(percentile(ours, 95))} (verified {ms(percentile(loads.verified, 95))}); "
        f"baseline p95 {ms(percentile(baseline, 95))}"
    )
    load = os.getloadavg()[0]
    ctx.notes.append(f"load average during the run: {load:.2f} on {os.cpu_count()} CPUs (wall times include waiting)")
    return [
        Row(
            "runtime: cached load_extension",
            f"p50 / p99 of {len(cached):,}",
            f"{cached_us(median(cached))} / {cached_us(p99)}",
            target="p99 < 1 ms",
            ok=p99 < 0.001,
        ),
        Row(
            f"runtime: cold load of {size / 1e6:.1f} MB over loopback",
            "median (resolve, download, sha256 and MANIFEST.json, unpack; verify=False)",
            ms(cold),
            f"curl + sha256sum + tar xzf: {ms(base)}",
            f"{ratio:.2f}x",
            "<= 2x and < 100 ms",
            ratio <= 2.0 and cold < 0.100,
        ),
        Row(
            f"runtime: cold load of {size / 1e6:.1f} MB over loopback, verified (the default)",
            "median (also the signed index's target and the signed provenance)",
            ms(verified),
            f"verify=False: {ms(cold)}",
            f"{verified / cold:.2f}x",
        ),
        Row(
            "runtime: module discover taskserv",
            f"median of {len(discover)}, whole process (CPU)",
            f"{ms(found)} ({ms(median(discover_cpu))})",
            target="< 300 ms",
            ok=found < 0.300,
        ),
        Row(
            "runtime: module discover taskserv",
            f"median of {len(uncompiled)}, no bytecode cache (CPU)",
            f"{ms(median(uncompiled))} ({ms(median(uncompiled_cpu))})",
        ),
    ]


def cached_us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"
