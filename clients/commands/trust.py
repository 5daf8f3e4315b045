"""`provisioning trust init | show`: the registry's root of trust, pinned per registry URL under
``PROVISIONING_HOME`` (clients.trust). Without `trust init`, the first command that reads from a
registry pins its root on first use and prints the fingerprint once."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from clients import trust
from clients.errors import ClientError, os_error_message

if TYPE_CHECKING:
    from clients.cli import Commands, Context


def _cmd_init(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    path = Path(args.root).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ClientError(
            f"cannot read the root file: {os_error_message(exc, about=path)}", code="bad_request"
        ) from None
    pin = trust.pin_root(config.home, config.registry, data, how="explicit", replace=args.force)
    ctx.out.success(pin)
    ctx.out.line(
        f"pinned the root of {config.registry}: fingerprint {pin['fingerprint']} (root version {pin['root_version']})"
    )
    return 0


def _cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    shown = trust.describe(config.home, config.registry)
    out = ctx.out
    out.success(shown)
    out.line(f"registry     {shown['registry']}")
    out.line(f"fingerprint  {shown['fingerprint']} (pinned {shown['how']}, {shown['pinned_at']})")
    out.line(f"root         version {shown['trusted_root_version']}, expires {shown['root_expires']}")
    if "timestamp" in shown:
        out.line(f"timestamp    version {shown['timestamp']['version']}, expires {shown['timestamp']['expires']}")
    out.table(
        ["role", "threshold", "keys"],
        [[name, role["threshold"], ", ".join(k[:16] for k in role["keyids"])] for name, role in shown["roles"].items()],
    )
    return 0


def register(cli: Commands) -> None:
    p = cli.leaf("trust", "init", _cmd_init, "pin the registry's root metadata (a root.json its operator gave you)")
    p.add_argument("--root", required=True, metavar="FILE", help="the root file (e.g. 1.root.json)")
    p.add_argument("--force", action="store_true", help="replace a different root pinned before")
    cli.leaf("trust", "show", _cmd_show, "the pinned root's fingerprint, keys and expiry")
