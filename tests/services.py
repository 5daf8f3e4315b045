"""Real services for the tests: PostgreSQL, Redis with a Celery worker, and S3 (moto's server).

Everything runs as private processes (or a thread, for moto) on 127.0.0.1 with free ports, starts
once per test process and is removed at the end, even when a test fails (finalizers, and atexit as
a fallback). Locally a missing service skips the test; under CI=true it fails it
(`tests.conftest.require`). `make services` installs PostgreSQL and Redis (Debian, as root).

Whole suite on PostgreSQL::

    pytest --postgres    # `make test` runs the suite twice: on SQLite, then with --postgres

``--postgres`` starts a private server in the xdist controller (or the only process) before any
test runs and exports its URL as DATABASE_URL (and TESTS_DATABASE_URL, which tests/settings.py
reads), so every worker uses it; pytest-django creates test_registry_gw0, test_registry_gw1, ...

Fixtures:

``postgres_url`` (session)
    URL of a fresh PostgreSQL database for this test process, even in the SQLite run (a private
    server is started on first use; in the --postgres run the suite's server is reused).
``postgres_server`` (session)
    The `PostgresServer` behind it: ``.create_database() -> url`` for one more fresh database.
``redis_url`` / ``redis_server`` (session)
    ``redis://127.0.0.1:P/0`` of a private redis-server; the server has ``.stop()``/``.start()``.
``live_db_url`` (function, implies ``transactional_db``)
    URL of the test database this test really uses, for other processes (a worker, a server).
    In the SQLite run the test database is a file (tests/settings.py), so it can be shared.
``celery_worker_factory`` (function)
    ``start(env=None, include=()) -> CeleryWorker`` runs ``celery -A registry worker --pool=solo``
    against the test database (``live_db_url``), the test's REGISTRY_DATA_DIR and ``redis_url``
    (and the test's S3 bucket when ``s3_storage`` is active), and returns once the worker is
    ready. The test process itself is switched to that broker (no eager tasks) for the test.
    ``CeleryWorker``: ``.pid``, ``.name``, ``.log`` (Path of its output), ``.output()``, ``.ping()``,
    ``.wait_for_log(text)``, ``.stop()`` (SIGTERM, wait), ``.kill()`` (SIGKILL). Readiness is a
    remote-control ping, not the log: log levels are settings (celery.app.trace logs WARNING+).
    The worker runs with ``registry.settings`` and only the environment it is given: settings a
    test changed with the ``settings`` fixture must be passed as environment variables (``env=``).
``moto_server`` (session)
    `MotoServer`: ``.url``, ``.stop()`` (connections refused, open ones dropped) and ``.start()``
    (same port, same buckets and objects), for "storage down, then recovered" tests.
``s3_storage`` (function)
    Creates a fresh bucket and switches ``STORAGES["packages"]`` to django-storages' S3Storage on
    it (REGISTRY_STORAGE="s3"); returns an `S3Bucket` (``.name``, ``.client``, ``.location``,
    ``.env`` for other processes). botocore retries once only, so a stopped server fails fast.

``distribution_registry`` (session)
    `DistributionRegistry`: Debian's docker-registry (the CNCF distribution registry) serving an
    empty filesystem store on ``.address`` (``127.0.0.1:P``, plain HTTP): an OCI registry that tests
    copy extensions into with skopeo.

Markers: ``postgres``, ``redis`` and ``s3`` pull in ``postgres_server``, ``redis_url`` and
``moto_server``, so a marked test fails under CI=true when its service cannot run.

A whole-system test combines them with pytest-django's ``live_server`` (a thread of the test
process serving the test database)::

    def test_publish_builds_on_a_worker(live_server, celery_worker_factory, s3_storage):
        worker = celery_worker_factory()
        ...  # POST to live_server.url; the view enqueues on Redis; the worker builds into S3
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from celery import shared_task

from tests.conftest import require

log = logging.getLogger(__name__)

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
# Set by --postgres in the controller; tests/settings.py prefers it over the shell's DATABASE_URL.
TESTS_DATABASE_URL = "TESTS_DATABASE_URL"
_POSTGRES_KEY = pytest.StashKey["PostgresServer"]()
_S3_ENV_KEY = pytest.StashKey[dict[str, str]]()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM to the process group a server was started in (start_new_session=True), then
    SIGKILL if it has not exited within the timeout."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout)


def _wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """A ``preexec_fn`` for the servers the tests start: the child gets SIGTERM when the process
    that started it ends, however it ends (a finished run, Ctrl-C, a SIGKILL of pytest or of an
    xdist worker), so no run leaves a server behind. Linux's PR_SET_PDEATHSIG; it follows the
    thread that started the child, so start servers from the main thread (fixtures do)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def _end_process(process: subprocess.Popen[bytes], timeout: float = 10) -> int:
    """SIGTERM, then SIGKILL if it does not exit in time; the exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return int(process.returncode)


# --- PostgreSQL ----------------------------------------------------------------------------------


def is_postgres_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in {"postgres", "postgresql", "pgsql"} if "://" in url else False


def find_postgres_bin() -> Path | None:
    """The directory holding initdb and pg_ctl (Debian's newest /usr/lib/postgresql/N/bin first)."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb") if (p.parent / "pg_ctl").exists()]
    if found:
        return max(found, key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    return Path(initdb).parent if initdb and pg_ctl else None


def _with_database(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(dbname), query=""))


class PostgresServer:
    """A PostgreSQL server that trusts the `postgres` user over TCP.

    Started by `start_postgres` (owned: `stop` removes it and its data) or adopted from an
    existing URL (the --postgres run's server, owned by the controller)."""

    def __init__(self, admin_url: str, *, base: Path | None = None, bin_dir: Path | None = None) -> None:
        self.admin_url = _with_database(admin_url, "postgres")
        self.base = base
        self.bin_dir = bin_dir
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(urlsplit(self.admin_url).port or 5432)

    def url(self, dbname: str) -> str:
        return _with_database(self.admin_url, dbname)

    def create_database(self, prefix: str = "registry", *, name: str | None = None) -> str:
        """Create an empty database (named `name`, or `prefix` and a unique suffix); its URL."""
        import psycopg
        from psycopg import sql

        name = name or f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def version(self) -> str:
        import psycopg

        with psycopg.connect(self.admin_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def stop(self) -> None:
        """Stop the server and remove its files (only for a server this process started)."""
        with self._lock:
            base, self.base = self.base, None
        if base is None or self.bin_dir is None:
            return
        data = base / "data"
        result = subprocess.run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "20", "stop"],
            capture_output=True,
            cwd=base,
            env=_postgres_env(base),
            check=False,
            **_as_postgres_user(),
        )
        if result.returncode != 0:
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid = int((data / "postmaster.pid").read_text().split()[0])
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def _as_postgres_user() -> dict[str, Any]:
    """PostgreSQL refuses to run as root: as root, run its commands as the `postgres` user."""
    if os.geteuid() != 0:
        return {}
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root but there is no `postgres` user to run PostgreSQL as") from None
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _postgres_env(base: Path) -> dict[str, str]:
    # No PG* variables from the caller's shell: they would point the tools elsewhere.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "HOME": str(base)}


def run_initdb(bin_dir: Path, data: Path, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """initdb of a private PostgreSQL cluster (trust authentication, UTF-8, C locale, no sync), as
    the `postgres` user when run as root; cwd must be writable by that user."""
    return subprocess.run(
        [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_postgres_env(cwd),
        check=False,
        **_as_postgres_user(),
    )


def start_postgres(attempts: int = 3) -> PostgresServer:
    """initdb + pg_ctl start a private, fast (no fsync) server on a free port."""
    bin_dir = find_postgres_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed: no initdb/pg_ctl under /usr/lib/postgresql (make services)")
    base = Path(tempfile.mkdtemp(prefix="registry-pg-"))
    as_postgres = _as_postgres_user()
    for path in (base, base / "sock"):
        path.mkdir(exist_ok=True)
        if as_postgres:
            os.chown(path, as_postgres["user"], as_postgres["group"])
    env = _postgres_env(base)
    data, logfile = base / "data", base / "postgres.log"
    server = PostgresServer(f"postgres://postgres@{HOST}:1/postgres", base=base, bin_dir=bin_dir)
    atexit.register(server.stop)
    initdb = run_initdb(bin_dir, data, cwd=base)
    if initdb.returncode != 0:
        server.stop()
        raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}{initdb.stderr}")
    for _ in range(attempts):
        port = free_port()
        # Later lines win: a retry on another port appends its own `port`.
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(
                f"\nport = {port}\nunix_socket_directories = '{base / 'sock'}'\nlisten_addresses = '{HOST}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
            )
        started = subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(logfile), "-w", "-t", "30", "start"],
            capture_output=True,
            text=True,
            cwd=base,
            env=env,
            check=False,
            **as_postgres,
        )
        if started.returncode == 0:
            server.admin_url = f"postgres://postgres@{HOST}:{port}/postgres"
            return server
        if "already in use" not in _tail(logfile, 10):
            break
    output = _tail(logfile)
    server.stop()
    raise RuntimeError(f"PostgreSQL did not start:\n{output}")


def _point_django_at(url: str) -> None:
    """Re-read the default database of the already loaded settings (pytest-django loads them before
    any conftest runs) from `url`; no connection exists yet, but drop any just in case."""
    from django.conf import settings
    from django.db import connections

    from registry.env import database_from_url

    connections.close_all()
    with contextlib.suppress(AttributeError):
        delattr(getattr(connections, "_connections"), "default")  # noqa: B009 - private, untyped
    settings.DATABASES["default"] = database_from_url(TESTS_DATABASE_URL, url)
    connections.__dict__.pop("settings", None)
    setattr(connections, "_settings", None)  # noqa: B010


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--postgres",
        action="store_true",
        default=False,
        help="run the tests on a private PostgreSQL server (started before and removed after the run)",
    )


@pytest.hookimpl(tryfirst=True)
def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # A run ended by SIGTERM (timeout(1), a CI job cancelled) ends as Ctrl-C does: pytest's own
    # teardown stops every server the run started, the daemonized PostgreSQL (pg_ctl) included.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    if not config.getoption("postgres") or config.getoption("help") or config.getoption("version"):
        return
    if _is_xdist_worker(config):
        if not is_postgres_url(os.environ.get(TESTS_DATABASE_URL, "")):
            raise pytest.UsageError("--postgres: this xdist worker did not inherit the server's TESTS_DATABASE_URL")
        return
    try:
        server = start_postgres()
        url = server.create_database(name="registry")
    except Exception as exc:  # any failure ends the run, with its reason
        raise pytest.UsageError(f"--postgres: could not start PostgreSQL: {exc}") from exc
    config.stash[_POSTGRES_KEY] = server
    os.environ[TESTS_DATABASE_URL] = url
    os.environ["DATABASE_URL"] = url
    _point_django_at(url)


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_POSTGRES_KEY, None)
    if server is not None:
        server.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    server = config.stash.get(_POSTGRES_KEY, None)
    if server is None:
        return None
    return f"database: private PostgreSQL {server.version()} on {HOST}:{server.port} (--postgres)"


_MARKER_FIXTURES = {"postgres": "postgres_server", "redis": "redis_url", "s3": "moto_server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", None)
        if names is None:
            continue
        for marker, fixture in _MARKER_FIXTURES.items():
            if item.get_closest_marker(marker) is not None and fixture not in names:
                names.append(fixture)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The --postgres run's server, or a private one started for this test process."""
    suite_url = os.environ.get(TESTS_DATABASE_URL, "")
    if is_postgres_url(suite_url):
        yield PostgresServer(suite_url)
        return
    require(find_postgres_bin() is not None, "PostgreSQL (initdb and pg_ctl, `make services`)")
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of a fresh, empty PostgreSQL database for this test process."""
    return postgres_server.create_database("registry_extra")


@pytest.fixture
def live_db_url(transactional_db: None) -> str:
    """URL of the test database in use, for other processes. Implies `transactional_db`: what the
    test writes is committed, so another process sees it (and it is flushed after the test)."""
    from django.db import connection

    db = connection.settings_dict
    name = str(db["NAME"])
    if connection.vendor == "sqlite":
        if name == ":memory:" or "mode=memory" in name:
            pytest.fail("the SQLite test database is in memory: set DATABASES TEST NAME to a file (tests/settings.py)")
        return f"sqlite:///{name}"
    if connection.vendor != "postgresql":
        pytest.fail(f"live_db_url does not know the {connection.vendor} backend")
    auth = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(str(db["PASSWORD"]), safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}@{db.get('HOST') or HOST}{port}/{quote(name)}"


# --- Redis and Celery ------------------------------------------------------------------------------


class ServerProcess:
    """A server the tests start as a private process on 127.0.0.1: on a free port (tried again on
    another when the port was taken meanwhile), or on the same port again after `stop`. A subclass
    says how to run it (`command`) and when it is ready (`answers`)."""

    what = "the server"

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "server.log"

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def answers(self) -> bool:
        raise NotImplementedError

    def _exited(self) -> bool:
        return self.process is None or self.process.poll() is not None

    def start(self, timeout: float = 10) -> None:
        """Start; returns once it answers."""
        fixed = self.port is not None
        for _ in range(1 if fixed else 3):
            port = self.port if fixed else free_port()
            assert port is not None
            with self.log.open("ab") as output:
                process = subprocess.Popen(
                    self.command(port),
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    cwd=self.directory,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            self.port, self.process = port, process
            _wait_until(lambda: self._exited() or self.answers(), timeout)
            if not self._exited() and self.answers():
                atexit.register(self.stop)
                return
            self.stop()
            if "in use" not in _tail(self.log, 5):
                break
        raise RuntimeError(f"{self.what} did not answer on port {self.port}:\n{_tail(self.log)}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            _end_process(process, timeout=5)


class RedisServer(ServerProcess):
    """A private redis-server without persistence; `stop` and `start` keep the port."""

    what = "redis-server"

    @property
    def url(self) -> str:
        assert self.port is not None, "start() the server first"
        return f"redis://{HOST}:{self.port}/0"

    def command(self, port: int) -> list[str]:
        return [self.binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
                "--dir", str(self.directory)]  # fmt: skip

    def answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port or 0), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    require(binary is not None, "Redis (redis-server, `make services`)")
    assert binary is not None
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer) -> str:
    """``redis://127.0.0.1:P/0`` of this test process's private Redis."""
    return redis_server.url


@dataclass
class CeleryWorker:
    """A `celery worker` child process."""

    process: subprocess.Popen[bytes]
    log: Path
    name: str
    app: Any = field(repr=False)
    started_in: float = 0.0
    env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def ping(self, timeout: float = 0.5) -> bool:
        """Whether the worker answers a remote-control ping (it is consuming)."""
        return bool(self.app.control.ping(destination=[self.name], timeout=timeout))

    def _stuck(self, what: str) -> None:
        if self.process.poll() is not None:
            pytest.fail(f"the Celery worker exited ({self.process.returncode}) before {what}:\n{_tail(self.log)}")
        self.process.send_signal(signal.SIGUSR1)  # Celery prints every thread's stack: where it is stuck
        time.sleep(0.5)
        pytest.fail(f"the Celery worker did not {what}:\n{_tail(self.log, 60)}")

    def wait_ready(self, timeout: float = 30) -> None:
        """Wait until the worker answers a ping. (Not its log: the log levels are settings.)"""
        if not _wait_until(lambda: self.process.poll() is not None or self.ping(0.25), timeout, 0):
            self._stuck(f"answer a ping within {timeout}s")
        if self.process.poll() is not None:
            self._stuck("answering a ping")

    def wait_for_log(self, text: str, timeout: float = 15) -> str:
        """Wait until `text` appears in the worker's output; the output."""
        if not _wait_until(lambda: text in self.output() or self.process.poll() is not None, timeout, 0.05):
            self._stuck(f"log {text!r} within {timeout}s")
        if text not in self.output():
            self._stuck(f"logging {text!r}")
        return self.output()

    def stop(self, timeout: float = 15) -> int:
        """Warm shutdown (SIGTERM: the current task finishes); the exit status."""
        return _end_process(self.process, timeout)

    def kill(self) -> int:
        """SIGKILL, as if the machine died mid-task; the exit status (-9)."""
        if self.process.poll() is None:
            self.process.kill()
        return int(self.process.wait())


@shared_task(name="tests.services.probe")
def probe(key: str) -> str:
    """A task for the fixtures' own tests (workers started with ``include=("tests.services",)``):
    it writes a user row and a file, proving the worker shares the test's database and data dir."""
    from django.conf import settings
    from django.contrib.auth import get_user_model

    (Path(settings.REGISTRY_DATA_DIR) / f"probe-{key}").write_text(key, encoding="utf-8")
    get_user_model().objects.create(username=key)  # last: a test that sees the row finds the file
    return key


def _reset_celery_connections(app: Any) -> None:
    # Forget the app's pools so the next send picks up the broker setting. (kombu keeps pools in a
    # registry keyed by broker URL: closing one here would break the next test on the same Redis.)
    app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None


@pytest.fixture
def celery_worker_factory(
    request: pytest.FixtureRequest,
    live_db_url: str,
    redis_url: str,
    settings: Any,
    tmp_path: Path,
) -> Iterator[Callable[..., CeleryWorker]]:
    """Start real Celery workers for this test (see the module docstring); all are stopped after it."""
    from registry.celery import app

    # Saved before the settings change: app.conf reads Django's settings live, so saving after
    # would "restore" the worker's values and leave later tests of this process non-eager.
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    settings.CELERY_BROKER_URL = redis_url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=redis_url, task_always_eager=False)
    _reset_celery_connections(app)
    workers: list[CeleryWorker] = []

    def start(env: dict[str, str] | None = None, include: Sequence[str] = (), timeout: float = 30) -> CeleryWorker:
        number = len(workers) + 1
        name = f"test{number}-{uuid.uuid4().hex[:8]}@{HOST}"
        child_env = {key: value for key, value in os.environ.items() if key not in {"DJANGO_SETTINGS_MODULE"}}
        child_env.update(
            DJANGO_SETTINGS_MODULE="registry.settings",
            DATABASE_URL=live_db_url,
            CELERY_BROKER_URL=redis_url,
            REGISTRY_DATA_DIR=str(settings.REGISTRY_DATA_DIR),
            DJANGO_SECRET_KEY=settings.SECRET_KEY,
            PYTHONUNBUFFERED="1",
        )
        child_env.update(request.node.stash.get(_S3_ENV_KEY, {}))
        child_env.update(env or {})
        command = [
            sys.executable, "-m", "celery", "-A", "registry", "worker", "--pool=solo", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "-Q", "celery", "-l", "info",
            "-n", name,
        ]  # fmt: skip
        if include:
            command += ["--include", ",".join(include)]
        logfile = tmp_path / f"celery-worker-{number}.log"
        began = time.monotonic()
        with logfile.open("wb") as output:
            process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=BASE_DIR,
                env=child_env,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        atexit.register(_end_process, process, 5)
        worker = CeleryWorker(process=process, log=logfile, name=name, app=app, env=child_env)
        workers.append(worker)
        worker.wait_ready(timeout)
        worker.started_in = time.monotonic() - began
        return worker

    yield start
    for worker in workers:
        worker.stop()
    app.conf.update(saved)
    _reset_celery_connections(app)


# --- S3 (moto's server) ----------------------------------------------------------------------------


class MotoServer:
    """moto's standalone S3 (and more) server in a thread of this process.

    `stop` closes the listening socket and every open connection, so clients see the storage go
    down at once; `start` brings it back on the same port with the same buckets and objects."""

    def __init__(self) -> None:
        self.port = 0
        self._server: Any = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self.port, "start() the server first"
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        if self._server is not None:
            return
        connections, lock = self._connections, self._lock

        class TrackingHandler(MotoRequestHandler):
            def setup(self) -> None:
                super().setup()
                with lock:
                    connections.add(self.connection)

            def finish(self) -> None:
                with lock:
                    connections.discard(self.connection)
                super().finish()

        class Server(ThreadedMotoServer):
            # ThreadedMotoServer with a handler that tracks connections, so stop() can drop them.
            def _server_entry(self) -> None:
                app = DomainDispatcherApplication(create_backend_app)
                self._server = make_server(self._ip_address, self._port, app, True, request_handler=TrackingHandler)
                self._server_ready_event.set()
                self._server.serve_forever(poll_interval=0.05)

        server = Server(ip_address=HOST, port=self.port, verbose=False)
        server.start()
        self.port = int(server.get_host_and_port()[1])
        self._server = server
        atexit.register(self.stop)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.stop()
        server._server.server_close()
        with self._lock:
            open_connections = list(self._connections)
            self._connections.clear()
        for conn in open_connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    try:
        import boto3  # noqa: F401
        import moto.moto_server.threaded_moto_server  # noqa: F401
        import storages.backends.s3  # noqa: F401
    except ImportError:
        require(False, "moto[server], boto3 and django-storages")
    server = MotoServer()
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    try:
        yield server
    finally:
        server.stop()


@dataclass
class S3Bucket:
    name: str
    endpoint_url: str
    location: str
    client: Any = field(repr=False)
    env: dict[str, str] = field(default_factory=dict)


S3_REGION = "us-east-1"
S3_ACCESS_KEY = "testing"
S3_SECRET_KEY = "testing"  # moto accepts any credentials


@pytest.fixture
def s3_storage(
    request: pytest.FixtureRequest, settings: Any, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> S3Bucket:
    """A fresh bucket on moto's server, and STORAGES["packages"] switched to it for this test."""
    import boto3
    from botocore.config import Config

    # Fail fast when a test stops the server: one retry, not botocore's default four with backoff.
    monkeypatch.setenv("AWS_RETRY_MODE", "standard")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    name = f"registry-test-{uuid.uuid4().hex[:16]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto_server.url,
        region_name=S3_REGION,
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        config=Config(retries={"mode": "standard", "max_attempts": 2}),
    )
    client.create_bucket(Bucket=name)
    location = "packages"
    # The same OPTIONS as registry/settings.py builds for REGISTRY_STORAGE=s3.
    options = {
        "bucket_name": name,
        "endpoint_url": moto_server.url,
        "region_name": S3_REGION,
        "access_key": S3_ACCESS_KEY,
        "secret_key": S3_SECRET_KEY,
        "location": location,
        "file_overwrite": False,
        "querystring_auth": True,
        "querystring_expire": settings.REGISTRY_PRESIGN_SECONDS,
        "default_acl": None,
        "signature_version": "s3v4",
        "object_parameters": {"ContentType": "application/gzip"},
    }
    settings.REGISTRY_STORAGE = "s3"
    settings.STORAGES = {
        **settings.STORAGES,
        "packages": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
    }
    env = {
        "REGISTRY_STORAGE": "s3",
        "REGISTRY_S3_BUCKET": name,
        "REGISTRY_S3_ENDPOINT_URL": moto_server.url,
        "REGISTRY_S3_REGION": S3_REGION,
        "REGISTRY_S3_ACCESS_KEY_ID": S3_ACCESS_KEY,
        "REGISTRY_S3_SECRET_ACCESS_KEY": S3_SECRET_KEY,
        "REGISTRY_S3_PREFIX": location,
        "AWS_RETRY_MODE": "standard",
        "AWS_MAX_ATTEMPTS": "2",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    request.node.stash[_S3_ENV_KEY] = env
    return S3Bucket(name=name, endpoint_url=moto_server.url, location=location, client=client, env=env)


# --- An OCI registry (the CNCF distribution registry) ------------------------------------------------


class DistributionRegistry(ServerProcess):
    """Debian's ``docker-registry`` (the CNCF distribution registry, what Harbor and most mirrors
    run) on 127.0.0.1 with a filesystem store in ``directory``: an OCI registry to mirror into."""

    what = "docker-registry"

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as image references name it."""
        assert self.port is not None, "start() the registry first"
        return f"{HOST}:{self.port}"

    def command(self, port: int) -> list[str]:
        config = self.directory / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self.directory / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {HOST}:{port}\n",
            encoding="utf-8",
        )
        return [self.binary, "serve", str(config)]

    def answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port or 0), timeout=0.5) as sock:
                sock.sendall(b"GET /v2/ HTTP/1.0\r\n\r\n")
                status = sock.recv(64)
                return status.startswith(b"HTTP/1.") and b" 200 " in status
        except OSError:
            return False


@pytest.fixture(scope="session")
def distribution_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DistributionRegistry]:
    """A private CNCF distribution registry (Debian's docker-registry, `make services`)."""
    binary = shutil.which("docker-registry")
    require(binary is not None, "the distribution registry (docker-registry, `make services`)")
    assert binary is not None
    server = DistributionRegistry(binary, tmp_path_factory.mktemp("distribution"))
    server.start(timeout=15)
    try:
        yield server
    finally:
        server.stop()


# --- Every test ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Throttle counters, cached pages and buffered download counts never leak from one test into
    the next."""
    from django.core.cache import caches

    from registry import downloadcounts, selectors, thisrequest, views

    for cache in caches.all(initialized_only=True):
        cache.clear()
    downloadcounts.discard_local()
    selectors.forget_facets()
    thisrequest.end()
    views.forget_pages()
