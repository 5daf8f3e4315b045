"""The same mixed load against one web node and against two, in the same run (issue 15): one
`cluster.Cluster` (PostgreSQL, Redis, moto's S3, two gunicorn nodes, two workers, beat, nginx as
docs/deploy.md configures it), nginx balancing over web1 alone, then over web1 and web2, runs
alternating. Per configuration: requests/s, p50/p99 per kind of request (and of the index reads
of `cluster.probe`, a client of its own beside the load), and the server CPU ms
per request of each web node (its gunicorn master and workers' CPU over the requests nginx sent
it, from nginx's access log). On 2 cores the throughput ratio says little (the load driver
itself shares them); CPU per request is what docs/deploy.md's sizing is computed from.

    python -m bench cluster [--quick]
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.common import Context, Row
from bench.report import machine, now, write_section
from cluster.cluster import Cluster
from cluster.load import Catalogue, LoadPlan, LoadResult, run_load
from cluster.seed import seed_examples

KINDS = ("index", "resolve", "download", "oci", "tuf", "publish")
INDEX_P99_MS = 50.0  # issue 15: p99 of index reads under the load, as one client sees it (cluster.probe)


@dataclass
class Measured:
    nodes: int
    result: LoadResult
    cpu_ms: dict[str, float]  # web role -> CPU ms per request it served
    served: dict[str, int]  # web role -> requests nginx sent it
    worker_cpu_s: float  # both workers' CPU seconds (the builds of the publishes)


def _access_counts(cluster: Cluster, start: int) -> Counter[str]:
    """Requests per upstream address in nginx's access log, after byte offset start."""
    counts: Counter[str] = Counter()
    with cluster.nginx_access_log().open("rb") as handle:
        handle.seek(start)
        for line in handle:
            upstream = line.split(b" ", 1)[0].decode()
            for address in upstream.split(","):  # "A, B" when nginx tried A, then B
                counts[address.strip()] += 1
    return counts


def _measure(cluster: Cluster, token: str, catalogue: Catalogue, plan: LoadPlan, nodes: int, ctx: Context) -> Measured:
    roles = cluster.web_roles()[:nodes]
    cluster.nginx_route(roles)
    log = cluster.nginx_access_log()
    offset = log.stat().st_size if log.exists() else 0
    before = {role: cluster.procs[role].cpu_seconds() for role in cluster.web_roles()}
    workers_before = sum(cluster.procs[r].cpu_seconds() for r in cluster.worker_roles())
    result = run_load(cluster.url, plan=plan, catalogue=catalogue, token=token, workdir=ctx.workdir)
    after = {role: cluster.procs[role].cpu_seconds() for role in cluster.web_roles()}
    workers_after = sum(cluster.procs[r].cpu_seconds() for r in cluster.worker_roles())
    counts = _access_counts(cluster, offset)
    served = {role: counts.get(f"127.0.0.1:{cluster.ports[role]}", 0) for role in roles}
    cpu_ms = {role: (after[role] - before[role]) * 1000 / served[role] for role in roles if served[role]}
    return Measured(nodes, result, cpu_ms, served, workers_after - workers_before)


def _range(values: list[float], fmt: str = "{:.0f}") -> str:
    if not values:
        return "n/a"
    middle = fmt.format(statistics.median(values))
    return middle if len(values) == 1 else f"{middle} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def run(ctx: Context) -> list[Row]:
    plan = LoadPlan(clients=20 if ctx.quick else 50, seconds=10 if ctx.quick else 30, publishers=2, seed=7)
    repeats = 1 if ctx.quick else 3
    # Under /tmp itself (the scratch directory is private, 0700): PostgreSQL runs as its own user.
    directory = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    cluster = Cluster(directory)
    runs: dict[int, list[Measured]] = {1: [], 2: []}
    try:
        cluster.start()
        seed_examples(cluster)
        token = cluster.createtoken("bench", "publish:*")
        catalogue = Catalogue.read(cluster.url)
        run_load(cluster.url, plan=LoadPlan(clients=10, seconds=3, publishers=0), catalogue=catalogue, token=token)
        for index in range(repeats):
            for nodes in (1, 2) if index % 2 == 0 else (2, 1):
                runs[nodes].append(_measure(cluster, token, catalogue, plan, nodes, ctx))
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)

    rows: list[Row] = []
    lines = [
        f"Run {now()} on {machine()}; {plan.clients} clients for {plan.seconds:.0f} s per run, "
        f"{repeats} run(s) per configuration, alternating; medians (range). The load driver runs on the same "
        "2 cores as the cluster: throughput is bounded by the machine, not by the nodes.",
        "",
        "| nodes | req/s | index (probe) p50/p99 ms | "
        + " | ".join(f"{k} p50/p99 ms" for k in KINDS)
        + " | web CPU ms/request | errors |",
        "|---|---|---|" + "---|" * len(KINDS) + "---|---|",
    ]
    throughput: dict[int, float] = {}
    for nodes, measured in runs.items():
        rps = [m.result.requests_per_second() for m in measured]
        throughput[nodes] = statistics.median(rps)
        probe50 = [m.result.probe_latency(50) * 1000 for m in measured]
        probe99 = [m.result.probe_latency(99) * 1000 for m in measured]
        cells = [f"{_range(probe50, '{:.1f}')} / {_range(probe99, '{:.1f}')}"]
        for kind in KINDS:
            p50 = [m.result.latency(kind, 50) * 1000 for m in measured]
            p99 = [m.result.latency(kind, 99) * 1000 for m in measured]
            cells.append(f"{_range(p50)} / {_range(p99)}")
        per_node = [ms for m in measured for ms in m.cpu_ms.values()]
        by_node = "; ".join(
            f"{role} {_range([m.cpu_ms[role] for m in measured if role in m.cpu_ms], '{:.1f}')}"
            for role in cluster.web_roles()[:nodes]
        )
        errors = sum(len(m.result.failures()) for m in measured)
        lines.append(f"| {nodes} | {_range(rps)} | " + " | ".join(cells) + f" | {by_node} | {errors} |")
        rows.append(Row("cluster", f"{nodes} node(s): requests/s", _range(rps)))
        rows.append(
            Row(
                "cluster",
                f"{nodes} node(s): index p99 ms (probe)",
                _range(probe99, "{:.1f}"),
                target=f"< {INDEX_P99_MS:.0f} ms",
                ok=statistics.median(probe99) < INDEX_P99_MS,
            )
        )
        rows.append(
            Row(
                "cluster",
                f"{nodes} node(s): index p99 ms (load driver)",
                _range([m.result.latency("index", 99) * 1000 for m in measured]),
            )
        )
        rows.append(
            Row("cluster", f"{nodes} node(s): web CPU ms/request", _range(per_node, "{:.1f}"), target="sizing input")
        )
        rows.append(
            Row("cluster", f"{nodes} node(s): errors (5xx or no answer)", str(errors), target="0", ok=errors == 0)
        )
    ratio = throughput[2] / throughput[1] if throughput[1] else float("nan")
    rows.append(
        Row("cluster", "requests/s, two nodes vs one", f"{throughput[2]:.0f}", f"{throughput[1]:.0f}", f"{ratio:.2f}x")
    )
    lines += [
        "",
        f"Two nodes vs one: {ratio:.2f}x the requests/s. Requests nginx answered from the bucket (index documents, "
        "signed metadata) reach no web node and are not in the CPU per request.",
        "",
        "index (probe): index documents read every 20 ms by a process of its own (cluster/probe.py: one "
        "keep-alive connection, a higher priority, each latency counted from when the request was due), which "
        "is what one client sees of the server; the other columns are what the load's 50 asyncio clients "
        "record, their own event loop's queueing included.",
    ]
    ctx.notes.append(f"written to {write_section(ctx.root, 'cluster', chr(10).join(lines))}")
    return rows
