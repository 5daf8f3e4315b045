"""The catalog's SVG pictures (registry.pictures): pure functions, no Django. The downloads chart and
the dependency graph's layered layout, what they draw, and that author text never escapes."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import date, timedelta
from pathlib import Path

import pytest

from registry import pictures
from registry.pictures import GraphEdge, GraphNode, day_series, dependency_graph, downloads_chart, layered_layout

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script>"onload="x'
END = date(2026, 12, 1)


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 - our own output, parsed to check it is well-formed


def assert_inert(svg: str) -> None:
    """No script, no event handler, no style, no external reference."""
    root = parse(svg)
    for element in root.iter():
        tag = element.tag.removeprefix(SVG)
        assert tag not in {"script", "style", "foreignObject", "image", "use"}, tag
        for attribute, value in element.attrib.items():
            assert not attribute.lower().startswith("on"), attribute
            assert attribute != "style", element.tag
            if attribute == "href":
                assert value.startswith("/"), value


def test_it_imports_without_django() -> None:
    code = "import sys; sys.modules['django'] = None; import registry.pictures"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True).returncode == 0


# --- the chart -----------------------------------------------------------------------------------


def test_a_day_series_fills_the_days_without_downloads_with_zero() -> None:
    series = day_series({END: 3, END - timedelta(days=2): 5, END - timedelta(days=200): 9}, end=END, days=5)
    assert series == [(END - timedelta(days=4 - i), n) for i, n in enumerate([0, 0, 5, 0, 3])]
    assert len(day_series({}, end=END, days=10**6)) == pictures.MAX_DAYS  # bounded


def test_the_chart_draws_one_bar_per_day_with_downloads_each_with_its_title() -> None:
    series = day_series({END: 3, END - timedelta(days=10): 12}, end=END, days=90)
    svg = downloads_chart(series, title="Downloads of etcd", ident="c")
    root = parse(svg)
    assert root.get("role") == "img" and root.get("aria-labelledby") == "c-title c-desc"
    assert root.find(f"{SVG}title").text == "Downloads of etcd"  # type: ignore[union-attr]
    desc = root.find(f"{SVG}desc").text  # type: ignore[union-attr]
    assert desc == "15 downloads in 90 days, 2026-09-03 to 2026-12-01; busiest day 2026-11-21 with 12"
    bars = root.findall(f"{SVG}rect")
    assert [b.find(f"{SVG}title").text for b in bars] == [  # type: ignore[union-attr]
        "2026-11-21: 12 downloads",
        "2026-12-01: 3 downloads",
    ]
    heights = [float(b.get("height", 0)) for b in bars]
    assert heights[0] > heights[1] > 0
    # The axis: 0, half and the top gridline (a round number at or above the busiest day).
    labels = [t.text for t in root.findall(f"{SVG}text")]
    assert labels[:3] == ["0", "10", "20"] and labels[3:] == ["2026-09-03", "2026-10-18", "2026-12-01"]
    assert_inert(svg)


def test_a_chart_without_downloads_says_so_and_draws_no_bar() -> None:
    svg = downloads_chart(day_series({}, end=END, days=90), title="t", ident="c")
    assert parse(svg).findall(f"{SVG}rect") == []
    assert "0 downloads in 90 days" in svg


def test_the_chart_escapes_its_title_and_ident() -> None:
    svg = downloads_chart(day_series({END: 1}, end=END, days=3), title=HOSTILE, ident=HOSTILE)
    assert "<script" not in svg and 'onload="' not in svg
    assert parse(svg).find(f"{SVG}title").text == HOSTILE  # type: ignore[union-attr]
    assert_inert(svg)


def test_the_same_data_gives_the_same_bytes() -> None:
    series = day_series({END: 4}, end=END, days=30)
    assert downloads_chart(series, title="t", ident="c") == downloads_chart(list(series), title="t", ident="c")


# --- the layout ------------------------------------------------------------------------------------


def test_dependencies_are_layered_below_everything_that_needs_them() -> None:
    # web -> api -> db; web -> db (so db is two layers down, by the longest path); web -> cache
    edges = [("web", "api"), ("api", "db"), ("web", "db"), ("web", "cache")]
    layout = layered_layout("web", ["web", "api", "db", "cache"], edges)
    assert layout.layers == [["web"], ["api", "cache"], ["db"]]
    for a, b in edges:
        assert layout.position[a][0] < layout.position[b][0]


def test_the_order_within_layers_follows_the_parents() -> None:
    # Two subtrees: the children of a stay on a's side, those of z on z's side.
    edges = [("r", "z"), ("r", "a"), ("z", "z1"), ("z", "z2"), ("a", "a1"), ("a", "a2")]
    layout = layered_layout("r", ["r", "a", "z", "a1", "a2", "z1", "z2"], edges)
    assert layout.layers == [["r"], ["a", "z"], ["a1", "a2", "z1", "z2"]]


def test_a_cycle_is_laid_out_and_names_not_reached_go_below() -> None:
    layout = layered_layout("a", ["a", "b", "c", "lonely"], [("a", "b"), ("b", "c"), ("c", "a")])
    assert layout.layers == [["a"], ["b"], ["c"], ["lonely"]]


def test_the_layout_is_deterministic_whatever_the_input_order() -> None:
    names = [f"n{i:02d}" for i in range(30)]
    edges = [(names[i], names[j]) for i in range(30) for j in (i * 2 + 1, i * 2 + 2) if j < 30]
    first = layered_layout("n00", names, edges)
    again = layered_layout("n00", list(reversed(names)), list(reversed(edges)))
    assert first.layers == again.layers
    assert sum(len(layer) for layer in first.layers) == 30


# --- the graph -------------------------------------------------------------------------------------


def graph_nodes() -> tuple[list[GraphNode], list[GraphEdge]]:
    nodes = [
        GraphNode("kubernetes", "1.28.0", "/extensions/kubernetes/1.28.0/", "root", "taskserv"),
        GraphNode("etcd", "3.5.12", "/extensions/etcd/3.5.12/", "ok", "taskserv"),
        GraphNode("containerd", "", "/extensions/containerd/", "missing"),
        GraphNode("cni", "1.0.0", "/extensions/cni/1.0.0/", "conflict"),
    ]
    edges = [
        GraphEdge("kubernetes", "etcd", "^3.5"),
        GraphEdge("kubernetes", "containerd", "^9", broken=True),
        GraphEdge("kubernetes", "cni", ">=1"),
        GraphEdge("etcd", "cni", "<1", broken=True),
    ]
    return nodes, edges


def test_each_node_is_a_link_with_its_name_version_and_trouble() -> None:
    nodes, edges = graph_nodes()
    svg = dependency_graph(nodes, edges, root="kubernetes", title="What kubernetes installs", ident="g")
    root = parse(svg)
    assert root.get("role") == "group" and root.get("aria-labelledby") == "g-title"
    links = {a.get("href"): a for a in root.iter(f"{SVG}a")}
    assert set(links) == {n.href for n in nodes}
    labels = {href: a.find(f"{SVG}title").text for href, a in links.items()}  # type: ignore[union-attr]
    assert labels["/extensions/kubernetes/1.28.0/"] == "kubernetes 1.28.0 (the version shown)"
    assert labels["/extensions/etcd/3.5.12/"] == "etcd 3.5.12"
    assert labels["/extensions/containerd/"] == "containerd no version (no version matches)"
    assert labels["/extensions/cni/1.0.0/"] == "cni 1.0.0 (in conflict)"
    classes = {href: a.get("class") for href, a in links.items()}
    assert classes["/extensions/containerd/"] == "graph-node graph-node-missing"
    assert classes["/extensions/kubernetes/1.28.0/"] == "graph-node graph-node-root graph-kind-taskserv"
    # Every edge drawn, the broken ones marked (class and words) and pointing at their own marker.
    paths = [p for p in root.iter(f"{SVG}path") if "graph-edge" in (p.get("class") or "")]
    assert len(paths) == 4
    broken = [p for p in paths if "graph-edge-broken" in (p.get("class") or "")]
    assert [p.find(f"{SVG}title").text for p in broken] == [  # type: ignore[union-attr]
        "etcd requires cni <1: no version matches",
        "kubernetes requires containerd ^9: no version matches",
    ]
    assert all(p.get("marker-end") == "url(#g-arrow-broken)" for p in broken)
    assert_inert(svg)


def test_author_text_in_the_graph_is_escaped() -> None:
    nodes = [GraphNode("root", HOSTILE, "/extensions/root/", "root"), GraphNode("dep", "1.0.0", '/x"><script>')]
    svg = dependency_graph(nodes, [GraphEdge("root", "dep", HOSTILE)], root="root", title=HOSTILE, ident="g")
    assert "<script" not in svg and 'onload="' not in svg
    assert_inert(svg)  # the href stays one attribute value, starting with /
    assert re.search(r'href="/x&quot;&gt;&lt;script&gt;"', svg)


def test_the_graph_is_bounded() -> None:
    nodes = [GraphNode(f"n{i:04d}", "1.0.0", f"/extensions/n{i:04d}/", "ok") for i in range(1, 500)]
    nodes.append(GraphNode("n0000", "1.0.0", "/extensions/n0000/", "root"))
    edges = [GraphEdge("n0000", n.name) for n in nodes[:-1]]
    svg = dependency_graph(nodes, edges, root="n0000", title="t", ident="g")
    assert len(list(parse(svg).iter(f"{SVG}a"))) == pictures.MAX_NODES
    assert 'href="/extensions/n0000/"' in svg  # the root is always drawn


def test_the_root_must_be_a_node() -> None:
    with pytest.raises(ValueError, match="root"):
        dependency_graph([GraphNode("a", "1", "/a")], [], root="b", title="t", ident="g")
