"""The web catalog's pages for a signed-in user that involve builds (so they live in `builds`:
`registry` never imports it): the account page (their extensions, their recent builds, their
tokens) and the publish page, which uploads a built package or a source archive from the browser
through the same checks, limits and services as ``POST /api/v1/extensions/`` and
``POST /api/v1/builds/`` and lands on the build page, which follows the build live.

The upload streams through the API's handler (`builds.uploads.LimitedHashingUploadHandler`: to a
temporary file of its own, hashed as it arrives, refused past REGISTRY_MAX_PACKAGE_BYTES); the
declared length is checked before a byte is read, and publishes are throttled per user and writes
per address with the API's throttles. Django's CSRF check reads the form, so it runs after the
handler is in place (the view is ``csrf_exempt`` on the outside and ``csrf_protect`` inside)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_safe

from builds import services
from builds.models import Build
from builds.uploads import LimitedHashingUploadHandler, check_declared_length
from registry.account_views import actor_of, login_redirect, private_page
from registry.apis.base import PublishThrottle, WriteThrottle
from registry.errors import BadRequest, RegistryError
from registry.models import Extension
from registry.views import extension_url

RECENT_BUILDS = 20
#: What the publish form's ``kind`` may be, and what the upload then is.
KINDS = {
    Build.Kind.PACKAGE: "a built package (NAME-VERSION.tar.gz, from provisioning extension build)",
    Build.Kind.SOURCE: "a source archive (a tar.gz of the extension's directory; the registry builds it)",
}


# --- the account page ------------------------------------------------------------------------------


@never_cache
@require_safe
def account_page(request: HttpRequest) -> HttpResponseBase:
    """The signed-in user's extensions (owned), recent builds and tokens."""
    if not request.user.is_authenticated:
        return login_redirect(request)
    user = request.user
    extensions = [
        {"extension": e, "url": extension_url(e.name)}
        for e in Extension.objects.filter(ownerships__user=user)
        .select_related("latest_version")
        .only("name", "type", "description", "downloads", "latest_version__version", "latest_version__canonical")
        .order_by("name")
    ]
    builds = [
        {"build": b, "url": reverse("catalog-build", kwargs={"build_id": str(b.pk)})}
        for b in Build.objects.filter(submitted_by=user)
        .only("id", "kind", "status", "name", "version_text", "filename", "created_at", "error_code")
        .order_by("-created_at")[:RECENT_BUILDS]
    ]
    now_tokens = user.api_tokens.aggregate(total=Count("id"), active=Count("id", filter=Q(revoked_at__isnull=True)))
    context = {
        "extensions": extensions,
        "builds": builds,
        "tokens": now_tokens,
        "title": "Your account",
    }
    return private_page(render(request, "accounts/account.html", context))


# --- publishing from the browser -------------------------------------------------------------------


def _form(
    request: HttpRequest, *, status: int = 200, errors: list[str] | None = None, kind: str = ""
) -> HttpResponseBase:
    context = {
        "kinds": list(KINDS.items()),
        "kind": kind or Build.Kind.PACKAGE,
        "errors": errors or [],
        "limit": settings.REGISTRY_MAX_PACKAGE_BYTES,
        "title": "Publish",
    }
    return private_page(render(request, "builds/publish.html", context, status=status))


def _throttled(request: HttpRequest) -> int | None:
    """Seconds to wait when the user (publishes) or the address (writes) is over its rate."""
    for throttle in (PublishThrottle(), WriteThrottle()):
        if not throttle.allow_request(request, None):  # type: ignore[arg-type]
            return max(1, int(throttle.wait() or 1))
    return None


@csrf_exempt  # checked by _submit once the streaming upload handler is in place
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def publish_page(request: HttpRequest) -> HttpResponseBase:
    """The upload form (GET) and the upload (POST: ``kind`` and ``file``, multipart)."""
    if not request.user.is_authenticated:
        return login_redirect(request)
    if request.method != "POST":
        return _form(request)
    limit = settings.REGISTRY_MAX_PACKAGE_BYTES
    try:
        check_declared_length(request, limit)
        wait = _throttled(request)
        if wait is not None:
            response = _form(request, status=429, errors=[f"Too many publishes: try again in {wait} s."])
            response["Retry-After"] = str(wait)
            return response
        handler = LimitedHashingUploadHandler(request, limit=limit)
        request.upload_handlers = [handler]
        try:
            request.POST  # noqa: B018 - reads the body through the handler (streamed, hashed, limited)
        except MultiPartParserError as exc:
            raise BadRequest(
                f"the upload is not a well-formed multipart form ({exc}): use the form on this page"
            ) from None
    except RegistryError as exc:
        return _form(request, status=exc.status, errors=[exc.message])
    return _submit(request, handler)


@csrf_protect
def _submit(request: HttpRequest, handler: LimitedHashingUploadHandler) -> HttpResponseBase:
    kind = request.POST.get("kind", "")
    if kind not in KINDS:
        allowed = ", ".join(KINDS)
        return _form(request, status=400, errors=[f"What is the file? Choose one of: {allowed}."])
    upload = request.FILES.get("file")
    if upload is None or not upload.name:
        return _form(request, status=400, errors=["Choose the file to upload (a .tar.gz)."], kind=kind)
    try:
        build = services.build_submit(
            actor=actor_of(request), kind=kind, upload=upload, filename=upload.name, build_id=handler.upload_id
        )
    except RegistryError as exc:
        return _form(request, status=exc.status, errors=[exc.message], kind=kind)
    # The build page follows it (queued for the workers, or already final in embedded mode).
    return private_page(HttpResponseRedirect(reverse("catalog-build", kwargs={"build_id": str(build.pk)}), status=303))
