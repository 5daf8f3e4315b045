"""Where extensions are found: the discovery directories (installed versions, as resolver
candidates), the registry alongside them, and what the registry offers (`module discover`)."""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients.errors import ClientError
from clients.registry_client import RegistryUnavailable
from clients.runtime.arguments import _check_name, normalise_type
from clients.runtime.errors import ExtensionNotFoundError
from extensions.errors import ExtensionError
from extensions.kinds import TYPES as EXTENSION_TYPES
from extensions.kinds import plural
from extensions.names import is_valid_name
from extensions.versions import Requirement, SemVer, runs_on

if TYPE_CHECKING:
    from clients.registry_client import RegistryClient
    from extensions.index import IndexCatalogue
    from extensions.manifest import Manifest
    from extensions.resolver import Candidate


# --------------------------------------------------------------------------------------------------
# Discovery directories
# --------------------------------------------------------------------------------------------------


def default_search_paths(
    *, cwd: Path | None = None, user_home: Path | None = None, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The discovery directories of SPEC 5, in order (whether they exist or not)."""
    env = os.environ if environ is None else environ
    paths = [
        (cwd or Path.cwd()) / ".provisioning" / "extensions",
        (user_home or Path(env.get("HOME") or Path.home())) / ".provisioning-extensions",
        Path("/opt/provisioning-extensions"),
    ]
    paths += [Path(p).expanduser() for p in (env.get("PROVISIONING_EXTENSIONS_PATH") or "").split(os.pathsep) if p]
    return paths


class _LocalIndex:
    """Installed extensions in the discovery directories, read lazily per name."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = list(dirs)
        self._found: dict[str, list[tuple[int, Candidate]]] = {}

    def _scan(self, name: str) -> list[tuple[int, Candidate]]:
        found = self._found.get(name)
        if found is not None:
            return found
        found = []
        for rank, directory in enumerate(self.dirs):
            for kind in EXTENSION_TYPES:
                base = directory / plural(kind) / name
                if (base / "extension.toml").is_file():
                    found.append((rank, _local_candidate(base, kind, name, None)))
                elif base.is_dir():
                    for sub in sorted(base.iterdir()):
                        if (sub / "extension.toml").is_file():
                            found.append((rank, _local_candidate(sub, kind, name, sub.name)))
        self._found[name] = found
        return found

    def seen(self) -> list[str]:
        return [name for name, found in self._found.items() if found]

    def first(self, name: str) -> list[Candidate]:
        """The versions in the first directory that has ``name``."""
        found = self._scan(name)
        if not found:
            return []
        rank = found[0][0]
        return _dedupe(c for r, c in found if r == rank)

    def every(self, name: str) -> list[Candidate]:
        """The versions in every directory; an earlier directory wins for the same version."""
        return _dedupe(c for _, c in self._scan(name))

    def preferred(self, name: str, runtime: SemVer | None) -> SemVer | None:
        """The newest runtime-compatible version in the first directory with one."""
        by_rank: dict[int, list[Candidate]] = {}
        for rank, candidate in self._scan(name):
            by_rank.setdefault(rank, []).append(candidate)
        for rank in sorted(by_rank):
            fits = [
                c.version
                for c in by_rank[rank]
                if runs_on(c.provisioning_version, runtime) and not c.version.is_prerelease
            ]
            if fits:
                return max(fits)
        return None

    def names(self) -> set[str]:
        names: set[str] = set()
        for directory in self.dirs:
            for kind in EXTENSION_TYPES:
                with contextlib.suppress(OSError):
                    names.update(p.name for p in (directory / plural(kind)).iterdir() if is_valid_name(p.name))
        return names


def _misplaced(dirs: Sequence[Path], kind: str, name: str) -> Path | None:
    """An extension put straight into a discovery directory (``{dir}/{name}/extension.toml``, or with a
    version directory), which is not searched: ``{dir}/{name}``, so that the error can say where it goes."""
    for directory in dirs:
        base = directory / name
        with contextlib.suppress(OSError):
            if (base / "extension.toml").is_file() or any(base.glob("*/extension.toml")):
                return base
    return None


def _dedupe(candidates: Iterator[Candidate] | Sequence[Candidate]) -> list[Candidate]:
    seen: dict[SemVer, Candidate] = {}
    for candidate in candidates:
        seen.setdefault(candidate.version, candidate)
    return sorted(seen.values(), key=lambda c: c.version, reverse=True)


def _read_manifest(path: Path) -> Manifest:
    from extensions.manifest import load_manifest

    try:
        return load_manifest(path)
    except ExtensionError as exc:
        raise ClientError(f"{path / 'extension.toml'}: {exc}", code=exc.code, details=exc.details_list()) from None


def _local_candidate(path: Path, kind: str, name: str, version_dir: str | None) -> Candidate:
    from extensions.resolver import Candidate

    manifest = _read_manifest(path)
    wrong = []
    if manifest.name != name:
        wrong.append(f"its name is {manifest.name!r}, not {name!r}")
    if manifest.type != kind:
        wrong.append(f"its type is {manifest.type!r}, not {kind!r}")
    if version_dir is not None and version_dir != str(manifest.version):
        wrong.append(f"its version is {manifest.version}, not {version_dir}")
    if wrong:
        raise ClientError(
            f"{path / 'extension.toml'} does not match its directory: {'; '.join(wrong)}. An installed extension "
            "lives in {dir}/{type}s/{name}/ or {dir}/{type}s/{name}/{version}/",
            code="invalid_manifest",
            details=[{"path": str(path / "extension.toml")}],
        )
    return Candidate(
        name=name,
        version=manifest.version,
        dependencies=tuple(Requirement(d.name, d.constraint) for d in manifest.dependencies),
        provisioning_version=manifest.provisioning_version,
        type=manifest.type,
        extra={"source": "local", "path": str(path), "manifest": manifest},
    )


class _Sources:
    """The catalogue the resolver sees: installed versions and the registry's (the `clients.runtime` docstring)."""

    def __init__(self, local: _LocalIndex, registry: IndexCatalogue | None, *, shadow: bool) -> None:
        self.local = local
        self.registry = registry
        self.shadow = shadow
        self.unavailable: RegistryUnavailable | None = None  # the registry could not be asked

    def versions(self, name: str) -> Sequence[Candidate]:
        installed = self.local.first(name) if self.shadow else self.local.every(name)
        if self.registry is None or (installed and self.shadow):
            return installed
        remote = self._remote(name, tolerate=bool(installed))
        have = {c.version for c in installed}
        return [*installed, *(c for c in remote if c.version not in have)]

    def _remote(self, name: str, *, tolerate: bool) -> Sequence[Candidate]:
        assert self.registry is not None
        try:
            return self.registry.versions(name)
        except RegistryUnavailable as exc:
            if tolerate:
                self.unavailable = exc
                return ()
            raise

    def names(self) -> list[str]:
        names = self.local.names()
        if self.registry is not None:
            with contextlib.suppress(ClientError):
                names.update(self.registry.names())
        return sorted(names)


# --------------------------------------------------------------------------------------------------
# Discovery in the registry (`module discover`)
# --------------------------------------------------------------------------------------------------


def discover(
    client: RegistryClient,
    type: str,
    *,
    name: str | None = None,
    runtime_version: str | None = None,
) -> list[dict[str, Any]]:
    """What the registry offers of a kind: ``[{type, name, extension, version, description}]`` by
    name. With ``name``, only that one (or the extension of that name), plus every version
    (``versions: [{version, yanked, compatible, published_at}]``, newest first) and the latest
    version's ``dependencies`` and ``provisioning_version``. ExtensionNotFoundError (with close
    names) when the registry offers no such name."""
    kind = normalise_type(type)
    items = [
        {
            "type": kind,
            "name": str(i.get("name")),
            "extension": str(i.get("extension")),
            "version": i.get("version"),
            "description": i.get("description", ""),
        }
        for i in client.provided(kind)
    ]
    items.sort(key=lambda i: (i["name"], i["extension"]))
    if name is None:
        return items
    _check_name(name)
    chosen = [i for i in items if i["name"] == name] or [i for i in items if i["extension"] == name]
    if not chosen:
        suggestions = difflib.get_close_matches(name, sorted({i["name"] for i in items}), n=3, cutoff=0.7)
        hint = f"; did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        offered = ", ".join(sorted({i["name"] for i in items})[:20]) or "none"
        raise ExtensionNotFoundError(
            f"the registry offers no {kind} named {name}{hint} (it offers: {offered})",
            suggestions=suggestions,
            details=[{"reason": "extension_not_found", "type": kind, "name": name, "suggestions": suggestions}],
        )
    from extensions.index import parse_index
    from extensions.resolver import describe_requirement

    runtime = None if runtime_version is None else SemVer.parse(runtime_version)
    for item in chosen:
        document = client.index(item["extension"])
        candidates = parse_index(document, name=item["extension"])[1] if document is not None else []
        item["versions"] = [
            {
                "version": str(c.version),
                "yanked": c.yanked,
                "compatible": None if runtime is None else runs_on(c.provisioning_version, runtime),
                "provisioning_version": None if c.provisioning_version is None else str(c.provisioning_version),
                "published_at": c.extra.get("published_at"),
            }
            for c in reversed(candidates)
        ]
        latest = next((c for c in reversed(candidates) if str(c.version) == item["version"]), None)
        item["dependencies"] = [describe_requirement(r) for r in latest.dependencies] if latest is not None else []
    return chosen
