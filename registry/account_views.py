"""The web catalog's pages for a signed-in user: logging in and out, and managing an extension's
trusted publishers (SPEC 6.3), through the same services as the API.

These pages differ per user, so they are never cached by anyone (``private, no-store``), unlike
the public catalog pages; they carry the catalog's Content-Security-Policy, and every form posts
with Django's CSRF token. Failed logins are throttled per address and audited exactly as failed
API authentications are (REGISTRY_RATE_AUTH_FAILURE)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from extensions.names import is_valid_name
from registry import trusted_publishing
from registry.apis.base import base_url
from registry.authentication import AuthFailureThrottle, client_address, record_auth_failure
from registry.errors import NotFound, RegistryError
from registry.models import Extension, TrustedPublisher
from registry.tokens import Actor
from registry.views import CATALOG_CSP, extension_url, not_found_page

PRIVATE_CACHE_CONTROL = "private, no-store"


def _private(response: HttpResponseBase) -> HttpResponseBase:
    response["Content-Security-Policy"] = CATALOG_CSP
    response["Cache-Control"] = PRIVATE_CACHE_CONTROL
    return response


# --- logging in and out ------------------------------------------------------------------------------


class ThrottledLoginView(auth_views.LoginView):
    """Django's login, with failures counted against the address and audited; past the rate the
    form is refused (429) without checking the password."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = AuthFailureThrottle().blocked_for(request)
        if wait is not None:
            form = self.get_form()
            form.errors.clear()
            context = self.get_context_data(form=form, throttled=wait)
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        record_auth_failure(self.request, "wrong username or password (web login)")
        return super().form_invalid(form)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "title": "Log in"}

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        return _private(super().dispatch(request, *args, **kwargs))


class CatalogLogoutView(auth_views.LogoutView):
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        _private(response)
        return response


# --- trusted publishers ------------------------------------------------------------------------------


def _claims_from_text(text: str) -> dict[str, str] | str:
    """``NAME=VALUE`` lines as claims, or what is wrong with them (the services check the rest)."""
    claims: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip() or not value:
            return f"claims, line {number}: write one claim per line as NAME=VALUE (e.g. repository=acme/etcd)"
        if name.strip() in claims:
            return f"claims, line {number}: {name.strip()} is given twice"
        claims[name.strip()] = value.rstrip("\r")
    return claims


def _actor(request: HttpRequest) -> Actor:
    user = request.user if request.user.is_authenticated else None
    return Actor(user=user, address=client_address(request))


def _page(
    request: HttpRequest, name: str, *, status: int = 200, error: str = "", done: str = "", form: dict[str, str]
) -> HttpResponseBase:
    actor = _actor(request)
    extension = Extension.objects.filter(name=name).first()
    rows: list[TrustedPublisher] = []
    try:
        extension, rows = trusted_publishing.publishers_list(actor=actor, name=name)
    except NotFound as exc:
        if extension is not None or not is_valid_name(name):
            return _private(not_found_page(request, exc.message))
    except RegistryError as exc:  # not an owner
        response = render(
            request,
            "catalog/trusted_publishers.html",
            {"name": name, "forbidden": exc.message, "title": f"Trusted publishers of {name}"},
            status=exc.status,
        )
        return _private(response)
    context = {
        "name": name,
        "extension": extension,
        "extension_url": extension_url(name) if extension is not None else None,
        "publishers": [(p, trusted_publishing.publisher_problem(p)) for p in rows],
        "issuers": list(settings.REGISTRY_OIDC_ISSUERS),
        "default_audience": base_url(request),
        "pending_days": settings.REGISTRY_OIDC_PENDING_DAYS,
        "error": error,
        "done": done,
        "form": form,
        "title": f"Trusted publishers of {name}",
    }
    return _private(render(request, "catalog/trusted_publishers.html", context, status=status))


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def trusted_publishers_page(request: HttpRequest, name: str) -> HttpResponseBase:
    """An extension's trusted publishers for its owners (for a name that does not exist yet: the
    signed-in user's pending publishers of it): the list, a form to add one, a button to remove each."""
    if not request.user.is_authenticated:
        login = reverse("login") + "?next=" + request.path
        return _private(HttpResponseRedirect(login))
    form = {"issuer": "", "audience": "", "claims": ""}
    try:
        if request.method != "POST":
            return _page(request, name, form=form)
        actor = _actor(request)
        action = request.POST.get("action")
        if action == "remove":
            raw = request.POST.get("id", "")
            publisher_id = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else 0
            removed = trusted_publishing.publisher_remove(actor=actor, name=name, publisher_id=publisher_id)
            done = f"Removed trusted publisher {removed.pk} ({removed.issuer}); its live tokens were revoked."
            return _page(request, name, done=done, form=form)
        if action != "add":
            return _page(request, name, status=400, error="unknown action: use the buttons on this page", form=form)
        form = {k: request.POST.get(k, "")[:4096] for k in ("issuer", "audience", "claims")}
        claims = _claims_from_text(form["claims"])
        if isinstance(claims, str):
            return _page(request, name, status=400, error=claims, form=form)
        publisher, created = trusted_publishing.publisher_add(
            actor=actor,
            name=name,
            issuer=form["issuer"],
            audience=form["audience"].strip() or base_url(request),
            claims=claims,
        )
        what = "pending trusted publisher" if publisher.is_pending else "trusted publisher"
        done = f"Added {what} {publisher.pk}." if created else f"That {what} ({publisher.pk}) was already registered."
        return _page(request, name, done=done, form={"issuer": "", "audience": "", "claims": ""})
    except NotFound as exc:
        return _private(not_found_page(request, exc.message))
    except RegistryError as exc:
        return _page(request, name, status=exc.status, error=exc.message, form=form)
