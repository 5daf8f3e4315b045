"""Dependency order: the one topological sort (the standard library's ``graphlib``), used for the
resolver's install order, the client's installs from a lockfile and the server's ``publish``
command.

    dependency_order({"web": {"api"}, "api": {"db"}, "db": set(), "cache": set()})
    # ['cache', 'db', 'api', 'web']: dependencies first; among the names ready, alphabetical

A cycle raises `DependencyCycleError`, whose ``cycle`` reads in the "requires" direction from the
cycle's alphabetically first name: ``["a", "b", "a"]`` is a requires b, b requires a.
"""

from __future__ import annotations

import graphlib
import heapq
from collections.abc import Iterable, Mapping

__all__ = ["DependencyCycleError", "dependency_order"]


class DependencyCycleError(ValueError):
    """The names depend on each other in a cycle (``cycle``: first name repeated at the end)."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("dependency cycle: " + " -> ".join(cycle))


def dependency_order(needs: Mapping[str, Iterable[str]]) -> list[str]:
    """The names of ``needs`` (name -> the names it requires) with every name after the names it
    requires; among the names ready at each step, the alphabetically first comes next. Required
    names that are not keys of ``needs`` are ignored. `DependencyCycleError` on a cycle."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for name in sorted(needs):
        sorter.add(name, *sorted({d for d in needs[name] if d in needs}))
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise DependencyCycleError(_requires_order(exc.args[1])) from None
    ready: list[str] = []
    order: list[str] = []
    while sorter.is_active():
        for name in sorter.get_ready():
            heapq.heappush(ready, name)
        name = heapq.heappop(ready)
        order.append(name)
        sorter.done(name)
    return order


def _requires_order(found: list[str]) -> list[str]:
    # graphlib lists a cycle with each name a dependency of the next ([a, b, a]: b requires a);
    # turn it around and start it at its first name in alphabetical order.
    names = list(reversed(found))[:-1]
    start = names.index(min(names))
    names = names[start:] + names[:start]
    return [*names, names[0]]
