"""A bounded mixed load against a registry (the cluster's tests and `make bench`): N concurrent
clients for S seconds, asyncio and httpx, every request recorded.

Readers pick, by weight, one of: an index document (``GET /api/v1/index/NAME``), a resolution
(``POST /api/v1/resolve``), a download (the registry's answer and the bytes behind its redirect,
hashed), an OCI pull (manifest by tag, then the layer blob behind its redirect, hashed), and the
signed index's ``timestamp.json``. Publishers (a few of the clients) publish new versions one after
another; every few publishes is a re-publish of an earlier package, which the build must refuse as
the author's error (``version_exists``). After the load, `LoadResult.settle` follows every accepted
publish to its final state, and `verify_downloads` checks every downloaded (name, version, sha256)
against the signed metadata with the client's verifier (`clients.trust`).

Every request has a timeout, so a run lasts at most its seconds plus one timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import percentile
from extensions.archive import build_package
from extensions.oci import MANIFEST_MEDIA_TYPE

READ_KINDS = ("index", "resolve", "download", "oci", "tuf")
DEFAULT_WEIGHTS = {"index": 40, "resolve": 15, "download": 20, "oci": 15, "tuf": 10}
#: Build outcomes that are the author's (a refused package), not the registry's.
PLATFORM_ERRORS = frozenset({"internal_error", "storage_unavailable", "database_unavailable"})


@dataclass(frozen=True)
class LoadPlan:
    clients: int = 50
    seconds: float = 60.0
    publishers: int = 2  # of the clients
    publish_pause: float = 0.5  # seconds between one publisher's publishes
    republish_every: int = 6  # every Nth publish sends an earlier package again (an author error)
    weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    timeout: float = 15.0
    seed: int = 0
    # cluster.probe: an index read every this many seconds from a process of its own (0: none)
    probe_interval: float = 0.02


@dataclass(frozen=True)
class Outcome:
    """One request (an OCI pull and a download are one each, their redirect followed)."""

    kind: str
    at: float  # seconds after the load started
    seconds: float
    status: int  # 0: no answer (refused, reset, timed out)
    error: str = ""  # what went wrong, when something did
    code: str = ""  # the envelope's error code, when there is one
    retry_after: str = ""  # the Retry-After header of an error answer

    @property
    def server_error(self) -> bool:
        return self.status >= 500


@dataclass
class Publish:
    at: float
    filename: str
    name: str
    version: str
    republish: bool
    status: int
    build_id: str = ""
    code: str = ""
    final: str = ""  # succeeded / failed (after settle)
    final_code: str = ""
    final_message: str = ""

    @property
    def accepted(self) -> bool:
        return self.status == 202 and bool(self.build_id)


@dataclass
class LoadResult:
    plan: LoadPlan
    started: float
    seconds: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    publishes: list[Publish] = field(default_factory=list)
    downloaded: set[tuple[str, str, str]] = field(default_factory=set)  # (name, version, sha256 of the bytes)
    mismatches: list[str] = field(default_factory=list)  # bytes that were not what the answer said
    # cluster.probe's index reads during the load: (at, seconds from when it was due, status)
    probe: list[tuple[float, float, int]] = field(default_factory=list)

    # --- reading the result -------------------------------------------------------------------

    def kinds(self) -> list[str]:
        return sorted({o.kind for o in self.outcomes})

    def of(self, kind: str, *, between: tuple[float, float] | None = None) -> list[Outcome]:
        lo, hi = between or (float("-inf"), float("inf"))
        return [o for o in self.outcomes if o.kind == kind and lo <= o.at < hi]

    def server_errors(self, *, between: tuple[float, float] | None = None) -> list[Outcome]:
        lo, hi = between or (float("-inf"), float("inf"))
        return [o for o in self.outcomes if o.server_error and lo <= o.at < hi]

    def failures(self, *, between: tuple[float, float] | None = None) -> list[Outcome]:
        """Requests that got no answer or a 5xx."""
        lo, hi = between or (float("-inf"), float("inf"))
        return [o for o in self.outcomes if (o.status == 0 or o.status >= 500) and lo <= o.at < hi]

    def latency(self, kind: str, pct: float, *, ok_only: bool = True) -> float:
        samples = [o.seconds for o in self.of(kind) if not ok_only or 200 <= o.status < 400]
        return percentile(samples, pct) if samples else float("nan")

    def probe_latency(self, pct: float) -> float:
        """A percentile of the probe's index reads (what one client sees of the server, without
        the load driver's own queueing), answered ones only."""
        samples = [seconds for _, seconds, status in self.probe if status == 200]
        return percentile(samples, pct) if samples else float("nan")

    def requests_per_second(self) -> float:
        return len(self.outcomes) / self.seconds if self.seconds else 0.0

    def statuses(self, kind: str | None = None) -> Counter[int]:
        return Counter(o.status for o in self.outcomes if kind is None or o.kind == kind)

    def accepted(self) -> list[Publish]:
        return [p for p in self.publishes if p.accepted]

    def lost(self) -> list[Publish]:
        """Accepted publishes that did not end succeeded or with an author's error."""
        return [
            p
            for p in self.accepted()
            if p.final != "succeeded" and (p.final != "failed" or p.final_code in PLATFORM_ERRORS)
        ]

    def unfinished(self) -> list[Publish]:
        return [p for p in self.accepted() if p.final not in ("succeeded", "failed")]

    def summary(self) -> str:
        lines = [
            f"{len(self.outcomes)} requests in {self.seconds:.1f} s ({self.requests_per_second():.0f}/s) from "
            f"{self.plan.clients} clients; {len(self.publishes)} publishes ({len(self.accepted())} accepted)"
        ]
        for kind in self.kinds():
            outcomes = self.of(kind)
            statuses = ", ".join(
                f"{s or 'no answer'}: {n}" for s, n in sorted(Counter(o.status for o in outcomes).items())
            )
            lines.append(
                f"  {kind:14} {len(outcomes):6}  p50 {self.latency(kind, 50) * 1000:7.1f} ms  "
                f"p99 {self.latency(kind, 99) * 1000:7.1f} ms  [{statuses}]"
            )
        if self.probe:
            counts = sorted(Counter(status for *_, status in self.probe).items())
            statuses = ", ".join(f"{s or 'no answer'}: {n}" for s, n in counts)
            lines.append(
                f"  {'index (probe)':14} {len(self.probe):6}  p50 {self.probe_latency(50) * 1000:7.1f} ms  "
                f"p99 {self.probe_latency(99) * 1000:7.1f} ms  [{statuses}]"
            )
        finals = Counter(f"{p.final} {p.final_code}".strip() for p in self.accepted())
        if finals:
            lines.append("  publishes ended: " + ", ".join(f"{k}: {v}" for k, v in sorted(finals.items())))
        return "\n".join(lines)

    # --- after the load -----------------------------------------------------------------------

    def settle(self, base_url: str, *, timeout: float) -> None:
        """Follow every accepted publish until its build is final (or the timeout passes)."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=10) as http:
            for publish in self.accepted():
                while True:
                    try:
                        response = http.get(f"{base_url}/api/v1/builds/{publish.build_id}/")
                        data = response.json().get("data") or {}
                    except (httpx.HTTPError, ValueError):
                        data = {}
                    if data.get("status") in ("succeeded", "failed"):
                        publish.final = str(data["status"])
                        error = data.get("error") or {}
                        publish.final_code = str(error.get("code", ""))
                        publish.final_message = str(error.get("message", ""))
                        break
                    publish.final = str(data.get("status", "unknown"))
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.25)


# --- the catalogue the readers read --------------------------------------------------------------


@dataclass(frozen=True)
class Catalogue:
    """What readers ask for: (name, version) pairs and the names to resolve."""

    versions: tuple[tuple[str, str], ...]
    names: tuple[str, ...]

    @classmethod
    def read(cls, base_url: str, *, exclude_prefix: str = "ld") -> Catalogue:
        pairs: list[tuple[str, str]] = []
        with httpx.Client(timeout=15) as http:
            items = http.get(f"{base_url}/api/v1/extensions/", params={"limit": 100}).json()["data"]["items"]
            names = sorted(str(i["name"]) for i in items if not str(i["name"]).startswith(exclude_prefix))
            for name in names:
                document = http.get(f"{base_url}/api/v1/index/{name}").json()["data"]
                pairs += [(name, str(v["version"])) for v in document["versions"] if not v.get("yanked")]
        if not pairs:
            raise RuntimeError(f"the registry at {base_url} has nothing to read: publish something first")
        return cls(versions=tuple(pairs), names=tuple(names))


# --- the packages the publishers send ------------------------------------------------------------


def run_id(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(6))


def build_packages(directory: Path, *, run: str, publishers: int, count: int, depends_on: str = "") -> list[list[Path]]:
    """``count`` new versions for each publisher's own extension (``ld{run}-{a,b,...}``), built as
    ``provisioning extension build`` builds them."""
    lists: list[list[Path]] = []
    for index in range(publishers):
        name = f"ld{run}-{string.ascii_lowercase[index % 26]}{index // 26 or ''}"
        built: list[Path] = []
        for n in range(count):
            source = directory / "src" / name / str(n)
            source.mkdir(parents=True)
            dependency = f'[dependencies]\nextensions = ["{depends_on}"]\n' if depends_on else ""
            (source / "extension.toml").write_text(
                f'[extension]\nname = "{name}"\nversion = "1.0.{n}"\ndescription = "A load-test extension"\n'
                f'type = "taskserv"\nlicense = "MIT"\n\n[provides]\ntaskservs = ["{name}"]\n\n{dependency}',
                encoding="utf-8",
            )
            (source / "README.md").write_text(f"# {name} 1.0.{n}\n\nPublished by the load test.\n", encoding="utf-8")
            (source / "templates").mkdir()
            (source / "templates" / "config.j2").write_text("name: {{ name }}\nversion: " + str(n) + "\n")
            built.append(build_package(source, directory / "dist" / name).path)
        lists.append(built)
    return lists


# --- the clients ------------------------------------------------------------------------------------


def _code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("code", ""))
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("code", ""))
    return ""


class _Run:
    def __init__(
        self, base_url: str, plan: LoadPlan, catalogue: Catalogue, token: str, packages: list[list[Path]]
    ) -> None:
        self.base = base_url.rstrip("/")
        self.plan = plan
        self.catalogue = catalogue
        self.token = token
        self.packages = packages
        self.result = LoadResult(plan=plan, started=time.monotonic())
        self.deadline = self.result.started + plan.seconds
        kinds = [k for k in READ_KINDS if plan.weights.get(k, 0) > 0]
        self.kinds = kinds
        self.weights = [plan.weights[k] for k in kinds]

    def now(self) -> float:
        return time.monotonic() - self.result.started

    def record(
        self, kind: str, began: float, status: int, error: str = "", code: str = "", retry_after: str = ""
    ) -> None:
        outcome = Outcome(kind, began - self.result.started, time.monotonic() - began, status, error, code, retry_after)
        self.result.outcomes.append(outcome)

    async def request(
        self, http: httpx.AsyncClient, kind: str, method: str, url: str, **kwargs: Any
    ) -> httpx.Response | None:
        began = time.monotonic()
        try:
            response = await http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.record(kind, began, 0, f"{type(exc).__name__}: {exc}"[:200])
            return None
        code = _code(response) if response.status_code >= 400 else ""
        status = response.status_code
        # A redirect followed to the object store: a failure there is the download's failure.
        for hop in response.history:
            if hop.status_code >= 500:
                status = hop.status_code
        error = "" if status < 400 else response.text[:200]
        self.record(kind, began, status, error, code, response.headers.get("Retry-After", "") if status >= 400 else "")
        return response

    async def reader(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        while time.monotonic() < self.deadline:
            kind = rng.choices(self.kinds, self.weights)[0]
            await getattr(self, f"read_{kind}")(http, rng)

    async def read_index(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        name = rng.choice(self.catalogue.names)
        await self.request(http, "index", "GET", f"{self.base}/api/v1/index/{name}")

    async def read_resolve(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        wanted = rng.sample(self.catalogue.names, k=min(2, len(self.catalogue.names)))
        await self.request(http, "resolve", "POST", f"{self.base}/api/v1/resolve", json={"requirements": wanted})

    def _check(self, name: str, version: str, expected: str, body: bytes) -> None:
        actual = hashlib.sha256(body).hexdigest()
        if actual != expected:
            self.result.mismatches.append(f"{name} {version}: got sha256 {actual}, the answer said {expected}")
        self.result.downloaded.add((name, version, actual))

    async def read_download(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        name, version = rng.choice(self.catalogue.versions)
        url = f"{self.base}/api/v1/extensions/{name}/versions/{version}/download"
        response = await self.request(http, "download", "GET", url, follow_redirects=True)
        if response is not None and response.status_code == 200:
            first = response.history[0] if response.history else response
            self._check(name, version, first.headers.get("X-Checksum-Sha256", ""), response.content)

    async def read_oci(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        name, version = rng.choice(self.catalogue.versions)
        repository = f"{self.base}/v2/extensions/{name}"
        manifest = await self.request(
            http,
            "oci",
            "GET",
            f"{repository}/manifests/{version.replace('+', '_')}",
            headers={"Accept": MANIFEST_MEDIA_TYPE},
        )
        if manifest is None or manifest.status_code != 200:
            return
        digest = str(json.loads(manifest.content)["layers"][0]["digest"])
        blob = await self.request(http, "oci", "GET", f"{repository}/blobs/{digest}", follow_redirects=True)
        if blob is not None and blob.status_code == 200:
            self._check(name, version, digest.removeprefix("sha256:"), blob.content)

    async def read_tuf(self, http: httpx.AsyncClient, rng: random.Random) -> None:
        await self.request(http, "tuf", "GET", f"{self.base}/tuf/metadata/timestamp.json")

    async def publisher(self, http: httpx.AsyncClient, packages: list[Path]) -> None:
        sent: list[Path] = []
        for number, package in enumerate(packages, start=1):
            if time.monotonic() >= self.deadline:
                return
            republish = bool(sent) and number % self.plan.republish_every == 0
            path = sent[len(sent) // 2] if republish else package
            await self.publish(http, path, republish=republish)
            if not republish:
                sent.append(path)
            await asyncio.sleep(self.plan.publish_pause)

    async def publish(self, http: httpx.AsyncClient, path: Path, *, republish: bool) -> None:
        name, _, version = path.name.removesuffix(".tar.gz").rpartition("-")
        began = time.monotonic()
        record = Publish(began - self.result.started, path.name, name, version, republish, 0)
        self.result.publishes.append(record)
        files = {"file": (path.name, path.read_bytes(), "application/gzip")}
        response = await self.request(
            http,
            "publish",
            "POST",
            f"{self.base}/api/v1/extensions/",
            files=files,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        if response is None:
            return
        record.status = response.status_code
        if response.status_code == 202:
            record.build_id = str(response.json()["data"]["id"])
        else:
            record.code = _code(response)

    async def run(self) -> LoadResult:
        limits = httpx.Limits(max_connections=self.plan.clients + 8, max_keepalive_connections=self.plan.clients + 8)
        timeout = httpx.Timeout(self.plan.timeout, connect=min(5.0, self.plan.timeout))
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
            tasks = []
            for index in range(self.plan.clients):
                if index < min(self.plan.publishers, len(self.packages)):
                    tasks.append(self.publisher(http, self.packages[index]))
                else:
                    tasks.append(self.reader(http, random.Random(self.plan.seed * 1000 + index)))
            await asyncio.gather(*tasks)
        self.result.seconds = time.monotonic() - self.result.started
        return self.result


def run_load(
    base_url: str,
    *,
    plan: LoadPlan,
    catalogue: Catalogue,
    token: str,
    workdir: Path | None = None,
    depends_on: str = "",
    during: Callable[[float], None] | None = None,
) -> LoadResult:
    """The load (its own event loop). ``during``, given the load's start (time.monotonic()), runs
    in this thread while the load runs in another: a fault injected on a schedule. (This thread,
    because the processes a fault restarts die with the thread that started them: PR_SET_PDEATHSIG.)"""
    rng = random.Random(plan.seed or None)
    per_publisher = int(plan.seconds / max(plan.publish_pause, 0.05)) + 2 if plan.publishers else 0
    with tempfile.TemporaryDirectory(prefix="load-", dir=workdir) as tmp:
        packages = build_packages(
            Path(tmp), run=run_id(rng), publishers=plan.publishers, count=per_publisher, depends_on=depends_on
        )
        runner = _Run(base_url, plan, catalogue, token, packages)
        with _Probe(base_url, plan, catalogue) as probe:
            result = _run(runner, plan, during)
        result.probe = probe.samples
        return result


class _Probe:
    """cluster.probe in a process of its own for the load's seconds (nothing when the plan says 0)."""

    def __init__(self, base_url: str, plan: LoadPlan, catalogue: Catalogue) -> None:
        self.command = [
            sys.executable, "-m", "cluster.probe", base_url, str(plan.seconds), str(plan.probe_interval),
            *catalogue.names,
        ]  # fmt: skip
        self.enabled = plan.probe_interval > 0
        self.timeout = plan.seconds + plan.timeout + 30
        self.samples: list[tuple[float, float, int]] = []
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> _Probe:
        if self.enabled:
            root = Path(__file__).resolve().parent.parent
            self.process = subprocess.Popen(self.command, cwd=root, stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self.process is None:
            return
        if exc_type is not None:  # the load failed: its figures do not matter
            self.process.kill()
            self.process.communicate()
            return
        try:
            out, _ = self.process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise RuntimeError(f"the latency probe did not end within {self.timeout:.0f} s") from None
        if self.process.returncode != 0:
            raise RuntimeError(f"the latency probe failed with exit code {self.process.returncode}")
        self.samples = [(float(at), float(seconds), int(status)) for at, seconds, status in json.loads(out)]


def _run(runner: _Run, plan: LoadPlan, during: Callable[[float], None] | None) -> LoadResult:
    if during is None:
        return asyncio.run(runner.run())
    results: list[LoadResult] = []
    errors: list[BaseException] = []

    def load() -> None:
        try:
            results.append(asyncio.run(runner.run()))
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=load, name="load", daemon=True)
    thread.start()
    try:
        during(runner.result.started)
    finally:
        thread.join(timeout=plan.seconds + plan.timeout + 60)
    if errors:
        raise errors[0]
    if not results:
        raise RuntimeError(f"the load did not end within {plan.seconds + plan.timeout + 60:.0f} s")
    return results[0]


def sleep_until(started: float, offset: float) -> None:
    """In a ``during`` function: wait until ``offset`` seconds into the load."""
    delay = started + offset - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def verify_downloads(
    base_url: str, downloaded: Sequence[tuple[str, str, str]] | set[tuple[str, str, str]], *, root: Path, home: Path
) -> list[str]:
    """Every downloaded (name, version, sha256) checked against the registry's signed metadata by
    the client's verifier, from the root given; the problems ([] when every byte is what was signed)."""
    from clients.errors import ClientError
    from clients.trust import Trust, pin_root

    problems: list[str] = []
    with httpx.Client(timeout=30) as http:
        pin_root(home, base_url, root.read_bytes(), how="explicit", replace=True)
        trust = Trust(base_url, home=home, http=http, notice=lambda text: None)
        for name, version, sha256 in sorted(downloaded):
            try:
                trust.check_package(name, version, sha256)
            except ClientError as exc:
                problems.append(str(exc))
    return problems
