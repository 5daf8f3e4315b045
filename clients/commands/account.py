"""`provisioning registry login | logout`: keep (or forget) an API token for a registry under
``PROVISIONING_HOME`` (mode 0600), used when neither ``--token`` nor ``PROVISIONING_TOKEN`` is given."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
from typing import TYPE_CHECKING

from clients.commands._args import positive
from clients.config import forget_credentials, store_credentials
from clients.errors import UsageError
from clients.registry_client import RegistryClient, RegistryErrorAnswer

if TYPE_CHECKING:
    from clients.cli import Commands, Context


def _password(args: argparse.Namespace, registry: str) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        if not sys.stdin.isatty():
            raise UsageError("no terminal to ask for the password: pipe it in with --password-stdin")
        password = getpass.getpass(f"password for {args.username} at {registry}: ")
    if not password:
        raise UsageError("the password is empty")
    return password


def _cmd_login(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    config = ctx.config
    if args.username and getattr(args, "token", None):
        raise UsageError("give either --username (a new token is created) or --token (an existing one), not both")
    # PROVISIONING_TOKEN stands in for --token, but not beside --username: logging in with a
    # password makes the new token the stored one, whatever the shell exports.
    given = None if args.username else getattr(args, "token", None) or os.environ.get("PROVISIONING_TOKEN")
    with RegistryClient.from_config(config) as client:
        if args.username:
            created = client.create_token(
                username=args.username,
                password=_password(args, config.registry),
                name=args.token_name or f"provisioning client on {socket.gethostname()}"[:100],
                scopes=args.scope or None,
                expires_in_days=args.expires_in_days,
            )
            token = str(created["token"])
            info = {k: v for k, v in created.items() if k != "token"}
        elif given:
            client.token = given
            info = {"prefix": given[:12]}
            try:
                client.tokens()  # proves the token works (401 otherwise)
            except RegistryErrorAnswer as exc:
                if exc.code != "forbidden":
                    raise
                # Authenticated, but without the tokens scope (it may still publish): keep it.
                info["tokens_scope"] = False
            token = given
        else:
            raise UsageError(
                "give --username U (the password is asked for, or read with --password-stdin) "
                "or --token T (an existing API token)"
            )
    path = store_credentials(config, registry=config.registry, token=token)
    out.success({"registry": config.registry, "credentials": str(path), "token": info})
    who = f" as {args.username}" if args.username else ""
    out.line(f"logged in to {config.registry}{who}; token {token[:12]}… stored in {path}")
    if info.get("tokens_scope") is False:
        out.line("this token has no tokens scope: it cannot list, create or revoke tokens")
    exported = os.environ.get("PROVISIONING_TOKEN")
    if exported and exported != token:
        out.line("PROVISIONING_TOKEN is set in this shell: commands use it before the stored token (unset it)")
    return 0


def _cmd_logout(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    removed = forget_credentials(config)
    ctx.out.success({"registry": config.registry, "credentials": str(config.credentials_path), "removed": removed})
    if removed:
        ctx.out.line(
            f"logged out: removed {config.credentials_path} (the token stays valid on the registry until revoked)"
        )
    else:
        ctx.out.line(f"not logged in: {config.credentials_path} does not exist")
    return 0


def register(cli: Commands) -> None:
    p = cli.leaf(
        "registry",
        "login",
        _cmd_login,
        "store an API token for the registry: a new one created with --username (password asked, or "
        "--password-stdin), or an existing one given with --token (checked first)",
    )
    p.add_argument("--username", "-u", metavar="U", help="create a new token with this user's password")
    p.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    p.add_argument("--token-name", metavar="NAME", help="the new token's name (default: the host name)")
    p.add_argument(
        "--scope",
        action="append",
        metavar="SCOPE",
        help="a scope of the new token, repeatable (publish:NAME, publish:*, yank:NAME, owners:NAME, tokens); "
        "default: all (tokens: list, create and revoke tokens)",
    )
    p.add_argument("--expires-in-days", type=positive, metavar="N", help="the new token expires after N days")

    cli.leaf("registry", "logout", _cmd_logout, "forget the stored token of the registry (it is not revoked)")
