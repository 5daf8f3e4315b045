"""``python -m cluster start|stop|status [--dir DIR]``: the registry distributed on this machine
(`make cluster`, `make cluster-stop`); see `cluster.cluster`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cluster.cluster import BASE_DIR, BUCKET, Cluster, ClusterError
from cluster.seed import seed_examples

DEFAULT_DIR = BASE_DIR / "var" / "cluster"


def _start(directory: Path, *, seed: bool) -> int:
    cluster = Cluster(directory, attached=False)
    cluster.start()
    try:
        if seed:
            seed_examples(cluster)
        token = cluster.createtoken("cluster-admin", "publish:*", "yank:*", "owners:*")
    except BaseException:
        cluster.stop()
        raise
    print(f"the registry runs distributed from {directory} (state: {directory / 'state.json'}):")
    print(f"  nginx in front of both web nodes  {cluster.url}")
    for role in cluster.web_roles():
        print(f"  {role}                              {cluster.web_url(int(role[3:]))}")
    print(f"  PostgreSQL                        {cluster.database_url}")
    print(f"  Redis                             {cluster.redis_url}  (broker /0, cache /1)")
    print(f"  S3 (moto)                         {cluster.s3_url}  (bucket {BUCKET})")
    print(f"  workers                           {', '.join(cluster.worker_roles())} and beat")
    print(f"  root to pin                       provisioning trust init --root {cluster.root_file}")
    print(f"  a publish token (cluster-admin)   {token}")
    print("stop it with: make cluster-stop")
    return 0


def _stop(directory: Path) -> int:
    cluster = Cluster.load_state(directory)
    if cluster is None:
        print(f"no cluster recorded in {directory}: nothing to stop")
        return 0
    running = [role for role, alive in cluster.alive().items() if alive]
    cluster.stop()
    left = [role for role, alive in cluster.alive().items() if alive]
    if left:
        print(f"error: still running: {', '.join(left)}", file=sys.stderr)
        return 1
    print(f"stopped {', '.join(running) or 'nothing (it was not running)'}; its data stays in {directory}")
    return 0


def _status(directory: Path, *, as_json: bool) -> int:
    cluster = Cluster.load_state(directory)
    if cluster is None:
        print(f"no cluster recorded in {directory}")
        return 1
    alive = cluster.alive()
    if as_json:
        print(json.dumps({"url": cluster.url, "ports": cluster.ports, "alive": alive}, indent=2))
    else:
        for role, proc in cluster.procs.items():
            print(f"{role:10} pid {proc.pid:<8} {'running' if alive[role] else 'stopped'}")
    return 0 if all(alive.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"where it lives (default {DEFAULT_DIR})")
    parser.add_argument("--no-seed", action="store_true", help="start: do not publish the bundled examples")
    parser.add_argument("--json", action="store_true", help="status: as JSON")
    args = parser.parse_args(argv)
    directory = args.dir.resolve()
    try:
        if args.command == "start":
            return _start(directory, seed=not args.no_seed)
        if args.command == "stop":
            return _stop(directory)
        return _status(directory, as_json=args.json)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
