"""A generated catalogue for the resolution benchmarks (the core one here, and the server-side one
that loads the same records into the database).

`generate_catalogue(seed)` gives 300 extensions (`ext-000` ... `ext-299`) x 10 versions as plain
records `{"name", "version", "dependencies": {name: constraint}}`. Each extension depends on 2 to 5
higher-numbered extensions (so the graph has no cycle), mostly nearby ones, with ranged constraints
in the SPEC 2.3 grammar: `^x.y`, `>=a.b, <c` and `~x.y.z`. Every ordinary constraint admits the
newest version of its target and nothing outside the target's newest major, so that the newest
versions fit together, except for the traps:

- about one extension in eight has a newest version that also wants one of its targets `<M` (M the
  target's newest major). Wherever another extension of the same resolution needs that target too,
  the newest version cannot be used, and the resolver has to find that out (by backtracking when it
  pinned the trap first) and fall back to the next version;
- about one in thirty has its two newest versions trapped that way.

So resolving a low-numbered extension pulls in most of the catalogue and runs into traps, while a
high-numbered one pulls in a handful of extensions. `ROOT_SETS` are the ten root sets the
benchmarks resolve, from small (at most 20 extensions) to large (250 and more, with backtracking).
"""

from __future__ import annotations

import random
from typing import Any

EXTENSIONS = 300
VERSIONS = 10
DEFAULT_SEED = 20240601


def _versions(rng: random.Random) -> list[tuple[int, int, int]]:
    major, minor, patch = rng.randint(0, 2), rng.randint(0, 5), 0
    if major == 0 and minor == 0:
        minor = 1
    out = [(major, minor, patch)]
    while len(out) < VERSIONS:
        roll = rng.random()
        if roll < 0.5:
            patch += 1
        elif roll < 0.85:
            minor, patch = minor + 1, 0
        else:
            major, minor, patch = major + 1, 0, 0
        out.append((major, minor, patch))
    return out


def _text(version: tuple[int, int, int]) -> str:
    return "{}.{}.{}".format(*version)


def _bound(version: tuple[int, int, int]) -> str:
    """The shortest spelling that means exactly this version as a lower or upper bound."""
    return f"{version[0]}.{version[1]}" if version[2] == 0 else _text(version)


def _ranged(rng: random.Random, versions: list[tuple[int, int, int]]) -> str:
    """An ordinary constraint on a target with these `versions` (oldest first): from its fourth or
    third newest version up, with its newest version and nothing past its newest major."""
    newest = versions[-1]
    low = rng.choice(versions[-4:-2])
    if low[:2] == newest[:2] and rng.random() < 0.5:
        return f"~{_text(low)}"
    if low[0] == newest[0] > 0 and rng.random() < 0.6:
        return f"^{_bound(low)}"
    return f">={_bound(low)}, <{newest[0] + 1}"


def generate_catalogue(
    seed: int = DEFAULT_SEED, *, trap_rate: float = 1 / 8, deep_trap_rate: float = 1 / 60
) -> list[dict[str, Any]]:
    """The 3,000 version records (deterministic for a seed and rates).

    Ordinary constraints admit a target's fourth or third newest version up to its newest. The newest
    version of a trapped extension also wants one target at a version that does not exist (a
    shallow trap: the resolver rejects it as soon as it looks at its dependencies) or at its fifth or
    sixth newest version, which no ordinary constraint admits (a deep trap: it fails once another
    extension of the same resolution needs that target too, which may take backtracking)."""
    rng = random.Random(seed)
    names = [f"ext-{i:03d}" for i in range(EXTENSIONS)]
    versions = {name: _versions(rng) for name in names}
    records: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        later = names[i + 1 :]
        targets: list[str] = []
        if later:
            nearby = later[:40]
            count = min(len(later), rng.randint(2, 5))
            while len(targets) < count:
                pick = rng.choice(nearby if rng.random() < 0.8 else later)
                if pick not in targets:
                    targets.append(pick)
        roll = rng.random()
        trap = ""
        if targets and roll < deep_trap_rate:
            trap = "deep"
        elif targets and roll < deep_trap_rate + trap_rate:
            trap = "shallow"
        for k, version in enumerate(versions[name]):
            deps = {target: _ranged(rng, versions[target]) for target in targets}
            if trap and k == VERSIONS - 1:
                target = rng.choice(targets)
                theirs = versions[target]
                if trap == "shallow":
                    deps[target] = f">={theirs[-1][0] + 1}.0"
                else:
                    deps[target] = f">={_bound(theirs[-6])}, <{_bound(theirs[-4])}"
            records.append({"name": name, "version": _text(version), "dependencies": deps})
    return records


# Root sets resolved by the benchmarks (with the default seed and rates): five small ones (each
# resolves to 18-20 extensions, which plain resolvelib takes 10-20 ms for, as the small sets
# did; ext-271 and ext-279 run into a trap) and five large ones (250
# extensions or more, each with dozens of rejected candidates and some backjumping). Plain resolvelib
# resolves all of them; HARD_ROOT_SETS are large sets it gives up on (too many rounds).
SMALL_ROOT_SETS: list[list[str]] = [["ext-252"], ["ext-277"], ["ext-267"], ["ext-271"], ["ext-279"]]
LARGE_ROOT_SETS: list[list[str]] = [
    ["ext-000"],
    ["ext-001"],
    ["ext-007"],
    ["ext-001", "ext-020"],
    ["ext-000", "ext-003", "ext-007", "ext-018"],
]
ROOT_SETS: list[list[str]] = SMALL_ROOT_SETS + LARGE_ROOT_SETS
HARD_ROOT_SETS: list[list[str]] = [["ext-003"]]
