"""Faults injected one after another during one load through nginx (issue 15), each in its own
window: SIGKILL of a Celery worker while it builds, PostgreSQL stopped and restarted, Redis
stopped and restarted, the object store down and back, SIGKILL of a web node's processes in the
middle of an upload. Every failure a client sees lies in a fault's window (plus a short recovery)
and is the failure that fault should cause (a fast 503 with the envelope and Retry-After, a
refused download), never a 500; every accepted publish ends final; after the load everything
answers again, the sweeper removes what the killed upload left, and `check_integrity` finds
nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from cluster.cluster import Cluster, wait_until
from cluster.load import Catalogue, LoadPlan, LoadResult, Outcome, run_load, sleep_until, verify_downloads
from tests.cluster.test_cluster import assert_integrity

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.xdist_group("cluster")]

RECOVERY = 8.0  # seconds after a fault ends during which its failures may still be seen
LOAD_SECONDS = 72.0


@dataclass
class Faults:
    """When each fault began and ended (seconds into the load), and what it touched."""

    windows: dict[str, tuple[float, float]] = field(default_factory=dict)
    builds_on_killed_worker: list[str] = field(default_factory=list)
    killed_upload_error: str = ""
    parts_after_kill: list[str] = field(default_factory=list)

    def window(self, outcome: Outcome) -> str | None:
        for name, (start, end) in self.windows.items():
            if start <= outcome.at <= end + RECOVERY:
                return name
        return None


class SlowPackage:
    """A file-like upload body that trickles in (64 KiB every 50 ms), so a kill lands mid-upload."""

    def __init__(self, size: int = 16 * 1024 * 1024) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        time.sleep(0.05)
        chunk = min(self.left, 64 * 1024)
        self.left -= chunk
        return b"\0" * chunk


def _slow_upload(cluster: Cluster, token: str, faults: Faults) -> None:
    try:
        httpx.post(
            f"{cluster.web_url(1)}/api/v1/extensions/",
            files={"file": ("killed-1.0.0.tar.gz", SlowPackage(), "application/gzip")},  # type: ignore[dict-item]
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
    except httpx.HTTPError as exc:
        faults.killed_upload_error = type(exc).__name__


def inject(cluster: Cluster, token: str, faults: Faults) -> object:
    def during(started: float) -> None:
        def mark(name: str, start: float) -> None:
            faults.windows[name] = (start, time.monotonic() - started)

        # A worker dies while it builds: wait (a little) until worker1 holds a build.
        sleep_until(started, 3)
        begin = time.monotonic() - started
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not faults.builds_on_killed_worker:
            faults.builds_on_killed_worker = cluster.worker_active().get("worker1", [])
        cluster.worker_kill("worker1")
        sleep_until(started, 12)
        cluster.worker_start("worker1")
        mark("worker", begin)

        sleep_until(started, 16)
        begin = time.monotonic() - started
        cluster.postgres_stop()
        sleep_until(started, 22)
        cluster.postgres_start()
        mark("postgres", begin)

        sleep_until(started, 30)
        begin = time.monotonic() - started
        cluster.redis_stop()
        sleep_until(started, 36)
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
        upload = threading.Thread(target=_slow_upload, args=(cluster, token, faults), daemon=True)
        upload.start()
        tmp = cluster.directory / "web1" / "tmp"
        wait_until(lambda: any(tmp.glob("upload-*.part")), 10, "the slow upload did not reach web1's disk")
        time.sleep(0.5)
        cluster.web_kill("web1")
        upload.join(30)
        faults.parts_after_kill = sorted(p.name for p in tmp.glob("upload-*.part"))
        cluster._wait_web("web1")  # the gunicorn master started new workers
        mark("web", begin)

    return during


@pytest.fixture(scope="module")
def faulted(
    cluster: Cluster, token: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LoadResult, Faults]]:
    faults = Faults()
    catalogue = Catalogue.read(cluster.url)
    plan = LoadPlan(clients=50, seconds=LOAD_SECONDS, publishers=3, seed=16)
    result = run_load(
        cluster.url,
        plan=plan,
        catalogue=catalogue,
        token=token,
        workdir=tmp_path_factory.mktemp("faults"),
        during=inject(cluster, token, faults),
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
        window = faults.window(outcome)
        if window is None or outcome.status not in ALLOWED[window].get(outcome.kind, set()):
            unexplained.append((window, outcome))
    assert unexplained == [], unexplained[:10]


def test_a_database_outage_answers_503_fast_with_the_envelope_and_retry_after(
    faulted: tuple[LoadResult, Faults],
) -> None:
    result, faults = faulted
    outage = [o for o in result.failures() if faults.window(o) == "postgres"]
    assert outage, "no request noticed the database outage"
    api = [o for o in outage if o.kind in ("resolve", "download", "publish", "index")]
    assert api and all(o.code == "database_unavailable" for o in api), api[:5]
    assert all(o.retry_after == "5" for o in outage), outage[:5]
    assert max(o.seconds for o in outage) < 10  # fails fast: never the client's 15 s timeout


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


def test_every_accepted_publish_ends_and_none_is_lost_outside_the_faults(
    cluster: Cluster, faulted: tuple[LoadResult, Faults]
) -> None:
    result, faults = faulted
    assert result.unfinished() == []
    assert result.mismatches == []
    in_fault = {
        id(p) for p in result.publishes if any(a - 15 <= p.at <= b + RECOVERY for a, b in faults.windows.values())
    }
    assert [p for p in result.lost() if id(p) not in in_fault] == []
    # One that a fault failed says why, in words (never a bare traceback).
    assert all(p.final_message for p in result.accepted() if p.final == "failed")


def test_builds_of_a_killed_worker_finish_on_another_or_fail_with_a_reason(
    cluster: Cluster, faulted: tuple[LoadResult, Faults]
) -> None:
    _, faults = faulted
    for build_id in faults.builds_on_killed_worker:
        [(status, attempts, error)] = cluster.sql(
            "SELECT status, attempts, error_message FROM builds_build WHERE id = %s", (build_id,)
        )
        assert (status == "succeeded" and attempts >= 2) or (status == "failed" and "interrupted" in error), (
            status,
            attempts,
            error,
        )


def test_a_killed_upload_leaves_no_row_and_the_sweeper_removes_its_files(
    cluster: Cluster, faulted: tuple[LoadResult, Faults], tmp_path: Path
) -> None:
    _, faults = faulted
    assert faults.killed_upload_error  # the connection was cut mid-upload
    assert faults.parts_after_kill  # what it left on web1's disk
    assert_integrity(cluster)  # builds final, sweepers run, check_integrity: no problems
    assert list((cluster.directory / "web1" / "tmp").glob("upload-*.part")) == []


def test_downloads_during_the_faults_were_the_signed_bytes(
    cluster: Cluster, faulted: tuple[LoadResult, Faults], tmp_path: Path
) -> None:
    result, _ = faulted
    assert verify_downloads(cluster.url, result.downloaded, root=cluster.root_file, home=tmp_path / "v") == []
