"""What a web process keeps in memory between requests: bounded maps shared by its threads
(cachetools' LRU cache, or its TTL cache when entries must also age out, behind one lock).

Each user keys its entries by the state they were computed from (a page's ETag, the catalog's
state, the index documents a graph read), so a kept value is never served for another state.
Keys may come from requests: the bound (entries, or bytes with ``getsizeof``) means requests can
only push one another's entries out, never grow what a process holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import cachetools

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """At most ``maxsize`` entries (or ``maxsize`` units of ``getsizeof``), least recently used
    out first; with ``ttl``, none older than ``ttl`` seconds."""

    def __init__(
        self,
        maxsize: int,
        *,
        ttl: float | None = None,
        getsizeof: Callable[[V], float] | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._entries: cachetools.Cache[K, V]
        if ttl is None:
            self._entries = cachetools.LRUCache(maxsize, getsizeof=getsizeof)
        else:
            self._entries = cachetools.TTLCache(maxsize, ttl, timer=timer, getsizeof=getsizeof)

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` (one bigger than the whole bound is not kept)."""
        with self._lock:
            try:
                self._entries[key] = value
            except ValueError:  # cachetools: "value too large"
                pass

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
