"""`provisioning extension verify NAME[@VERSION]` and `extension verify --infra DIR`: what the
registry attests about a package, and whether an infrastructure directory holds exactly what it
signed (the work is in `clients.verify`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients.errors import ClientError, UsageError

if TYPE_CHECKING:
    from clients.cli import Commands, Context
    from clients.output import Output


def _coordinates(text: str) -> tuple[str, str | None]:
    from extensions.errors import ExtensionError
    from extensions.names import NAME_RE
    from extensions.versions import SemVer

    name, at, version = text.partition("@")
    if not NAME_RE.match(name):
        raise UsageError(f"{text!r}: use NAME or NAME@VERSION (an extension name, e.g. kubernetes@1.28.0)")
    if not at:
        return name, None
    try:
        return name, str(SemVer.parse(version))
    except ExtensionError as exc:
        raise UsageError(f"{text!r}: {version!r} is not a version: {exc.message}") from None


def _show(out: Output, shown: dict[str, Any]) -> None:
    summary = shown["summary"]
    publisher = summary.get("publisher") or {}
    upload = summary.get("upload") or {}
    out.line(
        f"{shown['name']} {shown['version']}: provenance verified (signed by the provenance key "
        f"{str(summary.get('keyid'))[:16]} that {shown['registry']} publishes in its signed metadata)"
    )
    who = str(publisher.get("user") or "unknown user")
    if publisher.get("token"):
        who += f" with the token {publisher['token']}…"
    elif publisher.get("via") == "no-token":
        who += " (without a token: a web session, or the operator's `manage.py publish`)"
    trusted = publisher.get("trustedPublisher")
    rows: list[tuple[str, Any]] = [
        ("package", f"{summary.get('package')} sha256:{summary.get('sha256')}"),
        ("published by", who),
    ]
    if isinstance(trusted, dict):
        claims = trusted.get("claims")
        claims = claims if isinstance(claims, dict) else {}
        rows.append(("trusted publisher", f"{trusted.get('issuer')} (audience {trusted.get('audience')})"))
        rows.extend((f"  {key}", value) for key, value in sorted(claims.items()))
    what = "source archive" if summary.get("kind") == "source" else "uploaded package"
    rows += [
        ("built from", f"{what} {upload.get('name')} sha256:{(upload.get('digest') or {}).get('sha256')}"),
        ("builder", f"{summary.get('builder')} ({_versions(summary.get('builder_version'))})"),
        ("build", f"{summary.get('build') or 'unknown'}, {summary.get('started')} to {summary.get('finished')}"),
        ("reproducible", _reproducible(summary.get("reproducible"), summary.get("reproducible_note"))),
    ]
    dependencies = summary.get("dependencies") or []
    rows.append(
        (
            "dependencies",
            "; ".join(
                f"{d.get('name')} {d.get('version')}" + (f" ({d.get('constraint')})" if d.get("constraint") else "")
                for d in dependencies
            )
            or "none",
        )
    )
    if summary.get("build_log"):
        rows.append(("build log", summary["build_log"]))
    for label, value in rows:
        out.line(f"  {label + ':':<19}{value}")


def _versions(value: Any) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) if isinstance(value, dict) else str(value)


def _reproducible(verdict: Any, note: Any) -> str:
    if verdict is True:
        return f"yes: {note}" if note else "yes"
    if verdict is False:
        return f"no: {note}" if note else "no"
    return f"not checked{': ' + str(note) if note else ''}"


def _cmd_verify(args: argparse.Namespace, ctx: Context) -> int:
    from clients import verify
    from clients.lockfile import LOCKFILE_NAME, Lockfile
    from clients.registry_client import RegistryClient
    from clients.store import Store

    out = ctx.out
    if (args.target is None) == (args.infra is None):
        raise UsageError("give NAME[@VERSION] or --infra DIR (one of them)")
    config = ctx.config
    if args.target is not None:
        if args.offline:
            raise UsageError("--offline goes with --infra DIR")
        name, version = _coordinates(args.target)
        with RegistryClient.from_config(config) as client:
            shown = verify.show(client, name, version).to_dict()
        out.success(shown)
        _show(out, shown)
        return 0
    infra = Path(args.infra)
    explicit = getattr(args, "registry", None) or os.environ.get("PROVISIONING_REGISTRY")
    registry = None if explicit else (Lockfile.load(infra / LOCKFILE_NAME).registry or None)
    with RegistryClient.from_config(config, offline=args.offline, registry=registry) as client:
        report = verify.verify_infra(client, Store(config.home), infra)
    if report.differences:
        out.table(
            ["extension", "version", "path", "status", "detail"],
            [(d.extension, d.version, d.path or "-", d.status, d.detail) for d in report.differences],
        )
        count = len(report.differences)
        raise ClientError(
            f"{count} difference{'s' if count != 1 else ''} between {infra} and what the registry signed "
            f"({len({d.extension for d in report.differences})} of {len(report.checked)} extensions); restore them "
            f"with `provisioning extension sync --infra {infra}`",
            code="integrity_error",
            details=[d.to_dict() for d in report.differences],
        )
    out.success(report.to_dict())
    against = "the signed metadata and " if report.verified else ""
    count = len(report.checked)
    out.line(
        f"ok: {count} extension{'s' if count != 1 else ''} pinned by {infra / LOCKFILE_NAME} "
        f"{'is' if count == 1 else 'are'} installed exactly as {against}their packages' MANIFEST.json say"
    )
    return 0


def register(cli: Commands) -> None:
    p = cli.leaf(
        "extension",
        "verify",
        _cmd_verify,
        "NAME[@VERSION]: show a version's signed build provenance (who published it, from what, when, the builder, "
        "reproducible or not), verified; --infra DIR: re-hash what DIR has installed against the signed metadata and "
        "each package's MANIFEST.json, listing every difference (exit 1 if any)",
    )
    p.add_argument("target", nargs="?", metavar="NAME[@VERSION]", help="an extension (default: its latest version)")
    p.add_argument("--infra", metavar="DIR", help="check this infrastructure directory instead")
    p.add_argument(
        "--offline", action="store_true", help="with --infra: only the local store and cached signed metadata"
    )
