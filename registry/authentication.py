"""Bearer-token authentication for the API, with failed attempts throttled per address and
written to the audit log."""

from __future__ import annotations

import ipaddress
import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from registry.models import ApiToken, AuditEvent
from registry.tokens import digests_match, looks_like_token, token_digest

log = logging.getLogger(__name__)
# Recording last use more often than this is pointless write load.
_LAST_USE_RESOLUTION = timedelta(seconds=60)


def _ip_address(text: str | None) -> str | None:
    """An IP address, or None. Proxies may write ``1.2.3.4:5678`` or ``[2001:db8::1]:443``; anything
    that is not an address would be refused by PostgreSQL's inet columns (a 500), so it is None."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    text = text.split("%", 1)[0]  # an IPv6 zone (fe80::1%eth0) means nothing here
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return None
    return text


def client_address(request: Request | HttpRequest) -> str | None:
    """The client's address (REMOTE_ADDR, or X-Forwarded-For behind REGISTRY_NUM_PROXIES proxies),
    or None when that is not an IP address."""
    xff = request.META.get("HTTP_X_FORWARDED_FOR")
    proxies: int = settings.REST_FRAMEWORK.get("NUM_PROXIES") or 0  # type: ignore[assignment]
    if xff and proxies:
        hops = [h.strip() for h in xff.split(",") if h.strip()]
        if hops:
            return _ip_address(hops[-min(proxies, len(hops))])
    return _ip_address(request.META.get("REMOTE_ADDR"))


class AuthFailureThrottle(SimpleRateThrottle):
    """Failed authentications per address (REGISTRY_RATE_AUTH_FAILURE). Only failures count."""

    scope = "auth_failure"
    duration: int
    num_requests: int

    def get_rate(self) -> str:
        return str(settings.REGISTRY_RATE_AUTH_FAILURE)

    def get_cache_key(self, request: Request | HttpRequest, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": client_address(request) or "unknown"}

    def blocked_for(self, request: Request | HttpRequest) -> int | None:
        """Seconds to wait when this address has failed too often, else None (nothing recorded)."""
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            wait = self.wait()
            return max(1, int(wait or 1))
        return None

    def record_failure(self, request: Request | HttpRequest) -> None:
        self.blocked_for(request)
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)


def record_auth_failure(request: Request | HttpRequest, reason: str, token_text: str = "") -> None:
    """Count a failed authentication against the address (AuthFailureThrottle) and audit it; for
    the API's authenticators and the web login alike (a Django or a DRF request)."""
    AuthFailureThrottle().record_failure(request)
    AuditEvent.objects.create(
        action=AuditEvent.Action.AUTH_FAILURE,
        address=client_address(request),
        token_prefix=token_text[:12] if token_text.startswith("pvr_") else "",
        details={"reason": reason, "path": request.path[:200], "method": request.method},
    )
    log.info("authentication failed from %s: %s", client_address(request), reason)


def _fail(
    request: Request,
    reason: str,
    token_text: str = "",
    *,
    allowed: str = "send a valid token as 'Authorization: Bearer pvr_...'",
) -> exceptions.AuthenticationFailed:
    record_auth_failure(request, reason, token_text)
    return exceptions.AuthenticationFailed(f"{reason}; {allowed}")


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer pvr_...``. Sets request.user and request.auth (the ApiToken)."""

    keyword = "bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        parts = header.split()
        if not parts or parts[0].lower() != self.keyword:
            return None  # blank, or another scheme (Basic) that is for another authenticator
        wait = AuthFailureThrottle().blocked_for(request)
        if wait is not None:
            raise exceptions.Throttled(wait=wait, detail="too many failed authentications from this address")
        if len(parts) != 2:
            raise _fail(request, "malformed Authorization header")
        token_text = parts[1]
        if not looks_like_token(token_text):
            raise _fail(request, "not a registry token", token_text)
        digest = token_digest(token_text)
        token = ApiToken.objects.select_related("user").filter(digest=digest).first()
        if token is None or not digests_match(token.digest, digest):
            raise _fail(request, "unknown or revoked token", token_text)
        now = timezone.now()
        if token.revoked_at is not None:
            raise _fail(request, "this token was revoked", token_text)
        if token.expires_at is not None and token.expires_at <= now:
            raise _fail(request, "this token has expired", token_text)
        if not token.user.is_active:
            raise _fail(request, "this token's user is inactive", token_text)
        if token.last_used_at is None or now - token.last_used_at > _LAST_USE_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now, last_used_ip=client_address(request))
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="registry"'


class BasicPasswordAuthentication(authentication.BasicAuthentication):
    """Username and password (for creating a first token), with failures throttled and audited."""

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header.lower().startswith("basic "):
            return None
        wait = AuthFailureThrottle().blocked_for(request)
        if wait is not None:
            raise exceptions.Throttled(wait=wait, detail="too many failed authentications from this address")
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed as exc:
            detail = str(exc.detail).rstrip(".")
            raise _fail(
                request,
                "wrong username or password" if detail.startswith("Invalid username/password") else detail,
                allowed="send the username and password of an active user (HTTP Basic), or a token",
            ) from None

    def authenticate_credentials(self, userid: str, password: str, request: Any = None) -> tuple[Any, None]:
        if "\x00" in userid:  # no username has one, and PostgreSQL refuses it in a query
            raise exceptions.AuthenticationFailed("Invalid username/password.")
        return super().authenticate_credentials(userid, password, request)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="registry"'
