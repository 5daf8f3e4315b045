"""The registry distributed on one machine, as docs/deploy.md lays it out, on 127.0.0.1:

    PostgreSQL · Redis (broker db 0, cache db 1) · S3 (moto, `cluster.s3`)
    web1, web2: gunicorn, each with a REGISTRY_DATA_DIR of its own (nothing shared but the three
                services above, the secret key and a copy of the signed index's online keys)
    worker1, worker2: `celery worker` (prefork), each with its own data directory and key copy
    beat: `celery beat`
    nginx: docs/deploy.md's configuration for S3 in front of both web nodes

Every process leads a session of its own and is recorded (pid and start time) in
``DIR/state.json``, so `stop` ends exactly what `start` started, even from another process
(`python -m cluster stop`). In-process users (the tests, the benchmark) start it *attached*: every
process also gets SIGTERM when the starting process dies, so nothing outlives a killed test run.

Faults are methods: `postgres_stop`/`postgres_start`, `redis_stop`/`redis_start`,
`s3_down`/`s3_up`, `web_kill` (SIGKILL of a node's gunicorn workers: the master starts new
ones), `worker_kill`/`worker_start`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from cluster.processes import Proc, descendants

log = logging.getLogger(__name__)

BASE_DIR = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
STATE_FILE = "state.json"
BUCKET = "registry-cluster"
S3_PREFIX = "packages"
S3_REGION = "us-east-1"
S3_KEY = "cluster"
S3_SECRET = "cluster-secret"  # noqa: S105 - moto accepts any credentials
DATABASE = "registry"

#: What the cluster changes from the defaults, and why (docs/deploy.md, "make cluster"):
#: heartbeats and the stale age are short so that a killed worker's builds are taken over within
#: seconds; all load comes from one address, so the per-address rates are raised; download counts
#: are written every second.
CLUSTER_SETTINGS: dict[str, str] = {
    "REGISTRY_BUILD_HEARTBEAT_SECONDS": "2",
    "REGISTRY_BUILD_STALE_SECONDS": "8",
    "REGISTRY_SWEEP_GRACE_SECONDS": "120",
    "REGISTRY_DOWNLOADS_FLUSH_SECONDS": "1",
    "REGISTRY_RATE_PUBLISH": "100000/minute",
    "REGISTRY_RATE_WRITE": "1000000/minute",
    "REGISTRY_RATE_RESOLVE": "1000000/minute",
    "REGISTRY_RATE_AUTH_FAILURE": "100000/minute",
    "REGISTRY_BUILD_TIME_LIMIT": "120",
    "LOG_LEVEL": "warning",
}


class ClusterError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.3):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception as exc:  # noqa: BLE001 - "not yet" in any form
            log.debug("%s: not yet (%s)", what, exc)
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} within {timeout:.0f} s")
        time.sleep(interval)


def _postgres_user() -> tuple[int, int] | None:
    """PostgreSQL refuses to run as root: as root, its processes run as the `postgres` user."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError("running as root, but there is no `postgres` user to run PostgreSQL as") from None
    return user.pw_uid, user.pw_gid


def _postgres_bin() -> Path:
    from tests.services import find_postgres_bin

    found = find_postgres_bin()
    if found is None:
        raise ClusterError("PostgreSQL is not installed (make services)")
    return found


class Cluster:
    """The processes of a distributed registry on this machine (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        *,
        web_nodes: int = 2,
        workers: int = 2,
        attached: bool = True,
        settings: Mapping[str, str] | None = None,
        web_processes: int = 2,
        web_threads: int = 4,
        worker_concurrency: int = 2,
    ) -> None:
        self.directory = directory.resolve()
        self.web_nodes = web_nodes
        self.workers = workers
        self.attached = attached
        self.settings = {**CLUSTER_SETTINGS, **(settings or {})}
        self.web_processes = web_processes
        self.web_threads = web_threads
        self.worker_concurrency = worker_concurrency
        self.ports: dict[str, int] = {}
        self.secret_key = ""
        self.procs: dict[str, Proc] = {}
        self.nginx_upstreams: list[str] = []

    # --- addresses --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The public entry point: nginx in front of every web node."""
        return f"http://{HOST}:{self.ports['nginx']}"

    def web_url(self, node: int) -> str:
        return f"http://{HOST}:{self.ports[f'web{node}']}"

    @property
    def s3_url(self) -> str:
        return f"http://{HOST}:{self.ports['s3']}"

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@{HOST}:{self.ports['postgres']}/{DATABASE}"

    @property
    def redis_url(self) -> str:
        return f"redis://{HOST}:{self.ports['redis']}"

    @property
    def root_file(self) -> Path:
        """The signed index's first root (1.root.json): what clients pin."""
        return self.directory / "1.root.json"

    def web_roles(self) -> list[str]:
        return [f"web{i}" for i in range(1, self.web_nodes + 1)]

    def worker_roles(self) -> list[str]:
        return [f"worker{i}" for i in range(1, self.workers + 1)]

    def worker_name(self, role: str) -> str:
        return f"{role}@{HOST}"

    # --- environment ------------------------------------------------------------------------------

    def common_env(self) -> dict[str, str]:
        """What every registry process (web, worker, beat, manage.py) shares."""
        return {
            "DJANGO_SETTINGS_MODULE": "registry.settings",
            "DJANGO_SECRET_KEY": self.secret_key,
            "DATABASE_URL": self.database_url,
            "CELERY_BROKER_URL": f"{self.redis_url}/0",
            "CACHE_URL": f"{self.redis_url}/1",
            "REGISTRY_STORAGE": "s3",
            "REGISTRY_S3_BUCKET": BUCKET,
            "REGISTRY_S3_ENDPOINT_URL": self.s3_url,
            "REGISTRY_S3_REGION": S3_REGION,
            "REGISTRY_S3_ACCESS_KEY_ID": S3_KEY,
            "REGISTRY_S3_SECRET_ACCESS_KEY": S3_SECRET,
            "REGISTRY_S3_PREFIX": S3_PREFIX,
            "AWS_RETRY_MODE": "standard",
            "AWS_MAX_ATTEMPTS": "2",
            "AWS_EC2_METADATA_DISABLED": "true",
            "REGISTRY_BEHIND_PROXY": "1",
            "REGISTRY_NUM_PROXIES": "1",
            "PYTHONUNBUFFERED": "1",
            **self.settings,
        }

    def env(self, role: str) -> dict[str, str]:
        """The environment of one process: the shared one, and a data directory (and key copy) of its own."""
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("REGISTRY_", "DJANGO_", "CELERY_", "AWS_", "PROVISIONING_"))
            and key not in {"DATABASE_URL", "CACHE_URL", "TESTS_DATABASE_URL"}
        }
        tools = BASE_DIR / ".tools" / "bin"
        base["PATH"] = f"{tools}:{Path(sys.executable).parent}:{base.get('PATH', '/usr/bin:/bin')}"
        base["PYTHONPATH"] = os.pathsep.join(p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH", "")) if p)
        data = self.directory / role
        # Workers log each build they run (the pipeline's INFO lines): which worker built what.
        level = {"LOG_LEVEL": "info"} if role.startswith("worker") else {}
        return {
            **base,
            **self.common_env(),
            **level,
            "REGISTRY_DATA_DIR": str(data),
            "REGISTRY_TUF_KEYS_DIR": str(data / "tuf-keys"),
            "HOME": str(data / "home"),
        }

    def manage(
        self, *args: str, role: str = "web1", check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """``python manage.py ARGS`` as an operator on the machine of ``role`` runs it."""
        (self.directory / role / "home").mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=self.env(role),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise ClusterError(f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def createtoken(self, username: str, *scopes: str) -> str:
        args = ["createtoken", username, "--create-user"]
        for scope in scopes:
            args += ["--scope", scope]
        return self.manage(*args).stdout.strip().splitlines()[-1]

    # --- starting and stopping --------------------------------------------------------------------

    def _preexec(self) -> Callable[[], None] | None:
        if not self.attached:
            return None
        # Imported here, not in the child: PostgreSQL's child has already become the `postgres`
        # user when the hook runs, and may not be able to read this Python's library to import it.
        import ctypes  # noqa: F401

        from tests.services import die_with_parent

        return die_with_parent

    def _spawn(self, role: str, command: Sequence[str], *, env: Mapping[str, str] | None = None, **kwargs: Any) -> Proc:
        directory = self.directory / role
        directory.mkdir(parents=True, exist_ok=True)
        proc = Proc.spawn(
            role,
            command,
            env=env if env is not None else self.env(role),
            cwd=kwargs.pop("cwd", BASE_DIR),
            log=directory / f"{role}.log",
            preexec_fn=self._preexec(),
            **kwargs,
        )
        self.procs[role] = proc
        self.save()
        return proc

    def _check_alive(self, role: str) -> bool:
        proc = self.procs[role]
        if not proc.alive():
            raise ClusterError(f"{role} exited ({proc.exit_code()}):\n{proc.tail()}")
        return True

    def start(self) -> None:
        """Start everything (a fresh cluster in the directory); returns once every part answers."""
        existing = self.load_state(self.directory)
        if existing is not None and any(p.alive() for p in existing.procs.values()):
            raise ClusterError(f"a cluster is already running from {self.directory}: stop it first (make cluster-stop)")
        if self.directory.exists():
            shutil.rmtree(self.directory)
        self.directory.mkdir(parents=True)
        self.directory.chmod(0o755)  # PostgreSQL (another user) must reach its directory
        self.secret_key = secrets.token_urlsafe(48)
        for name in ("postgres", "redis", "s3", "nginx", *self.web_roles()):
            self.ports[name] = free_port()
        try:
            self._initdb()
            self.postgres_start(wait=False)
            self.redis_start(wait=False)
            self.s3_start(wait=False)
            self._wait_postgres()
            self._wait_redis()
            wait_until(lambda: self._check_alive("s3") and _listening(self.ports["s3"]), 30, "S3 did not answer")
            self._create_database()
            self._create_bucket()
            self.manage("migrate", "--noinput", "-v", "0")
            self._trust_init()
            for role in self.web_roles():
                self.web_start(role, wait=False)
            for role in self.worker_roles():
                self.worker_start(role, wait=False)
            self.beat_start()
            self.nginx_start(self.web_roles(), wait=False)
            for role in self.web_roles():
                self._wait_web(role)
            for role in self.worker_roles():
                self._wait_worker(role)
            wait_until(
                lambda: self._check_alive("nginx") and _listening(self.ports["nginx"]), 20, "nginx did not listen"
            )
            self._check_alive("beat")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process this cluster started (nginx and the web first, PostgreSQL last)."""
        order = ["nginx", *self.web_roles(), "beat", *self.worker_roles(), "s3", "redis", "postgres"]
        for role in [*order, *(r for r in self.procs if r not in order)]:
            proc = self.procs.get(role)
            if proc is None:
                continue
            # PostgreSQL: SIGINT is its fast shutdown (SIGTERM would wait for every client).
            proc.stop(signum=signal.SIGINT if role == "postgres" else signal.SIGTERM, timeout=15)
        self.save()

    def log(self, role: str) -> str:
        """What a process wrote (its output and errors) so far."""
        return Path(self.procs[role].log).read_text(encoding="utf-8", errors="replace")

    def alive(self) -> dict[str, bool]:
        return {role: proc.alive() for role, proc in self.procs.items()}

    # --- the state file ---------------------------------------------------------------------------

    def save(self) -> None:
        if not self.directory.exists():
            return
        state = {
            "web_nodes": self.web_nodes,
            "workers": self.workers,
            "ports": self.ports,
            "secret_key": self.secret_key,
            "settings": self.settings,
            "nginx_upstreams": self.nginx_upstreams,
            "procs": {role: proc.record() for role, proc in self.procs.items()},
        }
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.chmod(0o600)  # it holds the secret key
        tmp.replace(path)

    @classmethod
    def load_state(cls, directory: Path) -> Cluster | None:
        """The cluster recorded in directory (detached: its processes are not this process's children)."""
        path = directory / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        cluster = cls(directory, web_nodes=state["web_nodes"], workers=state["workers"], attached=False)
        cluster.ports = {k: int(v) for k, v in state["ports"].items()}
        cluster.secret_key = state["secret_key"]
        cluster.settings = dict(state["settings"])
        cluster.nginx_upstreams = list(state.get("nginx_upstreams", []))
        cluster.procs = {role: Proc.from_record(rec) for role, rec in state["procs"].items()}
        return cluster

    # --- PostgreSQL ---------------------------------------------------------------------------------

    def _initdb(self) -> None:
        bin_dir = _postgres_bin()
        base = self.directory / "postgres"
        (base / "sock").mkdir(parents=True)
        owner = _postgres_user()
        if owner:
            for path in (base, base / "sock"):
                os.chown(path, *owner)
        from tests.services import run_initdb

        result = run_initdb(bin_dir, base / "data", cwd=base)
        if result.returncode != 0:
            raise ClusterError(f"initdb failed:\n{result.stdout}{result.stderr}")

    def _postgres_env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "LANG": "C",
            "HOME": str(self.directory / "postgres"),
        }

    def postgres_start(self, *, wait: bool = True) -> None:
        base = self.directory / "postgres"
        owner = _postgres_user()
        command = [
            str(_postgres_bin() / "postgres"),
            "-D",
            str(base / "data"),
            "-p",
            str(self.ports["postgres"]),
            "-k",
            str(base / "sock"),
            "-c",
            f"listen_addresses={HOST}",
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=300",
        ]
        self._spawn(
            "postgres",
            command,
            env=self._postgres_env(),
            cwd=base,
            user=owner[0] if owner else None,
            group=owner[1] if owner else None,
        )
        if wait:
            self._wait_postgres()

    def postgres_stop(self) -> None:
        """PostgreSQL's fast shutdown (open sessions are ended, their transactions rolled back)."""
        self.procs["postgres"].stop(signum=signal.SIGINT, timeout=30)
        wait_until(lambda: not _listening(self.ports["postgres"]), 10, "PostgreSQL kept listening")

    def _wait_postgres(self) -> None:
        import psycopg

        def ready() -> bool:
            self._check_alive("postgres")
            with psycopg.connect(self.admin_url("postgres"), connect_timeout=2):
                return True

        wait_until(ready, 60, "PostgreSQL did not accept connections")

    def admin_url(self, dbname: str = DATABASE) -> str:
        return f"postgres://postgres@{HOST}:{self.ports['postgres']}/{dbname}"

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query on the cluster's database (for checks; a fresh connection each time)."""
        import psycopg

        with psycopg.connect(self.admin_url(), connect_timeout=5, autocommit=True) as conn:
            cursor = conn.execute(query, params)
            return list(cursor.fetchall()) if cursor.description else []

    # --- Redis ------------------------------------------------------------------------------------

    def redis_start(self, *, wait: bool = True) -> None:
        directory = self.directory / "redis"
        directory.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server")
        if binary is None:
            raise ClusterError("redis-server is not installed (make services)")
        # No persistence: a restart loses what the broker held, which the reaper must make good.
        command = [
            binary,
            "--port",
            str(self.ports["redis"]),
            "--bind",
            HOST,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ]
        self._spawn("redis", command, cwd=directory, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        if wait:
            self._wait_redis()

    def _wait_redis(self) -> None:
        def ready() -> bool:
            self._check_alive("redis")
            with socket.create_connection((HOST, self.ports["redis"]), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")

        wait_until(ready, 20, "Redis did not answer")

    def redis_stop(self) -> None:
        self.procs["redis"].stop(timeout=10)

    # --- S3 ---------------------------------------------------------------------------------------

    def s3_start(self, *, wait: bool = True) -> None:
        command = [sys.executable, "-m", "cluster.s3", "--port", str(self.ports["s3"])]
        self._spawn("s3", command, env=self.env("s3"))
        if wait:
            wait_until(lambda: self._check_alive("s3") and _listening(self.ports["s3"]), 30, "S3 did not answer")

    def s3_client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            region_name=S3_REGION,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            config=Config(retries={"mode": "standard", "max_attempts": 2}),
        )

    def _create_bucket(self) -> None:
        from tests.nginx import deploy_bucket_policy

        client = self.s3_client()
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_policy(Bucket=BUCKET, Policy=deploy_bucket_policy(bucket=BUCKET, prefix=S3_PREFIX))

    def s3_down(self) -> None:
        """The object store stops answering (connections refused); its objects are kept."""
        self.procs["s3"].send(signal.SIGUSR1)
        wait_until(lambda: not _listening(self.ports["s3"]), 10, "S3 kept listening")

    def s3_up(self) -> None:
        self.procs["s3"].send(signal.SIGUSR2)
        wait_until(lambda: _listening(self.ports["s3"]), 10, "S3 did not listen again")

    # --- the signed index ---------------------------------------------------------------------------

    def _trust_init(self) -> None:
        """`trust init` once, with the root key kept apart (offline), then the online keys copied
        to every machine that signs (web nodes and workers), as docs/trust.md says."""
        keys = self.directory / "tuf-keys"
        root_dir = self.directory / "tuf-root-offline"
        env_keys = {"REGISTRY_TUF_KEYS_DIR": str(keys)}
        proc = subprocess.run(
            [sys.executable, "manage.py", "trust", "init", "--root-key-dir", str(root_dir)],
            cwd=BASE_DIR,
            env={**self.env("web1"), **env_keys},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise ClusterError(f"trust init failed:\n{proc.stdout}\n{proc.stderr}")
        for role in [*self.web_roles(), *self.worker_roles()]:
            target = self.directory / role / "tuf-keys"
            shutil.copytree(keys, target)
            for path in [target, *target.rglob("*")]:
                path.chmod(0o700 if path.is_dir() else 0o600)
        body = self.s3_client().get_object(Bucket=BUCKET, Key=f"{S3_PREFIX}/tuf/metadata/1.root.json")["Body"].read()
        self.root_file.write_bytes(body)

    # --- web nodes ---------------------------------------------------------------------------------

    def web_start(self, role: str, *, wait: bool = True) -> None:
        from tests.nginx import GUNICORN_KEEP_ALIVE

        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "registry.wsgi",
            "--bind",
            f"{HOST}:{self.ports[role]}",
            "--workers",
            str(self.web_processes),
            "--threads",
            str(self.web_threads),
            "--worker-class",
            "gthread",
            "--timeout",
            "120",
            "--graceful-timeout",
            "10",
            "--keep-alive",
            str(GUNICORN_KEEP_ALIVE),
            "--name",
            f"registry-{role}",
            "--no-control-socket",  # its default path is one per machine (docs/deploy.md)
        ]
        self._spawn(role, command)
        if wait:
            self._wait_web(role)

    def _wait_web(self, role: str) -> None:
        url = f"http://{HOST}:{self.ports[role]}/healthz"
        wait_until(
            lambda: self._check_alive(role) and httpx.get(url, timeout=2).status_code == 200,
            90,
            f"{role} did not answer /healthz",
        )

    def web_workers(self, role: str) -> list[int]:
        """The pids of a web node's gunicorn worker processes."""
        master = self.procs[role].pid
        return [pid for pid in descendants(master) if _ppid(pid) == master]

    def web_kill(self, role: str) -> list[int]:
        """SIGKILL every gunicorn worker of a web node at once (whatever they were doing); the
        master starts new ones. Returns the pids killed."""
        killed = self.web_workers(role)
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return killed

    def web_stop(self, role: str) -> None:
        self.procs[role].stop(timeout=20)

    # --- Celery -----------------------------------------------------------------------------------

    def worker_start(self, role: str, *, wait: bool = True) -> None:
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "registry",
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            str(self.worker_concurrency),
            "-n",
            self.worker_name(role),
            "-l",
            "info",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        self._spawn(role, command)
        if wait:
            self._wait_worker(role)

    def celery(self) -> Any:
        """A plain Celery app on the cluster's broker, for remote control (ping, inspect)."""
        from celery import Celery

        return Celery("cluster-control", broker=f"{self.redis_url}/0")

    def _wait_worker(self, role: str) -> None:
        app = self.celery()
        name = self.worker_name(role)
        try:
            wait_until(
                lambda: self._check_alive(role) and bool(app.control.ping(destination=[name], timeout=0.5)),
                90,
                f"{role} did not answer a ping",
                interval=0,
            )
        finally:
            app.close()

    def worker_active(self) -> dict[str, list[str]]:
        """The build ids each worker is running right now (Celery's inspect)."""
        app = self.celery()
        try:
            answer = app.control.inspect(timeout=1.0, limit=self.workers).active() or {}
        finally:
            app.close()
        return {
            name.split("@")[0]: [
                str(task.get("args", [""])[0]) for task in tasks if task.get("name") == "builds.run_build"
            ]
            for name, tasks in answer.items()
        }

    def worker_kill(self, role: str) -> None:
        """SIGKILL the worker and its pool and sandbox processes at once, as if its machine died."""
        self.procs[role].kill_tree()

    def beat_start(self) -> None:
        directory = self.directory / "beat"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "registry",
            "beat",
            "-l",
            "info",
            "-s",
            str(directory / "celerybeat-schedule"),
            "--pidfile",
            str(directory / "beat.pid"),
        ]
        self._spawn("beat", command)

    # --- nginx ------------------------------------------------------------------------------------

    def _nginx_config(self, upstreams: Sequence[str]) -> Path:
        from tests.nginx import deploy_s3_server_block, nginx_conf

        directory = self.directory / "nginx"
        directory.mkdir(parents=True, exist_ok=True)
        block = deploy_s3_server_block(
            port=self.ports["nginx"],
            upstreams=[f"{HOST}:{self.ports[role]}" for role in upstreams],
            s3_url=self.s3_url,
            bucket=BUCKET,
            prefix=S3_PREFIX,
            cache_dir=directory / "cache",
        )
        config = directory / "nginx.conf"
        config.write_text(
            nginx_conf(directory, servers=[block], workers=1, access_log=f"{directory / 'access.log'} upstream"),
            encoding="utf-8",
        )
        self.nginx_upstreams = list(upstreams)
        return config

    def nginx_start(self, upstreams: Sequence[str], *, wait: bool = True) -> None:
        from tests.nginx import nginx_binary

        binary = nginx_binary()
        if binary is None:
            raise ClusterError("nginx is not installed (make services)")
        config = self._nginx_config(upstreams)
        directory = config.parent
        check = subprocess.run([binary, "-t", "-p", str(directory), "-c", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise ClusterError(f"nginx refused its configuration:\n{check.stderr}")
        self._spawn(
            "nginx",
            [binary, "-p", str(directory), "-c", str(config)],
            cwd=directory,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        if wait:
            wait_until(
                lambda: self._check_alive("nginx") and _listening(self.ports["nginx"]), 20, "nginx did not listen"
            )

    def nginx_route(self, upstreams: Sequence[str]) -> None:
        """Balance over these web nodes only (a reload: nginx re-reads its configuration)."""
        self._nginx_config(upstreams)
        self.procs["nginx"].send(signal.SIGHUP)
        time.sleep(1.0)  # the old workers finish their requests; new ones take new connections
        self.save()

    def nginx_access_log(self) -> Path:
        return self.directory / "nginx" / "access.log"

    def nginx_errors(self, limit: int = 20) -> str:
        """The last ``limit`` errors and warnings nginx logged (not its notes that a large answer
        was buffered to a file): why it answered 502 or 504, when it did."""
        path = self.directory / "nginx" / "error.log"
        if not path.exists():
            return ""
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join([line for line in lines if "buffered to a temporary file" not in line][-limit:])

    # --- waiting for the builds -------------------------------------------------------------------

    def unfinished_builds(self) -> list[tuple[str, str]]:
        return [
            (str(pk), status)
            for pk, status in self.sql("SELECT id, status FROM builds_build WHERE status IN ('queued', 'running')")
        ]

    def wait_builds_final(self, timeout: float) -> None:
        wait_until(lambda: not self.unfinished_builds(), timeout, "builds were still unfinished", interval=0.5)

    @contextlib.contextmanager
    def running(self) -> Iterator[Cluster]:
        self.start()
        try:
            yield self
        finally:
            self.stop()


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
