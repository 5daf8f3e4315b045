"""Resolution, in memory: `extensions.resolver.resolve` over a `MemoryCatalogue` against plain resolvelib
with a minimal `packaging` provider (bench/baseline_resolver.py) on the same generated graph
(bench/catalogue.py: 300 extensions x 10 versions, 2-5 ranged dependencies each, with traps that
force backtracking).

For each of the ten root sets: our median and p95 over several runs, the baseline's median, the
ratio (target <= 1.0), and whether both chose the same versions. Also: the median over the small
sets (each resolving to <= 20 extensions; target <= 50 ms), and, as information, a large set the
baseline gives up on.

Both answers are checked against every constraint of the chosen versions. Where the two differ
(both valid), the reason is resolvelib itself: it keeps the first consistent answer it reaches, and
which one that is depends on the order the provider pins names in (ours: names in the latest
conflict first, then fewest candidates; the baseline: fewest candidates).
"""

from __future__ import annotations

from collections.abc import Mapping

from resolvelib import BaseReporter, ResolutionError, Resolver

from bench.baseline_resolver import BaselineProvider, BaseRequirement, baseline_index
from bench.catalogue import HARD_ROOT_SETS, ROOT_SETS, generate_catalogue
from bench.common import Context, Row, median, ms, percentile, timed
from extensions.resolver import MemoryCatalogue, resolve
from extensions.versions import Constraint, parse_version

SMALL_TARGET_SECONDS = 0.050


class _Counter(BaseReporter):
    def __init__(self) -> None:
        self.rejected = 0
        self.backjumps = 0

    def rejecting_candidate(self, criterion: object, candidate: object) -> None:
        self.rejected += 1

    def resolving_conflicts(self, causes: object) -> None:
        self.backjumps += 1


def _baseline(roots: list[str], index: Mapping[str, list], reporter: BaseReporter | None = None) -> dict[str, str]:
    resolver = Resolver(BaselineProvider(index), reporter or BaseReporter())
    result = resolver.resolve([BaseRequirement(name, "") for name in roots], max_rounds=2000)
    return {name: candidate.version for name, candidate in result.mapping.items()}


def _check(answer: Mapping[str, str], by_key: Mapping[tuple[str, str], dict], roots: list[str]) -> list[str]:
    """Every dependency of every chosen version is present and satisfied; the roots are present."""
    problems = [f"{r} is missing" for r in roots if r not in answer]
    for name, version in answer.items():
        for dep, text in by_key[(name, version)]["dependencies"].items():
            chosen = answer.get(dep)
            if chosen is None or not Constraint.parse(text).contains(parse_version(chosen)):
                problems.append(f"{name} {version} requires {dep} {text}, chose {chosen}")
    return problems


def run(ctx: Context) -> list[Row]:
    records = generate_catalogue()
    by_key = {(r["name"], r["version"]): r for r in records}
    catalogue = MemoryCatalogue.from_records(records)
    index = baseline_index(records)
    rows: list[Row] = []
    small_medians: list[float] = []
    ratios_ok = True
    for roots in ROOT_SETS:
        ours = {n: str(c.version) for n, c in resolve(roots, catalogue).resolved.items()}
        counter = _Counter()
        theirs = _baseline(roots, index, counter)
        size = len(ours)
        small = size <= 20
        runs = (5 if ctx.quick else 30) if small else (3 if ctx.quick else 7)
        base_runs = (3 if ctx.quick else 10) if small else (1 if ctx.quick else 3)
        samples = timed(lambda roots=roots: resolve(roots, catalogue), runs)
        base = timed(lambda roots=roots: _baseline(roots, index), base_runs)
        ours_median, base_median = median(samples), median(base)
        ratio = ours_median / base_median
        ratios_ok = ratios_ok and ratio <= 1.0
        if small:
            small_medians.append(ours_median)
        problems = _check(ours, by_key, roots) + _check(theirs, by_key, roots)
        same = "same answer" if ours == theirs else f"{sum(ours.get(n) != v for n, v in theirs.items())} differ"
        label = "+".join(roots)
        rows.append(
            Row(
                "resolve_core",
                f"{label}: {size} ext, baseline rejected {counter.rejected} / backjumped {counter.backjumps}",
                f"{ms(ours_median)} (p95 {ms(percentile(samples, 95))})",
                f"{ms(base_median)}; {same}",
                f"{ratio:.2f}",
                "<= 1.0",
                ratio <= 1.0 and not problems,
            )
        )
        for problem in problems[:5]:
            ctx.notes.append(f"{label}: invalid answer: {problem}")
    overall = median(small_medians) if small_medians else float("nan")
    rows.append(
        Row(
            "resolve_core",
            f"median over the {len(small_medians)} sets resolving to <= 20 extensions",
            ms(overall),
            "",
            "",
            "<= 50 ms",
            overall <= SMALL_TARGET_SECONDS,
        )
    )
    if not ctx.quick:
        for roots in HARD_ROOT_SETS:
            label = "+".join(roots)
            samples = timed(lambda roots=roots: resolve(roots, catalogue), 3)
            size = len(resolve(roots, catalogue).resolved)
            try:
                base_text = ms(median(timed(lambda roots=roots: _baseline(roots, index), 1)))
            except ResolutionError as exc:
                base_text = f"gives up ({type(exc).__name__})"
            rows.append(
                Row("resolve_core", f"{label} (information): {size} ext", ms(median(samples)), base_text, "", "", None)
            )
    ctx.notes.append(
        "catalogue: 300 extensions x 10 versions (bench/catalogue.py); baseline: resolvelib + packaging "
        "(bench/baseline_resolver.py), parsing on every call"
    )
    if not ratios_ok:
        ctx.notes.append("some set was slower than the baseline")
    return rows
