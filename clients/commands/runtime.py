"""`provisioning module discover | load | list | reload` and `provisioning runtime serve` (SPEC 5).

`module load|list|reload` act on the runtime state under ``PROVISIONING_HOME`` (the manager's
``runtime/state.json``), so `module list` in a new process shows what `module load` loaded. The
runtime's version comes from ``--runtime-version`` or ``PROVISIONING_VERSION``; the policy from
``PROVISIONING_EXTENSION_MODE``, ``PROVISIONING_ALLOWED_EXTENSIONS`` and
``PROVISIONING_BLOCKED_EXTENSIONS`` (see `clients.runtime`).

Imports are made inside the handlers: building the parser must stay cheap, since every command
pays for it (``module discover`` answers in well under 300 ms, interpreter start included).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from clients.commands._args import exact_version, version_or_constraint

if TYPE_CHECKING:
    from clients.cli import Commands, Context
    from clients.registry_client import RegistryClient
    from clients.runtime import ExtensionManager, LoadResult

TYPES_HELP = "provider, taskserv, cluster or template"


def _runtime_version(args: argparse.Namespace) -> str | None:
    from clients.runtime import runtime_version_from_env

    return runtime_version_from_env(getattr(args, "runtime_version", None))


@contextlib.contextmanager
def _client(ctx: Context, *, offline: bool = False, cache_fallback: bool = False) -> Iterator[RegistryClient]:
    from clients.registry_client import RegistryClient

    with RegistryClient.from_config(ctx.config, offline=offline, cache_fallback=cache_fallback) as client:
        yield client


@contextlib.contextmanager
def _manager(
    args: argparse.Namespace, ctx: Context, *, registry: bool, progress: bool = True
) -> Iterator[ExtensionManager]:
    """The manager over this home's state; with ``registry``, a client that falls back to the cached
    index documents and the local store when the registry cannot be reached (or uses only them with
    ``--offline``)."""
    from clients.progress import Progress
    from clients.runtime import ExtensionManager, LoadPolicy

    policy = LoadPolicy.from_env()
    runtime_version = _runtime_version(args)
    offline = bool(getattr(args, "offline", False))
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(_client(ctx, offline=offline, cache_fallback=True)) if registry else None
        bars = stack.enter_context(Progress.for_output(ctx.out)) if registry and progress else None
        yield ExtensionManager(
            home=ctx.config.home,
            client=client,
            runtime_version=runtime_version,
            policy=policy,
            progress=bars.task if bars is not None else None,
        )


def _fell_back(manager: ExtensionManager) -> str | None:
    """Why the registry was not used, when the manager's client fell back to the cache and store."""
    client = manager.client
    if client is None or client.unreachable is None:
        return None
    return f"{client.unreachable.message}: used the cached index documents and the local store"


def _report(ctx: Context, result: LoadResult, verb: str) -> None:
    out = ctx.out
    for check in result.checks:
        first = check.message.splitlines()[0] if check.message else ""
        timing = f" ({check.seconds * 1000:.0f} ms)" if check.status != "skipped" else ""
        out.line(f"{check.check} {check.path}: {check.status}{timing}{': ' + first if first else ''}", err=True)
    ext = result.extension
    roots = result.reloaded or (ext,)
    keys = {r.key for r in roots}
    for dep in result.loaded:
        if dep.key not in keys:
            meta = dep.metadata
            where = _source(dep.source)
            out.line(f"loaded {meta.extension_type} {meta.name} {meta.version} (dependency, {where}): {dep.path}")
    if result.cached:
        meta = ext.metadata
        where = _source(ext.source)
        out.line(f"{meta.extension_type} {meta.name} {meta.version} is already loaded ({where}): {ext.path}")
        return
    for root in roots:
        meta = root.metadata
        out.line(f"{verb} {meta.extension_type} {meta.name} {meta.version} ({_source(root.source)}): {root.path}")


def _source(source: str) -> str:
    """Where a loaded extension came from, in words (Extension.source)."""
    return {"store": "local store"}.get(source, source)


def _cmd_discover(args: argparse.Namespace, ctx: Context) -> int:
    from clients.runtime import discover

    with _client(ctx) as client:
        items = discover(client, args.type, name=args.name, runtime_version=_runtime_version(args))
    ctx.out.success(items)
    if args.name is None:
        ctx.out.table(
            ["name", "extension", "version", "description"],
            [(i["name"], i["extension"], i["version"], _short(i["description"])) for i in items],
        )
        if not items:
            ctx.out.line(f"the registry offers no {args.type} yet")
        return 0
    for item in items:
        ctx.out.line(f"{item['type']} {item['name']} (extension {item['extension']}): {item['description']}")
        if item.get("dependencies"):
            ctx.out.line(f"dependencies of {item['version']}: {', '.join(item['dependencies'])}")
        ctx.out.table(
            ["version", "provisioning", "compatible", "yanked", "published"],
            [
                (
                    v["version"],
                    v["provisioning_version"] or "*",
                    "" if v["compatible"] is None else ("yes" if v["compatible"] else "no"),
                    "yes" if v["yanked"] else "",
                    v["published_at"] or "",
                )
                for v in item["versions"]
            ],
        )
    return 0


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cmd_load(args: argparse.Namespace, ctx: Context) -> int:
    with _manager(args, ctx, registry=True) as manager:
        result = manager.load(args.type, args.name, args.version)
        fell_back = _fell_back(manager)
    ctx.out.success({**result.to_dict(), "registry_unreachable": fell_back})
    if fell_back:
        ctx.out.warn(fell_back)
    _report(ctx, result, "loaded")
    return 0


def _cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    with _manager(args, ctx, registry=False) as manager:
        loaded = manager.list_loaded_extensions()
    ctx.out.success([e.to_dict() for e in loaded])
    if not loaded:
        ctx.out.line("nothing is loaded (load with `provisioning module load TYPE NAME`)")
        return 0
    ctx.out.table(
        ["type", "name", "version", "source", "loaded at", "path"],
        [
            (
                e.metadata.extension_type,
                e.metadata.name,
                e.metadata.version,
                e.source,
                e.to_dict()["loaded_at"],
                e.path,
            )
            for e in sorted(loaded, key=lambda e: (e.metadata.extension_type, e.metadata.name, e.metadata.version))
        ],
    )
    return 0


def _cmd_reload(args: argparse.Namespace, ctx: Context) -> int:
    with _manager(args, ctx, registry=True) as manager:
        result = manager.reload(args.type, args.name, args.version)
        fell_back = _fell_back(manager)
    ctx.out.success({"message": result.reload_message(), **result.to_dict(), "registry_unreachable": fell_back})
    if fell_back:
        ctx.out.warn(fell_back)
    _report(ctx, result, "reloaded")
    return 0


def _cmd_serve(args: argparse.Namespace, ctx: Context) -> int:
    from clients.runtime_api import make_server

    with _manager(args, ctx, registry=True, progress=False) as manager:
        server = make_server(manager, port=args.port)

        try:
            ctx.out.success({"url": server.url, "port": server.port, "home": str(ctx.config.home)})
            ctx.out.line(
                f"serving the runtime API on {server.url} "
                "(GET /api/v1/extensions/loaded, POST /api/v1/extensions/reload); Ctrl-C stops"
            )
            ctx.out.stdout.flush()
            server.serve_forever(poll_interval=0.2)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (clients.cli.Terminated)
            ctx.out.line("stopped", err=True)
        finally:
            server.server_close()
    return 0


def _offline_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--offline",
        action="store_true",
        help="use only the local store and cached index documents; never ask the registry (without it, an "
        "unreachable registry falls back to them, saying so)",
    )


def _runtime_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime-version",
        metavar="VERSION",
        default=None,
        help="the runtime's version for compatibility (env PROVISIONING_VERSION; default: any)",
    )


def register(cli: Commands) -> None:
    p = cli.leaf("module", "discover", _cmd_discover, "what the registry offers of a kind")
    p.add_argument("type", metavar="TYPE", help=TYPES_HELP)
    p.add_argument("--name", metavar="NAME", default=None, help="only this one, with its versions")
    _runtime_option(p)

    p = cli.leaf("module", "load", _cmd_load, "resolve, download, verify, unpack and load an extension")
    p.add_argument("type", metavar="TYPE", help=TYPES_HELP)
    p.add_argument("name", metavar="NAME", help="extension name")
    p.add_argument(
        "--version",
        type=version_or_constraint,
        metavar="VERSION",
        default=None,
        help="a version or constraint (default: the newest compatible with the runtime)",
    )
    _runtime_option(p)
    _offline_option(p)

    cli.leaf("module", "list", _cmd_list, "the extensions loaded in the runtime")

    p = cli.leaf(
        "module",
        "reload",
        _cmd_reload,
        "read a loaded extension again: every loaded version of it, or the one --version names",
    )
    p.add_argument("type", metavar="TYPE", help=TYPES_HELP)
    p.add_argument("name", metavar="NAME", help="extension name")
    p.add_argument(
        "--version",
        type=exact_version,
        metavar="VERSION",
        default=None,
        help="reload only this loaded version (default: every loaded version of NAME)",
    )
    _runtime_option(p)
    _offline_option(p)

    p = cli.leaf("runtime", "serve", _cmd_serve, "serve GET /api/v1/extensions/loaded and POST .../reload on 127.0.0.1")
    p.add_argument("--port", type=int, default=8082, metavar="PORT", help="port on 127.0.0.1 (default 8082; 0: any)")
    _runtime_option(p)
