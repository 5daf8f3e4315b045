"""GET /metrics: Prometheus text format.

Every value is read from the database when Prometheus scrapes, by custom collectors, so the
numbers are the same whichever gunicorn worker answers (in-process counters would only count
that worker's requests). The catalog's collector lives here; other apps add theirs through the
composition root (registry/urls.py), e.g. the builds by status."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib import metadata

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from registry import selectors


def _package_version() -> str:
    try:
        return metadata.version("provisioning-registry")
    except metadata.PackageNotFoundError:
        return "unknown"


class CatalogCollector(Collector):
    """Extensions (by type), versions, yanked versions, downloads, and ``registry_info``."""

    def collect(self) -> Iterator[Metric]:
        stats = selectors.catalog_stats()
        extensions = GaugeMetricFamily("registry_extensions", "Extensions in the registry, by type", labels=["type"])
        for kind, count in sorted(stats.extensions_by_type.items()):
            extensions.add_metric([kind], count)
        yield extensions
        yield GaugeMetricFamily("registry_versions", "Published versions (yanked ones included)", value=stats.versions)
        yield GaugeMetricFamily("registry_versions_yanked", "Yanked versions", value=stats.yanked_versions)
        yield CounterMetricFamily("registry_downloads", "Package downloads, every version", value=stats.downloads)
        yield InfoMetricFamily(
            "registry",
            "The registry's version and configuration",
            value={
                "version": _package_version(),
                "storage": str(settings.REGISTRY_STORAGE),
                "database": connection.vendor,
            },
        )


def metrics_view(extra: Iterable[Collector] = ()) -> Callable[[HttpRequest], HttpResponse]:
    """The /metrics view, with the catalog's collector and ``extra`` ones."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CatalogCollector())
    for collector in extra:
        registry.register(collector)

    @require_safe
    def metrics(request: HttpRequest) -> HttpResponse:
        response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
        response["Cache-Control"] = "no-store"
        return response

    return metrics
