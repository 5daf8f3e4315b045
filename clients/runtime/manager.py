"""`ExtensionManager`: the LRU cache of loaded extensions over discovery and the registry."""

from __future__ import annotations

import difflib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from clients.errors import ClientError
from clients.registry_client import IntegrityError
from clients.runtime.arguments import _check_name, _exact_version, _Spec, normalise_type
from clients.runtime.discovery import _LocalIndex, _misplaced, _read_manifest, _Sources, default_search_paths
from clients.runtime.errors import (
    DependencyError,
    ExtensionNotFoundError,
    LoadCheckError,
    LoaderError,
    NotLoadedError,
    VersionNotFoundError,
)
from clients.runtime.loaded import Extension, ExtensionMetadata, LoaderMetrics, LoadResult
from clients.runtime.policy import LoadPolicy
from clients.runtime.state import RuntimeState
from extensions.errors import ExtensionError
from extensions.versions import Requirement, SemVer

if TYPE_CHECKING:
    from clients.registry_client import RegistryClient
    from clients.store import Store
    from extensions.checks import CheckResult
    from extensions.index import IndexCatalogue
    from extensions.manifest import Manifest
    from extensions.resolver import Candidate, Resolution


DEFAULT_CACHE_SIZE = 100


# --------------------------------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------------------------------


class ExtensionManager(RuntimeState):
    """The runtime loader: an LRU cache of loaded extensions over discovery directories and the
    registry (the `clients.runtime` docstring). Thread-safe; one manager per runtime."""

    def __init__(
        self,
        *,
        home: Path,
        client: RegistryClient | None,
        runtime_version: str | None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        search_paths: Sequence[Path] | None = None,
        policy: LoadPolicy | None = None,
        persist: bool = True,
        check_nushell: bool = True,
        nu: str | None = None,
        progress: Callable[[str], Callable[[int, int | None], None]] | None = None,
    ) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, not {cache_size}")
        self.home = Path(home)
        self.client = client
        self.runtime_version: SemVer | None = None if runtime_version is None else SemVer.parse(runtime_version)
        self.cache_size = cache_size
        self.search_paths = list(default_search_paths() if search_paths is None else search_paths)
        self.policy = policy if policy is not None else LoadPolicy.from_env()
        self.persist = persist
        self.check_nushell = check_nushell
        self.nu = nu
        self.progress = progress
        self.metrics = LoaderMetrics()
        self._cache: OrderedDict[str, Extension] = OrderedDict()
        self._aliases: dict[tuple[str, str, str], str] = {}
        self._lock = threading.RLock()
        self._store: Store | None = None
        self._state_stamp: tuple[int, int, int] | None = None
        self._generation = 0
        if persist:
            self._sync()

    # --- the platform's API ------------------------------------------------------------------------

    def load_extension(self, type: str, name: str, version: str | None = None) -> Extension:
        """The loaded extension (from the cache, or found, verified and read with its dependencies)."""
        return self.load(type, name, version).extension

    def list_loaded_extensions(self) -> list[Extension]:
        """Every cached extension, least recently used first."""
        with self._lock:
            if self.persist:
                self._sync()
            return list(self._cache.values())

    def reload_extension(self, type: str, name: str, version: str | None = None) -> Extension:
        """Read a loaded extension again: found again, verified, re-read, ``loaded_at`` set to now.
        Several versions of one extension may be loaded at once: without ``version`` every loaded
        version is reloaded (the most recently used one is returned); with it, only that version.
        NotLoadedError if it (or that version) is not loaded, listing the versions that are."""
        return self.reload(type, name, version).extension

    def reload(self, type: str, name: str, version: str | None = None) -> LoadResult:
        """`reload_extension`, with what it read (``reloaded``: each version of the extension, oldest
        first; ``loaded``: everything read, dependencies included) and the Nushell checks."""
        kind = normalise_type(type)
        _check_name(name)
        wanted = None if version is None else _exact_version(version)
        with self._lock, self._writing():
            every = [e for e in self._cache.values() if _same(e, kind, name)]
            chosen = [e for e in every if wanted is None or SemVer.parse(e.metadata.version) == wanted]
            if not chosen:
                raise self._not_loaded(kind, name, wanted, every)
            self.policy.check(kind, name)
            for alias in [a for a in self._aliases if a[:2] == (kind, name)]:
                del self._aliases[alias]
            loaded_now: list[Extension] = []
            checks: list[CheckResult] = []
            reloaded: list[Extension] = []
            for extension in chosen:  # least recently used first: the last one ends most recently used
                result = self._load_cold(kind, name, _Spec.parse(extension.metadata.version), force=True)
                loaded_now.extend(result.loaded)
                checks.extend(result.checks)
                reloaded.append(result.extension)
            self.metrics.reloads += 1
            return replace(
                result,
                loaded=tuple(loaded_now),
                checks=tuple(checks),
                reloaded=tuple(sorted(reloaded, key=lambda e: SemVer.parse(e.metadata.version))),
            )

    def _not_loaded(self, kind: str, name: str, wanted: SemVer | None, loaded: Sequence[Extension]) -> NotLoadedError:
        versions = sorted((e.metadata.version for e in loaded), key=SemVer.parse)
        if wanted is not None and versions:
            message = (
                f"{kind} {name} {wanted} is not loaded, so it cannot be reloaded (loaded versions: "
                f"{', '.join(versions)}; leave out --version to reload them all)"
            )
        else:
            what = f"{kind} {name}" + (f" {wanted}" if wanted is not None else "")
            message = (
                f"{what} is not loaded, so it cannot be reloaded (loaded: {', '.join(self._cache) or 'nothing'}); "
                f"load it with `provisioning module load {kind} {name}`"
            )
        return NotLoadedError(
            message,
            details=[
                {
                    "reason": "not_loaded",
                    "type": kind,
                    "name": name,
                    "version": None if wanted is None else str(wanted),
                    "loaded_versions": versions,
                    "loaded": list(self._cache),
                }
            ],
        )

    def is_extension_loaded(self, type: str, name: str) -> bool:
        kind = normalise_type(type)
        with self._lock:
            if self.persist:
                self._sync()
            return any(_same(e, kind, name) for e in self._cache.values())

    def clear_cache(self) -> None:
        """Forget every loaded extension (and what None/constraint loads chose)."""
        with self._lock, self._writing():
            self._cache.clear()
            self._aliases.clear()

    # --- the richer call the CLI uses -------------------------------------------------------------

    def load(self, type: str, name: str, version: str | None = None) -> LoadResult:
        """`load_extension`, with what it did: cached or not, what was read, the Nushell checks."""
        start = time.perf_counter()
        kind = normalise_type(type)
        _check_name(name)
        spec = _Spec.parse(version)
        with self._lock:
            self.metrics.loads += 1
            key = (
                f"{kind}:{name}:{spec.exact}" if spec.exact is not None else self._aliases.get((kind, name, spec.alias))
            )
            hit = self._cache.get(key) if key is not None else None
            try:
                if hit is not None and all(k in self._cache for k in hit.dependency_keys):
                    self.policy.check(kind, name)
                    for dep in hit.dependency_keys:
                        self._check_policy_key(dep, required_by=hit.key)
                    for dep in hit.dependency_keys:
                        self._cache.move_to_end(dep)
                    self._cache.move_to_end(hit.key)
                    self.metrics.cache_hits += 1
                    return LoadResult(extension=hit, cached=True)
                self.policy.check(kind, name)
                with self._writing():
                    result = self._load_cold(kind, name, spec, force=False)
            except BaseException:
                self.metrics.failures += 1
                raise
            if result.cached:
                self.metrics.cache_hits += 1
            else:
                self.metrics.load_times.append(time.perf_counter() - start)
            if spec.exact is None:
                self._aliases[(kind, name, spec.alias)] = result.extension.key
            return result

    # --- loading ----------------------------------------------------------------------------------

    def _load_cold(self, kind: str, name: str, spec: _Spec, *, force: bool) -> LoadResult:
        plan = self._plan(kind, name, spec)
        root = plan[-1]
        by_name = {c.name: c for c in plan}
        for candidate in plan[:-1]:
            self.policy.check(candidate.type, candidate.name, required_by=f"{kind} {name} {root.version}")
        keys = {_key_of(c) for c in plan}
        root_key = _key_of(root)
        if (
            not force
            and root_key in self._cache
            and all(k in self._cache for k in self._cache[root_key].dependency_keys)
        ):
            for key in (*self._cache[root_key].dependency_keys, root_key):
                self._cache.move_to_end(key)
            return LoadResult(extension=self._cache[root_key], cached=True)
        loaded: list[Extension] = []
        checks: list[CheckResult] = []
        for candidate in plan:
            key = _key_of(candidate)
            is_root = candidate is root
            if key in self._cache and not (force and is_root):
                self._cache.move_to_end(key)
                continue
            dependency_keys = tuple(_key_of(by_name[r.name]) for r in candidate.dependencies if r.name in by_name)
            extension, results = self._materialise(candidate, dependency_keys)
            checks.extend(results)
            self._insert(extension, protect=keys)
            loaded.append(extension)
            if not is_root:
                self.metrics.dependency_loads += 1
        return LoadResult(extension=self._cache[root_key], cached=False, loaded=tuple(loaded), checks=tuple(checks))

    def _insert(self, extension: Extension, *, protect: set[str]) -> None:
        key = extension.key
        self._cache.pop(key, None)
        while len(self._cache) >= self.cache_size:
            victim = next((k for k in self._cache if k not in protect), None)
            if victim is None:
                break  # the extension and its dependencies alone exceed the size: keep them all
            del self._cache[victim]
            self.metrics.evictions += 1
            for alias in [a for a, k in self._aliases.items() if k == victim]:
                del self._aliases[alias]
        self._cache[key] = extension

    def _check_policy_key(self, key: str, *, required_by: str) -> None:
        kind, name, _ = key.split(":", 2)
        self.policy.check(kind, name, required_by=required_by)

    def _registry(self) -> IndexCatalogue | None:
        return None if self.client is None else self.client.catalogue()

    def _plan(self, kind: str, name: str, spec: _Spec) -> list[Candidate]:
        """The candidates to load, dependencies first, the extension last."""
        from extensions.errors import ResolutionError
        from extensions.resolver import resolve

        local = _LocalIndex(self.search_paths)
        registry = self._registry()
        root = Requirement(name, spec.constraint)
        first = _Sources(local, registry, shadow=True)
        resolution: Resolution
        try:
            resolution = resolve([root], first, runtime_version=self.runtime_version)
        except ResolutionError as exc:
            seen = local.seen()
            if not seen:
                raise self._explain(exc, kind, name, spec, first) from None
            everything = _Sources(local, registry, shadow=False)
            prefer = {n: v for n in seen if (v := local.preferred(n, self.runtime_version)) is not None}
            try:
                resolution = resolve([root], everything, runtime_version=self.runtime_version, locked=prefer)
            except ResolutionError as again:
                raise self._explain(again, kind, name, spec, everything) from None
        chosen = resolution.resolved[name]
        if chosen.type and chosen.type != kind:
            raise ExtensionNotFoundError(
                f"there is no {kind} named {name}: {name} is a {chosen.type}; "
                f"use `provisioning module load {chosen.type} {name}`",
                suggestions=[f"{chosen.type}:{name}"],
                details=[{"reason": "wrong_type", "type": kind, "name": name, "actual_type": chosen.type}],
            )
        order = [n for n in resolution.install_order if n != name]
        return [resolution.resolved[n] for n in order] + [chosen]

    def _explain(self, error: ExtensionError, kind: str, name: str, spec: _Spec, sources: _Sources) -> LoaderError:
        """The resolver's failure as the specific error SPEC 5 asks for."""
        explained = self._explain_error(error, kind, name, spec, sources)
        if sources.unavailable is not None:
            explained.message += f" (only installed versions were seen: {sources.unavailable.message})"
            explained.details.append({"reason": "registry_unavailable", "message": sources.unavailable.message})
        return explained

    def _explain_error(
        self, error: ExtensionError, kind: str, name: str, spec: _Spec, sources: _Sources
    ) -> LoaderError:
        from extensions.resolver import describe_constraint

        details = error.details_list()
        first = details[0] if details and isinstance(details[0], dict) else {}
        reason = first.get("reason")
        is_root = first.get("name") == name and first.get("required_by") is None
        if reason == "unknown" and is_root:
            suggestions = list(first.get("suggestions") or [])
            if not suggestions:
                suggestions = difflib.get_close_matches(name, sources.names(), n=3, cutoff=0.7)
            # Only names of the kind asked for: `taskserv kubernets` means the taskserv kubernetes,
            # never the cluster kubernetes-ha.
            suggestions = [s for s in suggestions if _is_of_kind(sources, s, kind)]
            hint = f"; did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions else ""
            misplaced = _misplaced(self.search_paths, kind, name)
            if misplaced is not None:  # far likelier what was meant than a close name
                hint = (
                    f"; {misplaced / 'extension.toml'} is not looked at: an installed {kind} lives in "
                    f"{misplaced.parent / f'{kind}s' / name}/ (or .../{name}/VERSION/)"
                )
            where = "the discovery directories" + (" or the registry" if self.client is not None else "")
            return ExtensionNotFoundError(
                f"{kind} {name} not found in {where}{hint}",
                suggestions=suggestions,
                details=[
                    {
                        "reason": "extension_not_found",
                        "type": kind,
                        "name": name,
                        "suggestions": suggestions,
                        "searched": [str(p) for p in self.search_paths],
                        "misplaced": None if misplaced is None else str(misplaced),
                    }
                ],
            )
        if reason == "no_matching_version" and is_root:
            available = [str(c.version) for c in sorted(sources.versions(name), key=lambda c: c.version)]
            skipped = list(first.get("skipped") or [])
            why = "; ".join(f"{s['version']} {s['why']}" for s in skipped if s.get("version") in available)
            listed = f"available: {', '.join(available) or 'none'}"
            if spec.exact is not None and str(spec.exact) not in available:
                message = f"{kind} {name} has no version {spec.exact} ({listed})"
            elif spec.exact is not None:
                message = f"{kind} {name} {spec.exact} cannot be loaded: {why or first.get('message', '')} ({listed})"
            else:
                wanted = "" if spec.constraint.is_any else f" matching {describe_constraint(spec.constraint)}"
                runtime = f" compatible with runtime {self.runtime_version}" if self.runtime_version is not None else ""
                message = f"{kind} {name} has no version{wanted}{runtime} ({listed})"
                if why:
                    message += f"; {why}"
            return VersionNotFoundError(
                message,
                available=available,
                details=[
                    {
                        "reason": "version_not_found",
                        "type": kind,
                        "name": name,
                        "requested": str(spec.exact or spec.constraint),
                        "runtime_version": None if self.runtime_version is None else str(self.runtime_version),
                        "available": available,
                        "skipped": skipped,
                    }
                ],
            )
        problems = [d for d in details if isinstance(d, dict)] or [{"reason": "dependency", "message": error.message}]
        missing = sorted({str(d["name"]) for d in problems if d.get("reason") == "unknown" and d.get("name")})
        conflicting = sorted(
            {
                str(d["name"])
                for d in problems
                if d.get("reason") in ("conflict", "no_matching_version") and d.get("name")
            }
        )
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if conflicting:
            parts.append(f"no version of {', '.join(conflicting)} fits")
        summary = f" ({'; '.join(parts)})" if parts else ""
        return DependencyError(
            f"cannot load {kind} {name}: its dependencies cannot be satisfied{summary}: {error.message}",
            missing=missing,
            conflicting=conflicting,
            details=problems,
        )

    def _get_store(self) -> Store:
        if self._store is None:
            from clients.store import Store

            self._store = Store(self.home)
        return self._store

    def _materialise(
        self, candidate: Candidate, dependency_keys: tuple[str, ...]
    ) -> tuple[Extension, list[CheckResult]]:
        """Find the candidate's tree, verify it, read its manifest, parse its Nushell code."""
        from clients.store import verify_tree

        source = str(candidate.extra.get("source", "registry"))
        version = str(candidate.version)
        if source == "local":
            path = Path(str(candidate.extra["path"]))
            if (path / "MANIFEST.json").is_file():
                _integrity(path, verify_tree(path))
            sha256 = ""
        else:
            if self.client is None:
                raise LoaderError(f"{candidate.name} {version} is in the registry, but no registry client is set")
            store = self._get_store()
            # A tree already unpacked is checked before the store would quietly unpack it again: a
            # changed file in the runtime's store is reported, not papered over.
            path = store.tree_path(candidate.type, candidate.name, version)
            mark = store.tree_mark(candidate.type, candidate.name, version)
            if mark is not None and mark.sha256 == candidate.sha256 and path.is_dir():
                _integrity(path, verify_tree(path, manifest_sha256=mark.manifest_sha256))
            bar = self.progress(f"{candidate.name} {version}") if self.progress is not None else None
            store.fetch(self.client, candidate.name, version, candidate.sha256, progress=bar)
            path = store.tree(candidate.type, candidate.name, version, candidate.sha256)
            sha256 = candidate.sha256
            if self.client.offline or self.client.unreachable is not None:
                # Not asked (--offline) or not reachable: the package and the index data were the
                # local store's and its cache's, and that is what the user is told.
                source = "store"
        manifest = _read_manifest(path)
        if (manifest.name, str(manifest.version), manifest.type) != (candidate.name, version, candidate.type):
            raise IntegrityError(
                f"{path / 'extension.toml'} says {manifest.type} {manifest.name} {manifest.version}, but "
                f"{candidate.type} {candidate.name} {version} was expected: the tree does not hold what was published",
                details=[{"reason": "integrity", "path": str(path / "extension.toml")}],
            )
        checks = self._nushell(path, manifest)
        extension = Extension(
            metadata=ExtensionMetadata.from_manifest(manifest),
            path=str(path),
            loaded_at=datetime.now(UTC),
            source=source,
            sha256=sha256,
            dependency_keys=dependency_keys,
        )
        return extension, checks

    def _nushell(self, root: Path, manifest: Manifest) -> list[CheckResult]:
        """Every ``nulib/**/*.nu`` must parse in Nushell (when installed); LoadCheckError otherwise."""
        nulib = root / "nulib"
        if not self.check_nushell or not nulib.is_dir() or not any(nulib.rglob("*.nu")):
            return []
        from extensions.checks import CheckResult, find_nu, nu_unavailable_reason, run_content_checks

        nu = self.nu or find_nu()
        if nu is None:
            return [CheckResult("nushell", "nulib", "skipped", nu_unavailable_reason())]
        report = run_content_checks(nulib, nu=nu, kcl=False)
        results = [replace(r, path=f"nulib/{r.path}") for r in report.results]
        failed = [r for r in results if r.status == "failed"]
        if failed:
            raise LoadCheckError(
                f"{manifest.type} {manifest.name} {manifest.version} cannot be loaded: "
                + "; ".join(f"{r.path}: {r.message.splitlines()[0] if r.message else 'failed'}" for r in failed),
                details=[{"reason": "check_failed", **r.as_dict()} for r in results],
            )
        return results


def _integrity(root: Path, problems: Sequence[str]) -> None:
    if not problems:
        return
    shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
    raise IntegrityError(
        f"integrity check failed for {root}: {shown}. The files must be exactly those of the published "
        f"package (MANIFEST.json): remove {root} and load again to unpack a fresh copy",
        details=[{"reason": "integrity", "path": str(root), "problems": list(problems)}],
    )


def _same(extension: Extension, kind: str, name: str) -> bool:
    return extension.metadata.extension_type == kind and extension.metadata.name == name


def _key_of(candidate: Candidate) -> str:
    return f"{candidate.type}:{candidate.name}:{candidate.version.without_build()}"


def _is_of_kind(sources: _Sources, name: str, kind: str) -> bool:
    """Whether some version of ``name`` (installed, or in the registry) is a ``kind``."""
    try:
        return any(candidate.type == kind for candidate in sources.versions(name))
    except ClientError:
        return False
