"""The shared cache (``CACHE_URL`` on Redis) fails soft: while Redis cannot be reached, the cache
behaves as an empty one that keeps nothing, so a Redis outage never fails a request.

What the registry keeps there are throttling counters (publishes, writes, resolutions, failed
authentications per address): during an outage the rates are not enforced (each process logs
the outage once), which is better for users than refusing every write, and costs nothing an
attacker could use that the web processes' own limits (upload sizes, the resolver's time bound)
do not already bound. After a failure Redis is not asked again for ``RETRY_SECONDS``, so an
outage costs each request nothing."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0
#: Connection and command timeouts (seconds), so that a Redis that does not answer cannot hold a request.
TIMEOUTS = {"socket_connect_timeout": 0.5, "socket_timeout": 1.0}


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


class FailSoftRedisCache(RedisCache):
    """Django's RedisCache, with every operation answering "nothing cached" while Redis is down."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        params = {**params, "OPTIONS": {**TIMEOUTS, **params.get("OPTIONS", {})}}
        super().__init__(server, params)
        self._down_until = 0.0
        self._errors = _redis_errors()

    def _call(self, what: str, default: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() < self._down_until:
            return default
        try:
            return func(*args, **kwargs)
        except self._errors as exc:
            if self._down_until == 0.0 or time.monotonic() - self._down_until > 60:
                log.warning("the shared cache (Redis) is unavailable: %s; rate limits are not enforced meanwhile", exc)
            self._down_until = time.monotonic() + RETRY_SECONDS
            return default

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return bool(self._call("add", False, super().add, key, value, timeout, version))

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._call("get", default, super().get, key, default, version)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._call("set", None, super().set, key, value, timeout, version)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return bool(self._call("touch", False, super().touch, key, timeout, version))

    def delete(self, key: Any, version: int | None = None) -> bool:
        return bool(self._call("delete", False, super().delete, key, version))

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return dict(self._call("get_many", {}, super().get_many, keys, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return bool(self._call("has_key", False, super().has_key, key, version))

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        missing = object()
        value = self._call("incr", missing, super().incr, key, delta, version)
        if value is missing:
            raise ValueError(f"Key '{key}' not found (the shared cache is unavailable)")
        return int(value)

    def set_many(self, data: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        return list(self._call("set_many", list(data), super().set_many, data, timeout, version))

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._call("delete_many", None, super().delete_many, keys, version)

    def clear(self) -> None:
        self._call("clear", None, super().clear)
