"""Faults injected one after another during one load through nginx (issue 15), each in its own
window: SIGKILL of a Celery worker while it builds, PostgreSQL stopped and restarted, Redis
stopped and restarted, the object store down and back, SIGKILL of a web node's processes in the
middle of an upload. Every failure a client sees lies in a fault's window (plus a short recovery)
and is the failure that fault should cause (a fast 503 with the envelope and Retry-After, a
refused download), never a 500; every accepted publish ends final; after the load everything
answers again, the sweeper removes what the killed upload left, and `check_integrity` finds
nothing."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from cluster.cluster import Cluster, wait_until
from cluster.load import (
    Catalogue,
    LoadPlan,
    LoadResult,
    Outcome,
    build_packages,
    run_load,
    sleep_until,
    verify_downloads,
)
from tests.cluster.test_cluster import assert_integrity

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.xdist_group("cluster")]

RECOVERY = 8.0  # seconds after a fault ends during which its failures may still be seen
LOAD_SECONDS = 72.0
CLIENT_TIMEOUT = 30.0  # each request's, as in test_cluster (where it says why)


@dataclass
class Faults:
    """When each fault began and ended (seconds into the load), and what it touched."""

    windows: dict[str, tuple[float, float]] = field(default_factory=dict)
    builds_on_killed_worker: list[str] = field(default_factory=list)
    builds_when_redis_stopped: list[str] = field(default_factory=list)
    killed_upload_error: str = ""
    parts_after_kill: list[str] = field(default_factory=list)

    def window(self, outcome: Outcome) -> list[str]:
        """The faults whose window (and recovery) the request overlapped."""
        began, ended = outcome.at, outcome.at + outcome.seconds
        return [name for name, (start, end) in self.windows.items() if began <= end + RECOVERY and ended >= start]


BOUNDARY = "cluster-fault-boundary"
UPLOAD_BYTES = 16 * 1024 * 1024


def slow_body(sent: list[int]) -> Iterator[bytes]:
    """A multipart upload that trickles in (64 KiB every 50 ms), so a kill lands mid-upload;
    ``sent`` counts the bytes of the file sent so far."""
    yield (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="killed-1.0.0.tar.gz"\r\n'
        "Content-Type: application/gzip\r\n\r\n"
    ).encode()
    while sent[0] < UPLOAD_BYTES:
        time.sleep(0.05)
        sent[0] += 64 * 1024
        yield b"\0" * (64 * 1024)
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def _slow_upload(cluster: Cluster, token: str, faults: Faults, sent: list[int]) -> None:
    head = len(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="killed-1.0.0.tar.gz"\r\n'
        "Content-Type: application/gzip\r\n\r\n"
    )
    length = head + UPLOAD_BYTES + len(f"\r\n--{BOUNDARY}--\r\n")
    try:
        answer = httpx.post(
            f"{cluster.web_url(1)}/api/v1/extensions/",
            content=slow_body(sent),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                "Content-Length": str(length),
            },
            timeout=60,
        )
        faults.killed_upload_error = f"answered {answer.status_code}: {answer.text[:200]}"
    except httpx.HTTPError as exc:
        faults.killed_upload_error = type(exc).__name__


def _big_parts(tmp: Path) -> list[str]:
    """Upload files on a web node's disk bigger than the load's packages: the slow upload's."""
    return sorted(p.name for p in tmp.glob("upload-*.part") if p.stat().st_size > 1024 * 1024)


def _running(cluster: Cluster, build_ids: list[str]) -> list[str]:
    """Those of the builds still running now (inspect's answer is a moment old)."""
    return [
        b for b in build_ids if cluster.sql("SELECT status FROM builds_build WHERE id = %s", (b,))[0][0] == "running"
    ]


def _publish(cluster: Cluster, token: str, package: Path) -> list[str]:
    """Publish a package of the test's own: its build's id, if it was accepted (the build is not
    followed further: the integrity check says that it ended)."""
    try:
        response = httpx.post(
            f"{cluster.url}/api/v1/extensions/",
            files={"file": (package.name, package.read_bytes(), "application/gzip")},
            headers={"Authorization": f"Bearer {token}"},
            timeout=CLIENT_TIMEOUT,
        )
    except httpx.HTTPError:
        return []  # (the faults go on: the step looks for the load's builds too)
    return [str(response.json()["data"]["id"])] if response.status_code == 202 else []


def inject(cluster: Cluster, token: str, faults: Faults, spare: list[Path]) -> object:
    def during(started: float) -> None:
        def mark(name: str, start: float) -> None:
            faults.windows[name] = (start, time.monotonic() - started)

        # A worker dies while it builds: wait (a little) until worker1 holds a build.
        sleep_until(started, 3)
        begin = time.monotonic() - started
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            faults.builds_on_killed_worker = cluster.worker_active().get("worker1", [])
            if faults.builds_on_killed_worker:
                break
            time.sleep(0.2)
        cluster.worker_kill("worker1")
        # The builds it held that had not finished when it died (inspect's answer is a moment old).
        faults.builds_on_killed_worker = _running(cluster, faults.builds_on_killed_worker)
        mark("worker", begin)  # no request notices it: builds are asynchronous
        cluster.worker_start("worker1", wait=False)  # it comes back (and takes builds) when ready

        sleep_until(started, 16)
        begin = time.monotonic() - started
        cluster.postgres_stop()
        sleep_until(started, 22)
        cluster.postgres_start()
        mark("postgres", begin)

        # The broker stops while a worker holds a build: an unacknowledged message, which the worker
        # must let go of and reconnect (Celery 5.7.0's worker stopped there: requirements.txt).
        # The test's own builds are queued first, so that whichever build the workers are on when
        # Redis stops (a build takes about a second), others follow it at once: one is held then.
        sleep_until(started, 30)
        ours = [build for package in spare for build in _publish(cluster, token, package)]
        deadline = time.monotonic() + 6
        active: list[str] = []
        while time.monotonic() < deadline:
            active = [build for builds in cluster.worker_active().values() for build in _running(cluster, builds)]
            if active:
                break
            time.sleep(0.2)
        begin = time.monotonic() - started
        cluster.redis_stop()
        faults.builds_when_redis_stopped = _running(cluster, sorted({*active, *ours}))
        time.sleep(6)
        cluster.redis_start()
        mark("redis", begin)

        sleep_until(started, 43)
        begin = time.monotonic() - started
        cluster.s3_down()
        sleep_until(started, 49)
        cluster.s3_up()
        mark("s3", begin)

        sleep_until(started, 55)
        begin = time.monotonic() - started
        sent = [0]
        upload = threading.Thread(target=_slow_upload, args=(cluster, token, faults, sent), daemon=True)
        upload.start()
        tmp = cluster.directory / "web1" / "tmp"
        wait_until(lambda: bool(_big_parts(tmp)), 20, "the slow upload did not reach web1's disk")
        assert sent[0] < UPLOAD_BYTES
        cluster.web_kill("web1")
        mark("web", begin)
        upload.join(30)
        faults.parts_after_kill = _big_parts(tmp)
        cluster._wait_web("web1")  # the gunicorn master started new workers

    return during


@pytest.fixture(scope="module")
def faulted(
    cluster: Cluster, token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LoadResult, Faults]]:
    faults = Faults()
    catalogue = Catalogue.read(cluster.url)
    [spare] = build_packages(tmp_path_factory.mktemp("spare"), run="held", publishers=1, count=4)
    plan = LoadPlan(clients=50, seconds=LOAD_SECONDS, publishers=3, seed=16, timeout=CLIENT_TIMEOUT)
    result = run_load(
        cluster.url,
        plan=plan,
        catalogue=catalogue,
        token=token,
        workdir=tmp_path_factory.mktemp("faults"),
        during=inject(cluster, token, faults, spare),
    )  # type: ignore[arg-type]
    result.settle(cluster.url, timeout=240)
    print(result.summary())
    print({name: (round(a, 1), round(b, 1)) for name, (a, b) in faults.windows.items()})
    yield result, faults


# What each fault may cause, by kind of request: (statuses allowed, error codes allowed).
ALLOWED: dict[str, dict[str, set[int]]] = {
    "worker": {},  # builds are asynchronous: no request notices a worker's death
    # Answers from the web nodes, fast: 503 database_unavailable (or a read nginx takes from the bucket).
    "postgres": {kind: {503} for kind in ("index", "resolve", "download", "oci", "tuf", "publish")},
    "redis": {"publish": {503}},  # accepted (the reaper sends it once the broker is back) or refused cleanly
    # Packages cannot be stored or fetched; the index and resolution (the database) go on.
    "s3": {"publish": {503}, "download": {0, 502, 503, 504}, "oci": {0, 502, 503, 504}, "tuf": {503}},
    # Requests in flight on the killed node: nginx answers 502 for those it cannot send again.
    "web": {kind: {0, 502} for kind in ("index", "resolve", "download", "oci", "tuf", "publish")},
}


def test_every_fault_was_injected(faulted: tuple[LoadResult, Faults]) -> None:
    result, faults = faulted
    assert list(faults.windows) == ["worker", "postgres", "redis", "s3", "web"]
    assert faults.windows["web"][1] < result.seconds - RECOVERY  # a clean stretch after the last one


def test_no_request_ever_gets_a_500_and_failures_are_the_faults(faulted: tuple[LoadResult, Faults]) -> None:
    result, faults = faulted
    assert [o for o in result.outcomes if o.status == 500] == []
    unexplained = []
    for outcome in result.failures():
        windows = faults.window(outcome)
        if not any(outcome.status in ALLOWED[name].get(outcome.kind, set()) for name in windows):
            unexplained.append((windows, outcome))
    assert unexplained == [], unexplained[:10]


def test_a_database_outage_answers_503_fast_with_the_envelope_and_retry_after(
    faulted: tuple[LoadResult, Faults],
) -> None:
    result, faults = faulted
    outage = [o for o in result.failures() if "postgres" in faults.window(o)]
    assert outage, "no request noticed the database outage"
    api = [o for o in outage if o.kind in ("resolve", "download", "publish", "index")]
    assert api, outage[:5]

    # (A request that also overlapped another fault's window, as the outage's recovery may on a busy
    # machine, may have met that fault instead, as that fault allows.)
    def another_faults(outcome: Outcome) -> bool:
        others = [name for name in faults.window(outcome) if name != "postgres"]
        return any(outcome.status in ALLOWED[name].get(outcome.kind, set()) for name in others)

    other = [(faults.window(o), o) for o in api if o.code != "database_unavailable" and not another_faults(o)]
    assert other == [], faults.windows
    assert all(o.retry_after == "5" for o in outage), outage[:5]
    # Asked while the database was down, answered fast: within 10 s, never the client's timeout. (A request
    # already in flight when it went down had been slow for reasons of its own: its answer is
    # held to the statuses and codes above.)
    start, _ = faults.windows["postgres"]
    asked = [o for o in outage if o.at >= start]
    slowest = max(asked, key=lambda o: o.seconds)
    assert slowest.seconds < 10, slowest


def test_storage_outage_refuses_publishes_cleanly_while_reads_of_the_index_go_on(
    faulted: tuple[LoadResult, Faults],
) -> None:
    result, faults = faulted
    start, end = faults.windows["s3"]
    refused = [o for o in result.of("publish", between=(start, end + RECOVERY)) if o.status == 503]
    assert all(o.code == "storage_unavailable" and o.retry_after == "5" for o in refused), refused
    index = result.of("index", between=(start + 1, end))
    assert index and all(o.status == 200 for o in index)  # from the web nodes when the bucket is down


def test_everything_answers_after_the_faults(faulted: tuple[LoadResult, Faults]) -> None:
    result, faults = faulted
    after = (max(end for _, end in faults.windows.values()) + RECOVERY, result.seconds)
    assert result.failures(between=after) == []
    for kind in ("index", "resolve", "download", "oci", "tuf"):
        assert any(o.status == 200 for o in result.of(kind, between=after)), kind
    assert any(p.accepted and p.at > after[0] for p in result.publishes)


def test_the_workers_outlive_the_broker_s_restart(cluster: Cluster, faulted: tuple[LoadResult, Faults]) -> None:
    """Redis stopped while a worker held a build; every worker is still running and answers."""
    _, faults = faulted
    assert faults.builds_when_redis_stopped, "no worker held a build when Redis stopped"
    app = cluster.celery()

    def answers(role: str) -> bool:
        return bool(app.control.ping(destination=[cluster.worker_name(role)], timeout=2))

    try:
        for role in cluster.worker_roles():
            assert cluster.procs[role].alive(), cluster.log(role)[-3000:]
            # (This process's first broker connection since the restart may be a stale pooled one.)
            wait_until(functools.partial(answers, role), 20, f"{role} answering")
    finally:
        app.close()


def test_every_accepted_publish_ends_and_none_is_lost_outside_the_faults(
    cluster: Cluster, faulted: tuple[LoadResult, Faults]
) -> None:
    result, faults = faulted
    assert result.unfinished() == []
    assert result.mismatches == []
    in_fault = {
        id(p)
        for p in result.publishes
        if any(a - CLIENT_TIMEOUT <= p.at <= b + RECOVERY for a, b in faults.windows.values())
    }
    assert [p for p in result.lost() if id(p) not in in_fault] == []
    # One that a fault failed says why, in words (never a bare traceback).
    assert all(p.final_message for p in result.accepted() if p.final == "failed")


def test_builds_of_a_killed_worker_finish_on_another_or_fail_with_a_reason(
    cluster: Cluster, faulted: tuple[LoadResult, Faults]
) -> None:
    _, faults = faulted
    for build_id in faults.builds_on_killed_worker:
        [(status, attempts, error, code, name, version)] = cluster.sql(
            "SELECT status, attempts, error_message, error_code, name, version_text FROM builds_build WHERE id = %s",
            (build_id,),
        )
        finished = status == "succeeded" and attempts >= 2
        # Its worker died: failed for that, in words; or, sent again, its next attempt met a later
        # fault (the object store's outage) and failed cleanly for that one.
        failed_for_a_fault = status == "failed" and (
            "interrupted" in error or (attempts >= 2 and error.startswith("object storage is unavailable"))
        )
        # Or the load published the same package again meanwhile, and that build published it first.
        [(published_by_another,)] = cluster.sql(
            "SELECT count(*) FROM builds_build WHERE name = %s AND version_text = %s AND status = 'succeeded'",
            (name, version),
        )
        published_meanwhile = (
            status == "failed" and attempts >= 2 and code == "version_exists" and published_by_another == 1
        )
        assert finished or failed_for_a_fault or published_meanwhile, (status, attempts, error)


def test_a_killed_upload_leaves_no_row_and_the_sweeper_removes_its_files(
    cluster: Cluster, faulted: tuple[LoadResult, Faults], tmp_path: Path
) -> None:
    _, faults = faulted
    assert faults.killed_upload_error in ("RemoteProtocolError", "ReadError", "WriteError")  # cut mid-upload
    assert faults.parts_after_kill  # what it left on web1's disk
    assert_integrity(cluster)  # builds final, sweepers run, check_integrity: no problems
    assert list((cluster.directory / "web1" / "tmp").glob("upload-*.part")) == []


def test_downloads_during_the_faults_were_the_signed_bytes(
    cluster: Cluster, faulted: tuple[LoadResult, Faults], tmp_path: Path
) -> None:
    result, _ = faulted
    assert verify_downloads(cluster.url, result.downloaded, root=cluster.root_file, home=tmp_path / "v") == []
