"""Dependency resolution: one resolver for the registry (fed from the database) and the client (fed
from index documents), so both give the same answer for the same data::

    resolve(["kubernetes ^1.28", "cilium"], catalogue, runtime_version="1.4.0", locked={"etcd": "3.5.9"})

Semantics (SPEC 2.3 and 3.2):

- each name gets the newest version that satisfies every constraint on it; when a newer choice leads
  to a conflict further down, an older one is chosen;
- pre-releases only match a constraint that names a pre-release of the same ``MAJOR.MINOR.PATCH``,
  or everywhere with ``include_prereleases=True`` (``Constraint.contains``);
- yanked versions are never chosen unless the request pins exactly that version (a root
  requirement ``=1.2.3``) or ``locked`` names it. A dependency's exact pin does not revive a yanked
  version (the author's old pin is not the user's intent); the failure then says how to force it;
- with ``runtime_version``, versions whose ``[compatibility] provisioning_version`` excludes it are
  never chosen;
- a ``locked`` version that still satisfies every requirement is preferred; a pin that cannot be
  honoured is dropped and reported in ``Resolution.locked_ignored`` with the reason;
- ``install_order`` puts dependencies before dependents, ties broken by name; an answer whose
  extensions depend on each other in a cycle is an error that names it (``a -> b -> a``).

How (one module per step):

- `universe`: the rules above as bit masks over each name's candidates, computed once per name;
- `provider`: the fast path, resolvelib's backtracking search; its answers are the ones users have
  always had, and it answers nearly every request in milliseconds;
- `complete`: when backtracking gives up (it is not complete: it spins or stops on some shapes, and
  its backjumping misjudges cycles), a SAT solver decides: the answer that is newest in
  breadth-first order from the roots, or a minimal set of requirements that cannot hold together;
- `explain`: that proof in words, accounting for every version of the names in the conflict;
- `budget`: one bound for all of it (``timeout``, default ``DEFAULT_TIMEOUT`` seconds of work),
  checked inside both searches, and a probe that stops the work when the caller has gone. Past it
  the answer is ``ResolutionTooComplex`` (``too_complex``) saying what was tried. Waiting (for the
  catalogue's reads, for a CPU on a busy machine) is not charged as work, and the wall clock stops
  the whole at ``1 + WAIT_ALLOWANCE`` times the budget.

Every failure is a ``ResolutionError`` whose message is one line for people and whose ``details`` is
a list of dicts with a ``reason`` (``conflict``, ``no_matching_version``, ``unknown``, ``excluded``,
``cycle``, ``too_complex``, ``cancelled``, ``too_many_requirements``, ``invalid_requirement``,
``invalid_runtime_version``, ``invalid_locked_version``) plus the fields that reason needs.
Constraints are shown as their authors wrote them; details add the normal form (``normal``).

Other bounds: at most ``max_requirements`` root requirements and ``max_extensions`` distinct names;
``max_rounds`` and ``fast_path_work`` only bound the fast path (the complete solver takes over).
"""

from extensions.resolver.budget import DEFAULT_TIMEOUT, Budget
from extensions.resolver.describe import describe_constraint, describe_requirement, shown_constraint, shown_requirement
from extensions.resolver.model import Candidate, Catalogue, MemoryCatalogue, Resolution, install_order
from extensions.resolver.solve import MAX_EXTENSIONS, resolve

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_EXTENSIONS",
    "Budget",
    "Candidate",
    "Catalogue",
    "MemoryCatalogue",
    "Resolution",
    "describe_constraint",
    "describe_requirement",
    "install_order",
    "resolve",
    "shown_constraint",
    "shown_requirement",
]
