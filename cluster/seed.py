"""What a fresh cluster holds before it is used: the bundled examples, published through the
pipeline (`manage.py publish` on web node 1's machine; the builds run on the workers)."""

from __future__ import annotations

from cluster.cluster import Cluster
from tests.live_registry import EXAMPLES


def seed_examples(cluster: Cluster) -> None:
    cluster.manage("publish", "--skip-existing", *EXAMPLES, timeout=900)
