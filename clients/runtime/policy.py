"""What a runtime may load (SPEC 5): ``PROVISIONING_EXTENSION_MODE``, ``..._ALLOWED_...`` and
``..._BLOCKED_EXTENSIONS``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from clients.errors import UsageError
from clients.runtime.errors import PolicyError
from extensions.kinds import TYPES as EXTENSION_TYPES
from extensions.names import is_valid_name

MODES = ("full", "restricted", "disabled")


# --------------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------------


def _parse_entries(text: str | None, variable: str) -> frozenset[str]:
    entries = set()
    for index, raw in enumerate(t for t in re.split(r"[\s,]+", text or "") if t):
        entry = raw.strip().lower()
        kind, sep, name = entry.rpartition(":")
        ok = (not sep or kind in EXTENSION_TYPES) and (is_valid_name(name) or (sep and name == "*"))
        if not ok:
            raise UsageError(
                f"{variable}[{index}]: {raw[:80]!r} is not an entry: use NAME, TYPE:NAME or TYPE:* "
                f"(TYPE one of {', '.join(EXTENSION_TYPES)}), separated by commas or spaces",
                details=[{"path": f"{variable}[{index}]"}],
            )
        entries.add(entry)
    return frozenset(entries)


@dataclass(frozen=True)
class LoadPolicy:
    """What this runtime may load (see the `clients.runtime` docstring)."""

    mode: str = "full"
    allowed: frozenset[str] = frozenset()
    blocked: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(
                f"PROVISIONING_EXTENSION_MODE={self.mode[:40]!r} is not a mode: use one of {', '.join(MODES)}",
                details=[{"path": "PROVISIONING_EXTENSION_MODE", "allowed": list(MODES)}],
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoadPolicy:
        env = os.environ if environ is None else environ
        return cls(
            mode=(env.get("PROVISIONING_EXTENSION_MODE") or "full").strip().lower(),
            allowed=_parse_entries(env.get("PROVISIONING_ALLOWED_EXTENSIONS"), "PROVISIONING_ALLOWED_EXTENSIONS"),
            blocked=_parse_entries(env.get("PROVISIONING_BLOCKED_EXTENSIONS"), "PROVISIONING_BLOCKED_EXTENSIONS"),
        )

    @staticmethod
    def _matches(entries: frozenset[str], kind: str, name: str) -> bool:
        return name in entries or f"{kind}:{name}" in entries or f"{kind}:*" in entries

    def refusal(self, kind: str, name: str) -> str | None:
        """Why ``kind name`` may not load (``blocked``, ``not_allowed``, ``disabled``), or None."""
        if self._matches(self.blocked, kind, name):
            return "blocked"
        if self.mode == "disabled":
            return "disabled"
        if self.mode == "restricted" and not self._matches(self.allowed, kind, name):
            return "not_allowed"
        return None

    def check(self, kind: str, name: str, *, required_by: str | None = None) -> None:
        reason = self.refusal(kind, name)
        if reason is None:
            return
        what = f"{kind} {name}" + (f" (required by {required_by})" if required_by else "")
        why = {
            "blocked": "it is listed in PROVISIONING_BLOCKED_EXTENSIONS, which is refused in every mode",
            "disabled": "PROVISIONING_EXTENSION_MODE=disabled loads nothing; allowed modes: full, restricted",
            "not_allowed": (
                "PROVISIONING_EXTENSION_MODE=restricted loads only what PROVISIONING_ALLOWED_EXTENSIONS lists "
                f"(NAME, TYPE:NAME or TYPE:*); it lists {', '.join(sorted(self.allowed)) or 'nothing'}"
            ),
        }[reason]
        raise PolicyError(
            f"the runtime's policy refuses {what}: {why}",
            details=[
                {"reason": reason, "mode": self.mode, "type": kind, "name": name, "required_by": required_by},
            ],
        )
