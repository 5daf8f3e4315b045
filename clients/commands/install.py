"""`provisioning taskserv|cluster|providers create|list`, `providers validate`, `extension sync`:
installing extensions into an infrastructure directory (the work is in `clients.install`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from clients import install
from clients.commands._args import version_or_constraint
from clients.errors import ClientError
from clients.lockfile import LOCKFILE_NAME, Lockfile
from clients.progress import Progress
from clients.registry_client import RegistryClient, RegistryUnavailable
from clients.store import Store

if TYPE_CHECKING:
    from clients.cli import Commands, Context, Handler
    from clients.output import Output

OFFLINE_HINT = "--offline works from the local store and cache"  # create and sync have --offline


def _runtime_version(args: argparse.Namespace) -> str | None:
    return args.runtime_version or os.environ.get("PROVISIONING_VERSION") or None


def _print_report(out: Output, report: install.InstallReport) -> None:
    out.success(report.to_dict())
    out.table(
        ["extension", "version", "type", "action", "path"],
        [
            (
                p.name,
                p.version,
                p.type,
                f"{p.action} from {p.previous}" if p.action in ("upgraded", "downgraded") else p.action,
                p.path,
            )
            for p in report.extensions
        ],
    )
    for item in report.locked_ignored:
        out.warn(f"{item['name']}: locked {item['locked']} could not be kept ({item['reason']}); now {item['chosen']}")
    for pinned in report.yanked:
        why = f": {pinned['reason']}" if pinned.get("reason") else ""
        out.warn(
            f"{pinned['name']} {pinned['version']} is yanked{why} (installed because it was pinned exactly; "
            "resolution never chooses a yanked version otherwise)"
        )
    if report.changed:
        done = "wrote" if report.lockfile_written else "kept"
        out.line(f"installed into {report.infra / 'extensions'}; {done} {report.lockfile}")
    else:
        out.line(f"nothing to do: {report.infra} already has exactly this")
    if report.system_packages:
        out.line(f"the host needs these system packages: {', '.join(report.system_packages)}")
    if report.missing_env:
        out.warn(f"required environment variables not set: {', '.join(report.missing_env)}")


def _create(type: str) -> Handler:
    def handler(args: argparse.Namespace, ctx: Context) -> int:
        config = ctx.config
        with (
            RegistryClient.from_config(config, offline=args.offline, unreachable_hint=OFFLINE_HINT) as client,
            Progress.for_output(ctx.out) as bars,
        ):
            report = install.install(
                client,
                Store(config.home),
                type=type,
                name=args.name,
                infra=Path(args.infra),
                version=args.version,
                runtime_version=_runtime_version(args),
                progress=bars.task,
            )
        _print_report(ctx.out, report)
        return 0

    return handler


def _list(type: str) -> Handler:
    def handler(args: argparse.Namespace, ctx: Context) -> int:
        out = ctx.out
        if args.infra:
            infra = Path(args.infra)
            found = install.installed(infra, store=Store(ctx.config.home), type=type)
            yanked, unchecked = _yanked_pins(ctx, infra, found)
            broken = [item for item in found if item.status != "ok"]
            if not broken:
                out.success([{**item.to_dict(), "yanked": yanked.get(item.entry.name)} for item in found])
            if not found:
                out.line(f"no {type}s in {infra / LOCKFILE_NAME}")
                return 0
            out.table(
                ["name", "version", "status", "yanked", "path"],
                [(i.entry.name, i.entry.version, i.status, _yes_no(yanked.get(i.entry.name)), i.path) for i in found],
            )
            for item in found:
                if yanked.get(item.entry.name):
                    group = install.cli_group(type)
                    out.warn(
                        f"{item.entry.name} {item.entry.version} is yanked in the registry: choose another version "
                        f"with `provisioning {group} create {item.entry.name} --infra {infra} --version V`"
                    )
            if unchecked:
                out.warn(f"not checked for yanked versions: {unchecked}")
            if broken:  # as `providers validate` does: an install that is not what the lockfile pins fails
                raise ClientError(
                    f"{len(broken)} of {len(found)} {type}s in {infra} are not as {LOCKFILE_NAME} pins them: "
                    f"restore them with `provisioning extension sync --infra {infra}`",
                    code="integrity_error",
                    details=[{"path": item.entry.name, "message": p} for item in broken for p in item.problems],
                )
            return 0
        with RegistryClient.from_config(ctx.config) as client:
            offered = client.provided(type)
        out.success(offered)
        if not offered:
            out.line(f"the registry at {ctx.config.registry} offers no {type}s")
            return 0
        out.table(
            [type, "extension", "version", "description"],
            [(i["name"], i["extension"], i["version"], _trim(i.get("description"))) for i in offered],
        )
        return 0

    return handler


def _yanked_pins(
    ctx: Context, infra: Path, found: list[install.InstalledExtension]
) -> tuple[dict[str, bool | None], str]:
    """Which pins are yanked, from the index documents of the lockfile's registry (or --registry);
    when it cannot be reached, nothing is known and the reason is returned."""
    if not found:
        return {}, ""
    explicit = getattr(ctx.args, "registry", None) or os.environ.get("PROVISIONING_REGISTRY")
    registry = None if explicit else (Lockfile.load(infra / LOCKFILE_NAME).registry or None)
    try:
        with RegistryClient.from_config(ctx.config, registry=registry) as client:
            return install.yanked_pins(client, [i.entry for i in found]), ""
    except RegistryUnavailable as exc:
        return {}, exc.message


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "")


def _trim(text: object, width: int = 70) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= width else value[: width - 1] + "…"


def _cmd_validate_providers(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    infra = Path(args.infra)
    checks = install.validate_providers(infra, store=Store(ctx.config.home))
    out.table(
        ["provider", "version", "status", "required env", "system packages"],
        [
            (
                c.name,
                c.version,
                "ok" if c.ok else f"{len(c.problems)} problem{'s' if len(c.problems) != 1 else ''}",
                ", ".join(f"{v} (not set)" if v in c.missing_env else v for v in c.required_env),
                ", ".join(c.system_packages),
            )
            for c in checks
        ],
    )
    failing = [c for c in checks if not c.ok]
    if failing:
        raise ClientError(
            f"{len(failing)} of {len(checks)} providers in {infra} cannot work as installed",
            code="validation_failed",
            details=[{"path": c.name, "message": p} for c in failing for p in c.problems],
        )
    out.success([c.to_dict() for c in checks])
    if not checks:
        out.line(f"no providers in {infra / LOCKFILE_NAME}")
    else:
        out.line(f"ok: {len(checks)} provider{'s' if len(checks) != 1 else ''} intact and configured")
    return 0


def _cmd_sync(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    infra = Path(args.infra)
    explicit = getattr(args, "registry", None) or os.environ.get("PROVISIONING_REGISTRY")
    registry = None if explicit else (Lockfile.load(infra / LOCKFILE_NAME).registry or None)
    with (
        RegistryClient.from_config(
            config, offline=args.offline, registry=registry, unreachable_hint=OFFLINE_HINT
        ) as client,
        Progress.for_output(ctx.out) as bars,
    ):
        report = install.sync(Store(config.home), infra=infra, client=client, progress=bars.task)
    _print_report(ctx.out, report)
    return 0


def _install_options(p: argparse.ArgumentParser, *, create: bool) -> None:
    p.add_argument(
        "--offline",
        action="store_true",
        help="use only the local store and cached index documents; never ask the registry",
    )
    if create:
        p.add_argument(
            "--runtime-version",
            metavar="V",
            help="the provisioning runtime's version; versions whose [compatibility] excludes it are never "
            "chosen (env PROVISIONING_VERSION)",
        )


def register(cli: Commands) -> None:
    for type, group in install.CLI_GROUPS.items():
        p = cli.leaf(
            group,
            "create",
            _create(type),
            f"resolve the {type} NAME and its dependencies (from the registry's index documents), install them "
            f"into DIR/extensions/{{kind}}s/ and write DIR/{LOCKFILE_NAME}; versions the lockfile pins are kept "
            "where they still fit",
        )
        p.add_argument("name", metavar="NAME", help=f"the {type} (an extension name, or a name an extension provides)")
        p.add_argument("--infra", required=True, metavar="DIR", help="the infrastructure directory")
        p.add_argument(
            "--version",
            type=version_or_constraint,
            metavar="V",
            help="a version or constraint (1.28.6, ^1.28); default: the newest",
        )
        _install_options(p, create=True)

        p = cli.leaf(
            group,
            "list",
            _list(type),
            f"with --infra DIR: the {type}s DIR/{LOCKFILE_NAME} pins and whether each is intact; "
            f"without: the {type}s the registry offers",
        )
        p.add_argument("--infra", metavar="DIR", help="list what this infrastructure directory has installed")

    p = cli.leaf(
        "providers",
        "validate",
        _cmd_validate_providers,
        f"check every provider DIR/{LOCKFILE_NAME} pins: its files are intact, its extension.toml is valid, and "
        "every [configuration] required_env variable is set; exit 1 listing each problem",
    )
    p.add_argument("--infra", default=".", metavar="DIR", help="the infrastructure directory (default .)")

    p = cli.leaf(
        "extension",
        "sync",
        _cmd_sync,
        f"install exactly what DIR/{LOCKFILE_NAME} pins, verifying every sha256; packages come from the local "
        "store, else from the lockfile's registry (or --registry); a mismatch installs nothing",
    )
    p.add_argument("--infra", required=True, metavar="DIR", help="the infrastructure directory")
    _install_options(p, create=False)
