"""HTTP details shared by the Django views and the WSGI fast paths (registry.fastpath): ETag
matching, and the headers Django's middleware adds to every answer, so that an answer given
before Django carries the same ones."""

from __future__ import annotations

from django.conf import settings

#: Everything under it is the JSON API: its errors are the SPEC envelope.
API_PREFIX = "/api/"


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIX)


def is_oci_path(path: str) -> bool:
    """Under /v2 (SPEC 7): its errors are OCI's error document."""
    return path == "/v2" or path.startswith("/v2/")


def etag_matches(header: str, etag: str) -> bool:
    """Whether an If-None-Match header value matches the (quoted) etag; weak tags compare equal."""
    if not header:
        return False
    if header.strip() == "*":
        return True
    for candidate in header.split(","):
        candidate = candidate.strip()
        if candidate.startswith("W/"):
            candidate = candidate[2:]
        if candidate == etag:
            return True
    return False


def middleware_headers() -> list[tuple[str, str]]:
    """The headers SecurityMiddleware and XFrameOptionsMiddleware add to a plain answer, as the
    settings configure them (HSTS aside: it needs a secure request, which the proxy terminates)."""
    headers: list[tuple[str, str]] = []
    middleware = set(settings.MIDDLEWARE)
    if "django.middleware.security.SecurityMiddleware" in middleware:
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            headers.append(("X-Content-Type-Options", "nosniff"))
        policy = settings.SECURE_REFERRER_POLICY
        if policy:
            value = policy if isinstance(policy, str) else ",".join(policy)
            headers.append(("Referrer-Policy", ",".join(v.strip() for v in value.split(","))))
        if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
            headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    if "django.middleware.clickjacking.XFrameOptionsMiddleware" in middleware:
        headers.append(("X-Frame-Options", settings.X_FRAME_OPTIONS.upper()))
    return headers
