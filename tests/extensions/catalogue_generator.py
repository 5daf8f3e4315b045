"""Generated catalogues for the resolver's tests and benchmarks, and "hold back" requests on them.

`generate_catalogue(seed, extensions=300, versions=10)` gives version records
``{"name", "version", "dependencies": {name: constraint}}`` shaped like a real ecosystem that
grows over time: every extension (``x-000``, ``x-001``, ...) has its versions released at moments
on one timeline, the first at time 0, and depends on 2 to 5 higher-numbered extensions (so the
graph has no cycle; mostly near ones, sometimes far ones). A version released at time t writes
each dependency against the target's newest version *at t*, in the style its author keeps for that
dependency: ``>=1.2, <2``, ``^1.2``, ``~1.2.3``, ``<3``, ``2.*``, ``>=1.2`` (SPEC 2.3). Now and
then a version adds or drops a dependency. So the newest versions of everything fit together, and
so do all the versions that were newest at any one moment, but newer versions need newer
dependencies.

`holdback_requests(records, seed, count)` gives requests of the shape operators write when they
hold one dependency back: ``["A >=a", "X <m"]``, A with a large closure, X deep in it (at least
three dependency steps below A), m one of X's newest versions. Whether an answer exists depends on
when a and m were released and on how tightly the constraints between A and X are written, and
backtracking searches find these hard: everything newest is wrong, and the reason is far below.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

Record = dict[str, Any]
STYLES = ("range",) * 6 + ("caret",) * 5 + ("below",) * 3 + ("wildcard",) * 3 + ("atleast",) * 2 + ("tilde",)


def _version_texts(rng: random.Random, count: int) -> list[str]:
    major, minor, patch = rng.randint(0, 3), rng.randint(0, 6), 0
    if major == 0 and minor == 0:
        minor = 1
    out = [(major, minor, patch)]
    while len(out) < count:
        roll = rng.random()
        if roll < 0.45:
            patch += 1
        elif roll < 0.97:
            minor, patch = minor + 1, 0
        else:
            major, minor, patch = major + 1, 0, 0
        out.append((major, minor, patch))
    return [f"{a}.{b}.{c}" for a, b, c in out]


def _parts(text: str) -> tuple[int, int, int]:
    a, b, c = text.split(".")
    return int(a), int(b), int(c)


def _constraint(style: str, newest: str, lag: str) -> str:
    """A constraint in ``style`` written when ``newest`` was the target's newest version (``lag``:
    an older version the author also tested with)."""
    major, minor, patch = _parts(newest)
    low_major, low_minor, _ = _parts(lag)
    if style == "range":
        return f">={low_major}.{low_minor}, <{major + 1}"
    if style == "caret":
        return f"^{low_major}.{low_minor}" if low_major == major > 0 else f">={low_major}.{low_minor}, <{major + 1}"
    if style == "tilde":
        return f"~{major}.{minor}.{patch}"
    if style == "below":
        return f"<{major + 1}"
    if style == "wildcard":
        return f"{major}.*"
    return f">={low_major}.{low_minor}"


def generate_catalogue(
    seed: int, *, extensions: int = 300, versions: int = 10, horizon: int = 1000, lag: tuple[int, int] = (1, 3)
) -> list[Record]:
    """The records of a generated catalogue (deterministic for its arguments). ``lag``: how many
    versions behind the newest the lower bounds of ranges may be (the smaller, the tighter)."""
    rng = random.Random(seed)
    names = [f"x-{i:03d}" for i in range(extensions)]
    texts = {name: _version_texts(rng, versions) for name in names}
    times = {name: [0, *sorted(rng.sample(range(1, horizon), versions - 1))] for name in names}
    records: list[Record] = []
    for i, name in enumerate(names):
        later = names[i + 1 :]
        targets: list[str] = []
        count = min(len(later), rng.randint(2, 5))
        while len(targets) < count:
            pick = rng.choice(later[:10] if rng.random() < 0.9 else later)
            if pick not in targets:
                targets.append(pick)
        styles = {target: rng.choice(STYLES) for target in targets}
        spare = [n for n in later if n not in targets]
        current = list(targets)
        for k, (text, moment) in enumerate(zip(texts[name], times[name], strict=True)):
            if k and spare and rng.random() < 0.1:  # a new dependency
                added = rng.choice(spare[:12])
                spare.remove(added)
                styles[added] = rng.choice(STYLES)
                current.append(added)
            if k and len(current) > 2 and rng.random() < 0.05:  # one dropped
                current.remove(rng.choice(current))
            if k == versions - 1:  # the newest version is written against the newest of everything
                moment = horizon
            deps = {}
            for target in current:
                released = [t for t, at in zip(texts[target], times[target], strict=True) if at <= moment]
                older = released[max(0, len(released) - 1 - rng.randint(*lag))]
                deps[target] = _constraint(styles[target], released[-1], older)
            records.append({"name": name, "version": text, "dependencies": deps})
    return records


def _graph(records: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for record in records:
        graph.setdefault(record["name"], set()).update(record["dependencies"])
    return graph


def depths(graph: Mapping[str, set[str]], root: str) -> dict[str, int]:
    """Each name ``root`` reaches (through any version) and its shortest distance."""
    out = {root: 0}
    queue = deque([root])
    while queue:
        name = queue.popleft()
        for target in sorted(graph.get(name, ())):
            if target not in out:
                out[target] = out[name] + 1
                queue.append(target)
    return out


def holdback_requests(
    records: Sequence[Mapping[str, Any]],
    seed: int,
    count: int = 20,
    *,
    min_depth: int = 3,
    min_closure: int = 0,
    held_back: int = 3,
) -> list[list[str]]:
    """``count`` requests ``["A >=a", "X <m"]`` (deterministic for the records and the seed): a one of
    A's second to fourth newest versions, m one of X's ``held_back`` newest (all but the oldest at
    most)."""
    rng = random.Random(seed)
    graph = _graph(records)
    versions: dict[str, list[str]] = {}
    for record in records:
        versions.setdefault(record["name"], []).append(record["version"])
    names = sorted(graph)
    closures = {name: depths(graph, name) for name in names}
    big = [n for n in names if len(closures[n]) >= max(min_closure, 1) and max(closures[n].values()) >= min_depth]
    out: list[list[str]] = []
    attempts = 0
    while len(out) < count and big and attempts < 100 * count:
        attempts += 1
        top = rng.choice(big[: max(1, len(big) // 3)] if rng.random() < 0.7 else big)
        deep = sorted(n for n, d in closures[top].items() if d >= min_depth)
        if not deep:
            continue
        held = rng.choice(deep)
        a = rng.choice(versions[top][-4:-1])
        m = rng.choice(versions[held][-min(held_back, len(versions[held]) - 1) :])
        request = [f"{top} >={a}", f"{held} <{m}"]
        if request not in out:
            out.append(request)
    return out
