"""Values read once per web request: what a page's ETag function reads (the catalog's state, a
version's dependency graph), the page it guards reads again a moment later; remembering it for the
rest of the request spares the second read. Each thread serving a request has its own memo, made
empty when a request starts and dropped when it ends; outside a request (tasks, commands, tests
that call code directly) nothing is remembered and every read is made.

    graph = thisrequest.remembered(("graph", name, version), lambda: compute(name, version))

`forget` drops one value (after a commit changed what it was read from) or all of them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from django.core.signals import request_finished, request_started

T = TypeVar("T")

_local = threading.local()  # .memo: {key: value} while this thread serves a request, else None


def remembered(key: Hashable, read: Callable[[], T]) -> T:
    """``read()``, once per request for each key (every time outside a request)."""
    memo: dict[Hashable, Any] | None = getattr(_local, "memo", None)
    if memo is None:
        return read()
    if key not in memo:
        memo[key] = read()
    return cast(T, memo[key])


def forget(key: Hashable | None = None) -> None:
    """This request reads ``key`` anew (every key: None)."""
    memo: dict[Hashable, Any] | None = getattr(_local, "memo", None)
    if memo is None:
        return
    if key is None:
        memo.clear()
    else:
        memo.pop(key, None)


def _started(**_: Any) -> None:
    _local.memo = {}


def _finished(**_: Any) -> None:
    _local.memo = None


def end() -> None:
    """Nothing is remembered on this thread until its next request starts (tests use it)."""
    _finished()


request_started.connect(_started, dispatch_uid="registry.thisrequest.started")
request_finished.connect(_finished, dispatch_uid="registry.thisrequest.finished")
