"""The registry's background work in each web process: one daemon thread, started by the
process's first request (`start_once`, called by registry.wsgi before the fast paths, which
Django's request signals never see). Every REGISTRY_DOWNLOADS_FLUSH_SECONDS it

- writes the download counts this process buffered (registry.downloadcounts), and, at exit, the
  last ones (a graceful stop loses none);
- in embedded mode (no broker, so no Celery beat): drains the shared Redis counts if there are
  any, and, when REGISTRY_HOUSEKEEPING is on, repairs the static index files of extensions changed
  lately (all of them on its first pass, so a process that died between a commit and its file
  write is repaired by the next).

The counts are written whatever REGISTRY_HOUSEKEEPING says: they are the downloads' only way into
the database, not housekeeping (with it off, they would be lost).

Every pass is wrapped so that a failure is logged, never raised. (builds.housekeeping is the
builds' own thread: stale builds and temporary files.)"""

from __future__ import annotations

import logging
import os
import threading
import time
from datetime import timedelta
from multiprocessing import util as multiprocessing_util
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from registry import downloadcounts
from registry.staticindex import static_index_repair

log = logging.getLogger(__name__)

#: how far back each pass looks for extensions whose static index file may need a repair
REPAIR_WINDOW = timedelta(minutes=10)

_started_in: int | None = None
_lock = threading.Lock()


def start_once() -> None:
    """Start this process's background thread, once (cheap to call on every request)."""
    global _started_in
    if _started_in == os.getpid():
        return
    with _lock:
        if _started_in == os.getpid():
            return
        _started_in = os.getpid()
    threading.Thread(target=_loop, name="registry-background", daemon=True).start()
    # At the process's exit: multiprocessing's exit function runs it under either server, from
    # atexit in a gunicorn worker, and when a granian worker (a multiprocessing child, which skips
    # atexit when forked) returns from serving.
    multiprocessing_util.Finalize(None, _flush_at_exit, exitpriority=10)


def _flush_at_exit() -> None:
    try:
        downloadcounts.flush_local()
    except Exception:  # at exit, a log line is all that is left to give
        log.warning("download counts: the last ones could not be written", exc_info=True)


def run_pass(*, first: bool, housekeeping: bool = True, repair_all: bool | None = None) -> None:
    """One pass of the background work (see the module's docstring). The first pass runs as the
    process answers its first request, so it leaves that request's count to the next (a count
    written at once would race the request's own). ``repair_all`` (the first pass's by default):
    repair every static index file, not only those of the extensions changed lately. A Redis
    outage is logged, not raised: the process's own counts are written whatever Redis does."""
    if not first:
        downloadcounts.flush_local()
    if settings.CELERY_TASK_ALWAYS_EAGER:
        downloadcounts.drain_shared_unless_down()
        if housekeeping:
            everything = first if repair_all is None else repair_all
            static_index_repair(updated_since=None if everything else timezone.now() - REPAIR_WINDOW)


class Passes:
    """The passes of one process's background thread: a pass that fails is logged and the next
    goes on; the first pass's full repair is made again until one succeeds, but a failed pass does
    not hold the counts back (each pass after the first writes them)."""

    def __init__(self) -> None:
        self.first, self.repaired_all = True, False

    def run(self) -> None:
        try:
            close_old_connections()
            run_pass(first=self.first, housekeeping=settings.REGISTRY_HOUSEKEEPING, repair_all=not self.repaired_all)
            self.repaired_all = True
        except Exception:
            log.warning("registry background work failed; trying again", exc_info=True)
        finally:
            self.first = False
            connection.close()


def _loop() -> None:
    interval = float(settings.REGISTRY_DOWNLOADS_FLUSH_SECONDS)
    passes = Passes()
    while True:
        passes.run()
        time.sleep(interval)


def starting(app: Any) -> Any:
    """A WSGI application that starts the background thread before answering its first request."""

    def application(environ: dict[str, Any], start_response: Any) -> Any:
        start_once()
        return app(environ, start_response)

    return application
