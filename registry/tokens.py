"""API tokens: ``pvr_`` + 43 URL-safe random characters. Only the SHA-256 digest is stored (the
token has 256 bits of entropy, so an unsalted digest is safe to index); the secret is shown once.

Scopes: ``publish:NAME``, ``yank:NAME``, ``owners:NAME``, with ``*`` for every name, and ``tokens``
(listing, creating and revoking the user's tokens; a logged-in session may always do that)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from registry.models import ApiToken

TOKEN_PREFIX = "pvr_"  # noqa: S105 - the public prefix, not a secret
SCOPE_ACTIONS = ("publish", "yank", "owners")
TOKENS_SCOPE = "tokens"
DEFAULT_SCOPES = ("publish:*", "yank:*", "owners:*", TOKENS_SCOPE)
SCOPE_PATTERN = r"^(?:(publish|yank|owners):(\*|[a-z][a-z0-9]*(-[a-z0-9]+)*)|tokens)$"
_SCOPE_RE = re.compile(SCOPE_PATTERN)
_TOKEN_RE = re.compile(r"^pvr_[A-Za-z0-9_-]{43}$")


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def looks_like_token(token: str) -> bool:
    return bool(_TOKEN_RE.match(token))


def digests_match(a: str, b: str) -> bool:
    """Constant-time comparison of two digests."""
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))


def scope_problem(scope: object) -> str | None:
    """Why a scope string is not valid, or None."""
    if not isinstance(scope, str) or not _SCOPE_RE.fullmatch(scope):
        return (
            f"{scope!r} is not a scope: use publish:NAME, yank:NAME or owners:NAME, "
            "with * for every name (e.g. publish:*, yank:kubernetes), or tokens (to manage tokens)"
        )
    return None


def scope_allows(scopes: list[str] | tuple[str, ...], action: str, name: str) -> bool:
    return f"{action}:*" in scopes or f"{action}:{name}" in scopes


def scope_covers(held: list[str] | tuple[str, ...], wanted: str) -> bool:
    """Whether holding ``held`` covers granting ``wanted`` (a valid scope): ``publish:*`` covers
    every ``publish:NAME``; ``publish:NAME`` covers only itself."""
    if wanted == TOKENS_SCOPE:
        return TOKENS_SCOPE in held
    action, target = wanted.split(":", 1)
    return f"{action}:*" in held or (target != "*" and wanted in held)


@dataclass(frozen=True)
class Actor:
    """Who is making a request: a user, through a token (scoped) or a session (all scopes)."""

    user: User | None
    token: ApiToken | None = None
    address: str | None = None

    @property
    def is_authenticated(self) -> bool:
        return self.user is not None and bool(self.user.is_authenticated)

    @property
    def username(self) -> str:
        return self.user.get_username() if self.user is not None and self.user.is_authenticated else ""

    def has_scope(self, action: str, name: str) -> bool:
        """A session (no token) has every scope; a token only those it was given."""
        if not self.is_authenticated:
            return False
        if self.token is None:
            return True
        return scope_allows(list(self.token.scopes), action, name)

    @property
    def may_manage_tokens(self) -> bool:
        """Listing, creating and revoking the user's tokens: a session (or a password) may; a
        token only with the ``tokens`` scope."""
        if not self.is_authenticated:
            return False
        return self.token is None or TOKENS_SCOPE in self.token.scopes

    def has_any_scope(self, action: str) -> bool:
        if not self.is_authenticated:
            return False
        if self.token is None:
            return True
        return any(str(s).startswith(f"{action}:") for s in self.token.scopes)
