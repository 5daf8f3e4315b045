"""The builds' part of /metrics (added to registry.metrics by the composition root, registry/urls.py)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from builds.models import Build


class BuildCollector(Collector):
    """``registry_builds{status}``: builds by status, read from the database at scrape time."""

    def collect(self) -> Iterator[Metric]:
        counts = dict.fromkeys(Build.Status.values, 0)
        for row in Build.objects.values("status").annotate(n=Count("id")).order_by():
            counts[row["status"]] = row["n"]
        family = GaugeMetricFamily("registry_builds", "Builds by status", labels=["status"])
        for status, count in counts.items():
            family.add_metric([status], count)
        yield family
