"""`provisioning extension trusted-publishers list | add | remove NAME`: the CI identities trusted
to publish an extension with an OIDC token instead of a stored secret (SPEC 6.3)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from clients import oidc
from clients.commands._args import positive
from clients.errors import UsageError
from clients.registry_client import RegistryClient

if TYPE_CHECKING:
    from clients.cli import Commands, Context
    from clients.output import Output


def _status(publisher: dict[str, Any]) -> str:
    if publisher.get("problem"):
        return f"unusable: {publisher['problem']}"
    if publisher.get("pending"):
        return f"pending until {str(publisher.get('reserved_until') or '')[:10]}"
    return "active"


def _claims(publisher: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((publisher.get("claims") or {}).items()))


def _print(out: Output, publishers: list[dict[str, Any]]) -> None:
    out.table(
        ["id", "issuer", "claims", "audience", "added by", "status"],
        [(p["id"], p["issuer"], _claims(p), p["audience"], p.get("added_by"), _status(p)) for p in publishers],
    )


def _check_options(args: argparse.Namespace) -> None:
    adding = args.action == "add"
    if adding and (not args.issuer or not args.claim):
        raise UsageError(
            "adding a trusted publisher needs --issuer URL and at least one --claim NAME=VALUE "
            "(e.g. --claim repository=acme/etcd --claim workflow=release)"
        )
    if not adding and (args.issuer or args.claim or args.audience):
        raise UsageError(f"--issuer, --claim and --audience are for `add`, not `{args.action}`")
    if args.action == "remove" and args.id is None:
        raise UsageError("removing a trusted publisher needs its ID (see `trusted-publishers list NAME`)")
    if args.action != "remove" and args.id is not None:
        raise UsageError(f"`{args.action}` takes no ID")


def _cmd_trusted_publishers(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    _check_options(args)
    with RegistryClient.from_config(ctx.config) as client:
        if args.action == "list":
            data = oidc.trusted_publishers(client, args.name)
            out.success(data)
            rows = data.get("trusted_publishers") or []
            if not rows:
                out.line(f"{args.name} has no trusted publishers")
            else:
                _print(out, rows)
            return 0
        if args.action == "add":
            claims = oidc.parse_claims(args.claim)
            data = oidc.add_trusted_publisher(
                client, args.name, issuer=args.issuer, claims=claims, audience=args.audience
            )
            out.success(data)
            what = "pending trusted publisher" if data.get("pending") else "trusted publisher"
            out.line(f"{what} {data['id']} of {data['name']}: {data['issuer']} with {_claims(data)}")
            out.line(f"  tokens must have the audience {data['audience']}")
            if data.get("pending"):
                out.line(
                    f"  {data['name']} is reserved for you until {str(data.get('reserved_until'))[:10]}; "
                    "its first publish creates it"
                )
            return 0
        data = oidc.remove_trusted_publisher(client, args.name, args.id)
        out.success(data)
        out.line(f"removed trusted publisher {data['id']} of {data['name']} ({data['issuer']}, {_claims(data)})")
        return 0


def register(cli: Commands) -> None:
    p = cli.leaf(
        "extension",
        "trusted-publishers",
        _cmd_trusted_publishers,
        "list, add or remove the CI identities (OIDC issuer, audience, claims) trusted to publish an extension "
        "without a stored token; add one for a name that does not exist yet to reserve it (pending)",
    )
    p.add_argument("action", choices=("list", "add", "remove"), help="what to do")
    p.add_argument("name", metavar="NAME", help="the extension (or, for a pending publisher, the name to create)")
    p.add_argument("id", nargs="?", type=positive, metavar="ID", help="remove: the publisher's id (from `list`)")
    p.add_argument("--issuer", metavar="URL", help="add: the OIDC issuer, as its tokens' iss claim says it")
    p.add_argument(
        "--claim",
        action="append",
        metavar="NAME=VALUE",
        help="add: a claim the token must carry exactly, repeatable (repository=acme/etcd, workflow=release, "
        "ref=refs/heads/main, environment=release, sub=...)",
    )
    p.add_argument("--audience", metavar="AUD", help="add: the audience tokens must have (default: the registry's URL)")
