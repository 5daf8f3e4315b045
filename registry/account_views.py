"""The web catalog's pages for a signed-in user: logging in and out, their API tokens (created with
the secret shown once, listed, revoked), and managing an extension's trusted publishers (SPEC
6.3), through the same services (and the same input rules: the API's serializers) as the API.
(The account page and the publish page read builds, so they live in `builds.web_views`; the
owners' controls on the extension page in `registry.owner_views`.)

These pages differ per user, so they are never cached by anyone (``private, no-store``), unlike
the public catalog pages; they carry the catalog's Content-Security-Policy, and every form posts
with Django's CSRF token. Failed logins are throttled per address and audited exactly as failed
API authentications are (REGISTRY_RATE_AUTH_FAILURE)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from registry import services, trusted_publishing
from registry.apis.base import base_url
from registry.apis.tokens import TokenInput
from registry.authentication import AuthFailureThrottle, client_address, record_auth_failure
from registry.errors import NameTaken, NotFound, RegistryError
from registry.models import ApiToken, Extension, TrustedPublisher
from registry.selectors import check_name
from registry.tokens import DEFAULT_SCOPES, SCOPE_ACTIONS, TOKENS_SCOPE, Actor
from registry.views import CATALOG_CSP, extension_url, not_found_page, personal_headers


def private_page(response: HttpResponseBase) -> HttpResponseBase:
    response["Content-Security-Policy"] = CATALOG_CSP
    return personal_headers(response)


def login_redirect(request: HttpRequest) -> HttpResponseBase:
    """To the login page, coming back here after it (only here: Django checks ``next``)."""
    target = request.get_full_path() if request.method in ("GET", "HEAD") else request.path
    return private_page(auth_views.redirect_to_login(target))


def actor_of(request: HttpRequest) -> Actor:
    """The signed-in user of a web request (a session: every scope, as in the API)."""
    user = request.user if request.user.is_authenticated else None
    return Actor(user=user, address=client_address(request))


def form_errors(errors: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """A serializer's errors as lines that name the field (``labels``: its name on the form) and
    say what was wrong."""
    lines = []
    for field, problems in errors.items():
        label = labels.get(field, field)
        items = problems.values() if isinstance(problems, dict) else [problems]
        for item in items:
            for problem in item if isinstance(item, list) else [item]:
                lines.append(f"{label}: {problem}")
    return lines


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
        return private_page(super().dispatch(request, *args, **kwargs))


class CatalogLogoutView(auth_views.LogoutView):
    """POST only (with the CSRF token): a link or an image cannot log anyone out."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        private_page(response)
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


def _name_refusal(actor: Actor, name: str) -> str:
    """Why a publish (and so a pending publisher) would be refused this new name, or ""."""
    try:
        services.check_name_available(actor, name)
    except NameTaken as exc:
        return exc.message
    return ""


def _page(
    request: HttpRequest, name: str, *, status: int = 200, error: str = "", done: str = "", form: dict[str, str]
) -> HttpResponseBase:
    actor = actor_of(request)
    extension = Extension.objects.filter(name=name).first()
    rows: list[TrustedPublisher] = []
    try:
        extension, rows = trusted_publishing.publishers_list(actor=actor, name=name)
    except NotFound as exc:
        if extension is not None:  # (the name is valid: trusted_publishers_page checked it)
            return private_page(not_found_page(request, exc.message))
    except RegistryError as exc:  # not an owner
        response = render(
            request,
            "catalog/trusted_publishers.html",
            {"name": name, "forbidden": exc.message, "title": f"Trusted publishers of {name}"},
            status=exc.status,
        )
        return private_page(response)
    context = {
        "name": name,
        "extension": extension,
        "extension_url": extension_url(name) if extension is not None else None,
        "publishers": [(p, trusted_publishing.publisher_problem(p)) for p in rows],
        "refusal": _name_refusal(actor, name) if extension is None else "",
        "issuers": list(settings.REGISTRY_OIDC_ISSUERS),
        "default_audience": base_url(request),
        "pending_days": settings.REGISTRY_OIDC_PENDING_DAYS,
        "error": error,
        "done": done,
        "form": form,
        "title": f"Trusted publishers of {name}",
    }
    return private_page(render(request, "catalog/trusted_publishers.html", context, status=status))


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def trusted_publishers_page(request: HttpRequest, name: str) -> HttpResponseBase:
    """An extension's trusted publishers for its owners (for a name that does not exist yet: the
    signed-in user's pending publishers of it): the list, a form to add one, a button to remove each."""
    if not request.user.is_authenticated:
        return login_redirect(request)
    form = {"issuer": "", "audience": "", "claims": ""}
    try:
        check_name(name)  # the 404 that says why, before the database is asked (NUL: an error on PostgreSQL)
        if request.method != "POST":
            return _page(request, name, form=form)
        actor = actor_of(request)
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
        return private_page(not_found_page(request, exc.message))
    except RegistryError as exc:
        return _page(request, name, status=exc.status, error=exc.message, form=form)


# --- API tokens ------------------------------------------------------------------------------------

#: The scopes offered as boxes to tick; any other (publish:NAME, ...) is typed in.
SCOPE_CHOICES = (
    ("publish:*", "publish any extension you own, and new names"),
    ("yank:*", "yank and unyank versions of your extensions"),
    ("owners:*", "add and remove owners of your extensions"),
    (TOKENS_SCOPE, "list, create and revoke your tokens"),
)
DEFAULT_EXPIRY_DAYS = 90
_DAYS = str(DEFAULT_EXPIRY_DAYS)
_TOKEN_LABELS = {"name": "Name", "scopes": "Scopes", "expires_in_days": "Expires after (days)"}
_MAX_ID = 2**63 - 1


def _token_state(token: ApiToken, now: Any) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"


def _token_form(post: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The form as typed (to show it again) and as the API's request body (``TokenInput``): every
    rule on names, scopes and expiry is the API's (the serializer, then the token service)."""
    ticked = [s for s in post.getlist("scope") if isinstance(s, str)][:50]
    typed = post.get("more_scopes", "")[:2000]
    scopes = list(dict.fromkeys([*ticked, *typed.replace(",", " ").split()]))
    days_text = post.get("expires_in_days", "").strip()[:20]
    days: Any = None
    if days_text:
        days = int(days_text) if days_text.isascii() and days_text.isdigit() else days_text
    shown = {"name": post.get("name", "")[:200], "ticked": ticked, "more_scopes": typed, "expires_in_days": days_text}
    return shown, {"name": shown["name"], "scopes": scopes, "expires_in_days": days}


def _tokens_page(
    request: HttpRequest,
    *,
    status: int = 200,
    errors: list[str] | None = None,
    created: tuple[ApiToken, str] | None = None,
    form: dict[str, Any] | None = None,
) -> HttpResponseBase:
    actor = actor_of(request)
    now = timezone.now()
    tokens = [{"token": t, "state": _token_state(t, now)} for t in services.token_list(actor=actor)]
    context = {
        "tokens": tokens,
        "active": sum(1 for t in tokens if t["state"] == "active"),
        "created": {"token": created[0], "secret": created[1]} if created else None,
        "errors": errors or [],
        "form": form or {"name": "", "ticked": list(DEFAULT_SCOPES), "more_scopes": "", "expires_in_days": _DAYS},
        "max_days": services.MAX_TOKEN_DAYS,
        "scope_choices": SCOPE_CHOICES,
        "scope_actions": SCOPE_ACTIONS,
        "title": "API tokens",
    }
    return private_page(render(request, "accounts/tokens.html", context, status=status))


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponseBase:
    """The signed-in user's API tokens (with their scopes, creation, last use and expiry) and a form
    to create one. A new token's secret is in the answer to that POST, this once: it is stored
    nowhere (only its digest), and nothing caches the page."""
    if not request.user.is_authenticated:
        return login_redirect(request)
    if request.method != "POST":
        return _tokens_page(request)
    shown, body = _token_form(request.POST)
    if not body["scopes"]:
        errors = ["Scopes: choose at least one (tick a box, or type e.g. publish:etcd)"]
        return _tokens_page(request, status=400, errors=errors, form=shown)
    serializer = TokenInput(data=body)
    if not serializer.is_valid():
        return _tokens_page(request, status=400, errors=form_errors(serializer.errors, _TOKEN_LABELS), form=shown)
    data = serializer.validated_data
    try:
        created = services.token_create(
            actor=actor_of(request),
            name=data["name"],
            scopes=data.get("scopes"),
            expires_in_days=data.get("expires_in_days"),
        )
    except RegistryError as exc:
        return _tokens_page(request, status=exc.status, errors=[exc.message], form=shown)
    return _tokens_page(request, status=201, created=created)


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def token_revoke_page(request: HttpRequest, token_id: str) -> HttpResponseBase:
    """Revoke one of the user's tokens (and every token it created), then back to the list."""
    if not request.user.is_authenticated:
        return login_redirect(request)
    if request.method != "POST":
        return private_page(HttpResponseRedirect(reverse("account-tokens")))
    number = int(token_id) if token_id.isascii() and token_id.isdigit() and len(token_id) < 20 else 0
    try:
        if not 0 < number <= _MAX_ID:
            raise NotFound(f"you have no token with id {token_id[:40]!r}")
        token = services.token_revoke(actor=actor_of(request), token_id=number)
    except NotFound as exc:
        return private_page(not_found_page(request, exc.message))
    except RegistryError as exc:
        return _tokens_page(request, status=exc.status, errors=[exc.message])
    messages.success(request, f"Revoked the token {token.name!r} ({token.prefix}…) and every token created with it.")
    return private_page(HttpResponseRedirect(reverse("account-tokens"), status=303))
