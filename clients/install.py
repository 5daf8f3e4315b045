"""Installing extensions into an infrastructure directory (SPEC 4: ``taskserv create``,
``cluster create``, ``providers create``, ``extension sync``).

    DIR/extensions.lock                          exactly what is installed (clients.lockfile)
    DIR/extensions/{type}s/{name}/               a copy of the store's unpacked tree

`install` resolves on the client, from index documents, with the shared resolver (the same answer
the registry's resolve API gives), keeping what ``extensions.lock`` already pins where it can;
`sync` installs exactly what the lockfile pins. Both work in two phases:

1. **Stage**: every package is taken from the store or downloaded into it and verified against the
   sha256 from the index or lockfile, then unpacked with the safe extractor (`Store.tree`). Nothing
   in DIR is touched; any failure (unreachable registry, cut download, wrong checksum, hostile
   archive, inconsistent lockfile) stops here and DIR is exactly as it was, and the error says so.
2. **Place**: each tree that is not already in place is copied into a staging directory inside
   ``DIR/extensions/`` (same file system), then renamed into place; an older version is renamed
   aside first and deleted after. The lockfile is written last, atomically. If a rename fails the
   ones done are rolled back. (Between renaming an older version aside and the new one in, a
   reader may briefly find no directory, never a mixture of two versions.)

One process at a time installs into a given DIR (a file lock under ``HOME/locks`` keyed by DIR's
path), so two ``sync`` runs at once give one consistent result; packages and trees have their own
locks in the store. Re-running with nothing to change writes nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.errors import ClientError, UsageError, VerificationError, os_error_message
from clients.lockfile import LOCKFILE_NAME, LockedExtension, Lockfile
from clients.progress import ProgressCallback, ProgressFactory
from clients.registry_client import RegistryClient, RegistryErrorAnswer, RegistryUnavailable
from clients.store import Store, kind_dir, verify_tree
from extensions.archive import MANIFEST_JSON
from extensions.errors import ExtensionError, ResolutionError, ResolutionTooComplex
from extensions.graph import DependencyCycleError, dependency_order
from extensions.index import parse_index
from extensions.manifest import Manifest, load_manifest
from extensions.providing import latest_version, offers, provides, providing_since
from extensions.resolver import Candidate, Resolution, describe_requirement, resolve
from extensions.versions import Constraint, SemVer, parse_requirement

__all__ = [
    "InstallReport",
    "InstalledExtension",
    "PlacedExtension",
    "ProviderCheck",
    "find_extension",
    "install",
    "installed",
    "sync",
    "validate_providers",
    "yanked_pins",
]

EXTENSIONS_DIR = "extensions"


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacedExtension:
    """One extension of an install: where it is and what was done: ``installed``, ``upgraded`` or
    ``downgraded`` from ``previous``, ``restored`` (the same version put back because its files had
    changed), ``replaced`` (what was there had no readable version) or ``unchanged``."""

    name: str
    version: str
    type: str
    sha256: str
    path: Path
    action: str
    previous: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "type": self.type,
            "sha256": self.sha256,
            "path": str(self.path),
            "action": self.action,
            "previous": self.previous,
        }


@dataclass
class InstallReport:
    infra: Path
    lockfile: Path
    extensions: list[PlacedExtension]
    requested: dict[str, str] | None = None  # {"type", "name", "extension", "version"} for create
    system_packages: list[str] = field(default_factory=list)
    required_env: list[str] = field(default_factory=list)
    missing_env: list[str] = field(default_factory=list)
    locked_ignored: list[dict[str, str]] = field(default_factory=list)
    lockfile_written: bool = False
    yanked: list[dict[str, str | None]] = field(default_factory=list)  # {"name", "version", "reason"}

    @property
    def changed(self) -> bool:
        return self.lockfile_written or any(p.action != "unchanged" for p in self.extensions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "infra": str(self.infra),
            "lockfile": str(self.lockfile),
            "requested": self.requested,
            "extensions": [p.to_dict() for p in self.extensions],
            "changed": self.changed,
            "system_packages": self.system_packages,
            "required_env": self.required_env,
            "missing_env": self.missing_env,
            "locked_ignored": self.locked_ignored,
            "yanked": self.yanked,
        }


# --------------------------------------------------------------------------------------------------
# Finding what to install
# --------------------------------------------------------------------------------------------------


def find_extension(client: RegistryClient, type: str, name: str) -> str:
    """The extension to install for ``type NAME``, in the registry's order (its lookup
    ``GET /api/v1/extensions/{type}/{name}``, which its install plan follows too): an extension whose
    latest version provides NAME as that kind (of several, the one named NAME), else the extension
    of that type named NAME. So an extension merely *named* like a taskserv never shadows the one
    that provides it. Offline, the same rule over the cached index documents. An extension of
    another type named NAME is returned for `install` to point at its own command."""
    if client.offline:
        found = _provider_in_cache(client, type, name)
        if found is not None:
            return found
        if client.cached_index(name) is not None:
            return name
        raise RegistryUnavailable(
            f"offline: no cached index document names or provides {type} {name!r}; "
            "run once without --offline to fetch it"
        )
    try:
        found_item = client.lookup(type, name)
    except RegistryErrorAnswer as exc:
        if exc.status != 404:
            raise
        if client.index(name) is not None:
            return name  # an extension of another type: install() names the command for it
        offered = sorted({str(item["name"]) for item in client.provided(type)})
        close = difflib.get_close_matches(name, offered, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}?" if close else f"it offers: {', '.join(offered) or 'none'}"
        raise ClientError(
            f"no {type} named {name!r} in the registry at {client.base_url} ({hint})",
            code="not_found",
            details=[{"name": name, "type": type, "suggestions": close}],
        ) from None
    found = str(found_item["name"])
    if found != name:
        _check_provider(client, type, name, found)
    return found


def _check_provider(client: RegistryClient, type: str, name: str, found: str) -> None:
    """The lookup is the registry's word only; the index document (signed) is not. By the
    registry's own rule the extension it named must provide ``type NAME`` in its latest version."""
    document = client.index(found)
    latest = _latest_in(document, found) if document is not None else None
    if latest is None or not provides(latest, type, name):
        raise VerificationError(
            "lookup",
            f"the registry answered {found} for {type} {name!r}, but the latest version of {found} does not "
            f"provide it as a {type}: nothing was installed (an answer altered on the way, or a registry in error)",
        )


def _latest_in(document: bytes, name: str) -> Candidate | None:
    """The latest version (`latest_version`) of NAME's index document, or None (none, or it does not parse)."""
    with contextlib.suppress(ExtensionError):
        return latest_version(parse_index(document, name=name)[1])
    return None


def _provider_in_cache(client: RegistryClient, type: str, name: str) -> str | None:
    """The registry's lookup over the cached index documents: the extensions whose latest version
    provides ``type NAME`` (the one named NAME first, then by name; download counts are not in the
    documents), else the cached extension of that type named NAME."""
    providers: list[str] = []
    named_type: str | None = None
    for candidate in client.cached_names():
        document = client.cached_index(candidate)
        if document is None:
            continue
        latest = _latest_in(document, candidate)
        if latest is None:
            continue
        if provides(latest, type, name):
            providers.append(candidate)
        if candidate == name:
            named_type = latest.type
    if providers:
        return min(providers, key=lambda p: (p != name, p))
    return name if named_type == type else None


def _requirement(extension: str, version: str | None) -> str:
    return f"{extension} {version}" if version else extension


def _entries(resolution: Resolution, client: RegistryClient) -> list[LockedExtension]:
    entries = []
    for name in resolution.install_order:
        candidate = resolution.resolved[name]
        version = str(candidate.version)
        entries.append(
            LockedExtension(
                name=name,
                version=version,
                type=candidate.type,
                sha256=candidate.sha256,
                source=client.download_url(name, version),
                dependencies=tuple(describe_requirement(r) for r in candidate.dependencies),
            )
        )
    return entries


def _order(entries: Sequence[LockedExtension]) -> list[LockedExtension]:
    """Dependencies first, ties by name (a lockfile lists entries by name); by name alone if they
    form a cycle (the resolver refuses them; a hand-made lock might not)."""
    by_name = {e.name: e for e in entries}
    try:
        names = dependency_order({e.name: [parse_requirement(d).name for d in e.dependencies] for e in entries})
    except DependencyCycleError:
        names = sorted(by_name)
    return [by_name[name] for name in names]


# --------------------------------------------------------------------------------------------------
# Staging (nothing in DIR is touched)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Staged:
    entry: LockedExtension
    tree: Path
    manifest_sha256: str


def _infra_lock(store: Store, infra: Path) -> Any:
    key = hashlib.sha256(str(infra.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return store.lock(f"infra-{key}")


def _not_a_directory(infra: Path) -> ClientError | None:
    """DIR (or one of its parents) exists and is not a directory."""
    for candidate in [*reversed(infra.parents), infra]:
        if os.path.lexists(candidate) and not candidate.is_dir():
            what = "it" if candidate == infra else str(candidate)
            return ClientError(
                f"the infrastructure directory {infra} cannot be used: {what} is not a directory",
                code="bad_request",
            )
    return None


@contextlib.contextmanager
def _infra_dir(infra: Path, *, create: bool) -> Iterator[None]:
    """DIR, checked before anything is fetched: refused when it or a parent is not a directory;
    with ``create``, made now when missing (so an unwritable place fails before any download) and
    removed again, with the parents made for it, when the install then fails."""
    problem = _not_a_directory(infra)
    if problem is not None:
        problem.message += f"; nothing was installed into {infra}"
        raise problem
    made: list[Path] = []
    if create:
        missing = [p for p in [infra, *infra.parents] if not os.path.lexists(p)]
        try:
            for directory in reversed(missing):
                directory.mkdir()
                made.append(directory)
        except OSError as exc:
            _remove_empty(made)
            raise ClientError(
                f"cannot create the infrastructure directory {infra}: {os_error_message(exc, about=infra)}; "
                f"nothing was installed into {infra}",
                code="bad_request",
            ) from None
        if not os.access(infra, os.W_OK | os.X_OK):
            raise ClientError(
                f"cannot install into {infra}: it is not writable; nothing was installed into {infra}",
                code="bad_request",
            )
    try:
        yield
    except BaseException:
        _remove_empty(made)
        raise


def _remove_empty(directories: Sequence[Path]) -> None:
    for directory in reversed(directories):
        with contextlib.suppress(OSError):
            directory.rmdir()


@contextlib.contextmanager
def _nothing_installed(infra: Path) -> Iterator[None]:
    """Say so in the error when a failure left DIR untouched."""
    suffix = f"; nothing was installed into {infra}"
    try:
        yield
    except ClientError as exc:
        if suffix not in exc.message:
            exc.message += suffix
            exc.args = (exc.message,)
        raise
    except ExtensionError as exc:
        error = ClientError.from_extension_error(exc)
        error.message += suffix
        raise error from None


def _stage(
    store: Store,
    client: RegistryClient | None,
    entries: Sequence[LockedExtension],
    progress: ProgressFactory | None,
) -> list[_Staged]:
    staged = []
    for entry in entries:
        label = f"{entry.name} {entry.version}"
        callback: ProgressCallback | None = progress(label) if progress is not None else None
        try:
            store.fetch(client, entry.name, entry.version, entry.sha256, progress=callback)
            tree = store.tree(entry.type, entry.name, entry.version, entry.sha256)
        except ExtensionError as exc:
            raise ClientError(f"the package of {label} cannot be installed: {exc}", code=exc.code) from None
        mark = store.tree_mark(entry.type, entry.name, entry.version)
        assert mark is not None  # Store.tree wrote it
        staged.append(_Staged(entry=entry, tree=tree, manifest_sha256=mark.manifest_sha256))
    return staged


# --------------------------------------------------------------------------------------------------
# Placing (DIR changes; all or nothing)
# --------------------------------------------------------------------------------------------------


def _placed_version(path: Path) -> str | None:
    try:
        return str(json.loads((path / MANIFEST_JSON).read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _place(
    infra: Path,
    staged: Sequence[_Staged],
    lock: Lockfile | None,
    previous: Lockfile | None,
) -> tuple[list[PlacedExtension], bool]:
    """Copy and rename the trees into ``DIR/extensions/`` and write ``lock`` (None: leave the
    lockfile alone). Returns what was done and whether the lockfile was written. A file system
    error (renames done so far are rolled back) is a `ClientError` naming the path."""
    try:
        return _place_trees(infra, staged, lock, previous)
    except OSError as exc:
        raise ClientError(
            f"cannot install into {infra}: {os_error_message(exc, about=infra)}; nothing was installed into {infra}",
            code="bad_request",
        ) from None


def _place_trees(
    infra: Path,
    staged: Sequence[_Staged],
    lock: Lockfile | None,
    previous: Lockfile | None,
) -> tuple[list[PlacedExtension], bool]:
    root = infra / EXTENSIONS_DIR
    lock_path = infra / LOCKFILE_NAME
    plan: list[tuple[_Staged, Path, str, str | None]] = []
    for item in staged:
        entry = item.entry
        dest = root / kind_dir(entry.type) / entry.name
        if dest.is_dir() and not dest.is_symlink() and not verify_tree(dest, manifest_sha256=item.manifest_sha256):
            plan.append((item, dest, "unchanged", None))
            continue
        before = previous.get(entry.name) if previous is not None else None
        if os.path.lexists(dest):
            # What is there now: the placed tree's MANIFEST.json says, else the old lockfile.
            was = _placed_version(dest) or (before.version if before is not None else None)
            plan.append((item, dest, _change(was, entry.version), was))
        else:
            plan.append((item, dest, "installed", None))
    new_text = lock.dumps() if lock is not None else None
    try:
        old_text: str | None = lock_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        old_text = None
    write_lock = new_text is not None and new_text != old_text
    changes = [p for p in plan if p[2] != "unchanged"]
    if changes:
        root.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(root)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        try:
            copies = []
            for position, (item, _dest, _, _) in enumerate(changes):
                copy = staging / f"new-{position}"
                shutil.copytree(item.tree, copy, symlinks=True)
                problems = verify_tree(copy, manifest_sha256=item.manifest_sha256)
                if problems:
                    raise ClientError(f"copying {item.tree} did not give an identical tree: {problems[0]}")
                copies.append(copy)
            done: list[tuple[Path, Path | None]] = []
            try:
                for position, ((_, dest, _, _), copy) in enumerate(zip(changes, copies, strict=True)):
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    aside: Path | None = None
                    if os.path.lexists(dest):
                        aside = staging / f"old-{position}"
                        os.rename(dest, aside)
                    try:
                        os.rename(copy, dest)
                    except BaseException:
                        if aside is not None:
                            os.rename(aside, dest)
                        raise
                    done.append((dest, aside))
                if write_lock and lock is not None:
                    lock.dump(lock_path)
            except BaseException:
                for position, (dest, aside) in enumerate(reversed(done)):
                    with contextlib.suppress(OSError):
                        os.rename(dest, staging / f"undo-{position}")
                        if aside is not None:
                            os.rename(aside, dest)
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    elif write_lock and lock is not None:
        lock.dump(lock_path)
    placed = [
        PlacedExtension(
            name=item.entry.name,
            version=item.entry.version,
            type=item.entry.type,
            sha256=item.entry.sha256,
            path=dest,
            action=action,
            previous=was,
        )
        for item, dest, action, was in plan
    ]
    return placed, write_lock


def _change(was: str | None, now: str) -> str:
    """How a tree replaces the one in place: ``upgraded``, ``downgraded``, ``restored`` (the same
    version, put back because its files had changed) or ``replaced`` (the old version is unknown)."""
    try:
        old, new = SemVer.parse(was or ""), SemVer.parse(now)
    except ExtensionError:
        return "replaced"
    return "upgraded" if new > old else "downgraded" if new < old else "restored"


def _remove_leftovers(root: Path) -> None:
    """Staging directories of an install that was killed (only ever created under the DIR lock)."""
    for leftover in root.glob(".staging-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _needs(report: InstallReport, placed: Sequence[PlacedExtension], env: Mapping[str, str]) -> InstallReport:
    packages: set[str] = set()
    required: set[str] = set()
    for item in placed:
        manifest = _manifest_or_none(item.path)
        if manifest is None:
            continue
        packages.update(manifest.system_packages)
        required.update(manifest.required_env)
    report.system_packages = sorted(packages)
    report.required_env = sorted(required)
    report.missing_env = sorted(v for v in required if not env.get(v))
    return report


def _manifest_or_none(path: Path) -> Manifest | None:
    try:
        return load_manifest(path)
    except ExtensionError:
        return None


# --------------------------------------------------------------------------------------------------
# The operations
# --------------------------------------------------------------------------------------------------


def install(
    client: RegistryClient,
    store: Store,
    *,
    type: str,
    name: str,
    infra: Path,
    version: str | None = None,
    runtime_version: str | None = None,
    progress: ProgressFactory | None = None,
    env: Mapping[str, str] | None = None,
) -> InstallReport:
    """Resolve ``type NAME`` (and its dependencies) from index documents, keeping the versions
    ``DIR/extensions.lock`` already pins where they still fit, install the result into DIR and
    write the lockfile. ``version`` is a constraint (``1.28.6``, ``^1.28``). ``ResolutionError``
    explains a conflict; any failure before placing leaves DIR untouched."""
    infra = Path(infra)
    lock_path = infra / LOCKFILE_NAME
    if version is not None:
        try:
            Constraint.parse(version)
        except ExtensionError as exc:
            raise UsageError(
                f"version {version!r} is neither a version nor a constraint: {exc.message}",
                details=[{"path": "version"}],
            ) from None
    with _infra_lock(store, infra), _infra_dir(infra, create=True):
        previous = Lockfile.load(lock_path) if lock_path.exists() else None
        with _nothing_installed(infra):
            extension = find_extension(client, type, name)
            request = _requirement(extension, version)
            earlier = [r for r in (previous.requested if previous else []) if parse_requirement(r).name != extension]
            requested = [request, *earlier]
            asked = {parse_requirement(r).name for r in requested}
            # Every explicit request is resolved again, as it was asked for; what else is locked stays
            # (at its locked version where that still fits), so nothing installed is dropped.
            roots = requested + [e.name for e in (previous.extensions if previous else []) if e.name not in asked]
            try:
                resolution = resolve(
                    roots,
                    client.catalogue(),
                    runtime_version=runtime_version,
                    locked=previous.pins() if previous is not None else None,
                )
            except ResolutionError as exc:
                if earlier:
                    exc.message += (
                        f" ({lock_path} keeps the earlier requests {', '.join(earlier)}: to change one, "
                        f"create it again with another --version)"
                    )
                raise
            chosen = resolution.resolved[extension]
            if not offers(chosen, type, name):
                pins = previous.pins() if previous is not None else None
                raise _not_provided(
                    client,
                    type,
                    name,
                    chosen,
                    version=version,
                    previous=previous,
                    lock_path=lock_path,
                    fits=lambda asked: _resolves(
                        [asked, *roots[1:]],
                        client,
                        runtime_version=runtime_version,
                        locked=pins,
                        offering=(extension, type, name),
                    ),
                )
            entries = _entries(resolution, client)
            staged = _stage(store, client, entries, progress)
        lock = Lockfile(registry=client.base_url, extensions=entries, requested=requested)
        placed, written = _place(infra, staged, lock, previous)
    report = InstallReport(
        infra=infra,
        lockfile=lock_path,
        extensions=placed,
        requested={"type": type, "name": name, "extension": extension, "version": str(chosen.version)},
        locked_ignored=[dict(item) for item in resolution.locked_ignored],
        lockfile_written=written,
        yanked=_yanked(client, resolution),
    )
    return _needs(report, placed, os.environ if env is None else env)


def _resolves(
    roots: Sequence[str],
    client: RegistryClient,
    *,
    runtime_version: str | None,
    locked: Mapping[str, str] | None,
    offering: tuple[str, str, str],
) -> bool | None:
    """Whether ``roots`` resolve with a version of extension E that offers ``type NAME``
    (``offering``: E, type, NAME); None when that cannot be told (too complex, or an index document
    that cannot be had: offline and not cached, the registry unreachable)."""
    extension, type, name = offering
    try:
        resolution = resolve(list(roots), client.catalogue(), runtime_version=runtime_version, locked=locked)
    except ResolutionTooComplex:
        return None
    except ResolutionError:
        return False
    except ClientError:
        return None
    return offers(resolution.resolved[extension], type, name)


def _not_provided(
    client: RegistryClient,
    type: str,
    name: str,
    chosen: Candidate,
    *,
    version: str | None,
    previous: Lockfile | None,
    lock_path: Path,
    fits: Callable[[str], bool | None],
) -> ClientError:
    """``chosen`` does not offer ``type NAME`` (`offers`), though the lookup found its extension
    for it: why it was chosen (the lockfile, ``--version``, or what fits the runtime and the other
    extensions), and which versions offer NAME; ``--version '>=FIRST'`` is suggested only when the
    install resolves with it (``fits``). An extension named NAME none of whose versions offers it is
    of another type: the error names the command for that type."""
    document = client.index(chosen.name)
    candidates = parse_index(document, name=chosen.name)[1] if document is not None else []
    since = providing_since(candidates, type, name)
    if since is None and chosen.name == name:
        return ClientError(
            f"{name} is a {chosen.type}, not a {type}: use `provisioning {cli_group(chosen.type)} create {name}`",
            code="bad_request",
        )
    what = f"{type} {name!r}"
    other = f", a {chosen.type}," if chosen.type != type else ""
    here = "the runtime's version and the other extensions' constraints"
    locked = previous is not None and previous.pins().get(chosen.name) == str(chosen.version)
    if locked:
        why = f"{lock_path} keeps {chosen.name} at {chosen.version}{other or ','} which does not provide {what}"
    elif version is not None:
        why = f"{chosen.name} {chosen.version} (--version {version}){other} does not provide {what}"
    else:
        why = f"{chosen.version}, the newest version of {chosen.name} that fits here ({here}), does not provide {what}"
        here = ""
    # With no --version and no lockfile, the one root's newest version that fits was chosen.
    asked = since is not None and (previous is not None or version is not None)
    fitting = fits(f"{chosen.name} >={since}") if asked else False
    if since is None:
        fix = f"no version of {chosen.name} that can be installed does"
    elif fitting:
        fix = f"its versions from {since} do: create it with --version '>={since}'"
    elif fitting is None:
        fix = f"its versions from {since} do: see `provisioning extension info {chosen.name}`"
    else:
        fix = (
            f"its versions from {since} do, but none of them fits here{f' ({here})' if here else ''}: "
            f"see `provisioning extension info {chosen.name}`"
        )
    return ClientError(
        f"{why}; {fix}",
        code="resolution_failed",
        details=[
            {
                "reason": "not_provided",
                "extension": chosen.name,
                "version": str(chosen.version),
                "provided_since": str(since) if since is not None else None,
            }
        ],
    )


def _yanked(client: RegistryClient, resolution: Resolution) -> list[dict[str, str | None]]:
    """The yanked versions an install chose (only ever because they were pinned exactly or locked),
    with the yank's reason when the registry can be asked."""
    found: list[dict[str, str | None]] = []
    for name in resolution.install_order:
        candidate = resolution.resolved[name]
        if not candidate.yanked:
            continue
        reason: str | None = None
        with contextlib.suppress(ClientError):
            reason = str(client.version(name, str(candidate.version)).get("yanked_reason") or "") or None
        found.append({"name": name, "version": str(candidate.version), "reason": reason})
    return found


def yanked_pins(client: RegistryClient, entries: Iterable[LockedExtension]) -> dict[str, bool | None]:
    """Whether each locked version is yanked, from the registry's index documents (None when the
    registry does not list that version). `RegistryUnavailable` when it cannot be reached."""
    found: dict[str, bool | None] = {}
    for entry in entries:
        document = client.index(entry.name)
        state: bool | None = None
        if document is not None:
            with contextlib.suppress(ExtensionError):
                _, versions = parse_index(document, name=entry.name)
                state = next((v.yanked for v in versions if str(v.version) == entry.version), None)
        found[entry.name] = state
    return found


#: The CLI's command group for each type it creates: ``provisioning taskserv|cluster|providers create``.
CLI_GROUPS = {"taskserv": "taskserv", "cluster": "cluster", "provider": "providers"}


def cli_group(type: str) -> str:
    """The command group that creates a type (``provider`` -> ``providers``)."""
    return CLI_GROUPS.get(type, type)


def sync(
    store: Store,
    *,
    infra: Path,
    client: RegistryClient | None = None,
    progress: ProgressFactory | None = None,
    env: Mapping[str, str] | None = None,
) -> InstallReport:
    """Install exactly what ``DIR/extensions.lock`` pins, verifying every sha256: packages come from
    the store, else from ``client`` (None or offline: the store only). Any mismatch, missing package
    or inconsistency fails before DIR is touched. The lockfile itself is never rewritten."""
    infra = Path(infra)
    lock_path = infra / LOCKFILE_NAME
    with _infra_lock(store, infra), _infra_dir(infra, create=False):
        lock = Lockfile.load(lock_path)
        with _nothing_installed(infra):
            problems = lock.problems()
            if problems:
                raise ClientError(
                    f"{lock_path} is inconsistent: {problems[0]}",
                    code="invalid_lockfile",
                    details=[{"message": p} for p in problems],
                )
            staged = _stage(store, client, _order(lock.extensions), progress)
        placed, _ = _place(infra, staged, None, lock)
    report = InstallReport(infra=infra, lockfile=lock_path, extensions=placed)
    return _needs(report, placed, os.environ if env is None else env)


# --------------------------------------------------------------------------------------------------
# Looking at what is installed
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InstalledExtension:
    """A lockfile entry and the state of its directory: ``ok``, ``missing`` or ``modified``."""

    entry: LockedExtension
    path: Path
    status: str
    problems: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self.entry.to_dict(), "path": str(self.path), "status": self.status, "problems": list(self.problems)}


def installed(infra: Path, *, store: Store | None = None, type: str | None = None) -> list[InstalledExtension]:
    """What ``DIR/extensions.lock`` pins (of ``type``, or all), each checked against its directory:
    every file as its MANIFEST.json lists it (and MANIFEST.json as the store unpacked it, when the
    store has the package's tree)."""
    infra = Path(infra)
    problem = _not_a_directory(infra)
    if problem is not None:
        raise problem
    lock = Lockfile.load(infra / LOCKFILE_NAME)
    found = []
    for entry in _order(lock.extensions):
        if type is not None and entry.type != type:
            continue
        path = infra / EXTENSIONS_DIR / kind_dir(entry.type) / entry.name
        manifest_sha256 = None
        if store is not None:
            mark = store.tree_mark(entry.type, entry.name, entry.version)
            if mark is not None and mark.sha256 == entry.sha256:
                manifest_sha256 = mark.manifest_sha256
        if not path.is_dir():
            found.append(InstalledExtension(entry=entry, path=path, status="missing", problems=(f"{path} is missing",)))
            continue
        problems = verify_tree(path, manifest_sha256=manifest_sha256)
        placed_version = _placed_version(path)
        if placed_version is not None and placed_version != entry.version:
            problems.insert(0, f"{path} holds version {placed_version}, the lockfile pins {entry.version}")
        found.append(
            InstalledExtension(
                entry=entry, path=path, status="modified" if problems else "ok", problems=tuple(problems)
            )
        )
    return found


@dataclass(frozen=True)
class ProviderCheck:
    """`providers validate`: one installed provider and what keeps it from working."""

    name: str
    version: str
    path: Path
    problems: tuple[str, ...]
    required_env: tuple[str, ...]
    missing_env: tuple[str, ...]
    system_packages: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "path": str(self.path),
            "ok": self.ok,
            "problems": list(self.problems),
            "required_env": list(self.required_env),
            "missing_env": list(self.missing_env),
            "system_packages": list(self.system_packages),
        }


def validate_providers(
    infra: Path, *, store: Store | None = None, env: Mapping[str, str] | None = None
) -> list[ProviderCheck]:
    """Every provider ``DIR/extensions.lock`` pins: its directory is intact (as `installed` checks),
    its ``extension.toml`` is valid and names the locked version, and every variable in its
    ``[configuration] required_env`` is set in ``env`` (default: the environment)."""
    environment = os.environ if env is None else env
    checks = []
    for item in installed(infra, store=store, type="provider"):
        problems = list(item.problems)
        required: tuple[str, ...] = ()
        packages: tuple[str, ...] = ()
        missing: tuple[str, ...] = ()
        if item.status != "missing":
            try:
                manifest = load_manifest(item.path)
            except ExtensionError as exc:
                problems.append(f"{item.path / 'extension.toml'}: {exc}")
            else:
                if str(manifest.version) != item.entry.version:
                    problems.append(
                        f"extension.toml says version {manifest.version}, the lockfile {item.entry.version}"
                    )
                required, packages = manifest.required_env, manifest.system_packages
                missing = tuple(v for v in required if not environment.get(v))
                problems.extend(f"required environment variable {v} is not set" for v in missing)
        checks.append(
            ProviderCheck(
                name=item.entry.name,
                version=item.entry.version,
                path=item.path,
                problems=tuple(problems),
                required_env=required,
                missing_env=missing,
                system_packages=packages,
            )
        )
    return checks
