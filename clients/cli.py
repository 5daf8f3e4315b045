"""The `provisioning` command. It parses arguments and calls the library; nothing else.

Exit status: 0 on success, 1 on failure, 2 on usage errors. Errors are one clear line on stderr,
or the SPEC error envelope with ``--output json``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from clients import authoring
from clients.errors import ClientError, UsageError
from clients.output import Output
from extensions.errors import ExtensionError

Handler = Callable[[argparse.Namespace, Output], int]


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors raised (exit 2 through the one error path), not printed raw."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Global options, accepted before or after the subcommand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--registry",
        metavar="URL",
        default=default(None),
        help="registry URL (env PROVISIONING_REGISTRY; default http://127.0.0.1:8000)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default(None),
        help="API token (env PROVISIONING_TOKEN, or `registry login`)",
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=default(None),
        help="local store and runtime state (env PROVISIONING_HOME)",
    )
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default=default("table"),
        help="human tables or the JSON envelope",
    )


def _leaf(subparsers: Any, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text, description=help_text)
    _global_options(parser, suppress=True)
    parser.set_defaults(handler=handler)
    return parser


# --- extension validate | test | build ------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace, out: Output) -> int:
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


def _cmd_test(args: argparse.Namespace, out: Output) -> int:
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
        raise ClientError(f"extension test failed: {summary}", code="test_failed", details=report.as_dict()["results"])
    manifest = run.validation.manifest
    out.success({"name": manifest.name if manifest else None, **report.as_dict()})
    out.line(f"ok: {summary}")
    return 0


def _cmd_build(args: argparse.Namespace, out: Output) -> int:
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


# --- the parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="provisioning", description="Author, publish, install and load provisioning extensions.")
    _global_options(parser, suppress=False)
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", parser_class=_Parser)

    extension = groups.add_parser("extension", help="validate, test, build, publish extensions")
    ext = extension.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p = _leaf(ext, "validate", _cmd_validate, "check extension.toml against the schema and rules, offline")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help="extension source directory (default .)")
    p = _leaf(ext, "test", _cmd_test, "validate, check every file's content, then run the extension's tests")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help="extension source directory (default .)")
    p = _leaf(ext, "build", _cmd_build, "build the reproducible package dist/NAME-VERSION.tar.gz")
    p.add_argument("path", nargs="?", default=".", metavar="PATH", help="extension source directory (default .)")
    p.add_argument("-o", "--out", dest="output_dir", default="dist", metavar="DIR", help="output directory")
    return parser


def _resolve_globals(args: argparse.Namespace) -> None:
    """Fill the global options from the environment where the command line left them out."""
    if getattr(args, "registry", None) is None:
        args.registry = os.environ.get("PROVISIONING_REGISTRY") or None
    if getattr(args, "token", None) is None:
        args.token = os.environ.get("PROVISIONING_TOKEN") or None
    if getattr(args, "home", None) is None:
        args.home = os.environ.get("PROVISIONING_HOME") or None
    if getattr(args, "output", None) is None:
        args.output = "table"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = any(a == "--output=json" for a in argv) or any(
        a == "--output" and b == "json" for a, b in itertools.pairwise(argv)
    )
    out = Output("json" if wants_json else "table")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _resolve_globals(args)
        out = Output(args.output)
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            where = " ".join(x for x in (getattr(args, "group", None), getattr(args, "command", None)) if x)
            raise UsageError(f"a command is required (see `provisioning {where + ' ' if where else ''}--help`)")
        return handler(args, out)
    except ClientError as exc:
        out.failure(exc)
        return exc.exit_code
    except ExtensionError as exc:
        out.failure(ClientError.from_extension_error(exc))
        return 1
    except KeyboardInterrupt:
        out.failure(ClientError("interrupted", code="interrupted"))
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
