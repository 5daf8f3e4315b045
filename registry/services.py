"""Writes to the catalog. Plain functions with keyword-only arguments, one transaction each.

Publishing is split so that the build pipeline can store the package between the checks and the
commit: `publish_check` (reads only, before storing), `version_create` (one transaction guarded
by unique constraints, after storing), and `package_discard` (remove a stored object that no row
references, when the commit failed)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from extensions.archive import PackageInfo
from extensions.kinds import KINDS, SINGULAR
from extensions.manifest import Manifest
from extensions.names import RESERVED_NAMES, confusable_key, confusable_keys
from extensions.providing import latest_of
from extensions.versions import SemVer
from registry import downloadcounts, oci, publishers, storage
from registry.delivery import PackageRef
from registry.errors import (
    BadRequest,
    Forbidden,
    NameTaken,
    NotFound,
    RegistryError,
    Unauthenticated,
    UnknownDependency,
    VersionExists,
)
from registry.indexdocs import refresh_index
from registry.models import (
    ApiToken,
    AuditEvent,
    Dependency,
    Extension,
    NameLock,
    Ownership,
    PackageLock,
    Provide,
    Version,
)
from registry.provenance.records import BuildFacts
from registry.provenance.services import provenance_record
from registry.selectors import catalog_changed, categories_text, check_name, unknown_extension
from registry.staticindex import static_index_refresh
from registry.storedtext import nul_paths
from registry.tokens import (
    DEFAULT_SCOPES,
    TOKENS_SCOPE,
    Actor,
    generate_token,
    scope_covers,
    scope_problem,
    token_digest,
)
from registry.trust import repository as trust

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)


def audit(
    *,
    action: str,
    actor: Actor | None,
    extension: str = "",
    version: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    user = actor.user if actor is not None and actor.is_authenticated else None
    return AuditEvent.objects.create(
        action=action,
        actor=user,
        actor_name=actor.username if actor is not None else "",
        token_prefix=actor.token.prefix if actor is not None and actor.token is not None else "",
        address=actor.address if actor is not None else None,
        extension=extension,
        version=version,
        details=details or {},
    )


# --- publishing -----------------------------------------------------------------------------------


def _is_owner(extension: Extension, actor: Actor) -> bool:
    return actor.user is not None and extension.ownerships.filter(user_id=actor.user.pk).exists()


def _require_publish_rights(actor: Actor, name: str) -> None:
    if not actor.is_authenticated:
        raise Unauthenticated("publishing needs a token: send 'Authorization: Bearer pvr_...'")
    if not actor.has_scope("publish", name):
        raise Forbidden(
            f"this token may not publish {name!r}: it needs the scope publish:{name} or publish:*",
            details=[{"required_scope": f"publish:{name}"}],
        )


def check_name_available(actor: Actor, name: str) -> None:
    """A new name must not be reserved, nor confusable with (or equal to) an extension name or a
    provided name of someone else's: clients look names up both ways, so either would shadow. Nor
    may it be reserved by another user's pending trusted publisher (registry.publishers)."""
    if name in RESERVED_NAMES:
        raise NameTaken(f"{name!r} is a reserved name and cannot be used for an extension")
    _check_not_pending_elsewhere(actor, name, what=repr(name))
    keys = confusable_keys(name)
    for other in Extension.objects.filter(confusable_key__in=keys).exclude(name=name):
        if not _is_owner(other, actor):
            raise NameTaken(
                f"{name!r} is too similar to the existing extension {other.name!r}, owned by someone else; "
                "choose a clearly different name",
                details=[{"existing": other.name}],
            )
    provides = Provide.objects.filter(confusable_key__in=keys).exclude(version__extension__name=name)
    for provide in provides.select_related("version__extension"):
        other = provide.version.extension
        if not _is_owner(other, actor):
            how = "the same as" if provide.name == name else "too similar to"
            raise NameTaken(
                f"{name!r} is {how} the {provide.kind} {provide.name!r} provided by the extension {other.name!r}, "
                "owned by someone else; choose a clearly different name",
                details=[{"existing": other.name, "kind": provide.kind, "provided": provide.name}],
            )


def _check_not_pending_elsewhere(actor: Actor, name: str, *, what: str) -> None:
    reservation = publishers.reservation_conflict(name=name, user=actor.user)
    if reservation is not None:
        how = "" if reservation.pending_name == name else f"too similar to {reservation.pending_name!r}, which is "
        until = reservation.reserved_until.date().isoformat() if reservation.reserved_until else ""
        raise NameTaken(
            f"{what} is {how}reserved by another user's pending trusted publisher until {until}; "
            "choose a clearly different name",
            details=[{"reserved": reservation.pending_name, "until": until}],
        )


def lock_name(name: str) -> None:
    """As `lock_names`, for one name: a pending trusted publisher's reservation of it."""
    for key in sorted(confusable_keys(name)):
        _lock_row(NameLock, key)


def lock_names(manifest: Manifest) -> None:
    """Serialise, inside the current transaction, publishes whose name or provided names could be
    confusable: each takes a row lock on every confusable key of every name it claims (in sorted
    order, so two publishes cannot deadlock). Two confusable names share a key, so the second
    publish waits for the first and then sees it."""
    keys = set(confusable_keys(manifest.name))
    for kind in KINDS:
        for provided in manifest.provides.get(kind, ()):
            keys |= confusable_keys(provided)
    for key in sorted(keys):
        _lock_row(NameLock, key)


def _lock_row(model: Any, key: str) -> None:
    """Take the row lock on one lock row inside the current transaction (an UPDATE takes a row
    lock on PostgreSQL and the write lock on SQLite), creating the row if needed; if the sweeper
    removed it in between, create it again."""
    field = model._meta.pk.name
    while True:
        model.objects.bulk_create([model(**{field: key})], ignore_conflicts=True)
        if model.objects.filter(**{field: key}).update(touched_at=timezone.now()) == 1:
            return


def _check_provides(actor: Actor, manifest: Manifest, extension: Extension | None) -> None:
    """A provided (kind, name) belongs to one extension: another owner's extension cannot claim it,
    nor a name confusable with it or with another owner's extension name (clients look provided
    names up by kind, so a look-alike would be a typosquat)."""
    for kind in KINDS:
        singular = SINGULAR[kind]
        for provided in manifest.provides.get(kind, ()):
            keys = confusable_keys(provided)
            clashes = (
                Provide.objects.filter(confusable_key__in=keys)
                .exclude(version__extension__name=manifest.name)
                .select_related("version__extension")
            )
            # The kind is matched here, not in SQL: with it there, SQLite's planner walks the
            # (kind, name) index, every provide of the kind, and publishing grows with the catalogue.
            for clash in (c for c in clashes if c.kind == singular):
                other = clash.version.extension
                if _is_owner(other, actor):
                    continue
                how = "already provided" if clash.name == provided else f"too similar to the {singular} {clash.name!r}"
                raise NameTaken(
                    f"the {singular} {provided!r} is {how} by the extension {other.name!r}, owned by someone else"
                    + ("" if clash.name == provided else "; choose a clearly different name"),
                    details=[
                        {"kind": singular, "name": provided, "existing": other.name}
                        | ({} if clash.name == provided else {"similar_to": clash.name})
                    ],
                )
            for other in Extension.objects.filter(confusable_key__in=keys).exclude(name=manifest.name):
                if not _is_owner(other, actor):
                    raise NameTaken(
                        f"the {singular} {provided!r} is too similar to the extension {other.name!r}, owned by "
                        "someone else; choose a clearly different name",
                        details=[{"kind": singular, "name": provided, "existing": other.name}],
                    )
            if provided != manifest.name:
                _check_not_pending_elsewhere(actor, provided, what=f"the {singular} {provided!r}")


def _check_dependencies(manifest: Manifest) -> None:
    problems: list[dict[str, Any]] = []
    for index, dep in enumerate(manifest.dependencies):
        versions = list(
            Version.objects.filter(extension__name=dep.name).values_list("version", "yanked").order_by("id")
        )
        path = f"dependencies.extensions[{index}]"
        if not versions:
            problems.append(
                {
                    "path": path,
                    "name": dep.name,
                    "message": f"no extension named {dep.name!r} in this registry",
                }
            )
            continue
        live = [v for v, yanked in versions if not yanked]
        if not any(dep.constraint.contains(v) for v in live):
            shown = ", ".join(sorted(live, key=SemVer.parse)) or "none (all yanked)"
            problems.append(
                {
                    "path": path,
                    "name": dep.name,
                    "constraint": str(dep.constraint),
                    "available": sorted(live, key=SemVer.parse),
                    "message": f"no non-yanked version of {dep.name!r} matches {dep.constraint}; available: {shown}",
                }
            )
    if problems:
        first = problems[0]["message"]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UnknownDependency(f"unknown dependency: {first}{more}", details=problems)


# Version numbers are stored in integer columns (PositiveIntegerField: safe up to this everywhere).
MAX_VERSION_NUMBER = 2**31 - 1
# Where the fields of Manifest.to_dict() come from in extension.toml (the others: [extension]).
_TOML_PATHS = {
    "provisioning_version": "compatibility.provisioning_version",
    "compatibility": "compatibility",
    "provides": "provides",
    "dependencies": "dependencies.extensions",
    "system_packages": "dependencies.system_packages",
    "required_env": "configuration.required_env",
    "optional_env": "configuration.optional_env",
    "build_include": "build.include",
    "build_exclude": "build.exclude",
}


def _check_storable(manifest: Manifest) -> None:
    """What extension.toml allows but the database cannot store (PostgreSQL refuses it with an
    error; SQLite would store it): version numbers beyond an integer column, NUL characters."""
    version = manifest.version
    for label, number in (("major", version.major), ("minor", version.minor), ("patch", version.patch)):
        if number > MAX_VERSION_NUMBER:
            message = (
                f"extension.version: the {label} version number {number} is too large; "
                f"allowed: version numbers up to {MAX_VERSION_NUMBER}"
            )
            raise RegistryError(
                message, code="invalid_manifest", details=[{"path": "extension.version", "message": message}]
            )
    for key, value in manifest.to_dict().items():
        for path in nul_paths(value, _TOML_PATHS.get(key, f"extension.{key}")):
            message = f"{path} contains a NUL character (\\u0000); allowed: text without NUL characters"
            raise RegistryError(message, code="invalid_manifest", details=[{"path": path, "message": message}])


def _check_publish(actor: Actor, manifest: Manifest, extension: Extension | None) -> None:
    """Everything a publish must pass, given the extension's row as it is now (None: the name is
    new): the token's rights, a storable manifest, the name (free and not confusable with someone
    else's) or the publisher's ownership, a version never published, its provided names and its
    dependencies. The one definition of those rules: `publish_check` runs it before the package is
    stored, to refuse early; `version_create` runs it under the name locks, where it decides."""
    name = manifest.name
    _require_publish_rights(actor, name)
    _check_storable(manifest)
    if extension is None:
        check_name_available(actor, name)
    elif not _is_owner(extension, actor):
        raise Forbidden(f"you are not an owner of {name!r}; ask an owner to add you (owners: {_owners(extension)})")
    canonical = str(manifest.version.without_build())
    if extension is not None and extension.versions.filter(canonical=canonical).exists():
        raise VersionExists(
            f"{name} {canonical} was already published; versions are immutable, publish a new version instead"
        )
    _check_provides(actor, manifest, extension)
    _check_dependencies(manifest)


def publish_check(*, actor: Actor, manifest: Manifest) -> None:
    """The publish's checks (`_check_publish`) before the package is stored: reads only, no lock."""
    _check_publish(actor, manifest, Extension.objects.filter(name=manifest.name).first())


def _owners(extension: Extension) -> str:
    return ", ".join(extension.owners.order_by("username").values_list("username", flat=True)) or "none"


def lock_package(sha256: str) -> None:
    """Serialise, inside the current transaction, everything that stores, commits or removes the
    object with this digest (an UPDATE takes a row lock on PostgreSQL and the write lock on SQLite)."""
    _lock_row(PackageLock, sha256)


def version_interface_set(*, version_id: int, interface: dict[str, Any]) -> None:
    """Store a version's configuration interface read again from its package (`manage.py
    readinterfaces`). Its extension's row is touched too, so the catalog pages' ETags change."""
    with transaction.atomic():
        version = Version.objects.select_for_update().only("extension_id").get(pk=version_id)
        Version.objects.filter(pk=version_id).update(interface=interface)
        Extension.objects.filter(pk=version.extension_id).update(updated_at=timezone.now())


def version_create(
    *,
    actor: Actor,
    manifest: Manifest,
    package: PackageInfo,
    storage_key: str,
    readme_html: str,
    reupload: Callable[[], IO[bytes]] | None = None,
    reproducible: bool | None = None,
    reproducible_note: str = "",
    interface: dict[str, Any] | None = None,
    provenance: BuildFacts | None = None,
) -> Version:
    """Commit a stored package as a version: the extension (first publish makes the publisher its
    owner), the version, its dependencies and provides, its signed provenance (from the build's
    ``provenance`` facts, SPEC 6.2), and the audit event, in one transaction.

    Must run inside ``transaction.atomic()``. If the stored object vanished meanwhile (a concurrent
    failed publish of the same bytes removed it), it is stored again from ``reupload`` under the
    package lock, so a committed row always has its package."""
    assert transaction.get_connection().in_atomic_block, "version_create must run in a transaction"
    name = manifest.name
    lock_package(package.sha256)
    if not storage.exists(storage_key):
        if reupload is None:
            raise RuntimeError(f"package object {storage_key} is missing")
        with reupload() as fileobj:
            storage.put_package(package.sha256, fileobj, package.size)
    lock_names(manifest)
    extension = Extension.objects.select_for_update().filter(name=name).first()
    _check_publish(actor, manifest, extension)  # under the locks: this is the check that decides
    created = False
    if extension is None:
        try:
            with transaction.atomic():
                extension = Extension.objects.create(
                    name=name,
                    confusable_key=confusable_key(name),
                    type=manifest.type,
                    description=manifest.description,
                )
                assert actor.user is not None  # _check_publish checked the rights
                Ownership.objects.create(extension=extension, user=actor.user, added_by=actor.user)
                publishers.adopt_pending(extension=extension, user=actor.user)
                created = True
        except IntegrityError:
            # Created meanwhile by a publish these locks did not serialise with: decide again.
            extension = Extension.objects.select_for_update().get(name=name)
            _check_publish(actor, manifest, extension)
    version_number = manifest.version
    canonical = str(version_number.without_build())
    try:
        with transaction.atomic():
            version = Version.objects.create(
                extension=extension,
                version=str(version_number),
                canonical=canonical,
                major=version_number.major,
                minor=version_number.minor,
                patch=version_number.patch,
                prerelease=".".join(str(p) for p in version_number.prerelease),
                type=manifest.type,
                description=manifest.description,
                manifest=manifest.to_dict(),
                manifest_text=package.manifest_text,
                readme_html=readme_html,
                provisioning_version=str(manifest.provisioning_version) if manifest.provisioning_version else "",
                sha256=package.sha256,
                size=package.size,
                storage_key=storage_key,
                files=[{"path": f.path, "size": f.size, "sha256": f.sha256} for f in package.files],
                published_by=actor.user,
                reproducible=reproducible,
                reproducible_note=reproducible_note[:512],
                interface=interface,
            )
    except IntegrityError:
        if not Version.objects.filter(extension=extension, canonical=canonical).exists():
            raise  # not the unique constraint: a real database failure
        raise VersionExists(
            f"{name} {canonical} was already published; versions are immutable, publish a new version instead"
        ) from None
    dependencies = {dep.name: dep for dep in manifest.dependencies}
    targets = {e.name: e for e in Extension.objects.filter(name__in=list(dependencies))}
    Dependency.objects.bulk_create(
        [
            Dependency(
                version=version, extension=targets[n], constraint=str(d.constraint), written=d.constraint.written
            )
            for n, d in dependencies.items()
        ]
    )
    Provide.objects.bulk_create(
        [
            Provide(version=version, kind=SINGULAR[kind], name=provided, confusable_key=confusable_key(provided))
            for kind in KINDS
            for provided in sorted(set(manifest.provides.get(kind, ())))
        ]
    )
    oci.version_store_documents(version=version, manifest=manifest, tar_sha256=package.tar_sha256)
    if provenance is not None:
        provenance_record(version=version, facts=provenance)
    extension_refresh(extension)
    audit(
        action=AuditEvent.Action.PUBLISH,
        actor=actor,
        extension=name,
        version=str(version_number),
        details={"sha256": package.sha256, "size": package.size, "first_publish": created},
    )
    return version


def package_discard(*, sha256: str, key: str) -> bool:
    """Remove a stored object that no version references (after a failed commit). Returns whether
    it was removed. Runs under the package lock, so it cannot remove an object that a concurrent
    publish of the same bytes is committing."""
    with transaction.atomic():
        lock_package(sha256)
        if Version.objects.filter(storage_key=key).exists():
            return False
        storage.delete(key)
    return True


def _latest(versions: list[Version]) -> Version | None:
    """The newest non-yanked release; else the newest non-yanked pre-release; else None
    (`extensions.providing.latest_of`, the client's rule too)."""
    return latest_of(versions, version=lambda v: SemVer.parse(v.version), yanked=lambda v: v.yanked)


def extension_refresh(extension: Extension) -> None:
    """Recompute the denormalised fields of an extension from its versions."""
    latest = _latest(list(extension.versions.all()))
    extension.latest_version = latest
    extension.latest_published_at = latest.published_at if latest is not None else None
    if latest is not None:
        extension.description = latest.description
        extension.type = latest.type
        keywords = latest.manifest.get("keywords") or []
        extension.keywords_text = ("," + ",".join(keywords) + ",") if keywords else ""
        extension.categories_text = categories_text(latest.manifest.get("categories") or [])
    refresh_index(extension)
    static_index_refresh(extension)
    extension.save(
        update_fields=[
            "latest_version",
            "latest_published_at",
            "description",
            "type",
            "keywords_text",
            "categories_text",
            "index_json",
            "index_etag",
            "updated_at",
        ]
    )
    # The signed index covers the new document before the transaction commits (registry.trust).
    trust.record_extension(extension)
    transaction.on_commit(catalog_changed)


# --- yanking ------------------------------------------------------------------------------------


def _version_for_write(name: str, version: str) -> Version:
    check_name(name)  # never a malformed name (NUL...) in a query: PostgreSQL refuses some
    row = (
        Version.objects.select_for_update()
        .select_related("extension")
        .filter(extension__name=name)
        .filter(canonical=_canonical_or_400(version))
        .first()
    )
    if row is None:
        raise NotFound(f"{name} {version} does not exist")
    return row


def _canonical_or_400(version: str) -> str:
    from extensions.errors import VersionError

    try:
        return str(SemVer.parse(version).without_build())
    except VersionError as exc:
        raise BadRequest(str(exc)) from None


def _require_owner(actor: Actor, extension: Extension, action: str) -> None:
    if not actor.is_authenticated:
        raise Unauthenticated(f"{action} needs a token: send 'Authorization: Bearer pvr_...'")
    scope = {"yank": "yank", "unyank": "yank", "owners": "owners"}[action]
    if not actor.has_scope(scope, extension.name):
        raise Forbidden(
            f"this token may not {action} {extension.name!r}: it needs the scope {scope}:{extension.name} or {scope}:*",
            details=[{"required_scope": f"{scope}:{extension.name}"}],
        )
    if not _is_owner(extension, actor):
        raise Forbidden(f"you are not an owner of {extension.name!r} (owners: {_owners(extension)})")


@transaction.atomic
def version_yank(*, actor: Actor, name: str, version: str, reason: str) -> Version:
    row = _version_for_write(name, version)
    _require_owner(actor, row.extension, "yank")
    if not row.yanked:
        row.yanked, row.yanked_reason, row.yanked_at = True, reason, timezone.now()
        row.save(update_fields=["yanked", "yanked_reason", "yanked_at"])
        extension_refresh(row.extension)
        audit(
            action=AuditEvent.Action.YANK,
            actor=actor,
            extension=name,
            version=row.version,
            details={"reason": reason},
        )
    return row


@transaction.atomic
def version_unyank(*, actor: Actor, name: str, version: str) -> Version:
    row = _version_for_write(name, version)
    _require_owner(actor, row.extension, "unyank")
    if row.yanked:
        reason = row.yanked_reason
        row.yanked, row.yanked_reason, row.yanked_at = False, "", None
        row.save(update_fields=["yanked", "yanked_reason", "yanked_at"])
        extension_refresh(row.extension)
        audit(
            action=AuditEvent.Action.UNYANK,
            actor=actor,
            extension=name,
            version=row.version,
            details={"previous_reason": reason},
        )
    return row


def version_record_download(*, version: Version | PackageRef) -> None:
    """Count a download: no database write here (registry.downloadcounts buffers it and writes
    counts in batches, per version per day and in total)."""
    downloadcounts.record(version.pk)


# --- owners ---------------------------------------------------------------------------------------


def _extension_for_write(name: str) -> Extension:
    check_name(name)
    extension = Extension.objects.select_for_update().filter(name=name).first()
    if extension is None:
        raise unknown_extension(name)
    return extension


@transaction.atomic
def owner_add(*, actor: Actor, name: str, username: str) -> Extension:
    extension = _extension_for_write(name)
    _require_owner(actor, extension, "owners")
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise NotFound(f"no active user named {username!r}")
    _, created = Ownership.objects.get_or_create(extension=extension, user=user, defaults={"added_by": actor.user})
    if created:
        audit(action=AuditEvent.Action.OWNER_ADD, actor=actor, extension=name, details={"owner": username})
    return extension


@transaction.atomic
def owner_remove(*, actor: Actor, name: str, username: str) -> Extension:
    extension = _extension_for_write(name)
    _require_owner(actor, extension, "owners")
    # NUL (from the URL) is no username, and an error in a PostgreSQL query.
    owners = extension.ownerships.select_related("user")
    ownership = owners.filter(user__username=username).first() if "\x00" not in username else None
    if ownership is None:
        raise NotFound(f"{username!r} is not an owner of {name!r}")
    if extension.ownerships.count() == 1:
        raise BadRequest(f"{username!r} is the last owner of {name!r}; add another owner before removing them")
    ownership.delete()
    audit(action=AuditEvent.Action.OWNER_REMOVE, actor=actor, extension=name, details={"owner": username})
    return extension


# --- tokens ---------------------------------------------------------------------------------------

MAX_TOKEN_DAYS = 3650


def require_token_rights(actor: Actor, doing: str) -> User:
    """Managing tokens (``doing``: "listing tokens", ...) needs a session, a password, or a token
    with the ``tokens`` scope (SPEC 3.4): a leaked publish token cannot mint or revoke others."""
    if not actor.is_authenticated or actor.user is None:
        raise Unauthenticated(f"{doing} needs a token, a session, or a username and password")
    if not actor.may_manage_tokens:
        raise Forbidden(
            f"this token may not manage tokens ({doing}): it needs the scope {TOKENS_SCOPE}; "
            "create one that has it with your username and password (provisioning registry login)",
            details=[{"required_scope": TOKENS_SCOPE}],
        )
    return actor.user


def token_list(*, actor: Actor) -> list[ApiToken]:
    """The actor's user's tokens, newest first (revoked and expired ones too)."""
    user = require_token_rights(actor, "listing tokens")
    return list(ApiToken.objects.filter(user=user).order_by("-created_at", "-id"))


@transaction.atomic
def token_create(
    *, actor: Actor, name: str, scopes: list[str] | None, expires_in_days: int | None
) -> tuple[ApiToken, str]:
    """A new token for the actor's user; returns the row and the secret (shown once). A token can
    only create tokens with scopes it has itself (no escalation); without scopes asked, the new
    token gets every scope (or, created with a token, that token's scopes)."""
    user = require_token_rights(actor, "creating a token")
    if scopes is None:
        scopes = list(actor.token.scopes) if actor.token is not None else list(DEFAULT_SCOPES)
    wanted = list(scopes)
    problems = [p for p in (scope_problem(s) for s in wanted) if p]
    if problems:
        raise BadRequest(problems[0], details=[{"path": "scopes", "message": p} for p in problems])
    if not wanted:
        raise BadRequest("scopes is empty: give at least one scope, e.g. publish:*")
    if actor.token is not None:
        held = list(actor.token.scopes)
        for scope in wanted:
            if not scope_covers(held, scope):
                raise Forbidden(f"this token cannot grant {scope!r}: a token can only grant scopes it has ({held})")
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise BadRequest(f"expires_in_days must be between 1 and {MAX_TOKEN_DAYS}, or omitted for no expiry")
    if actor.token is not None and actor.token.expires_at is not None:
        # A token cannot outlive the token that created it.
        limit = actor.token.expires_at
        wanted_expiry = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
        expires_at: datetime | None = min(limit, wanted_expiry) if wanted_expiry else limit
    else:
        expires_at = timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None
    secret = generate_token()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[:12],
        digest=token_digest(secret),
        scopes=sorted(set(wanted)),
        expires_at=expires_at,
        parent=actor.token,
    )
    audit(
        action=AuditEvent.Action.TOKEN_CREATE,
        actor=actor,
        details={"token": token.prefix, "name": name, "scopes": token.scopes},
    )
    return token, secret


@transaction.atomic
def token_revoke(*, actor: Actor, token_id: int) -> ApiToken:
    user = require_token_rights(actor, "revoking a token")
    token = ApiToken.objects.select_for_update().filter(pk=token_id, user=user).first()
    if token is None:
        raise NotFound(f"you have no token with id {token_id}")
    now = timezone.now()
    # The token and every token it created, and theirs: a leaked token leaves nothing behind.
    family, frontier = [token], [token.pk]
    while frontier:
        children = list(ApiToken.objects.select_for_update().filter(parent_id__in=frontier))
        family += children
        frontier = [child.pk for child in children]
    for member in family:
        if member.revoked_at is None:
            member.revoked_at = now
            member.save(update_fields=["revoked_at"])
            details = {"token": member.prefix, "name": member.name}
            if member is not token:
                details["created_by"] = token.prefix
            audit(action=AuditEvent.Action.TOKEN_REVOKE, actor=actor, details=details)
    return token


def _check_username(username: str) -> None:
    from django.contrib.auth.validators import UnicodeUsernameValidator
    from django.core.exceptions import ValidationError

    if not username or len(username) > 150:
        raise BadRequest("a username is 1 to 150 characters: letters, digits and @ . + - _")
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise BadRequest(f"{username!r} is not a valid username: use letters, digits and @ . + - _ only") from None


@transaction.atomic
def user_create_token_for(*, username: str, scopes: list[str], create_user: bool, name: str, days: int | None) -> str:
    """For `manage.py createtoken`: a token for USERNAME (creating the user if asked). One
    transaction: a refused token (a bad scope or expiry) leaves no new user behind."""
    users = get_user_model()
    user = users.objects.filter(username=username).first()
    if user is None:
        if not create_user:
            raise NotFound(f"no user named {username!r}; pass --create-user to create one")
        _check_username(username)
        user = users.objects.create_user(username=username)
        user.set_unusable_password()
        user.save()
    _, secret = token_create(actor=Actor(user=user), name=name, scopes=scopes, expires_in_days=days)
    return secret
