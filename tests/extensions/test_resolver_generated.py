"""The resolver on generated catalogues (tests/extensions/catalogue_generator.py) and "hold back"
requests, against an exact oracle (tests/extensions/brute_resolver.py: a complete depth-first
search, written independently of the resolver), on graphs small enough for it, over hypothesis'
choice of graph seeds: every answer is valid, every "impossible" is confirmed, nothing hangs, and
the complete solver's answer is the one its preference rule defines."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.errors import ResolutionError
from extensions.resolver import Candidate, MemoryCatalogue, resolve
from extensions.versions import parse_requirement
from tests.extensions.brute_resolver import newest_in_breadth_first_order, search, violations
from tests.extensions.catalogue_generator import depths, generate_catalogue, holdback_requests

SETTINGS = settings(max_examples=80, deadline=None)
SEEDS = st.integers(min_value=0, max_value=2**31)
BOUND = 5.0  # seconds: far more than any of these takes; a hang would exceed it


def _small(seed: int) -> tuple[list[dict[str, object]], MemoryCatalogue, dict[str, list[Candidate]]]:
    records = generate_catalogue(seed, extensions=9, versions=4, horizon=40, lag=(0, 1))
    catalogue = MemoryCatalogue.from_records(records)
    by_name = {name: list(catalogue.versions(name)) for name in catalogue.names()}
    return records, catalogue, by_name


def _requests(records: list[dict[str, object]], seed: int) -> list[list[str]]:
    held = holdback_requests(records, seed, 4, min_depth=2, held_back=3)
    return [*held, ["x-000"], ["x-001", "x-004"]]


def _check(requirements: list[str], catalogue: MemoryCatalogue, by_name: dict[str, list[Candidate]], **kw: int) -> None:
    roots = [parse_requirement(text) for text in requirements]
    started = time.monotonic()
    try:
        result = resolve(requirements, catalogue, timeout=BOUND, **kw)
    except ResolutionError as error:
        assert time.monotonic() - started < BOUND
        assert error.code == "resolution_failed", error.message
        assert search(roots, by_name) is None, f"said {error.message!r}, but an answer exists"
        assert error.message.startswith("cannot resolve ")
        return
    assert time.monotonic() - started < BOUND
    assert violations(roots, result.resolved) == []
    if kw.get("fast_path_work") == 0:  # the complete solver's answer, by its definition
        expected = newest_in_breadth_first_order(roots, by_name)
        assert {n: c.version for n, c in result.resolved.items()} == expected


@SETTINGS
@given(SEEDS)
def test_on_generated_catalogues_every_answer_is_valid_and_impossible_is_confirmed(seed: int) -> None:
    records, catalogue, by_name = _small(seed)
    for requirements in _requests(records, seed):
        _check(requirements, catalogue, by_name)


@SETTINGS
@given(SEEDS)
def test_the_complete_solver_alone_gives_the_newest_answer_in_breadth_first_order(seed: int) -> None:
    records, catalogue, by_name = _small(seed)
    for requirements in _requests(records, seed):
        _check(requirements, catalogue, by_name, fast_path_work=0)


def test_the_generator_makes_hold_back_requests_of_the_shape_asked_for() -> None:
    records = generate_catalogue(7)
    names = {str(r["name"]) for r in records}
    assert len(names) == 300 and len(records) == 3000
    graph: dict[str, set[str]] = {}
    for record in records:
        deps = record["dependencies"]
        assert isinstance(deps, dict)
        graph.setdefault(str(record["name"]), set()).update(deps)
    requests = holdback_requests(records, 7, 20)
    assert len(requests) == 20
    for top, held in requests:
        a, m = parse_requirement(top), parse_requirement(held)
        assert str(a.constraint).startswith(">=") and str(m.constraint).startswith("<")
        assert depths(graph, a.name)[m.name] >= 3


@pytest.mark.slow
def test_hold_back_requests_on_a_full_size_catalogue_are_all_decided() -> None:
    """Each gets a valid answer or a proof that none exists. How fast (all within the 2 s default
    bound) is `make bench`'s resolve_holdback, not a timed test: a busy machine must not fail it."""
    records = generate_catalogue(11)
    catalogue = MemoryCatalogue.from_records(records)
    for requirements in holdback_requests(records, 11, 20):
        try:
            result = resolve(requirements, catalogue, timeout=60)
        except ResolutionError as error:
            assert error.code == "resolution_failed", error.message  # proven impossible, not too complex
        else:
            assert violations([parse_requirement(t) for t in requirements], result.resolved) == []
