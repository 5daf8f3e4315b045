"""extensions.graph.dependency_order: the one topological sort."""

from __future__ import annotations

import pytest

from extensions.graph import DependencyCycleError, dependency_order


def test_dependencies_come_first_and_ready_names_alphabetically() -> None:
    needs = {"web": {"api", "cache"}, "api": {"db"}, "db": {"disk"}, "disk": set(), "cache": set(), "alone": ()}
    assert dependency_order(needs) == ["alone", "cache", "disk", "db", "api", "web"]


def test_a_name_made_ready_early_in_the_alphabet_goes_before_names_already_waiting() -> None:
    # after "a" is done, its dependent "b" is ready and precedes "z", which was ready all along
    assert dependency_order({"z": [], "a": [], "b": ["a"]}) == ["a", "b", "z"]


def test_requirements_outside_the_names_are_ignored() -> None:
    assert dependency_order({"app": ["lib", "elsewhere"], "lib": ["elsewhere"]}) == ["lib", "app"]
    assert dependency_order({}) == []


@pytest.mark.parametrize(
    ("needs", "cycle"),
    [
        ({"app": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"]),
        ({"pong": ["ping"], "ping": ["pong"]}, ["ping", "pong", "ping"]),
        ({"selfish": ["selfish"], "other": []}, ["selfish", "selfish"]),
        ({"c": ["b"], "b": ["a"], "a": ["c"]}, ["a", "c", "b", "a"]),
    ],
)
def test_a_cycle_is_named_in_the_requires_direction_from_its_first_name(
    needs: dict[str, list[str]], cycle: list[str]
) -> None:
    with pytest.raises(DependencyCycleError) as caught:
        dependency_order(needs)
    assert caught.value.cycle == cycle
    assert str(caught.value) == "dependency cycle: " + " -> ".join(cycle)
