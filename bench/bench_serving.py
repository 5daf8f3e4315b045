"""Serving index documents and packages, side by side with pypiserver, devpi-server and nginx
(issue 10), in one run with the same files; writes its section of docs/benchmarks.md and prints it.

Servers, all started by the benchmark (each idle while another is measured):

- **ours** as docs/deploy.md runs it: ``gunicorn registry.wsgi --workers 4 --threads 4
  --worker-class gthread``, embedded mode (SQLite, files), the packages loaded as rows with
  their files in package storage (bench/load_packages.py) and the static index written;
- **ours (granian)**: the same application on the same data under granian, as docs/deploy.md runs
  its read nodes: ``granian --interface wsgi --workers 4 --blocking-threads 4``;
- **ours behind nginx**: docs/deploy.md's nginx configuration (tests/nginx.py reads it from the
  page) in front of a granian read node of ours on the same data with REGISTRY_ACCEL_REDIRECT:
  downloads go through X-Accel-Redirect, index documents come from the static index;
- **pypiserver** under ``gunicorn -w4`` and **devpi-server** ``--offline-mode`` (bench/peers.py
  installs them into their own virtual environments);
- **nginx static**: the same files (hard links of ours) and the same index documents served as
  plain files: the physical limit of this machine.

Load: wrk (Debian) ``-t2 -c16``, each connection cycling through every name or file of the
scenario (bench/wrk_paths.lua); repetitions interleaved (every scenario on every server, then the
next repetition); medians and ranges. Server CPU is the user + system time of the server's
processes during the run, per request. The X-Accel target (a few per cent between two figures
that vary more than that from run to run here) is the median of the ratios of ``accel_pairs``
pairs of runs of the two back to back, in alternating order. `--quick` serves fewer, shorter,
once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import peers
from bench.common import Context, Row
from bench.report import machine, now, write_section

SMALL_BYTES = 50 * 1024
BIG_BYTES = 5 * 1024 * 1024
TODAY_INDEX_REQS = 5476  # issue 10's measurement of the index fast path before this work
# Issue 10's index target was 10,000 req/s on a machine where nginx served the static files at
# 54,636 req/s; as a share of nginx in the same run, it holds on a machine of any speed.
INDEX_SHARE_OF_NGINX = 10_000 / 54_636
SCENARIOS = ("index", "small", "big")
TITLES = {
    "index": "index document per name, req/s (p99)",
    "small": "50 KB downloads, req/s (p99)",
    "big": "5 MB downloads, MB/s (p99)",
}
COLUMNS = {
    "ours": "ours (gunicorn, docs/deploy.md)",
    "granian": "ours (granian read nodes, docs/deploy.md)",
    "nginx-front": "ours behind nginx (granian read nodes, X-Accel-Redirect; static index)",
    "pypiserver": "pypiserver + gunicorn -w4",
    "devpi": "devpi-server",
    "nginx": "nginx static",
}
WRK_SCRIPT = Path(__file__).with_name("wrk_paths.lua")


@dataclass(frozen=True)
class Plan:
    extensions: int
    versions: int
    big: int
    seconds: int
    repetitions: int
    warm_seconds: int
    # The X-Accel target compares two figures a few per cent apart whose runs vary by more than
    # that here: it is the median of the ratios of this many pairs of runs of the two taken back
    # to back, after the repetitions, in alternating order (each runs first in half of them).
    accel_pairs: int


FULL = Plan(extensions=500, versions=10, big=5, seconds=15, repetitions=3, warm_seconds=2, accel_pairs=8)
QUICK = Plan(extensions=40, versions=5, big=2, seconds=3, repetitions=1, warm_seconds=1, accel_pairs=2)


@dataclass
class Sample:
    requests: int
    seconds: float
    bytes: int
    p99_ms: float
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


@dataclass
class Target:
    """A server and the paths of one scenario on it."""

    server: str
    scenario: str
    base_url: str
    paths: Path
    pgids: list[int]


def _files(workdir: Path, plan: Plan) -> list[dict[str, str]]:
    """The packages: random bytes (nothing compresses them away), named as sdists are."""
    rng = random.Random(20261201)
    directory = workdir / "files"
    directory.mkdir(parents=True)
    records = []
    kinds = (("e", plan.extensions, plan.versions, SMALL_BYTES), ("big", 1, plan.big, BIG_BYTES))
    for kind, count, versions, size in kinds:
        for i in range(count):
            name = f"bench-{kind}{i:03d}" if kind == "e" else "bench-big"
            for v in range(versions):
                version = f"1.0.{v}"
                path = directory / f"{name}-{version}.tar.gz"
                path.write_bytes(rng.randbytes(size))
                records.append({"name": name, "version": version, "file": str(path), "kind": kind})
    return records


def _wrk(url: str, paths: Path, seconds: int) -> dict[str, Any]:
    command = ["wrk", "-t2", "-c16", f"-d{seconds}s", "--timeout", "10s", "-s", str(WRK_SCRIPT), url, "--", str(paths)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _measure(target: Target, seconds: int) -> Sample:
    before = peers.cpu_seconds(target.pgids)
    result = _wrk(target.base_url, target.paths, seconds)
    cpu = peers.cpu_seconds(target.pgids) - before
    errors = result["errors"]
    if errors["status"] or errors["connect"] or errors["timeout"]:
        raise RuntimeError(f"{target.server} / {target.scenario}: wrk saw errors {errors}")
    return Sample(result["requests"], result["duration_us"] / 1e6, result["bytes"], result["p99_us"] / 1000, cpu)


def _check(target: Target, expected: dict[str, str]) -> None:
    """One request per scenario and server, checked, before anything is timed."""
    path = target.paths.read_text().splitlines()[0]
    response = httpx.get(target.base_url + path, timeout=30)
    if response.status_code != 200:
        raise RuntimeError(f"{target.server}: GET {path} answered {response.status_code}")
    if target.scenario != "index":
        digest = hashlib.sha256(response.content).hexdigest()
        if digest not in expected.values():
            raise RuntimeError(f"{target.server}: GET {path} served other bytes")


def _pid(registry: Any) -> int:
    """The started registry's server process (its process group: master and workers)."""
    assert registry.process is not None, "the registry is not started"
    pid: int = registry.process.pid
    return pid


def _write_paths(workdir: Path, server: str, scenario: str, paths: list[str]) -> Path:
    target = workdir / "paths" / f"{server}-{scenario}.txt"
    target.parent.mkdir(parents=True, exist_ok=True)
    shuffled = list(paths)
    random.Random(7).shuffle(shuffled)
    target.write_text("\n".join(shuffled) + "\n")
    return target


def _static_blocks(port: int, files: Path, index: Path) -> str:
    return f"""
    server {{
        listen 127.0.0.1:{port};
        location /files/ {{ alias {files}/; }}
        location /index/ {{ alias {index}/; default_type application/json; }}
    }}
"""


def _fmt_rate(samples: list[Sample], scenario: str) -> str:
    values = [s.mb_per_s if scenario == "big" else s.rate for s in samples]
    p99 = statistics.median(s.p99_ms for s in samples)
    spread = f" [{min(values):,.0f}-{max(values):,.0f}]" if len(values) > 1 else ""
    return f"{statistics.median(values):,.0f}{spread} ({p99:.0f} ms)"


def run(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry
    from tests.nginx import Nginx, deploy_server_block
    from tests.services import HOST, free_port

    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (make services)")
    plan = QUICK if ctx.quick else FULL
    started_at, machine_at_start = now(), machine()
    work = ctx.workdir
    base = peers.peers_dir(ctx.root)
    ctx.notes.append(f"peers' virtual environments: {base}")
    pypi_env = peers.venv(base, "pypiserver", peers.PYPISERVER)
    devpi_env = peers.venv(base, "devpi", peers.DEVPI)

    records = _files(work, plan)
    expected = {r["file"]: hashlib.sha256(Path(r["file"]).read_bytes()).hexdigest() for r in records}
    (work / "records.json").write_text(json.dumps([{k: r[k] for k in ("name", "version", "file")} for r in records]))

    processes: list[Any] = []
    registries: list[Any] = []
    nginx: Any = None
    try:
        ours = LiveRegistry(work / "ours")
        loaded = subprocess.run(
            [sys.executable, "-m", "bench.load_packages", str(work / "records.json"), "--static-index"],
            cwd=ctx.root, env=ours.env, capture_output=True, text=True,
        )  # fmt: skip
        if loaded.returncode != 0:
            raise RuntimeError(f"loading the packages failed:\n{loaded.stderr[-3000:]}")
        ours.start(workers=4, threads=4)
        registries.append(ours)
        granian = LiveRegistry(work / "ours", server="granian")
        granian.start(workers=4, threads=4)
        registries.append(granian)
        front = LiveRegistry(work / "ours", env={"REGISTRY_ACCEL_REDIRECT": "/_packages/"}, server="granian")
        front.start(workers=4, threads=4)
        registries.append(front)

        # The same files for the peers: hard links of the stored packages (one page cache).
        flat = work / "flat"
        flat.mkdir()
        packages = ours.data_dir / "packages"
        for record in records:
            digest = expected[record["file"]]
            os.link(packages / "sha256" / digest[:2] / f"{digest}.tar.gz", flat / Path(record["file"]).name)

        pypi_port, devpi_port, front_port, static_port = (free_port() for _ in range(4))
        pypi = peers.start_pypiserver(pypi_env, flat, pypi_port, work / "pypiserver.log")
        processes.append(pypi)
        devpi = peers.start_devpi(devpi_env, work / "devpi", devpi_port, work / "devpi.log")
        processes.append(devpi)
        uploaded = time.perf_counter()
        devpi_links = peers.devpi_upload(
            f"http://{HOST}:{devpi_port}", [(r["name"], r["version"], Path(r["file"])) for r in records]
        )
        ctx.notes.append(f"devpi: {len(records)} files uploaded in {time.perf_counter() - uploaded:.0f} s")
        nginx = Nginx(
            work / "nginx",
            servers=[
                deploy_server_block(port=front_port, upstream=f"{HOST}:{front.port}", data_dir=ours.data_dir),
                _static_blocks(static_port, flat, packages / "index"),
            ],
            workers="auto",
        )
        nginx.start([front_port, static_port])

        names = sorted({r["name"] for r in records if r["kind"] == "e"})
        files = {kind: [r for r in records if r["kind"] == kind] for kind in ("e", "big")}
        ours_download = "/api/v1/extensions/{name}/versions/{version}/download"
        ngx_pgid = [nginx.process.pid]

        def targets_for(scenario: str) -> list[Target]:
            rows = files["e" if scenario in ("index", "small") else "big"]
            filenames = [Path(r["file"]).name for r in rows]
            downloads = [ours_download.format(name=r["name"], version=r["version"]) for r in rows]
            if scenario == "index":
                paths = {
                    "ours": [f"/api/v1/index/{n}" for n in names],
                    "granian": [f"/api/v1/index/{n}" for n in names],
                    "nginx-front": [f"/api/v1/index/{n}" for n in names],
                    "pypiserver": [f"/simple/{n}/" for n in names],
                    "devpi": [f"/root/bench/+simple/{n}/" for n in names],
                    "nginx": [f"/index/{n}" for n in names],
                }
            else:
                paths = {
                    "ours": downloads,
                    "granian": downloads,
                    "nginx-front": downloads,
                    "pypiserver": [f"/packages/{f}" for f in filenames],
                    "devpi": [devpi_links[f] for f in filenames],
                    "nginx": [f"/files/{f}" for f in filenames],
                }
            where = {
                "ours": (ours.url, [_pid(ours)]),
                "granian": (granian.url, [_pid(granian)]),
                "nginx-front": (f"http://{HOST}:{front_port}", [*ngx_pgid, _pid(front)]),
                "pypiserver": (f"http://{HOST}:{pypi_port}", pypi.pgids),
                "devpi": (f"http://{HOST}:{devpi_port}", devpi.pgids),
                "nginx": (f"http://{HOST}:{static_port}", ngx_pgid),
            }
            return [
                Target(server, scenario, url, _write_paths(work, server, scenario, paths[server]), pgids)
                for server, (url, pgids) in where.items()
            ]

        targets = {scenario: targets_for(scenario) for scenario in SCENARIOS}
        for scenario in SCENARIOS:
            for target in targets[scenario]:
                _check(target, expected)
                _measure(target, plan.warm_seconds)  # warm-up: caches, connections, page cache
        samples: dict[tuple[str, str], list[Sample]] = {}
        for _ in range(plan.repetitions):
            for scenario in SCENARIOS:
                for target in targets[scenario]:
                    samples.setdefault((scenario, target.server), []).append(_measure(target, plan.seconds))
        big = {target.server: target for target in targets["big"]}
        accel_ratios: list[float] = []
        for pair in range(plan.accel_pairs):
            order = ("nginx", "nginx-front") if pair % 2 else ("nginx-front", "nginx")
            taken = {server: _measure(big[server], plan.seconds) for server in order}
            accel_ratios.append(taken["nginx-front"].mb_per_s / taken["nginx"].mb_per_s)
        finished_at, machine_at_end = now(), machine()
    finally:
        if nginx is not None:
            nginx.stop()
        for process in processes:
            process.stop()
        for registry in registries:
            registry.stop()

    def median_of(scenario: str, server: str, what: str) -> float:
        values = [getattr(s, what) for s in samples[(scenario, server)]]
        return float(statistics.median(values))

    rate = {(sc, sv): median_of(sc, sv, "mb_per_s" if sc == "big" else "rate") for sc in SCENARIOS for sv in COLUMNS}
    p99 = {(sc, sv): median_of(sc, sv, "p99_ms") for sc in SCENARIOS for sv in COLUMNS}
    cpu_ms = {
        sv: 1000 * sum(s.cpu_seconds for s in samples[("small", sv)]) / sum(s.requests for s in samples[("small", sv)])
        for sv in COLUMNS
    }

    def ratio(scenario: str, server: str, baseline: str) -> float:
        return rate[(scenario, server)] / rate[(scenario, baseline)]

    checks: list[tuple[str, float, str, float | None]] = []
    for server, label in (("ours", "gunicorn"), ("granian", "granian")):
        small_ratio = ratio("small", server, "pypiserver")
        checks += [
            (f"50 KB downloads: ours ({label}) / pypiserver req/s", small_ratio, ">= 1.5", 1.5),
            (f"50 KB downloads: ours ({label}) p99, ms", p99[("small", server)], "< 20", None),
            (f"5 MB downloads: ours ({label}) / nginx MB/s", ratio("big", server, "nginx"), ">= 0.80", 0.80),
        ]
    # The index targets are the read nodes' (granian, docs/deploy.md); "today's" is the index fast
    # path as issue 10 measured it, under gunicorn: the gunicorn column of this run.
    checks += [
        ("index: ours (granian) req/s", rate[("index", "granian")], ">= 10,000", 10_000.0),
        (
            "index: ours (granian) / ours (gunicorn: issue 10's 'today', this run) req/s",
            ratio("index", "granian", "ours"),
            ">= 2",
            2.0,
        ),
        (
            "index: ours (granian) / nginx static req/s (issue 10: 10,000 / 54,636)",
            ratio("index", "granian", "nginx"),
            f">= {INDEX_SHARE_OF_NGINX:.2f}",
            INDEX_SHARE_OF_NGINX,
        ),
    ]
    accel = statistics.median(accel_ratios)
    checks += [
        ("5 MB downloads: ours + nginx X-Accel / nginx MB/s (median of the pairs)", accel, ">= 0.95", 0.95),
        ("index: nginx static index / nginx static", ratio("index", "nginx-front", "nginx"), ">= 0.90", 0.90),
    ]

    def verdict(name: str, value: float, minimum: float | None) -> bool:
        return value < 20 if minimum is None else value >= minimum

    lines = [
        "## Serving: index documents and downloads (`python -m bench serving`)",
        "",
        f"Run {started_at} to {finished_at}{' (--quick)' if ctx.quick else ''}. Machine: {machine_at_start}; "
        f"at the end: load average {machine_at_end.rsplit('load average ', 1)[-1]}.",
        "",
        f"{plan.extensions} extensions x {plan.versions} versions of {SMALL_BYTES // 1024} KB packages and "
        f"{plan.big} x {BIG_BYTES // 1024**2} MB, the same files on every server; wrk -t2 -c16, "
        f"{plan.repetitions} x {plan.seconds} s interleaved, medians [range] (p99 latency, median of runs). "
        "Peers: pypiserver 2.4.2 under gunicorn 27.0.1 -w4 with watchdog 2.2.1 (newer watchdog defeats "
        "pypiserver's cache: pypiserver issue 502), devpi-server 6.20.3 --offline-mode, nginx "
        f"{_nginx_version()} (workers auto).",
        "",
        "| | " + " | ".join(COLUMNS.values()) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for scenario in SCENARIOS:
        cells = [_fmt_rate(samples[(scenario, server)], scenario) for server in COLUMNS]
        lines.append(f"| {TITLES[scenario]} | " + " | ".join(cells) + " |")
    lines.append("| server CPU per 50 KB download | " + " | ".join(f"{cpu_ms[s]:.2f} ms" for s in COLUMNS) + " |")
    lines += ["", "| target | measured | wanted | met |", "|---|---:|---|---|"]
    rows: list[Row] = []
    for name, value, wanted, minimum in checks:
        ok = verdict(name, value, minimum)
        shown = f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
        lines.append(f"| {name} | {shown} | {wanted} | {'yes' if ok else 'no'} |")
        rows.append(Row("serving", name, shown, target=wanted, ok=ok))
    lines += [
        "",
        f"X-Accel pairs: ours behind nginx / nginx static, 5 MB downloads, {len(accel_ratios)} pairs of "
        f"{plan.seconds} s runs back to back, in alternating order: "
        + ", ".join(f"{r:.2f}" for r in accel_ratios)
        + f" (median {accel:.2f}, range {min(accel_ratios):.2f}-{max(accel_ratios):.2f}).",
        "",
        "No database write per download (the download path only counts in memory or Redis; "
        "`tests/registry/test_download_paths.py` counts the queries).",
        "",
        "The index targets are the read nodes' (docs/deploy.md runs them under granian). Under gunicorn "
        f"the same fast path answered {rate[('index', 'ours')]:,.0f} index documents/s in this run "
        f"({TODAY_INDEX_REQS:,} when issue 10 measured it, on another run): that is gunicorn's own HTTP work "
        "in Python, which granian does in native code.",
    ]
    text = "\n".join(lines)
    path = write_section(ctx.root, "serving", text)
    print(text)
    ctx.notes.append(f"written to {path}")
    for scenario in SCENARIOS:
        for server in COLUMNS:
            rows.append(Row("serving", f"{scenario}: {server}", _fmt_rate(samples[(scenario, server)], scenario)))
    return rows


def _nginx_version() -> str:
    from tests.nginx import nginx_binary

    binary = nginx_binary()
    if binary is None:
        return "?"
    out = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
    return out.rsplit("/", 1)[-1]
