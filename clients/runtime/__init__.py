"""The runtime loader (SPEC 5): `ExtensionManager`, mirroring the platform orchestrator's.

    client = RegistryClient(url, cache_dir=home / "cache", trust_home=home)  # verifies (the root pinned under home)
    manager = ExtensionManager(home=home, client=client, runtime_version="1.2.0")
    ext = manager.load_extension("taskserv", "kubernetes")            # newest compatible version
    ext = manager.load_extension("taskserv", "kubernetes", "1.28.6")  # exactly this one
    manager.list_loaded_extensions(); manager.reload_extension("taskserv", "kubernetes")
    manager.metrics.hit_ratio

**Cache.** An LRU of ``cache_size`` (100) entries keyed ``{type}:{name}:{version}``. Loading a key
that is cached is a hit: the entry and its dependencies become the most recently used, nothing is
read. When an entry would exceed the size, the least recently *used* entry is evicted (never the
extension being loaded nor its dependencies). ``version`` is None (the newest version compatible
with ``runtime_version``), an exact version, or a constraint (``1.28``, ``^1.28``: the newest
matching). What a None or constraint load chose is remembered by the manager, so the next such
load is a hit too; ``reload_extension`` and ``clear_cache`` forget it.

**Discovery.** Installed extensions are looked for, in order, in

1. ``.provisioning/extensions/`` (relative to the current directory),
2. ``~/.provisioning-extensions/``,
3. ``/opt/provisioning-extensions/``,
4. each directory of ``$PROVISIONING_EXTENSIONS_PATH`` (``os.pathsep``-separated),

and then in the registry, through the local store (``clients.store``: packages by sha256, verified,
unpacked into ``HOME/store/trees/{type}/{name}/{version}/``). In a discovery directory an extension
is either ``{dir}/{type}s/{name}/extension.toml`` (one version: whatever its extension.toml says)
or ``{dir}/{type}s/{name}/{version}/extension.toml`` (versions side by side, the layout of the
bundled examples and of the store). The directory names must agree with extension.toml.

Versions are chosen by the shared resolver (`extensions.resolver.resolve`), dependencies included,
with the runtime's version as ``runtime_version``. Resolution first sees, for each name, only the
versions installed in the *first* discovery directory that has the name (the registry's only for
names installed nowhere): an installed extension wins over the registry, and an earlier directory
over a later one. Only when that has no answer (a version that is not installed was asked for, a
dependency's constraint excludes the installed version) does it see every directory and the
registry together, still preferring the installed versions it saw first (as lock pins).

**Policy** (environment, read by `LoadPolicy.from_env`):

- ``PROVISIONING_EXTENSION_MODE=full`` (default): anything may load except blocked names;
- ``restricted``: only names in ``PROVISIONING_ALLOWED_EXTENSIONS`` may load, dependencies
  included (an empty list allows nothing); blocked names never;
- ``disabled``: nothing loads or reloads (listing and clearing still work).

``PROVISIONING_BLOCKED_EXTENSIONS`` is refused in every mode. Lists are comma- or
whitespace-separated; an entry is ``NAME`` (any type), ``TYPE:NAME`` or ``TYPE:*``. The whole set
to load (the extension and its dependencies) is checked before anything is loaded, and a cached
extension is checked again on every hit.

**Integrity.** A tree from the store is checked file by file against its MANIFEST.json (every
listed file with its size and sha256, and no other file), on every cold load and reload; the
package itself was verified against the index's sha256 by the store. An installed tree with a
MANIFEST.json (an unpacked package) is checked the same way; one without (an author's source
directory) is taken as it is.

**Nushell.** When ``nu`` is available (``extensions.checks.find_nu``), every ``nulib/**/*.nu`` of an
extension must parse in Nushell (the content checks of `extensions.checks`, `nu --ide-check`)
before it is loaded; the results are on ``LoadResult.checks``. Without ``nu`` the step is reported
as skipped, never as passed.

**State.** With ``persist=True`` (the default) the cache is mirrored in ``HOME/runtime/state.json``
(atomic replace, under the file lock ``HOME/locks/runtime.lock``), so another process (``module
list``, ``runtime serve``) sees what was loaded. Every change (cold load, reload, eviction, clear)
first re-reads the file if another process changed it, then writes it; hits change only the
in-memory recency. Entries whose directory has gone are dropped when the file is read.
"""

from __future__ import annotations

from clients.registry_client import IntegrityError
from clients.runtime.arguments import normalise_type, runtime_version_from_env
from clients.runtime.discovery import default_search_paths, discover
from clients.runtime.errors import (
    DependencyError,
    ExtensionNotFoundError,
    LoadCheckError,
    LoaderError,
    NotLoadedError,
    PolicyError,
    VersionNotFoundError,
)
from clients.runtime.loaded import Extension, ExtensionMetadata, LoaderMetrics, LoadResult
from clients.runtime.manager import DEFAULT_CACHE_SIZE, ExtensionManager
from clients.runtime.policy import LoadPolicy
from extensions.kinds import TYPES as EXTENSION_TYPES

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "EXTENSION_TYPES",
    "DependencyError",
    "Extension",
    "ExtensionManager",
    "ExtensionMetadata",
    "ExtensionNotFoundError",
    "IntegrityError",
    "LoadCheckError",
    "LoadPolicy",
    "LoadResult",
    "LoaderError",
    "LoaderMetrics",
    "NotLoadedError",
    "PolicyError",
    "VersionNotFoundError",
    "default_search_paths",
    "discover",
    "normalise_type",
    "runtime_version_from_env",
]
