"""`provisioning extension publish | yank | search | info`: talking to the registry about packages."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients import oidc
from clients.commands._args import exact_version, extension_type, non_negative, page_size, seconds
from clients.errors import ClientError, UsageError
from clients.progress import Progress
from clients.registry_client import RegistryClient

if TYPE_CHECKING:
    from clients.cli import Commands, Context
    from clients.output import Output


def _log_line(entry: dict[str, Any]) -> str:
    seconds = entry.get("seconds")
    timing = f"{seconds:7.2f} s" if isinstance(seconds, int | float) else " " * 9
    message = str(entry.get("message") or "").strip().splitlines()
    return f"  {entry.get('step', '')!s:<14} {entry.get('status', '')!s:<8} {timing}  {message[0] if message else ''}"


def _build_failed(build: dict[str, Any]) -> ClientError:
    error = build.get("error") or {}
    details = list(error.get("details") or [])
    details.append({"build": build.get("id"), "url": build.get("url")})
    return ClientError(
        str(error.get("message") or f"build {build.get('id')} failed"),
        code=str(error.get("code") or "build_failed"),
        details=details,
    )


def _print_failed_build(out: Output, build: dict[str, Any]) -> None:
    """For people, after the build log was printed: the failing step's further message lines
    (the log shows each step's first line) and where the log is."""
    log = [e for e in build.get("log") or [] if isinstance(e, dict)]
    failing = next((e for e in reversed(log) if e.get("status") == "failed"), None)
    if failing is not None:
        for line in str(failing.get("message") or "").strip().splitlines()[1:]:
            out.line(f"  {'':<14} {'':<8} {'':9}  {line}")
    out.line(f"the build log: {build.get('url')}")


def _cmd_publish(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    package = Path(args.file)
    wait = out.interactive if args.wait is None else args.wait
    oidc_token = oidc.read_oidc_token(args.oidc_token)
    with RegistryClient.from_config(ctx.config) as client:
        if oidc_token is not None:
            # Trusted publishing: the CI job's OIDC token buys a publish token for this one upload.
            granted = oidc.exchange(client, oidc_token, name=oidc.package_name(package))
            client.token = str(granted["token"])
            out.line(
                f"trusted publishing: publishing {granted.get('name')} as {granted.get('user')} "
                f"(a token scoped {', '.join(granted.get('scopes') or [])}, until {granted.get('expires_at')})"
            )
        # The registry answers 202 with the build (SPEC 3.2), already final in embedded mode; a
        # refusal before any build (no token, too large...) is a RegistryError.
        with Progress.for_output(out) as bars:
            build = client.publish(package, progress=bars.task(f"uploading {package.name}"))
        out.line(f"build {build['id']}: {build['status']} ({build['url']})")
        if wait:
            build = client.wait_for_build(
                str(build["id"]),
                first=build,
                on_log=lambda entry: out.line(_log_line(entry)),
                timeout=args.timeout,
            )
        else:  # (not a terminal, or --no-wait) the steps so far, all of them
            for entry in build.get("log") or []:
                if isinstance(entry, dict):
                    out.line(_log_line(entry))
    if build.get("status") == "failed":
        _print_failed_build(out, build)
        raise _build_failed(build)
    out.success(build)
    result = build.get("result") or {}
    if build.get("status") == "succeeded":
        out.line(f"published {result.get('name') or build.get('name')} {result.get('version') or build.get('version')}")
    else:
        out.line(
            f"the build is {build.get('status')}; follow it with `provisioning extension publish --wait` next time"
        )
    return 0


def _cmd_yank(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    reason = (args.reason or "").strip()
    if args.undo and args.reason is not None:
        raise UsageError("--undo takes no --reason: undoing a yank clears the reason (leave --reason out)")
    if not args.undo and not reason:
        raise UsageError("yanking needs --reason R (say why, e.g. --reason 'breaks etcd 3.5 upgrades')")
    with RegistryClient.from_config(ctx.config) as client:
        before = client.version(args.name, args.version)
        if args.undo:
            data = client.unyank(args.name, args.version)
        else:
            data = client.yank(args.name, args.version, reason=reason)
    changed = bool(before.get("yanked")) != bool(data.get("yanked"))
    out.success({**data, "changed": changed})
    what = f"{data['name']} {data['version']}"
    if args.undo:
        out.line(f"{what} is no longer yanked" if changed else f"{what} is not yanked: nothing to undo")
    elif changed:
        out.line(f"yanked {what}: {data.get('yanked_reason')}")
    else:
        since = f" on {str(data.get('yanked_at'))[:10]}" if data.get("yanked_at") else ""
        out.line(f"{what} was already yanked{since}: {data.get('yanked_reason')}")
        if reason != data.get("yanked_reason"):
            out.warn(
                f"the reason was not changed to {reason!r}: undo the yank (--undo), then yank again with the new reason"
            )
    return 0


def _cmd_owners(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    if args.action == "list" and args.user is not None:
        raise UsageError("owners list takes no USER: provisioning extension owners list NAME")
    if args.action != "list" and args.user is None:
        raise UsageError(f"owners {args.action} needs a USER: provisioning extension owners {args.action} NAME USER")
    with RegistryClient.from_config(ctx.config) as client:
        if args.action == "add":
            data = client.add_owner(args.name, args.user)
        elif args.action == "remove":
            data = client.remove_owner(args.name, args.user)
        else:
            data = client.owners(args.name)
    out.success(data)
    owners = [o for o in data.get("owners") or [] if isinstance(o, dict)]
    everyone = ", ".join(str(o.get("username")) for o in owners)
    if args.action == "add":
        out.line(f"{args.user} is an owner of {data.get('name')}; its owners: {everyone}")
    elif args.action == "remove":
        out.line(f"{args.user} is no longer an owner of {data.get('name')}; its owners: {everyone}")
    else:
        out.table(
            ["owner", "added", "added by"],
            [(o.get("username"), str(o.get("added_at") or "")[:10], o.get("added_by") or "") for o in owners],
        )
    return 0


def _trim(text: Any, width: int = 70) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= width else value[: width - 1] + "…"


def _cmd_search(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    with RegistryClient.from_config(ctx.config) as client:
        page = client.search(args.query, type=args.type, keyword=args.keyword, limit=args.limit, offset=args.offset)
    out.success(page)
    items = page.get("items") or []
    if not items:
        out.line("no extensions found" + (f" for {args.query!r}" if args.query else ""))
        return 0
    out.table(
        ["name", "type", "version", "downloads", "description"],
        [
            (i["name"], i["type"], i.get("version") or "(yanked)", i.get("downloads", ""), _trim(i.get("description")))
            for i in items
        ],
    )
    shown_to = page.get("offset", 0) + len(items)
    if page.get("total", 0) > shown_to:
        out.line(f"{page.get('offset', 0) + 1}-{shown_to} of {page['total']} (more with --offset {shown_to})")
    return 0


def _print_extension(out: Output, data: dict[str, Any]) -> None:
    out.line(f"{data['name']} {data.get('latest_version') or '(every version yanked)'} ({data.get('type')})")
    out.line(_trim(data.get("description"), 500))
    provides = ", ".join(f"{kind} {', '.join(names)}" for kind, names in (data.get("provides") or {}).items() if names)
    for label, value in (
        ("author", data.get("author")),
        ("license", data.get("license")),
        ("homepage", data.get("homepage")),
        ("repository", data.get("repository")),
        ("owners", ", ".join(data.get("owners") or [])),
        ("provides", provides),
        ("keywords", ", ".join(data.get("tags") or [])),
        ("downloads", data.get("downloads")),
    ):
        if value not in (None, ""):
            out.line(f"  {label + ':':<12}{value}")
    out.table(
        ["version", "published", "yanked", "size", "sha256"],
        [
            (
                v["version"],
                (v.get("published_at") or "")[:10],
                f"yes: {v.get('yanked_reason')}" if v.get("yanked") else "",
                v.get("size"),
                str(v.get("sha256", ""))[:16],
            )
            for v in data.get("versions") or []
        ],
    )


def _print_version(out: Output, data: dict[str, Any]) -> None:
    out.line(f"{data['name']} {data['version']} ({data.get('type')})" + ("  [yanked]" if data.get("yanked") else ""))
    out.line(_trim(data.get("description"), 500))
    # Constraints as their authors wrote them (`constraint`; `normal` is the normal form), joined
    # with "; " since a constraint may hold a comma itself.
    dependencies = "; ".join(f"{d['name']} {d['constraint']}".strip() for d in data.get("dependencies") or [])
    manifest = data.get("manifest") or {}
    runtime = (manifest.get("compatibility") or {}).get("provisioning_version") or data.get("provisioning_version")
    for label, value in (
        ("sha256", data.get("sha256")),
        ("size", data.get("size")),
        ("published", f"{data.get('published_at')} by {data.get('published_by')}"),
        ("yanked", data.get("yanked_reason") if data.get("yanked") else None),
        ("runtime", runtime),
        ("depends on", dependencies),
        ("packages", ", ".join(manifest.get("system_packages") or [])),
        ("needs env", ", ".join(manifest.get("required_env") or [])),
        ("build", data.get("build")),
        ("download", data.get("download_url")),
    ):
        if value not in (None, ""):
            out.line(f"  {label + ':':<12}{value}")


def _cmd_info(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.out
    with RegistryClient.from_config(ctx.config) as client:
        data = client.version(args.name, args.version) if args.version else client.extension(args.name)
    out.success(data)
    if args.version:
        _print_version(out, data)
    else:
        _print_extension(out, data)
    return 0


def register(cli: Commands) -> None:
    p = cli.leaf(
        "extension",
        "publish",
        _cmd_publish,
        "upload a built package (streamed, with a progress bar on a terminal), then follow the build log "
        "until the build ends (--wait, the default on a terminal)",
    )
    p.add_argument("file", metavar="FILE", help="the package, dist/NAME-VERSION.tar.gz from `extension build`")
    p.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="follow the build until it succeeds or fails (default: on a terminal only)",
    )
    p.add_argument("--timeout", type=seconds, default=900.0, metavar="SECONDS", help="how long --wait waits (900)")
    p.add_argument(
        "--oidc-token",
        metavar="FILE",
        help="trusted publishing: exchange the CI job's OIDC ID token in FILE ('-': stdin) for a short-lived "
        f"publish token, instead of using --token (env {oidc.OIDC_TOKEN_ENV} holds the token itself)",
    )

    p = cli.leaf("extension", "yank", _cmd_yank, "yank a version (resolution stops choosing it), or --undo that")
    p.add_argument("name", metavar="NAME")
    p.add_argument("version", metavar="VERSION")
    p.add_argument("--reason", metavar="R", help="why (required to yank; shown to everyone)")
    p.add_argument("--undo", action="store_true", help="undo the yank")

    p = cli.leaf(
        "extension",
        "owners",
        _cmd_owners,
        "list an extension's owners, or (as an owner, with a token scoped owners:NAME) add or remove one",
    )
    p.add_argument("action", choices=("list", "add", "remove"), metavar="list|add|remove")
    p.add_argument("name", metavar="NAME")
    p.add_argument("user", nargs="?", metavar="USER", help="the username to add or remove")

    p = cli.leaf("extension", "search", _cmd_search, "search the registry's catalog")
    p.add_argument("query", nargs="?", default="", metavar="Q", help="words matched in names, descriptions, keywords")
    p.add_argument(
        "--type", type=extension_type, metavar="TYPE", help="only this type: provider, taskserv, cluster or template"
    )
    p.add_argument("--keyword", metavar="K", help="only extensions with this keyword")
    p.add_argument("--limit", type=page_size, default=20, metavar="N", help="page size, 1 to 100 (20)")
    p.add_argument("--offset", type=non_negative, default=0, metavar="N", help="results to skip (0)")

    p = cli.leaf("extension", "info", _cmd_info, "one extension: metadata, owners, versions (or one version)")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--version", type=exact_version, metavar="V", help="show this version: manifest, dependencies, sha256, build"
    )
