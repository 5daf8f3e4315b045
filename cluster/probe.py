"""A latency probe: index documents read at a fixed rate by a process of its own, while the load
(cluster/load.py) runs.

The load's clients share one asyncio event loop, so what they record of a request includes the
time the loop spent on the other clients' answers: on 2 cores with the cluster beside it, that is
most of what they measure. The probe measures what one client sees of the server: one keep-alive
connection, a request every ``interval`` seconds on a fixed schedule, each latency counted from
the time the request was due (so a slow answer that delays the next request is counted against
the next one too: no coordinated omission). It asks the kernel for a higher priority when it may
(root), so its own turn on the CPU is not what it measures.

    python -m cluster.probe URL SECONDS INTERVAL NAME... > samples.json

prints ``[[at, seconds, status], ...]`` (status 0: no answer).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import sys
import time
import urllib.parse

PRIORITY = -5  # nice value, when allowed


def probe(url: str, seconds: float, interval: float, names: list[str], seed: int = 0) -> list[list[float]]:
    parts = urllib.parse.urlsplit(url)
    rng = random.Random(seed)
    connection: http.client.HTTPConnection | None = None
    samples: list[list[float]] = []
    started = time.monotonic()
    due = started
    while due < started + seconds:
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        status = 0
        try:
            if connection is None:
                connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=15)
            connection.request("GET", f"{parts.path.rstrip('/')}/api/v1/index/{rng.choice(names)}")
            response = connection.getresponse()
            response.read()
            status = response.status
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException):
            if connection is not None:
                connection.close()
            connection = None
        samples.append([due - started, time.monotonic() - due, status])
        due += interval
    if connection is not None:
        connection.close()
    return samples


def main(argv: list[str]) -> int:
    url, seconds, interval, *names = argv
    try:
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
    except PermissionError:
        pass
    json.dump(probe(url, float(seconds), float(interval), names), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
