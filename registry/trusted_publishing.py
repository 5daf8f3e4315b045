"""Trusted publishing (SPEC 6.3): an extension's trusted publishers, and the exchange of a CI
job's OpenID Connect ID token for a short-lived publish token. Plain service functions.

**Publishers.** An owner registers, per extension, an issuer from REGISTRY_OIDC_ISSUERS, an
audience (default: the registry's URL) and claims that a token must carry exactly (at least one
that names whose workload it is: `IDENTIFYING_CLAIMS`). Any authenticated user may register a
*pending* publisher for a name that does not exist yet; it reserves the name
(registry.publishers) for REGISTRY_OIDC_PENDING_DAYS from the first time that user reserved it,
not renewable: after a reservation lapses, the same user cannot reserve the name again for as
long (the audit log is the record), and a user holds at most REGISTRY_OIDC_MAX_PENDING reserved
names at a time. So a pending publisher can hold a name for a while, never block it forever.

**The exchange.** The token is verified (registry.oidc), then matched: a publisher matches when
its issuer is the token's, its audience is among the token's, and each of its claims equals the
token's claim of that name exactly (strings only; no normalisation). The ``jti`` of every token
that verifies is recorded before it is matched, so a token is seen once: exchanged, or refused,
it cannot be tried again (not even with another ``name``: a probe of what a token matches costs a
fresh token each time); a token that does not verify is never recorded, so nobody can use up
another's token ID with a forgery. The answer is an API token of
the user who registered the publisher (who must still be an active owner; for a pending one,
whose reservation must still hold), scoped ``publish:NAME``, expiring after
REGISTRY_OIDC_TOKEN_SECONDS (15 minutes at most), that records the publisher and the verified
claims and cannot list, create or revoke tokens. Removing a publisher revokes the tokens it
answered that are still live.

**What a refusal says.** Invalid tokens (malformed, an algorithm other than an asymmetric one,
an issuer not allow-listed, an unknown key, a bad signature, expired, not yet valid, a missing
claim, a ``jti`` already presented) are 401 and say which check failed. A valid token that no
publisher matches is 403 and says so *without* saying which publisher came closest or which of
its claims differed (that would let anyone who can mint tokens of some identity learn other
extensions' configuration claim by claim); it shows the token's own issuer, audience and usual
identity claims, which the caller has anyway. When a publisher does match, the caller is that
trusted identity, so further problems (its owner left, its reservation lapsed, several
extensions match) are said plainly.

Every exchange, accepted or refused, is audited (``oidc_exchange`` / ``oidc_exchange_refused``)
with the token's header and claims, bounded; never the token itself."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from extensions.names import confusable_key, is_valid_name, suggest_name
from registry import oidc, publishers, services
from registry.errors import BadRequest, Forbidden, NotFound, RegistryError, Unauthenticated
from registry.models import ApiToken, AuditEvent, Extension, OidcTokenUse, Ownership, TrustedPublisher
from registry.selectors import check_name
from registry.tokens import Actor, generate_token, token_digest

MAX_PUBLISHERS = 20  # per extension, or per pending name and user
MAX_CLAIMS = 16
MAX_CLAIM_CHARS = 512
#: A publisher must name at least one of these: claims that say whose workload the token is for
#: (GitHub Actions: ``repository``, ``repository_id``; GitLab: ``project_path``, ``project_id``;
#: any issuer: ``sub``). Without one, every job of the issuer (anyone's) would match.
IDENTIFYING_CLAIMS = ("sub", "repository", "repository_id", "project_path", "project_id")
#: The claims a publisher may require: those that say who a CI job is and what it runs, as the
#: issuers in use put them in their ID tokens (per-run claims such as run or pipeline ids and
#: commit digests never identify a publisher, and the registry checks iss, aud, exp, nbf, iat and
#: jti itself). A fixed list, like PyPI's per-provider fields: a typo'd claim name is refused
#: instead of matching nothing, and the OpenAPI document can say exactly what is allowed.
CLAIM_NAMES = (
    *IDENTIFYING_CLAIMS,
    # any issuer
    "email",
    "azp",
    # GitHub Actions
    "repository_owner",
    "repository_owner_id",
    "repository_visibility",
    "workflow",
    "workflow_ref",
    "job_workflow_ref",
    "ref",
    "ref_type",
    "environment",
    "event_name",
    "actor",
    "actor_id",
    "runner_environment",
    "enterprise",
    # GitLab CI
    "namespace_path",
    "namespace_id",
    "ref_path",
    "pipeline_source",
    "ci_config_ref_uri",
    "deployment_tier",
    "user_login",
    "user_id",
)
#: The token's claims a refusal shows (fixed, so the list says nothing about any publisher).
SHOWN_CLAIMS = (
    "sub",
    "repository",
    "repository_owner",
    "workflow",
    "workflow_ref",
    "job_workflow_ref",
    "ref",
    "environment",
    "project_path",
)
#: What a publisher's claim values and audience may be: the one definition, used by the checks
#: below and documented as such in the OpenAPI document (registry.apis.trusted_publishers).
CLAIM_VALUE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"  # no control characters (C0, DEL, C1)
AUDIENCE_PATTERN = r"^[^\x00-\x1f\x7f-\x9f ]([^\x00-\x1f\x7f-\x9f]*[^\x00-\x1f\x7f-\x9f ])?$"
MAX_AUDIENCE_CHARS = 255


# --- what a publisher is ----------------------------------------------------------------------------


def claims_digest(claims: Mapping[str, str]) -> str:
    canonical = json.dumps(dict(claims), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def claim_names(claims: Mapping[str, Any]) -> str:
    return ",".join(sorted(claims))


def _check_issuer(issuer: str) -> str:
    issuers: list[str] = list(settings.REGISTRY_OIDC_ISSUERS)
    if issuer not in issuers:
        trusted = ", ".join(issuers) or "none (the registry's REGISTRY_OIDC_ISSUERS is empty)"
        raise BadRequest(
            f"issuer: {issuer[:200]!r} is not an issuer this registry trusts; use one of: {trusted} "
            "(exactly as its tokens' iss claim says it)",
            details=[{"path": "issuer", "message": f"one of: {trusted}"}],
        )
    return issuer


def _check_audience(audience: str) -> str:
    if len(audience) > MAX_AUDIENCE_CHARS or not re.fullmatch(AUDIENCE_PATTERN, audience):
        raise BadRequest(
            "audience: use 1 to 255 characters without surrounding spaces or control characters "
            "(by default the registry's URL)",
            details=[{"path": "audience", "message": "1 to 255 characters"}],
        )
    return audience


def _check_claims(claims: object) -> dict[str, str]:
    """The claims a publisher requires, checked: what is wrong is said with its key path."""

    def bad(path: str, message: str) -> BadRequest:
        return BadRequest(f"{path}: {message}", details=[{"path": path, "message": message}])

    if not isinstance(claims, dict) or not claims:
        raise bad("claims", 'give the claims a token must carry exactly, e.g. {"repository": "owner/repo"}')
    if len(claims) > MAX_CLAIMS:
        raise bad("claims", f"{len(claims)} claims: at most {MAX_CLAIMS}")
    for name, value in claims.items():
        path = f"claims.{oidc.shown_text(str(name), 64)}"
        if name in ("iss", "aud", "exp", "nbf", "iat", "jti"):
            raise bad(path, f"{name} is checked by the registry itself (issuer, audience, times, ID); leave it out")
        if name not in CLAIM_NAMES:
            raise bad(path, f"not a claim a trusted publisher can require; use: {', '.join(CLAIM_NAMES)}")
        if not isinstance(value, str) or len(value) > MAX_CLAIM_CHARS or not re.fullmatch(CLAIM_VALUE_PATTERN, value):
            raise bad(path, f"the value must be text of 1 to {MAX_CLAIM_CHARS} characters without control characters")
    if not any(name in claims for name in IDENTIFYING_CLAIMS):
        raise bad(
            "claims",
            f"name at least one claim that says whose workload the token is for ({', '.join(IDENTIFYING_CLAIMS)}); "
            "without one, every job of the issuer would match",
        )
    return dict(claims)


def publisher_problem(publisher: TrustedPublisher, *, now: datetime | None = None) -> str | None:
    """Why an exchange through this publisher would be refused now, or None."""
    user = publisher.added_by
    if not user.is_active:
        return f"{user.get_username()}, who registered it, is no longer an active user"
    if publisher.extension_id is None:
        if publisher.reserved_until is None or publisher.reserved_until <= (now or timezone.now()):
            when = publisher.reserved_until.date().isoformat() if publisher.reserved_until else "?"
            return f"its reservation of {publisher.pending_name!r} lapsed on {when}"
        return None
    if not Ownership.objects.filter(extension_id=publisher.extension_id, user_id=user.pk).exists():
        return f"{user.get_username()}, who registered it, is no longer an owner of {publisher.name!r}"
    return None


# --- listing, adding, removing ----------------------------------------------------------------------


def _require_rights(actor: Actor, name: str, action: str) -> Any:
    """Who may manage the trusted publishers of NAME: a user with a session or a token scoped
    owners:NAME (and, for an existing extension, `_require_owner`). Returns the user."""
    if not actor.is_authenticated or actor.user is None:
        raise Unauthenticated(f"{action} needs a token or a session: send 'Authorization: Bearer pvr_...'")
    if not actor.has_scope("owners", name):
        raise Forbidden(
            f"this token may not manage the trusted publishers of {name[:80]!r}: it needs the scope "
            f"owners:{name[:80]} or owners:*",
            details=[{"required_scope": f"owners:{name[:80]}"}],
        )
    return actor.user


def _require_owner(user: Any, extension: Extension) -> None:
    if not Ownership.objects.filter(extension=extension, user_id=user.pk).exists():
        owners = ", ".join(extension.owners.order_by("username").values_list("username", flat=True)) or "none"
        raise Forbidden(
            f"you are not an owner of {extension.name!r} (owners: {owners}); only owners manage its trusted publishers"
        )


def _valid_name(name: str) -> str:
    """A name in a request to add a publisher: 400 with the rule (and a suggestion) if invalid."""
    if not is_valid_name(name):
        suggestion = suggest_name(name)
        hint = f"; did you mean {suggestion!r}?" if suggestion and suggestion != name else ""
        raise BadRequest(
            f"{name[:80]!r} is not a valid extension name: lower-case letters, digits and single hyphens, "
            f"2 to 64 characters, starting with a letter{hint}",
            details=[{"path": "name", "message": "not a valid extension name"}],
        )
    return name


def publishers_list(*, actor: Actor, name: str) -> tuple[Extension | None, list[TrustedPublisher]]:
    """An extension's trusted publishers (owners only); for a name that does not exist, the
    caller's own pending publishers for it (404 when there are none)."""
    user = _require_rights(actor, name, "listing trusted publishers")
    extension = Extension.objects.filter(name=check_name(name)).first()
    if extension is not None:
        _require_owner(user, extension)
        rows = TrustedPublisher.objects.filter(extension=extension)
    else:
        rows = TrustedPublisher.objects.filter(extension__isnull=True, pending_name=name, added_by_id=user.pk)
        if not rows.exists():
            raise NotFound(f"no extension named {name!r}, and you have no pending trusted publisher for it")
    return extension, list(rows.select_related("extension", "added_by").order_by("added_at", "id"))


def _reservation_end(user: Any, name: str, now: datetime) -> datetime:
    """When the user's reservation of a new name ends: the end of their current reservation of it
    (adding more pending publishers, or removing them all and adding again, never extends it),
    else REGISTRY_OIDC_PENDING_DAYS from now. After a reservation lapses, the same user cannot
    reserve the name again for as long. The audit log, append-only, is the record."""
    days = timedelta(days=int(settings.REGISTRY_OIDC_PENDING_DAYS))
    last = (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.PUBLISHER_ADD,
            actor_id=user.pk,
            extension=name,
            details__pending=True,
            at__gte=now - 2 * days,  # a reservation ends at most `days` after it was recorded
        )
        .order_by("-at", "-id")
        .values_list("details", flat=True)
        .first()
    )
    try:
        previous = datetime.fromisoformat(str(last["reserved_until"])) if last else None
    except (KeyError, TypeError, ValueError):
        previous = None
    if previous is None or previous + days <= now:
        return now + days
    if previous > now:
        return previous
    raise Forbidden(
        f"your reservation of {name!r} lapsed on {previous.date().isoformat()}: a pending trusted publisher reserves "
        f"a name for {days.days} days, and the same user can reserve it again from "
        f"{(previous + days).date().isoformat()}. Meanwhile anyone may publish the name (you too, with an ordinary "
        "token)",
    )


def publisher_add(
    *, actor: Actor, name: str, issuer: str, audience: str, claims: object
) -> tuple[TrustedPublisher, bool]:
    """Register a trusted publisher of NAME (pending when NAME does not exist); returns it and
    whether it is new (the same issuer, audience and claims again change nothing)."""
    user = _require_rights(actor, name, "adding a trusted publisher")
    _valid_name(name)
    issuer, audience, wanted = _check_issuer(issuer), _check_audience(audience), _check_claims(claims)
    digest = claims_digest(wanted)
    with transaction.atomic():
        services.lock_name(name)  # serialises with publishes and other reservations of look-alikes
        extension = Extension.objects.select_for_update().filter(name=name).first()
        now = timezone.now()
        fields: dict[str, Any] = {"issuer": issuer, "audience": audience, "claims_digest": digest}
        if extension is not None:
            _require_owner(user, extension)
            rows = TrustedPublisher.objects.filter(extension=extension)
            defaults: dict[str, Any] = {}
        else:
            services.check_name_available(actor, name)  # reserved, confusable, or reserved by another user
            pending = TrustedPublisher.objects.filter(extension__isnull=True, pending_name=name)
            pending.exclude(added_by_id=user.pk).delete()  # lapsed reservations of others (live ones were refused)
            rows = pending.filter(added_by_id=user.pk)
            held = (
                publishers.live_pending(now)
                .filter(added_by_id=user.pk)
                .exclude(pending_name=name)
                .order_by()
                .values_list("pending_name", flat=True)
                .distinct()
            )
            held_names = sorted(set(held))
            if len(held_names) >= int(settings.REGISTRY_OIDC_MAX_PENDING):
                raise Forbidden(
                    f"you already reserve {len(held_names)} names with pending trusted publishers "
                    f"({', '.join(held_names) or 'none allowed'}); at most {settings.REGISTRY_OIDC_MAX_PENDING} at a "
                    "time: publish one, or remove its pending publishers, first",
                )
            defaults = {
                "pending_name": name,
                "pending_key": confusable_key(name),
                "reserved_until": _reservation_end(user, name, now),
            }
        row = rows.filter(**fields).first()
        if row is not None:
            return row, False
        if rows.count() >= MAX_PUBLISHERS:
            raise Forbidden(f"{name!r} already has {MAX_PUBLISHERS} trusted publishers: remove one first")
        row = TrustedPublisher.objects.create(
            extension=extension,
            claims=wanted,
            claim_names=claim_names(wanted),
            added_by=user,
            **fields,
            **defaults,
        )
        if extension is None:
            # All of the user's pending publishers of a name share one reservation.
            rows.exclude(pk=row.pk).update(reserved_until=row.reserved_until)
        reservation = {"reserved_until": row.reserved_until.isoformat()} if row.reserved_until else {}
        services.audit(
            action=AuditEvent.Action.PUBLISHER_ADD,
            actor=actor,
            extension=name,
            details={**_facts(row), **reservation},
        )
    return row, True


def _facts(publisher: TrustedPublisher) -> dict[str, Any]:
    """What the audit log records of a publisher."""
    return {
        "publisher": publisher.pk,
        "pending": publisher.extension_id is None,
        "issuer": publisher.issuer,
        "audience": publisher.audience,
        "claims": publisher.claims,
    }


def publisher_remove(*, actor: Actor, name: str, publisher_id: int) -> TrustedPublisher:
    """Remove one trusted publisher of NAME (an owner; for a pending one, the user who added it),
    and revoke the publish tokens it answered that are still live."""
    user = _require_rights(actor, name, "removing a trusted publisher")
    with transaction.atomic():
        extension = Extension.objects.select_for_update().filter(name=check_name(name)).first()
        if extension is not None:
            _require_owner(user, extension)
            rows = TrustedPublisher.objects.filter(extension=extension)
        else:
            rows = TrustedPublisher.objects.filter(extension__isnull=True, pending_name=name, added_by_id=user.pk)
        row = rows.select_for_update().filter(pk=publisher_id).first()
        if row is None:
            raise NotFound(f"{name!r} has no trusted publisher with id {publisher_id}")
        now = timezone.now()
        live = ApiToken.objects.filter(trusted_publisher=row, revoked_at__isnull=True, expires_at__gt=now)
        revoked = sorted(live.values_list("prefix", flat=True))
        live.update(revoked_at=now)
        services.audit(
            action=AuditEvent.Action.PUBLISHER_REMOVE,
            actor=actor,
            extension=name,
            details={
                **_facts(row),
                "revoked_tokens": revoked,
            },
        )
        removed_id = row.pk
        row.delete()
        row.pk = removed_id
    return row


# --- the exchange ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exchanged:
    token: ApiToken
    secret: str
    publisher: TrustedPublisher
    name: str


def _matching(verified: oidc.VerifiedToken, name: str | None) -> list[TrustedPublisher]:
    """The publishers the token matches, found by index: for each set of claim names the issuer's
    publishers use, the digest of the token's own values for those names."""
    rows = TrustedPublisher.objects.filter(issuer=verified.issuer)
    if name is not None:
        rows = rows.filter(Q(extension__name=name) | Q(extension__isnull=True, pending_name=name))
    wanted = Q(pk__in=[])
    for names in rows.order_by().values_list("claim_names", flat=True).distinct():
        values = {n: verified.claims.get(n) for n in names.split(",")}
        strings = {n: v for n, v in values.items() if isinstance(v, str)}
        if len(strings) == len(values):
            wanted |= Q(claim_names=names, claims_digest=claims_digest(strings))
    found = rows.filter(wanted, audience__in=verified.audiences).select_related("extension", "added_by")
    return [  # the digests found them; compare exactly anyway
        p for p in found if all(verified.claims.get(k) == v for k, v in p.claims.items())
    ]


def _no_match(verified: oidc.VerifiedToken, name: str | None, registry_url: str) -> Forbidden:
    shown = {k: oidc.shown_value(verified.claims[k]) for k in SHOWN_CLAIMS if k in verified.claims}
    said = ", ".join(f"{k}={v!r}" for k, v in shown.items()) or "none of the usual identity claims"
    where = f"of {name!r} " if name else ""
    return Forbidden(
        f"no trusted publisher {where}matches this token. A trusted publisher matches when its issuer, its "
        f"audience and each of its claims equal the token's exactly; this token has iss={verified.issuer!r}, "
        f"aud={verified.audiences!r} and {said}. An owner can list the extension's trusted publishers "
        f"(GET /api/v1/extensions/{name or 'NAME'}/trusted-publishers/); their audience is this registry's URL, "
        f"{registry_url}, unless they name another",
        details=[{"reason": "no_match", "issuer": verified.issuer, "audience": verified.audiences, "claims": shown}],
    )


def _choose(verified: oidc.VerifiedToken, name: str | None, registry_url: str) -> TrustedPublisher:
    """The one publisher this exchange goes through, or a 403 (400 when ambiguous) saying why."""
    now = timezone.now()
    matches = _matching(verified, name)
    by_name: dict[str, list[TrustedPublisher]] = {}
    for publisher in matches:
        if publisher.extension_id is None and Extension.objects.filter(name=publisher.pending_name).exists():
            continue  # left behind by a name created meanwhile; never a way in
        by_name.setdefault(publisher.name, []).append(publisher)
    if not by_name:
        raise _no_match(verified, name, registry_url)
    if len(by_name) > 1:
        names = ", ".join(sorted(by_name))
        raise BadRequest(
            f"this token matches the trusted publishers of several extensions ({names}): ask the issuer for "
            'another token and say which extension with "name" in the request (a token is used once)',
            details=[{"reason": "ambiguous", "names": sorted(by_name)}],
        )
    ((target, candidates),) = by_name.items()
    pending_users = {p.added_by_id for p in candidates if p.extension_id is None}
    if len(pending_users) > 1:
        # Reservations keep this from happening; if it ever did, nobody gets the name this way.
        raise Forbidden(
            f"pending trusted publishers of {target!r} by different users match this token; none is used",
            details=[{"reason": "contested", "name": target}],
        )
    candidates.sort(key=lambda p: (-len(p.claims), p.added_at, p.pk))  # the most specific first
    problems = []
    for publisher in candidates:
        problem = publisher_problem(publisher, now=now)
        if problem is None:
            return publisher
        problems.append(problem)
    fix = (
        "register it again when the name can be reserved, or publish the name with an ordinary token"
        if candidates[0].extension_id is None
        else "an owner must register it again"
    )
    raise Forbidden(
        f"the trusted publisher of {target!r} that matches this token cannot be used: {problems[0]}; {fix}",
        details=[{"reason": "publisher_unusable", "name": target, "problems": problems}],
    )


def _record_refusal(exc: RegistryError, *, token: Any, name: str | None, address: str | None) -> None:
    """The audit row of a refused exchange: why, and what the token said (verified or not)."""
    reason = getattr(exc, "reason", None) or next(
        (d.get("reason") for d in exc.details if isinstance(d, dict) and d.get("reason")), exc.code
    )
    facts: dict[str, Any] = token.audit() if token is not None else {}
    services.audit(
        action=AuditEvent.Action.OIDC_EXCHANGE_REFUSED,
        actor=Actor(user=None, address=address),
        extension=name if name and is_valid_name(name) else "",
        details={"reason": reason, "status": exc.status, "message": oidc.shown_text(exc.message, 500), **facts},
    )


def exchange(*, token: str, name: str | None, address: str | None, registry_url: str) -> Exchanged:
    """Exchange an OIDC ID token for a publish token (see the module docstring). ``name``, when
    given, says which extension the token is for."""
    unverified: oidc.UnverifiedToken | None = None
    verified: oidc.VerifiedToken | None = None
    try:
        if name is not None and not is_valid_name(name):
            raise BadRequest(f"name: {name[:80]!r} is not a valid extension name")
        unverified = oidc.peek(token)
        verified = oidc.verify(token, unverified)
        _record_use(verified)
        publisher = _choose(verified, name, registry_url)
        return _issue(verified, publisher, address)
    except RegistryError as exc:
        _record_refusal(exc, token=verified or unverified, name=name, address=address)
        raise


def _record_use(verified: oidc.VerifiedToken) -> None:
    """Record a verified token's ID, committed at once (whatever the exchange's outcome), or refuse
    it as a replay. A unique key decides, so of two exchanges of one token at once, one goes on."""
    now = timezone.now()
    leeway = timedelta(seconds=float(settings.REGISTRY_OIDC_LEEWAY))
    key = hashlib.sha256(f"{verified.issuer}\0{verified.jti}".encode()).hexdigest()
    with transaction.atomic():
        OidcTokenUse.objects.filter(expires_at__lt=now).delete()  # IDs that could no longer be accepted anyway
        try:
            with transaction.atomic():
                OidcTokenUse.objects.create(key=key, expires_at=verified.expires_at + leeway)
        except IntegrityError:
            raise oidc.TokenRefused(
                "replayed",
                f"this token (jti {oidc.shown_value(verified.jti)!r}) was already presented: a token is exchanged "
                "once; ask the issuer for a new one",
            ) from None


def _issue(verified: oidc.VerifiedToken, publisher: TrustedPublisher, address: str | None) -> Exchanged:
    now = timezone.now()
    user = publisher.added_by
    target = publisher.name
    with transaction.atomic():
        secret = generate_token()
        said = verified.claims
        identity = said.get("repository") or said.get("project_path") or said.get("sub") or verified.issuer
        claims = oidc.shown_claims(verified.claims)
        row = ApiToken.objects.create(
            user=user,
            name=f"trusted publishing: {oidc.shown_value(identity)}"[:100],
            prefix=secret[:12],
            digest=token_digest(secret),
            scopes=[f"publish:{target}"],
            expires_at=now + timedelta(seconds=float(settings.REGISTRY_OIDC_TOKEN_SECONDS)),
            trusted_publisher=publisher,
            oidc_claims=claims,
        )
        TrustedPublisher.objects.filter(pk=publisher.pk).update(last_used_at=now)
        actor = Actor(user=user, token=row, address=address)
        details = {
            "publisher": publisher.pk,
            "pending": publisher.extension_id is None,
            "token": row.prefix,
            "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        }
        services.audit(
            action=AuditEvent.Action.OIDC_EXCHANGE,
            actor=actor,
            extension=target,
            details={**details, **verified.audit()},
        )
        services.audit(
            action=AuditEvent.Action.TOKEN_CREATE,
            actor=actor,
            details={"token": row.prefix, "name": row.name, "scopes": row.scopes, "trusted_publisher": publisher.pk},
        )
    return Exchanged(token=row, secret=secret, publisher=publisher, name=target)
