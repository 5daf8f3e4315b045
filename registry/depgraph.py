"""The dependency graph of a version for the web catalog: what ``provisioning taskserv create``
would install with it pinned, resolved exactly as ``POST /api/v1/resolve`` resolves
(`registry.resolution.resolve_requirements`, under REGISTRY_RESOLVE_TIMEOUT), drawn by
`registry.pictures.dependency_graph`.

When resolution fails the picture still shows what the version asks for: from the version down,
each dependency's newest version that satisfies the constraint on it (not necessarily a
consistent set: that is what failed), the names the resolver named as in conflict marked, and a
constraint no version satisfies drawn as a broken edge to a node with no version.

Cache: per process, per (name, version), validated by the index documents the resolution read.
A resolution is a function of the documents it read (a `RecordingCatalogue` notes their names),
so the graph is reused while each of those documents keeps its ETag: one query to check, and the
ETag of the page includes the same state (`VersionGraph.state`)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.template.loader import render_to_string
from django.urls import reverse

from extensions.errors import ExtensionError, ResolutionError
from extensions.resolver import Candidate, Resolution
from extensions.versions import SemVer
from registry import pictures, resolution, thisrequest
from registry.kept import Kept
from registry.models import Extension
from registry.models import Version as VersionRow

log = logging.getLogger(__name__)

CACHE_SIZE = 512
STEPS_TEMPLATE = "catalog/_graph_steps.html"

_cache: Kept[tuple[str, str], tuple[dict[str, str], VersionGraph]] = Kept(CACHE_SIZE)


class RecordingCatalogue:
    """A `DatabaseCatalogue` that notes which names' documents were read."""

    def __init__(self) -> None:
        self._inner = resolution.DatabaseCatalogue()
        self.read: set[str] = set()

    def versions(self, name: str) -> Sequence[Candidate]:
        self.read.add(name)
        return self._inner.versions(name)

    def names(self) -> Iterable[str]:
        return self._inner.names()

    def etags(self) -> dict[str, str]:
        return {name: self._inner._etags.get(name, "") for name in sorted(self.read)}


@dataclass(frozen=True)
class Step:
    """One extension of the graph, for the text beside the picture (install order when resolved)."""

    name: str
    version: str
    url: str
    state: str
    requires: list[tuple[str, str, bool]]  # (name, constraint as written, broken)


@dataclass(frozen=True)
class VersionGraph:
    svg: str
    steps: list[Step]
    steps_html: str  # the steps as the page lists them (catalog/_graph_steps.html), escaped
    resolved: bool  # False: resolution failed, the picture shows what was asked
    problem: str  # the resolver's message when it failed
    dropped: int  # nodes beyond pictures.MAX_NODES, not drawn
    state: str  # a digest of the documents it was computed from (for ETags)


def _url(name: str, version: str) -> str:
    if not version:
        return reverse("catalog-extension", kwargs={"name": name})
    return reverse("catalog-version", kwargs={"name": name, "version": version})


def _state(name: str, version: str, etags: dict[str, str]) -> str:
    text = "\0".join([name, version, *(f"{n}={e}" for n, e in sorted(etags.items()))])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def version_graph(*, name: str, version: str) -> VersionGraph | None:
    """The graph of ``name`` ``version`` (its canonical text); None if there is no such version.
    Read once per web request (the page's ETag and the page share it: registry.thisrequest)."""
    return thisrequest.remembered(("depgraph", name, version), lambda: _version_graph(name, version))


def _version_graph(name: str, version: str) -> VersionGraph | None:
    key = (name, version)
    entry = _cache.get(key)
    if entry is not None:
        etags, graph = entry
        current = dict(Extension.objects.filter(name__in=list(etags)).values_list("name", "index_etag"))
        if all(current.get(n, "") == e for n, e in etags.items()):
            return graph
    if not VersionRow.objects.filter(extension__name=name, canonical=version).exists():
        return None  # (cheaper than reading every name's ETag for a version that is not there)
    catalogue = RecordingCatalogue()
    computed = _compute(name, version, catalogue)
    if computed is None:
        return None
    _cache.put(key, (catalogue.etags(), computed))
    return computed


def clear_cache() -> None:
    _cache.clear()


def _root(name: str, version: str, catalogue: RecordingCatalogue) -> Candidate | None:
    try:
        wanted = SemVer.parse(version)
    except ExtensionError:
        return None
    for candidate in catalogue.versions(name):
        if candidate.version == wanted:
            return candidate
    return None


def _compute(name: str, version: str, catalogue: RecordingCatalogue) -> VersionGraph | None:
    root = _root(name, version, catalogue)
    if root is None:
        return None
    try:
        answer = resolution.resolve_requirements(
            requirements=[f"{name} ={root.version}"],
            runtime_version=None,
            include_prereleases=False,
            locked=None,
            catalogue=catalogue,
        )
    except ResolutionError as exc:  # too_complex included
        troubled = {str(d["name"]) for d in exc.details if isinstance(d, dict) and d.get("name")}
        return _asked(root, catalogue, exc.message, troubled)
    return _resolved(root, answer, catalogue)


def _resolved(root: Candidate, answer: Resolution, catalogue: RecordingCatalogue) -> VersionGraph:
    nodes, edges, steps = [], [], []
    for step in answer.install_order:
        candidate = answer.resolved[step]
        text = str(candidate.version)
        state = "root" if step == root.name else ("yanked" if candidate.yanked else "ok")
        nodes.append(pictures.GraphNode(step, text, _url(step, text), state, candidate.type))
        requires = []
        for requirement in candidate.dependencies:
            shown = requirement.written.removeprefix(requirement.name).strip()
            edges.append(pictures.GraphEdge(step, requirement.name, shown))
            requires.append((requirement.name, shown, False))
        steps.append(Step(step, text, _url(step, text), state, requires))
    return _graph(root, nodes, edges, steps, catalogue, resolved=True, problem="")


def _asked(root: Candidate, catalogue: RecordingCatalogue, problem: str, troubled: set[str]) -> VersionGraph:
    """What the version asks for, breadth first: each dependency's newest non-yanked version
    that satisfies the first constraint met on it."""
    chosen: dict[str, Candidate | None] = {root.name: root}
    queue = [root]
    nodes: list[pictures.GraphNode] = []
    edges: list[pictures.GraphEdge] = []
    steps: list[Step] = []
    while queue and len(chosen) <= pictures.MAX_NODES:
        candidate = queue.pop(0)
        requires = []
        for requirement in candidate.dependencies:
            shown = requirement.written.removeprefix(requirement.name).strip()
            if requirement.name not in chosen:
                match = next(
                    (
                        c
                        for c in catalogue.versions(requirement.name)
                        if not c.yanked and requirement.constraint.contains(c.version)
                    ),
                    None,
                )
                chosen[requirement.name] = match
                if match is not None:
                    queue.append(match)
            target = chosen[requirement.name]
            broken = target is None or not requirement.constraint.contains(target.version, include_prereleases=True)
            edges.append(pictures.GraphEdge(candidate.name, requirement.name, shown, broken))
            requires.append((requirement.name, shown, broken))
        text = str(candidate.version)
        state = "root" if candidate is root else ("conflict" if candidate.name in troubled else "ok")
        nodes.append(pictures.GraphNode(candidate.name, text, _url(candidate.name, text), state, candidate.type))
        steps.append(Step(candidate.name, text, _url(candidate.name, text), state, requires))
    for missing, found in chosen.items():
        if found is None:
            nodes.append(pictures.GraphNode(missing, "", _url(missing, ""), "missing"))
            steps.append(Step(missing, "", _url(missing, ""), "missing", []))
    return _graph(root, nodes, edges, steps, catalogue, resolved=False, problem=problem)


def _graph(
    root: Candidate,
    nodes: list[pictures.GraphNode],
    edges: list[pictures.GraphEdge],
    steps: list[Step],
    catalogue: RecordingCatalogue,
    *,
    resolved: bool,
    problem: str,
) -> VersionGraph:
    what = "installs" if resolved else "asks for (resolution failed)"
    svg = pictures.dependency_graph(
        nodes,
        edges,
        root=root.name,
        title=f"Dependency graph: what {root.name} {root.version} {what}",
        ident=f"graph-{root.name}",
    )
    return VersionGraph(
        svg=svg,
        steps=steps,
        # Rendered once per graph, not on every page that shows it (a large graph's list is most
        # of a page's rendering time); it takes nothing from the request.
        steps_html=render_to_string(STEPS_TEMPLATE, {"steps": steps}),
        resolved=resolved,
        problem=problem,
        dropped=max(0, len(nodes) - pictures.MAX_NODES),
        state=_state(root.name, str(root.version), catalogue.etags()),
    )
