"""A real registry for end-to-end tests: `manage.py migrate` (and `trust init`) then gunicorn (or, with
``server="granian"``, docs/deploy.md's granian command for read nodes), as separate processes
with their own data directory and database (a SQLite file, or a PostgreSQL database), on a free
port. It can be stopped and started again on the same port (for "registry unreachable" tests).

    registry = LiveRegistry(tmp_path / "registry", database_url=None)   # SQLite in its data dir
    registry.start()
    token = registry.createtoken("alice")
    registry.manage("publish", "extensions/taskservs")
    httpx.get(f"{registry.url}/api/v1/extensions/")
    registry.stop()

Fixtures: ``live_registry`` (a fresh one per test) and ``examples_registry`` (one per test
process, with every bundled example published; do not change what it holds).
"""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.nginx import GUNICORN_KEEP_ALIVE
from tests.services import BASE_DIR, HOST, die_with_parent, free_port

EXAMPLES = [str(BASE_DIR / "extensions" / kind) for kind in ("providers", "taskservs", "clusters")]


#: the read nodes' command in docs/deploy.md, run as written but for these (its placeholders)
DOC_GRANIAN_PLACEHOLDERS = ("--host 0.0.0.0", "--port 8000", "--workers 4", "--blocking-threads 4")


def doc_granian_line() -> str:
    """The granian command line of docs/deploy.md, as written."""
    text = (BASE_DIR / "docs" / "deploy.md").read_text(encoding="utf-8")
    [line] = [line for line in text.splitlines() if line.startswith("granian --interface wsgi ")]
    return line


def granian_command(*, port: int, workers: int, threads: int) -> list[str]:
    """docs/deploy.md's granian command, on HOST:port with that many workers and threads."""
    line = doc_granian_line()
    for placeholder in DOC_GRANIAN_PLACEHOLDERS:
        assert placeholder in line, f"docs/deploy.md's granian command lost its {placeholder!r}"
    line = (
        line.replace("--host 0.0.0.0", f"--host {HOST}")
        .replace("--port 8000", f"--port {port}")
        .replace("--workers 4", f"--workers {workers}")
        .replace("--blocking-threads 4", f"--blocking-threads {threads}")
    )
    return [sys.executable, "-m", *line.split()]


class LiveRegistry:
    def __init__(
        self,
        data_dir: Path,
        *,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
        signed: bool = True,
        trust_args: tuple[str, ...] = (),
        server: str = "gunicorn",
    ) -> None:
        self.data_dir = data_dir
        self.server = server
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "server.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "DJANGO_", "CELERY_"))}
        base.pop("DATABASE_URL", None)
        base.pop("CACHE_URL", None)
        base.update(
            DJANGO_SETTINGS_MODULE="registry.settings",
            REGISTRY_DATA_DIR=str(data_dir),
            DJANGO_SECRET_KEY=secrets.token_urlsafe(40),
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="WARNING",
        )
        if database_url:
            base["DATABASE_URL"] = database_url
        base.update(env or {})
        self.env = base
        data_dir.mkdir(parents=True, exist_ok=True)
        self._migrated = False
        # signed: `manage.py trust init` after the migrations, so it serves the signed index
        # (SPEC 6.1) as `make run` does; trust_args are given to it (--threshold targets=2 ...).
        self.signed = signed
        self.trust_args = trust_args

    @property
    def url(self) -> str:
        assert self.port, "start() the registry first"
        return f"http://{HOST}:{self.port}"

    def manage(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def createtoken(self, username: str = "alice", *scopes: str) -> str:
        """A new token of USERNAME (created if missing): with the scopes given, else createtoken's
        default (every scope, tokens included)."""
        args = ["createtoken", username, "--create-user"]
        for scope in scopes:
            args += ["--scope", scope]
        return self.manage(*args).stdout.strip().splitlines()[-1]

    def start(self, *, workers: int = 2, threads: int = 4, timeout: float = 60) -> None:
        if not self._migrated:
            self.manage("migrate", "--noinput", "-v", "0")
            if self.signed:
                self.manage("trust", "init", "--if-missing", "--bins", "16", *self.trust_args)
            self._migrated = True
        if not self.port:
            self.port = free_port()
        if self.server == "granian":
            command = granian_command(port=self.port, workers=workers, threads=threads)
        else:
            command = [
                sys.executable, "-m", "gunicorn", "registry.wsgi", "--bind", f"{HOST}:{self.port}",
                "--workers", str(workers), "--threads", str(threads), "--worker-class", "gthread",
                "--timeout", "120", "--graceful-timeout", "5", "--keep-alive", str(GUNICORN_KEEP_ALIVE),
                "--no-control-socket",
            ]  # fmt: skip
        with self.log.open("ab") as output:
            # Its own process group (stop() signals master and workers at once), and SIGTERM when
            # the test process ends however it ends (tests.services.die_with_parent).
            self.process = subprocess.Popen(
                command,
                cwd=BASE_DIR,
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        atexit.register(self._kill)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.server} exited with {self.process.returncode}:\n{self.log.read_text()[-4000:]}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self._kill()
        raise AssertionError(f"the registry did not answer within {timeout} s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        """Stop serving (the port then refuses connections); `start` serves again on the same port."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self._kill()
        self.process = None

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(10)


@pytest.fixture
def live_registry(tmp_path: Path, request: pytest.FixtureRequest) -> LiveRegistry:
    """A fresh registry process (SQLite) for this test, started; stopped by a finalizer."""
    registry = LiveRegistry(tmp_path / "registry")
    request.addfinalizer(registry.stop)
    registry.start()
    return registry


@pytest.fixture(scope="session")
def examples_registry(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> LiveRegistry:
    """One registry per test process with every bundled example published. Read-only for tests."""
    registry = LiveRegistry(tmp_path_factory.mktemp("examples-registry"))
    request.addfinalizer(registry.stop)
    registry.start()
    registry.manage("publish", "--skip-existing", *EXAMPLES)
    return registry
