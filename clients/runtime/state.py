"""The runtime state file (``HOME/runtime/state.json``): the cache mirrored for other processes."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from clients.errors import home_unusable
from clients.runtime.loaded import Extension, _timestamp

log = logging.getLogger(__name__)


STATE_FORMAT = 1


class RuntimeState:
    """The state file of an `ExtensionManager` (a base class of it): with ``persist=True`` every
    change is made under the file lock, after catching up with other processes, and written back;
    `_sync` takes another process's changes. Uses the manager's cache, aliases and size."""

    home: Path
    persist: bool
    cache_size: int
    _cache: OrderedDict[str, Extension]
    _aliases: dict[tuple[str, str, str], str]
    _state_stamp: tuple[int, int, int] | None
    _generation: int

    @property
    def state_path(self) -> Path:
        return self.home / "runtime" / "state.json"

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Under the state file's lock: catch up with other processes, change, write (persist=True)."""
        if not self.persist:
            yield
            return
        import filelock

        lock_path = self.home / "locks" / "runtime.lock"
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise home_unusable(self.home, exc) from None
        with filelock.FileLock(str(lock_path)):
            self._sync()
            before = self._snapshot()
            try:
                yield
            finally:
                if self._snapshot() != before:
                    try:
                        self._write()
                    except OSError as exc:
                        raise home_unusable(self.home, exc) from None

    def _snapshot(self) -> list[tuple[str, datetime]]:
        return [(k, e.loaded_at) for k, e in self._cache.items()]

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.state_path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _sync(self) -> None:
        """Take the state file's contents when another process changed it since we last read/wrote."""
        stamp = self._stamp()
        if stamp == self._state_stamp:
            return
        self._state_stamp = stamp
        if stamp is None:
            if self._generation:
                self._cache.clear()
                self._aliases.clear()
            return
        try:
            data = json.loads(self.state_path.read_bytes())
            if data.get("format") != STATE_FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            generation = int(data.get("generation", 0))
            entries = [Extension.from_state(item) for item in data.get("extensions", [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the runtime state %s: %s", self.state_path, exc)
            return
        if generation == self._generation and self._generation:
            return
        self._generation = generation
        cache: OrderedDict[str, Extension] = OrderedDict()
        for extension in entries:
            if Path(extension.path).is_dir():
                cache[extension.key] = extension
        while len(cache) > self.cache_size:
            cache.popitem(last=False)
        self._cache = cache
        self._aliases = {a: k for a, k in self._aliases.items() if k in cache}

    def _write(self) -> None:
        self._generation += 1
        payload = {
            "format": STATE_FORMAT,
            "generation": self._generation,
            "updated_at": _timestamp(datetime.now(UTC)),
            "extensions": [e.to_state() for e in self._cache.values()],
        }
        path = self.state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        self._state_stamp = self._stamp()
