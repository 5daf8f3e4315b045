"""The owners' controls of the web catalog: yank and unyank a version (with a reason), add and
remove owners, from the extension and version pages (`templates/catalog/_owner_controls.html`,
shown to owners only). Each is a POST with Django's CSRF token, checked by the same input rules
(the API's serializers) and the same services as the API, so rights (owners only; staff have no
other rights than the API gives them), scopes and the audit log are the API's.

A success goes back to the page with a message (post, redirect, get); a refusal is a page of its
own with the status of its error (403 for a non-owner, 400 for bad input, 404 for a name or
version that does not exist) saying what was wrong and what is allowed."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods
from rest_framework import serializers

from extensions.names import is_valid_name
from registry import services
from registry.account_views import actor_of, form_errors, login_redirect, private_page
from registry.apis.owners import OwnerInput
from registry.apis.yank import YankInput
from registry.errors import BadRequest, RegistryError
from registry.views import extension_url, not_found_page, version_url

#: Where the controls are on the pages: a redirect back lands on them.
ANCHOR = "#owner-controls"


def _back(name: str, version: str | None) -> str:
    return (version_url(name, version) if version else extension_url(name)) + ANCHOR


def _refused(
    request: HttpRequest, name: str, error: RegistryError | list[str], *, back: str, status: int = 400
) -> HttpResponseBase:
    problems = error if isinstance(error, list) else [error.message]
    context = {
        "name": name,
        "problems": problems,
        "back": back,
        "forbidden": isinstance(error, RegistryError) and error.status == 403,
        "title": f"Not done: {name}",
    }
    status = error.status if isinstance(error, RegistryError) else status
    return private_page(render(request, "catalog/owner_refused.html", context, status=status))


def _checked(
    serializer_class: type[serializers.Serializer], data: dict[str, Any], labels: dict[str, str]
) -> dict[str, Any] | list[str]:
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return dict(serializer.validated_data)
    return form_errors(serializer.errors, labels)


def _owner_request(request: HttpRequest, name: str, back: str) -> HttpResponseBase | None:
    """The answer when this is not a logged-in POST for a possible name, else None."""
    if not request.user.is_authenticated:
        return login_redirect(request) if request.method == "POST" else private_page(HttpResponseRedirect(back))
    if request.method != "POST":
        return private_page(HttpResponseRedirect(back))  # the controls are on the page
    if not is_valid_name(name):
        return private_page(not_found_page(request, f"There is no extension {name[:80]!r}."))
    return None


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def yank_page(request: HttpRequest, name: str, version: str) -> HttpResponseBase:
    """POST ``action=yank`` with a ``reason``, or ``action=unyank``: as the API's yank endpoint."""
    from_version = request.method == "POST" and request.POST.get("back") == "version"
    back = _back(name, version if from_version else None)
    early = _owner_request(request, name, back)
    if early is not None:
        return early
    action = request.POST.get("action")
    actor = actor_of(request)
    try:
        if action == "yank":
            data = _checked(YankInput, {"reason": request.POST.get("reason", "")}, {"reason": "Reason"})
            if isinstance(data, list):
                return _refused(
                    request,
                    name,
                    [*data, "Say why it is yanked (at most 512 characters): everyone who resolves it sees the reason."],
                    back=back,
                )
            row = services.version_yank(actor=actor, name=name, version=version, reason=data["reason"])
            messages.success(
                request, f"Yanked {name} {row.version}: resolution skips it unless it is pinned or locked."
            )
        elif action == "unyank":
            row = services.version_unyank(actor=actor, name=name, version=version)
            messages.success(request, f"{name} {row.version} is no longer yanked.")
        else:
            raise BadRequest("unknown action: use the Yank or Unyank buttons on the extension's page")
    except RegistryError as exc:
        return _refused(request, name, exc, back=back)
    return private_page(HttpResponseRedirect(back, status=303))


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def owners_page(request: HttpRequest, name: str) -> HttpResponseBase:
    """POST ``action=add`` or ``action=remove`` with a ``username``: as the API's owners endpoint."""
    back = _back(name, None)
    early = _owner_request(request, name, back)
    if early is not None:
        return early
    action = request.POST.get("action")
    actor = actor_of(request)
    data = _checked(OwnerInput, {"username": request.POST.get("username", "").strip()}, {"username": "Username"})
    if isinstance(data, list):
        return _refused(request, name, [*data, "A username is 1 to 150 letters, digits and @ . + - _."], back=back)
    username = data["username"]
    try:
        if action == "add":
            services.owner_add(actor=actor, name=name, username=username)
            messages.success(request, f"{username} is now an owner of {name}.")
        elif action == "remove":
            services.owner_remove(actor=actor, name=name, username=username)
            messages.success(request, f"{username} is no longer an owner of {name}.")
        else:
            raise BadRequest("unknown action: use the Add or Remove buttons on the extension's page")
    except RegistryError as exc:
        return _refused(request, name, exc, back=back)
    return private_page(HttpResponseRedirect(back, status=303))
