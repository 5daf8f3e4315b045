"""One distributed registry (`cluster.Cluster`: PostgreSQL, Redis, moto's S3, two gunicorn web
nodes, two Celery workers, beat, nginx) for the whole package, with the bundled examples
published. Every module marks its tests ``cluster`` and ``slow`` (``-m cluster`` runs them alone)
and puts them in one xdist group, so one test process holds the cluster; the fault tests
(test_faults.py, collected last) leave it recovered."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.cluster import Cluster
from cluster.seed import seed_examples
from tests.conftest import require
from tests.nginx import nginx_binary
from tests.services import find_postgres_bin


@pytest.fixture(scope="package")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if request.config.getoption("postgres"):
        # The cluster runs on a PostgreSQL server of its own in either run: once is enough.
        pytest.skip("the cluster tests run in the SQLite run (the cluster has its own PostgreSQL)")
    require(find_postgres_bin() is not None, "PostgreSQL")
    require(shutil.which("redis-server") is not None, "Redis (redis-server)")
    require(nginx_binary() is not None, "nginx")
    require(importlib.util.find_spec("moto") is not None, "moto's S3 server")
    require(importlib.util.find_spec("celery") is not None, "Celery")
    # Under /tmp itself (not pytest's private 0700 directories): PostgreSQL runs as its own user.
    directory = Path(tempfile.mkdtemp(prefix="registry-cluster-"))
    running = Cluster(directory)  # attached: every process dies with this one
    try:
        running.start()
        seed_examples(running)
        yield running
    finally:
        running.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="package")
def token(cluster: Cluster) -> str:
    return cluster.createtoken("loader", "publish:*", "yank:*")
