"""Server-side resolution: the shared resolver (`extensions.resolver`) over the index documents
stored on each extension's row, exactly the documents clients resolve over, so both sides give the
same answers for the same data.

Parsed candidates are kept per process, keyed by the document's ETag: a request reads every
(name, ETag) pair in one query and re-parses only documents that changed, so versions are parsed
once and a publish, yank or unyank in any process is seen by the next request in every process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.urls import reverse

from extensions.errors import ExtensionError, ResolutionError, ResolutionTooComplex
from extensions.index import parse_index
from extensions.kinds import plural
from extensions.providing import offers, providing_since
from extensions.resolver import Candidate, Catalogue, Resolution, resolve
from extensions.versions import Constraint, SemVer
from registry import selectors
from registry.errors import BadRequest, NotFound
from registry.models import Extension, Provide
from registry.models import Version as VersionRow

_lock = threading.Lock()
_parsed: dict[str, tuple[str, tuple[Candidate, ...]]] = {}  # name -> (etag, candidates newest first)

MAX_REQUIREMENTS = 200
#: An install plan's check of the fix it suggests runs only with at least this much of its budget left.
MIN_CHECK_SECONDS = 0.05


class DatabaseCatalogue:
    """A resolver `Catalogue` over the materialised index documents, with a per-process cache."""

    def __init__(self) -> None:
        self._etags: dict[str, str] = dict(Extension.objects.values_list("name", "index_etag"))
        self._local: dict[str, tuple[Candidate, ...]] = {}

    def versions(self, name: str) -> Sequence[Candidate]:
        found = self._local.get(name)
        if found is not None:
            return found
        etag = self._etags.get(name)
        if not etag:
            self._local[name] = ()
            return ()
        with _lock:
            cached = _parsed.get(name)
        if cached is not None and cached[0] == etag:
            found = cached[1]
        else:
            row = Extension.objects.filter(name=name).values_list("index_etag", "index_json").first()
            if row is None or not row[1]:
                found = ()
            else:
                _, candidates = parse_index(row[1], name=name)
                found = tuple(reversed(candidates))
                with _lock:
                    _parsed[name] = (row[0], found)
        self._local[name] = found
        return found

    def names(self) -> Iterable[str]:
        return sorted(name for name, etag in self._etags.items() if etag)


def download_url(base_url: str, name: str, version: str) -> str:
    return base_url + reverse("version-download", kwargs={"name": name, "version": version})


def _entry(candidate: Candidate, base_url: str) -> dict[str, Any]:
    return {
        "name": candidate.name,
        "version": str(candidate.version),
        "type": candidate.type,
        "sha256": candidate.sha256,
        "size": candidate.size,
        "yanked": candidate.yanked,
        "download_url": download_url(base_url, candidate.name, str(candidate.version)),
        "dependencies": [requirement.written for requirement in candidate.dependencies],
    }


def resolution_data(resolution: Resolution, base_url: str) -> dict[str, Any]:
    return {
        "resolved": [_entry(resolution.resolved[name], base_url) for name in resolution.install_order],
        "install_order": list(resolution.install_order),
        "locked_ignored": [dict(item) for item in resolution.locked_ignored],
        "skipped": [dict(item) for item in resolution.skipped],
    }


def client_gone_probe(environ: Mapping[str, Any]) -> Callable[[], bool] | None:
    """Under gunicorn, a check that the client has closed its connection (a non-blocking peek at
    the socket gunicorn puts in the WSGI environ: end of stream or a reset means gone); None where
    there is no socket (the test client, other servers)."""
    sock = environ.get("gunicorn.socket")
    if not isinstance(sock, socket.socket):
        return None

    def gone() -> bool:
        try:
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False  # connected, nothing sent: the client is waiting
        except OSError:
            return True  # reset, or the socket was closed

    return gone


def resolve_requirements(
    *,
    requirements: Sequence[str],
    runtime_version: str | None,
    include_prereleases: bool,
    locked: Mapping[str, str] | None,
    cancelled: Callable[[], bool] | None = None,
    catalogue: Catalogue | None = None,
    timeout: float | None = None,
) -> Resolution:
    """Resolve against the registry's catalogue (``catalogue``: a `DatabaseCatalogue` by default;
    the web catalog's graph wraps one to record what it read) within ``timeout`` seconds, by
    default REGISTRY_RESOLVE_TIMEOUT (ResolutionError, 422, when impossible; ResolutionTooComplex,
    422 too_complex, past the bound or once ``cancelled()`` says the client has gone)."""
    if len(requirements) > MAX_REQUIREMENTS:
        raise BadRequest(f"too many requirements: {len(requirements)}; at most {MAX_REQUIREMENTS} at once")
    return resolve(
        list(requirements),
        catalogue if catalogue is not None else DatabaseCatalogue(),
        runtime_version=runtime_version,
        include_prereleases=include_prereleases,
        locked=locked,
        timeout=settings.REGISTRY_RESOLVE_TIMEOUT if timeout is None else timeout,
        cancelled=cancelled,
    )


def _extension_for(kind: str, name: str) -> str:
    """The extension that provides ``kind`` NAME, by the same rule as the lookup endpoint and the
    client (registry.selectors.provider_lookup). An extension of another kind named NAME is
    pointed at its own install endpoint."""
    selectors.check_name(name, what=kind)  # a name that cannot exist never reaches a query
    try:
        extension, _ = selectors.provider_lookup(kind=kind, name=name)
        return extension.name
    except NotFound:
        pass
    other = Extension.objects.filter(name=name).exclude(index_etag="").values_list("type", flat=True).first()
    if other is not None:
        raise NotFound(
            f"{name!r} is a {other}, not a {kind}: use POST {reverse('install-plan', kwargs={'kinds': plural(other)})}",
            details=[{"name": name, "type": other}],
        )
    from difflib import get_close_matches

    known = list(Provide.objects.filter(kind=kind).values_list("name", flat=True).distinct())
    close = get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise NotFound(f"no {kind} named {name!r} in this registry{hint}")


def _version_requirement(extension: str, version: str | None) -> str:
    """The root requirement for an install: a full version pins it exactly, anything else is a
    constraint (``^1.28``, ``>=1.28, <2``)."""
    if not version:
        return extension
    try:
        SemVer.parse(version)
    except ExtensionError:
        try:
            Constraint.parse(version)
        except ExtensionError as exc:
            # As POST /api/v1/resolve answers a requirement that does not parse: a 422 naming it.
            raise ResolutionError(
                exc.message,  # (the error names its path: "version: ...")
                path="version",
                details=[
                    {"reason": "invalid_requirement", "path": "version", "requirement": version, "message": exc.message}
                ],
            ) from None
        return f"{extension} {version}"
    return f"{extension} ={version}"


def install_plan(
    *,
    kind: str,
    name: str,
    version: str | None,
    runtime_version: str | None,
    base_url: str,
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """What installing a taskserv (or cluster, provider) takes: the resolved set in install order
    with download URLs and digests, and what each needs from the host."""
    extension = _extension_for(kind, name)
    requirement = _version_requirement(extension, version)
    catalogue = DatabaseCatalogue()
    # One budget for the plan and, on the error path, the check of the fix it suggests.
    deadline = time.monotonic() + settings.REGISTRY_RESOLVE_TIMEOUT

    def plan_for(root: str) -> Resolution:
        return resolve_requirements(
            requirements=[root],
            runtime_version=runtime_version,
            include_prereleases=False,
            locked=None,
            cancelled=cancelled,
            catalogue=catalogue,
            timeout=max(0.0, deadline - time.monotonic()),
        )

    def fits(root: str) -> bool | None:
        """Whether the plan resolves with ``root``; None when that could not be decided in time (the
        plan took the budget: the resolver counts work, and reads from the database besides)."""
        if deadline - time.monotonic() < MIN_CHECK_SECONDS:
            return None
        try:
            plan_for(root)
        except ResolutionTooComplex:
            return None
        except ResolutionError:
            return False
        return True

    resolution = plan_for(requirement)
    chosen = resolution.resolved[extension]
    if not offers(chosen, kind, name):
        raise _not_provided(
            kind,
            name,
            chosen,
            catalogue.versions(extension),
            version=version,
            runtime_version=runtime_version,
            fits=fits,
        )
    manifests = _manifests(resolution)
    entries = []
    system_packages: set[str] = set()
    required_env: set[str] = set()
    for item in resolution_data(resolution, base_url)["resolved"]:
        manifest = manifests.get((item["name"], item["version"]), {})
        needs = {
            "system_packages": list(manifest.get("system_packages", [])),
            "required_env": list(manifest.get("required_env", [])),
            "optional_env": list(manifest.get("optional_env", [])),
        }
        system_packages.update(needs["system_packages"])
        required_env.update(needs["required_env"])
        entries.append({**item, **needs})
    return {
        "name": name,
        "kind": kind,
        "extension": extension,
        "version": str(chosen.version),
        "install_order": list(resolution.install_order),
        "extensions": entries,
        "system_packages": sorted(system_packages),
        "required_env": sorted(required_env),
    }


def _not_provided(
    kind: str,
    name: str,
    chosen: Candidate,
    versions: Sequence[Candidate],
    *,
    version: str | None,
    runtime_version: str | None,
    fits: Callable[[str], bool | None],
) -> ResolutionError:
    """The lookup found ``chosen``'s extension for ``kind`` NAME (its latest version offers it), but
    ``chosen`` does not offer it: a 422 saying why it was chosen (``version``, or what fits the
    runtime and the dependencies) and which versions do (`providing_since`); ``version '>=FIRST'``
    is suggested only when the plan resolves with it (``fits``; not asked without ``version``: the
    plan already chose the newest version that fits)."""
    since = providing_since(versions, kind, name)
    what = f"{kind} {name!r}"
    other = f", a {chosen.type}," if chosen.type != kind else ","
    here = "the dependencies' constraints"
    if runtime_version:
        here = f"runtime_version {runtime_version} and {here}"
    if version is not None:
        why = f"{version!r} chooses {chosen.name} {chosen.version}{other} which does not provide {what}"
    else:
        why = f"{chosen.version}, the newest version of {chosen.name} that fits {here}, does not provide {what}"
    fitting = fits(f"{chosen.name} >={since}") if since is not None and version is not None else False
    if since is None:
        fix = f"no version of {chosen.name} that can be installed does"
    elif fitting:
        fix = f"its versions from {since} do: ask for version '>={since}'"
    elif fitting is None:
        fix = f"its versions from {since} do"
    else:
        fix = f"its versions from {since} do, but none of them fits {here}"
    message = f"{why}; {fix}"
    detail = {
        "reason": "not_provided",
        "extension": chosen.name,
        "version": str(chosen.version),
        "provided_since": str(since) if since is not None else None,
        "message": message,
    }
    return ResolutionError(message, path="version" if version is not None else "", details=[detail])


def _manifests(resolution: Resolution) -> dict[tuple[str, str], dict[str, Any]]:
    wanted = {(name, str(c.version)) for name, c in resolution.resolved.items()}
    rows = VersionRow.objects.filter(extension__name__in=[n for n, _ in wanted]).values_list(
        "extension__name", "version", "manifest"
    )
    return {(n, v): m for n, v, m in rows if (n, v) in wanted}
