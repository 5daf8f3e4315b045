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

from tests.services import HOST, MotoServer

log = logging.getLogger("cluster.s3")


def serve(port: int) -> int:
    # The signals are taken synchronously (sigwait) by the main thread, and blocked in every thread
    # (the server's threads inherit the mask): a handler that touched a lock the interrupted code
    # held (threading.Event.set, print) could deadlock the process.
    signals = {signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    server = MotoServer()
    server.port = port
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    print(f"S3 (moto) serving on http://{HOST}:{server.port}", flush=True)
    while True:
        signum = signal.sigwait(signals)
        if signum == signal.SIGUSR1:
            server.stop()
            print("S3 down (SIGUSR1): connections refused", flush=True)
        elif signum == signal.SIGUSR2:
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
