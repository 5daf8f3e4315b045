"""The web catalog's pictures, rendered on the server as SVG: the downloads chart and the
dependency graph. Pure functions of plain data (no Django, no I/O), deterministic (the same data
gives the same bytes), so they are unit-tested directly and cached by their inputs.

What goes into the SVG:

- every text that came from an author or a URL (names, versions, constraints, messages) is
  escaped with `html.escape` (quotes too: some land in attributes); links are only the hrefs the
  caller built with `reverse()`, escaped again;
- no script, no event attribute, no ``style`` attribute or element, no external reference: colours
  come from classes the catalog's stylesheet defines (so the strict CSP, ``style-src 'self'`` with
  no ``unsafe-inline``, holds) and ids are prefixed per picture (two pictures on a page never share
  a marker id);
- sizes are bounded: at most `MAX_DAYS` bars, `MAX_NODES` nodes and `MAX_LABEL` characters per
  label, whatever the input.

The chart is ``role="img"`` with a ``<title>`` and a ``<desc>`` (the page puts the same numbers in a
table); each bar has a ``<title>`` (shown on hover). The graph is a ``role="group"`` labelled by its
``<title>``, each node a link named by its ``<title>``; the page lists the same install order as
text.

The graph layout is a small layered (Sugiyama-style) layout: layers by longest path from the root
(dependencies below their dependents, so every edge points down), a few barycentre sweeps to
untangle the order within layers (ties broken by name), then coordinates on a grid."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

MAX_DAYS = 366
MAX_NODES = 120
MAX_LABEL = 40
SWEEPS = 8

# --- downloads chart --------------------------------------------------------------------------------

CHART_WIDTH = 720
CHART_HEIGHT = 200
_PAD_LEFT, _PAD_RIGHT, _PAD_TOP, _PAD_BOTTOM = 48, 12, 12, 28


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cut(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^n at or above ``value`` (the chart's top gridline)."""
    if value <= 1:
        return 1
    step = 1
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def day_series(counts: Mapping[date, int], *, end: date, days: int) -> list[tuple[date, int]]:
    """``days`` consecutive days ending on ``end`` (inclusive), each with its count (0 if absent)."""
    days = max(1, min(days, MAX_DAYS))
    start = end - timedelta(days=days - 1)
    return [(start + timedelta(days=i), int(counts.get(start + timedelta(days=i), 0))) for i in range(days)]


def downloads_chart(series: Sequence[tuple[date, int]], *, title: str, ident: str) -> str:
    """A bar chart of downloads per day, oldest on the left: ``series`` from `day_series`."""
    series = list(series)[-MAX_DAYS:]
    total = sum(n for _, n in series)
    top = _nice_ceiling(max((n for _, n in series), default=0))
    inner_w = CHART_WIDTH - _PAD_LEFT - _PAD_RIGHT
    inner_h = CHART_HEIGHT - _PAD_TOP - _PAD_BOTTOM
    slot = inner_w / max(1, len(series))
    bar = max(1.0, slot * 0.8)
    first, last = (series[0][0], series[-1][0]) if series else (None, None)
    busiest = max(series, key=lambda item: (item[1], item[0])) if total else None
    summary = f"{total} download{'s' if total != 1 else ''} in {len(series)} days"
    if first is not None and last is not None:
        summary += f", {first.isoformat()} to {last.isoformat()}"
    if busiest is not None:
        summary += f"; busiest day {busiest[0].isoformat()} with {busiest[1]}"
    ident = _e(ident)
    out = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" '
        f'role="img" aria-labelledby="{ident}-title {ident}-desc" preserveAspectRatio="xMidYMid meet">',
        f'<title id="{ident}-title">{_e(title)}</title>',
        f'<desc id="{ident}-desc">{_e(summary)}</desc>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = _PAD_TOP + inner_h * (1 - fraction)
        value = top * fraction
        label = f"{value:g}" if value != int(value) else str(int(value))
        out.append(
            f'<line class="chart-grid" x1="{_PAD_LEFT}" y1="{y:.1f}" x2="{CHART_WIDTH - _PAD_RIGHT}" y2="{y:.1f}"/>'
        )
        out.append(f'<text class="chart-axis" x="{_PAD_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(label)}</text>')
    for i, (day, count) in enumerate(series):
        if count <= 0:
            continue
        height = max(1.0, inner_h * count / top)
        x = _PAD_LEFT + i * slot + (slot - bar) / 2
        y = _PAD_TOP + inner_h - height
        out.append(
            f'<rect class="chart-bar" x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}">'
            f"<title>{_e(day.isoformat())}: {count} download{'s' if count != 1 else ''}</title></rect>"
        )
    if series:
        for i, anchor in ((0, "start"), (len(series) // 2, "middle"), (len(series) - 1, "end")):
            x = _PAD_LEFT + i * slot + slot / 2
            out.append(
                f'<text class="chart-axis" x="{x:.1f}" y="{CHART_HEIGHT - 8}" text-anchor="{anchor}">'
                f"{_e(series[i][0].isoformat())}</text>"
            )
    out.append("</svg>")
    return "".join(out)


# --- dependency graph ---------------------------------------------------------------------------------

#: A node's kinds of trouble, each a CSS class (``graph-node-conflict``...) and words in its title.
NODE_STATES = {
    "root": "the version shown",
    "ok": "",
    "yanked": "yanked",
    "conflict": "in conflict",
    "missing": "no version matches",
}
NODE_W, NODE_H, H_GAP, V_GAP, MARGIN = 168, 44, 24, 56, 12


@dataclass(frozen=True)
class GraphNode:
    name: str
    version: str  # "" when no version could be chosen
    href: str
    state: str = "ok"  # a key of NODE_STATES
    kind: str = ""  # taskserv, provider... (a CSS class)


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    label: str = ""  # the constraint as written
    broken: bool = False  # no version of the target satisfies it


@dataclass(frozen=True)
class Layout:
    """Where each node goes: its layer (0 is the root's) and its position within the layer."""

    layers: list[list[str]]
    position: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (layer, index)

    @property
    def width(self) -> int:
        widest = max((len(layer) for layer in self.layers), default=1)
        return MARGIN * 2 + widest * NODE_W + (widest - 1) * H_GAP

    @property
    def height(self) -> int:
        return MARGIN * 2 + len(self.layers) * NODE_H + max(0, len(self.layers) - 1) * V_GAP


def layered_layout(root: str, names: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Layers by longest path from ``root`` (a name below every name that depends on it); names
    not reached from the root go below the reached ones, in the order given. Cycles are broken
    by ignoring edges back to a name already on the current path. Within a layer, names are
    ordered by the mean position of their dependents (barycentre), ties by name."""
    known = list(dict.fromkeys(names))
    if root not in known:
        known.insert(0, root)
    wanted = set(known)
    children: dict[str, list[str]] = {n: [] for n in known}
    for a, b in edges:
        if a in wanted and b in wanted and a != b and b not in children[a]:
            children[a].append(b)
    for kids in children.values():
        kids.sort()
    # Depth-first order from the root with back edges dropped, then longest path over that DAG.
    order: list[str] = []
    state: dict[str, int] = {}  # 1 on the path, 2 done
    dag: dict[str, list[str]] = {n: [] for n in known}
    stack: list[tuple[str, int]] = [(root, 0)]
    state[root] = 1
    while stack:
        node, i = stack.pop()
        kids = children[node]
        if i < len(kids):
            stack.append((node, i + 1))
            kid = kids[i]
            if state.get(kid) == 1:
                continue  # a back edge: a cycle, drawn but not used for layering
            dag[node].append(kid)
            if kid not in state:
                state[kid] = 1
                stack.append((kid, 0))
        else:
            state[node] = 2
            order.append(node)
    order.reverse()  # topological: the root first
    layer: dict[str, int] = {root: 0}
    for node in order:
        for kid in dag[node]:
            layer[kid] = max(layer.get(kid, 0), layer[node] + 1)
    deepest = max(layer.values(), default=0)
    for name in known:  # not reached from the root
        if name not in layer:
            deepest += 1
            layer[name] = deepest
    count = max(layer.values()) + 1
    layers: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(known, key=lambda n: (layer[n], n)):
        layers[layer[name]].append(name)
    layers = [names_ for names_ in layers if names_]
    parents: dict[str, list[str]] = {n: [] for n in known}
    for a in known:
        for b in children[a]:
            parents[b].append(a)
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        near = parents if downward else children
        rows = range(1, len(layers)) if downward else range(len(layers) - 2, -1, -1)
        for r in rows:
            index = {n: i for names_ in layers for i, n in enumerate(names_)}
            layers[r] = sorted(layers[r], key=lambda name: _barycentre(name, near, index))
    position = {n: (r, i) for r, names_ in enumerate(layers) for i, n in enumerate(names_)}
    return Layout(layers=layers, position=position)


def _barycentre(name: str, near: Mapping[str, list[str]], index: Mapping[str, int]) -> tuple[float, str]:
    """The mean position of a name's neighbours in the layer beside it (its own if it has none)."""
    linked = [index[n] for n in near[name] if n in index]
    return (sum(linked) / len(linked) if linked else float(index[name]), name)


def _node_box(layout: Layout, name: str) -> tuple[float, float]:
    """The top-left corner of a node, each layer centred."""
    r, i = layout.position[name]
    row = len(layout.layers[r])
    row_width = row * NODE_W + (row - 1) * H_GAP
    x = (layout.width - row_width) / 2 + i * (NODE_W + H_GAP)
    y = MARGIN + r * (NODE_H + V_GAP)
    return x, y


def dependency_graph(
    nodes: Sequence[GraphNode],
    edges: Sequence[GraphEdge],
    *,
    root: str,
    title: str,
    ident: str,
) -> str:
    """The dependency graph as SVG: one linked box per node (name, version, trouble), an arrow from
    each dependent to its dependency, broken constraints and troubled nodes marked (class and
    words, never colour alone). At most `MAX_NODES` nodes (the rest are dropped; the caller says so)."""
    nodes = list({n.name: n for n in nodes}.values())
    if root not in {n.name for n in nodes}:
        raise ValueError(f"the root {root!r} is not one of the nodes")
    nodes = sorted(nodes, key=lambda n: (n.name != root, n.name))[:MAX_NODES]
    by_name = {n.name: n for n in nodes}
    edges = [e for e in edges if e.source in by_name and e.target in by_name and e.source != e.target]
    layout = layered_layout(root, [n.name for n in nodes], [(e.source, e.target) for e in edges])
    ident = _e(ident)
    out = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {layout.width} {layout.height}" '
        f'width="{layout.width}" height="{layout.height}" role="group" aria-labelledby="{ident}-title">',
        f'<title id="{ident}-title">{_e(title)}</title>',
        "<defs>",
        f'<marker id="{ident}-arrow" class="graph-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>',
        f'<marker id="{ident}-arrow-broken" class="graph-arrow graph-arrow-broken" viewBox="0 0 10 10" refX="9" '
        'refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>',
        "</defs>",
    ]
    for edge in sorted(edges, key=lambda e: (e.source, e.target)):
        sx, sy = _node_box(layout, edge.source)
        tx, ty = _node_box(layout, edge.target)
        x1, y1 = sx + NODE_W / 2, sy + NODE_H
        x2, y2 = tx + NODE_W / 2, ty
        if ty <= sy:  # a cycle's back edge: from the side, around
            x1, y1, x2, y2 = sx + NODE_W, sy + NODE_H / 2, tx + NODE_W, ty + NODE_H / 2
            bend = max(40.0, (sy - ty) / 2)
            path = f"M{x1:.1f},{y1:.1f}C{x1 + bend:.1f},{y1:.1f} {x2 + bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        else:
            mid = (y1 + y2) / 2
            path = f"M{x1:.1f},{y1:.1f}C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
        marker = f"{ident}-arrow-broken" if edge.broken else f"{ident}-arrow"
        what = f"{edge.source} requires {edge.target} {edge.label}".rstrip()
        if edge.broken:
            what += ": no version matches"
        out.append(
            f'<path class="graph-edge{" graph-edge-broken" if edge.broken else ""}" d="{path}" '
            f'marker-end="url(#{marker})"><title>{_e(_cut(what, 200))}</title></path>'
        )
    for node in nodes:
        x, y = _node_box(layout, node.name)
        state = node.state if node.state in NODE_STATES else "ok"
        trouble = NODE_STATES[state]
        version = node.version or "no version"
        label = f"{node.name} {version}" + (f" ({trouble})" if trouble else "")
        kind = f" graph-kind-{_e(node.kind)}" if node.kind.isalpha() else ""
        out.append(
            f'<a class="graph-node graph-node-{state}{kind}" href="{_e(node.href)}">'
            f"<title>{_e(label)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text class="graph-name" x="{x + NODE_W / 2:.1f}" y="{y + 18:.1f}" text-anchor="middle">'
            f"{_e(_cut(node.name, 22))}</text>"
            f'<text class="graph-version" x="{x + NODE_W / 2:.1f}" y="{y + 35:.1f}" text-anchor="middle">'
            f"{_e(_cut(version + (' · ' + trouble if trouble and state != 'root' else ''), 26))}</text>"
            "</a>"
        )
    out.append("</svg>")
    return "".join(out)
