"""`provisioning extension validate | test | build`: what authors run on their own machine."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from clients import authoring
from clients.errors import ClientError

if TYPE_CHECKING:
    from clients.cli import Commands, Context


def _cmd_validate(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    result = authoring.validate_extension(Path(args.path))
    details = [p.as_dict() for p in result.problems]
    if not result.ok or result.manifest is None:
        count = len(result.errors)
        raise ClientError(
            f"{result.path / 'extension.toml'}: {count} error{'s' if count != 1 else ''}",
            code="invalid_manifest",
            details=details,
        )
    manifest = result.manifest
    out.success({"valid": True, "manifest": manifest.to_dict(), "warnings": details})
    for warning in result.warnings:
        out.warn(str(warning))
    out.line(f"ok: {manifest.name} {manifest.version} ({manifest.type}) is valid")
    return 0


def _cmd_test(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    run = authoring.run_extension_test(Path(args.path))
    report = run.report
    for warning in run.validation.warnings:
        out.warn(str(warning))
    out.table(
        ["check", "path", "status", "time", "message"],
        [
            (
                r.check,
                r.path,
                r.status,
                f"{r.seconds * 1000:.0f} ms",
                r.message.splitlines()[0] if r.message else "",
            )
            for r in report.results
        ],
    )
    counts = report.counts()
    summary = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    if not run.ok:
        raise ClientError(
            f"extension test failed: {summary}", code="test_failed", details=[r.as_dict() for r in report.results]
        )
    manifest = run.validation.manifest
    out.success({"name": manifest.name if manifest else None, **report.as_dict()})
    out.line(f"ok: {summary}")
    return 0


def _cmd_build(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    built = authoring.build_extension(Path(args.path), Path(args.output_dir))
    out.success(
        {
            "name": built.name,
            "version": built.version,
            "path": str(built.path),
            "sha256": built.sha256,
            "size": built.size,
            "files": len(built.files),
        }
    )
    out.line(f"{built.path}")
    out.line(f"sha256:{built.sha256}  ({built.size} bytes, {len(built.files)} files)")
    return 0


def register(cli: Commands) -> None:
    path_help = "extension source directory (default .)"
    p = cli.leaf("extension", "validate", _cmd_validate, "check extension.toml against the schema and rules, offline")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help=path_help)
    p = cli.leaf("extension", "test", _cmd_test, "validate, check every file's content, then run the extension's tests")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help=path_help)
    p = cli.leaf("extension", "build", _cmd_build, "build the reproducible package dist/NAME-VERSION.tar.gz")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help=path_help)
    p.add_argument("-o", "--out", dest="output_dir", default="dist", metavar="DIR", help="output directory")
