"""Housekeeping inside each web process, started by its first request (REGISTRY_HOUSEKEEPING):

- in embedded mode (no broker, so no Celery beat), the reaper of stale builds runs every
  REGISTRY_BUILD_HEARTBEAT_SECONDS: a build whose web process died mid-build (its heartbeat
  stopped) is failed with a clear reason within REGISTRY_BUILD_STALE_SECONDS plus one interval;
- in every mode, the temporary files of this machine (`builds.workspace.tmp_sweep`) are swept
  every few minutes: an upload cut off by a killed web process leaves nothing for long.

One daemon thread per process; every pass is wrapped so that a failure is logged, never raised."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

log = logging.getLogger(__name__)

TMP_SWEEP_SECONDS = 300

_started_in: int | None = None
_lock = threading.Lock()


def start_once(sender: Any = None, **kwargs: Any) -> None:
    """A request_started receiver: start this process's housekeeping thread, once."""
    global _started_in
    if not settings.REGISTRY_HOUSEKEEPING or _started_in == os.getpid():
        return
    with _lock:
        if _started_in == os.getpid():
            return
        _started_in = os.getpid()
    threading.Thread(target=_loop, name="registry-housekeeping", daemon=True).start()


def _loop() -> None:
    from builds.lifecycle import build_reap_stale
    from builds.workspace import tmp_sweep

    interval = max(1.0, float(settings.REGISTRY_BUILD_HEARTBEAT_SECONDS))
    next_sweep = 0.0
    while True:
        try:
            close_old_connections()
            if settings.CELERY_TASK_ALWAYS_EAGER:
                build_reap_stale()
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + TMP_SWEEP_SECONDS
                tmp_sweep()
        except Exception:
            log.warning("housekeeping failed; trying again", exc_info=True)
        finally:
            connection.close()
        time.sleep(interval)
