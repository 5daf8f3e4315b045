"""Resolution on a generated catalogue of another shape (tests/extensions/catalogue_generator.py:
300 extensions x 10 versions released over time, 2-5 dependencies each written against what was
newest then: `>=1.2, <2`, `^1.2`, `<3`, `2.*`...), in memory:

- ordinary root sets: ours against plain resolvelib (bench/baseline_resolver.py) in the same run,
  median of several runs each (target <= 1.0x);
- 20 "hold back" requests (`["A >=a", "X <m"]`, X deep in A's closure): how many get an answer
  (valid, or proven impossible) within 2 s (target: all), the median and the maximum time; and the
  same for plain resolvelib given 20 s each.

Every answer of ours is checked against every constraint of the chosen versions."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from resolvelib import ResolutionError as BaselineError

from bench.baseline_resolver import baseline_index, baseline_resolve
from bench.common import Context, Row, median, ms, timed
from extensions.errors import ResolutionError
from extensions.resolver import MemoryCatalogue, resolve
from extensions.versions import Constraint, parse_requirement, parse_version
from tests.extensions.catalogue_generator import generate_catalogue, holdback_requests

SEED = 20261201
ORDINARY = [["x-000"], ["x-040"], ["x-120"], ["x-200"], ["x-260"], ["x-010", "x-150"]]
BOUND = 2.0
BASELINE_LIMIT = 20.0


class _Limit(Exception):
    pass


def _within(seconds: float, call: Callable[[], Any]) -> tuple[str, float]:
    """Run ``call`` for at most ``seconds`` (SIGALRM; pure-Python code is interrupted between bytecodes):
    ``answer``, ``impossible``, ``gave up`` (resolvelib's round limit) or ``no answer``, and the time."""

    def alarm(signum: int, frame: object) -> None:
        raise _Limit

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.perf_counter()
    try:
        call()
        outcome = "answer"
    except _Limit:
        outcome = "no answer"
    except BaselineError as exc:
        outcome = "gave up" if type(exc).__name__ == "ResolutionTooDeep" else "impossible"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return outcome, time.perf_counter() - started


def _problems(answer: dict[str, Any], by_key: dict[tuple[str, str], dict], roots: list[str]) -> list[str]:
    problems = []
    requirements = [parse_requirement(text) for text in roots]
    for name, version in answer.items():
        requirements += [parse_requirement(f"{d} {c}") for d, c in by_key[(name, version)]["dependencies"].items()]
    for requirement in requirements:
        chosen = answer.get(requirement.name)
        if chosen is None or not Constraint.parse(str(requirement.constraint)).contains(parse_version(chosen)):
            problems.append(f"{requirement} is not met (chose {chosen})")
    return problems


def run(ctx: Context) -> list[Row]:
    records = generate_catalogue(SEED)
    by_key = {(r["name"], r["version"]): r for r in records}
    catalogue = MemoryCatalogue.from_records(records)
    index = baseline_index(records)
    rows: list[Row] = []
    for roots in ORDINARY:
        answer = {n: str(c.version) for n, c in resolve(roots, catalogue).resolved.items()}
        problems = _problems(answer, by_key, roots)
        ours = timed(lambda roots=roots: resolve(roots, catalogue), 3 if ctx.quick else 7)
        base = timed(lambda roots=roots: baseline_resolve(roots, index), 1 if ctx.quick else 3)
        ratio = median(ours) / median(base)
        rows.append(
            Row(
                "resolve_holdback",
                f"ordinary {'+'.join(roots)}: {len(answer)} ext",
                f"{ms(median(ours))} ({ms(min(ours))}-{ms(max(ours))})",
                ms(median(base)),
                f"{ratio:.2f}",
                "<= 1.0",
                ratio <= 1.0 and not problems,
            )
        )
        ctx.notes.extend(f"{'+'.join(roots)}: invalid answer: {p}" for p in problems[:3])

    requests = holdback_requests(records, SEED, 20)
    decided, seconds, outcomes = 0, [], {"answer": 0, "impossible": 0}
    for roots in requests:
        started = time.perf_counter()
        try:
            result = resolve(roots, catalogue, timeout=BOUND)
        except ResolutionError as exc:
            elapsed = time.perf_counter() - started
            if exc.code == "resolution_failed":
                outcomes["impossible"] += 1
                decided += elapsed <= BOUND
        else:
            elapsed = time.perf_counter() - started
            answer = {n: str(c.version) for n, c in result.resolved.items()}
            problems = _problems(answer, by_key, roots)
            ctx.notes.extend(f"{roots}: invalid answer: {p}" for p in problems[:3])
            if not problems:
                outcomes["answer"] += 1
                decided += elapsed <= BOUND
        seconds.append(elapsed)
    rows.append(
        Row(
            "resolve_holdback",
            f"hold back x{len(requests)}: decided within {BOUND:g} s "
            f"({outcomes['answer']} answers, {outcomes['impossible']} proven impossible)",
            f"{decided}/{len(requests)}; median {ms(median(seconds))}, max {ms(max(seconds))}",
            "",
            "",
            "all",
            decided == len(requests),
        )
    )
    limit = 5.0 if ctx.quick else BASELINE_LIMIT
    base_requests = requests[:5] if ctx.quick else requests
    base_outcomes: dict[str, int] = {}
    base_seconds = []
    for roots in base_requests:
        outcome, elapsed = _within(limit, lambda roots=roots: _baseline_request(roots, index))
        base_outcomes[outcome] = base_outcomes.get(outcome, 0) + 1
        base_seconds.append(elapsed)
    answered = base_outcomes.get("answer", 0) + base_outcomes.get("impossible", 0)
    summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(base_outcomes.items()))
    rows.append(
        Row(
            "resolve_holdback",
            f"hold back x{len(base_requests)}: plain resolvelib, {limit:g} s each ({summary})",
            f"{answered}/{len(base_requests)}; median {ms(median(base_seconds))}, max {ms(max(base_seconds))}",
            "",
            "",
            "",
            None,
        )
    )
    ctx.notes.append(
        f"catalogue: tests/extensions/catalogue_generator.py, seed {SEED}; baseline: resolvelib + packaging"
    )
    return rows


def _baseline_request(roots: list[str], index: dict[str, list]) -> dict[str, str]:
    from resolvelib import BaseReporter, Resolver

    from bench.baseline_resolver import BaselineProvider, BaseRequirement, to_pep440

    requirements = []
    for text in roots:
        requirement = parse_requirement(text)
        spec = "" if requirement.constraint.is_any else to_pep440(str(requirement.constraint))
        requirements.append(BaseRequirement(requirement.name, spec))
    resolver = Resolver(BaselineProvider(index), BaseReporter())
    result = resolver.resolve(requirements, max_rounds=2000)
    return {name: candidate.version for name, candidate in result.mapping.items()}
