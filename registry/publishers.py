"""Pending trusted publishers as the publish checks see them (SPEC 6.3): a name that a pending
publisher reserves, and what becomes of pending publishers when their name is created.

A pending publisher reserves its name, and every name confusable with it, against other users
until its ``reserved_until`` (REGISTRY_OIDC_PENDING_DAYS after its user first reserved the name;
registry.trusted_publishing decides that). While the reservation holds, nobody else may publish
the name, provide it, or reserve it. The first publish of the name by the reserving user (through
the pending publisher's exchange or with an ordinary token) creates the extension and turns that
user's live pending publishers into ordinary trusted publishers of it; lapsed ones are dropped.

This module reads and writes models only, so that registry.services can call it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from extensions.names import confusable_keys
from registry.models import Extension, TrustedPublisher


def live_pending(now: datetime | None = None) -> QuerySet[TrustedPublisher]:
    """Pending publishers whose reservation holds: not lapsed, and their user still active."""
    return TrustedPublisher.objects.filter(
        extension__isnull=True, reserved_until__gt=now or timezone.now(), added_by__is_active=True
    )


def reservation_conflict(*, name: str, user: Any) -> TrustedPublisher | None:
    """The live pending publisher of another user that reserves ``name`` or a name confusable
    with it, or None (the earliest-ending one, for the message)."""
    rows = live_pending().filter(pending_key__in=confusable_keys(name)).select_related("added_by")
    if user is not None and getattr(user, "pk", None) is not None:
        rows = rows.exclude(added_by_id=user.pk)
    return rows.order_by("reserved_until", "id").first()


def adopt_pending(*, extension: Extension, user: Any) -> int:
    """The extension was just created by ``user``: their live pending publishers for its name
    become its trusted publishers; every other pending publisher of that name (lapsed ones, or a
    deactivated user's) is dropped. Returns how many were adopted. Runs in the publish's
    transaction."""
    pending = TrustedPublisher.objects.filter(extension__isnull=True, pending_name=extension.name)
    adopted = 0
    if user is not None and getattr(user, "pk", None) is not None:
        adopted = (
            live_pending()
            .filter(pending_name=extension.name, added_by_id=user.pk)
            .update(extension=extension, pending_name="", pending_key="", reserved_until=None)
        )
    pending.delete()
    return adopted
