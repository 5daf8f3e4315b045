"""The cluster's object store: moto's S3 server in a process of its own, which can go down and come
back without losing its buckets (moto keeps them in memory, so a restarted process would start
empty, unlike a real store).

    python -m cluster.s3 --port P      # serves until SIGTERM
    kill -USR1 PID                     # outage: the port refuses connections, open ones are dropped
    kill -USR2 PID                     # recovery: the same port, the same buckets and objects

It is `tests.services.MotoServer` (the tests' in-process S3) with its stop and start driven by
signals, so the tests and the cluster run the same server.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from tests.services import HOST, MotoServer

log = logging.getLogger("cluster.s3")


def serve(port: int) -> int:
    server = MotoServer()
    server.port = port
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    wanted: list[str] = []
    wake = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        wanted.append({int(signal.SIGUSR1): "down", int(signal.SIGUSR2): "up"}.get(signum, "exit"))
        wake.set()

    for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    print(f"S3 (moto) serving on http://{HOST}:{server.port}", flush=True)
    while True:
        wake.wait()
        wake.clear()
        while wanted:
            what = wanted.pop(0)
            if what == "down":
                server.stop()
                print("S3 down (SIGUSR1): connections refused", flush=True)
            elif what == "up":
                server.start()
                print("S3 up again (SIGUSR2)", flush=True)
            else:
                server.stop()
                print("S3 stopped", flush=True)
                return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.s3", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return serve(args.port)


if __name__ == "__main__":
    sys.exit(main())
