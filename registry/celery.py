"""The Celery application. Without CELERY_BROKER_URL, tasks run in-process (eager)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")

app = Celery("registry")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["builds", "registry", "registry.trust"])
app.conf.beat_schedule = {
    # Builds whose worker died are re-queued or failed: never `running` forever.
    # (Its schedule is REGISTRY_BUILD_HEARTBEAT_SECONDS, set in RegistryConfig.ready once the
    # settings are loaded: a dead worker's build is noticed within the stale age plus one beat.)
    "reap-stale-builds": {"task": "builds.reap_stale_builds", "schedule": 10.0},
    # Objects no row references (a crash between storing and committing) are removed.
    "sweep-storage": {"task": "builds.sweep_storage", "schedule": 3600.0},
    # Download counts written in batches (registry.downloadcounts); the schedule is
    # REGISTRY_DOWNLOADS_FLUSH_SECONDS, set in RegistryConfig.ready.
    "flush-downloads": {"task": "registry.flush_downloads", "schedule": 5.0},
    # Static index files left behind their rows by a crash (registry.staticindex).
    "repair-static-index": {"task": "registry.repair_static_index", "schedule": 60.0},
    # The signed index: the timestamp (and anything else close to expiry) re-signed in time.
    "maintain-signed-index": {"task": "trust.maintain", "schedule": 300.0},
}
