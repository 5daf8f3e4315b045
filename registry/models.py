"""The catalog: extensions, their immutable versions, owners, API tokens, and the audit log."""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from extensions.kinds import TYPES
from registry.storedtext import nul_escaped

#: The choices of extensions.kinds.TYPES (``ExtensionType.PROVIDER == "provider"``, ...).
ExtensionType = models.TextChoices("ExtensionType", [(t.upper(), t) for t in TYPES])  # type: ignore[call-overload]


class Extension(models.Model):
    """A name in the registry. Created by its first successful publish; never renamed."""

    # name, description and keywords_text make up PostgreSQL's stored search_vector (migration
    # 0014): a migration that changes one of their types drops that column first and adds it again.
    name = models.CharField(max_length=64, unique=True)
    # The confusable skeleton of the name (extensions.names.confusable_key), for typosquat checks.
    confusable_key = models.CharField(max_length=192, db_index=True)
    type = models.CharField(max_length=16, choices=ExtensionType.choices)
    description = models.CharField(max_length=512, blank=True)
    # Denormalised from the newest non-yanked release, for search and listings.
    latest_version = models.ForeignKey(
        "Version", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_constraint=False
    )
    # Its publish time (None with no latest version): "recently updated" is an indexed order.
    latest_published_at = models.DateTimeField(null=True, blank=True)
    keywords_text = models.CharField(max_length=400, blank=True)  # ",k1,k2," for keyword filtering
    # "\ncat1\ncat2\n" for category filtering and facets (registry.selectors.categories_text)
    categories_text = models.TextField(blank=True, default="")
    owners: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        through="Ownership",
        through_fields=("extension", "user"),
        related_name="extensions",
    )
    downloads = models.BigIntegerField(default=0)
    # The index document (registry.indexdocs), rewritten in every transaction that changes it.
    index_json = models.TextField(blank=True)
    index_etag = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        # The catalog's browse orders (registry.selectors.extension_search), read as index scans;
        # on PostgreSQL "recently updated" has one too (registry/migrations/0014: SQLite cannot
        # index NULLS LAST).
        indexes: ClassVar[list[Any]] = [models.Index(F("downloads").desc(), "name", name="extension_by_downloads")]

    def __str__(self) -> str:
        return self.name


class Ownership(models.Model):
    extension = models.ForeignKey(Extension, on_delete=models.CASCADE, related_name="ownerships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ownerships")
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(fields=("extension", "user"), name="ownership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} owns {self.extension_id}"


class Version(models.Model):
    """One published name@version: immutable but for yanking. Its package is stored write-once at
    ``storage_key`` before this row is committed, so a visible row always has its package."""

    extension = models.ForeignKey(Extension, on_delete=models.PROTECT, related_name="versions")
    # As published (may carry +build metadata); `canonical` drops build metadata, because
    # precedence ignores it: 1.0.0+a and 1.0.0+b are the same version, published once.
    # 256: the longest version extension.toml allows (extensions.versions.MAX_VERSION_LENGTH).
    version = models.CharField(max_length=256)
    canonical = models.CharField(max_length=256)
    major = models.PositiveIntegerField()
    minor = models.PositiveIntegerField()
    patch = models.PositiveIntegerField()
    prerelease = models.CharField(max_length=256, blank=True)
    type = models.CharField(max_length=16, choices=ExtensionType.choices)
    description = models.CharField(max_length=512, blank=True)
    manifest = models.JSONField()  # extensions.manifest.Manifest.to_dict()
    manifest_text = models.TextField()  # extension.toml as published
    readme_html = models.TextField(blank=True)  # sanitized at build time
    # A constraint on the runtime, normalised: text, because normalising expands it (``1`` is
    # ``>=1.0.0, <2.0.0-0``), so a constraint of 1024 characters can become several thousand.
    provisioning_version = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.BigIntegerField()
    storage_key = models.CharField(max_length=256)
    files = models.JSONField(default=list)  # MANIFEST.json's files
    # The OCI view of the version (SPEC 7, registry.oci): its image config blob (canonical JSON
    # rendered from immutable facts at publish, extensions.oci; the manifests are rendered from it),
    # and the digests of the config and of the manifest, plain and yanked, so a digest finds its row.
    oci_config = models.TextField(blank=True)
    oci_config_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    oci_manifest_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    oci_yanked_manifest_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    yanked = models.BooleanField(default=False)
    yanked_reason = models.CharField(max_length=512, blank=True)
    yanked_at = models.DateTimeField(null=True, blank=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    published_at = models.DateTimeField(auto_now_add=True)
    downloads = models.BigIntegerField(default=0)
    # Whether the registry's builder makes these bytes of the package's own files (a source build
    # is by construction; an uploaded package is rebuilt and compared); None: not checked.
    reproducible = models.BooleanField(null=True, blank=True)
    reproducible_note = models.CharField(max_length=512, blank=True)
    # Its configuration interface read from its KCL schemas at build time, in the sandbox
    # (extensions.interface, bounded); None: published before interfaces were read.
    interface = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("extension__name", "-major", "-minor", "-patch")
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(fields=("extension", "canonical"), name="version_unique_per_extension"),
        ]
        indexes: ClassVar[list[Any]] = [
            models.Index(fields=("extension", "yanked")),
            # the catalog's "recently published" and "recently updated" lists
            models.Index(fields=("published_at",), name="version_published_at"),
            # search's runtime filter: "has a non-yanked version whose constraint admits it"
            models.Index(
                fields=("extension", "provisioning_version"), condition=Q(yanked=False), name="version_runtime"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.extension.name}@{self.version}"


class DailyDownloads(models.Model):
    """Downloads of one version on one day (UTC). Written in batches by
    `registry.downloadcounts.flush` (never on the download path); the totals on Version and
    Extension are advanced in the same transaction, so the two always agree."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="daily_downloads")
    day = models.DateField()
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(fields=("version", "day"), name="daily_downloads_unique"),
        ]
        indexes: ClassVar[list[Any]] = [models.Index(fields=("day",))]

    def __str__(self) -> str:
        return f"{self.version_id} {self.day}: {self.count}"


class Dependency(models.Model):
    """An extension dependency of a version (``name constraint``)."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="dependencies")
    extension = models.ForeignKey(Extension, on_delete=models.PROTECT, related_name="dependents")
    constraint = models.TextField()  # normalised (see Version.provisioning_version)
    written = models.TextField(blank=True, default="")  # as the author wrote it; "" in older rows

    class Meta:
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(fields=("version", "extension"), name="dependency_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.extension_id} {self.constraint}"

    @property
    def shown(self) -> str:
        """The constraint as written (rows stored before it was kept: the normal form)."""
        return self.written or self.constraint


class Provide(models.Model):
    """Something a version provides: a provider, taskserv, cluster or template name."""

    #: the singular type of what is provided (the same choices as Extension.type)
    Kind = ExtensionType

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="provides")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=64)
    # extensions.names.confusable_key(name): provided names are typosquat-checked like extension names.
    confusable_key = models.CharField(max_length=192, db_index=True, default="")

    class Meta:
        constraints: ClassVar[list[Any]] = [
            models.UniqueConstraint(fields=("version", "kind", "name"), name="provide_unique"),
        ]
        indexes: ClassVar[list[Any]] = [models.Index(fields=("kind", "name"))]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class PackageLock(models.Model):
    """A row per package sha256, updated inside a transaction to serialise storing/committing and
    removing the same content-addressed object (works the same on SQLite and PostgreSQL)."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    touched_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return self.sha256


class NameLock(models.Model):
    """A row per confusable-name key, updated inside the publishing transaction, so that two
    publishes whose names (or provided names) could be confusable are serialised and the second
    sees the first (SQLite serialises all writes anyway; PostgreSQL needs this)."""

    key = models.CharField(max_length=192, primary_key=True)
    touched_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return self.key


class ApiToken(models.Model):
    """An API token. Only its SHA-256 digest is stored; the secret is shown once at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, db_index=True)  # "pvr_" + a few characters, for display
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The token that created this one (None for a password, session or createtoken): revoking a
    # token revokes every token it created, so a leaked token cannot leave a sibling behind.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    # A token answered by trusted publishing (registry.trusted_publishing.exchange): the publisher
    # whose JWT it was exchanged for, and that JWT's verified claims (kept when the publisher is
    # removed). A build submitted with it reaches them as ``build.token.oidc_claims``.
    trusted_publisher = models.ForeignKey(
        "TrustedPublisher", null=True, blank=True, on_delete=models.SET_NULL, related_name="tokens"
    )
    oidc_claims = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def from_trusted_publishing(self) -> bool:
        """Answered by a trusted-publishing exchange: it publishes one extension, nothing else."""
        return self.trusted_publisher_id is not None or bool(self.oidc_claims)


class TrustedPublisher(models.Model):
    """A CI identity trusted to publish an extension without a stored secret (SPEC 6.3): tokens
    from an allow-listed OpenID Connect ``issuer``, for ``audience``, whose ``claims`` are exactly
    these. An exchange through it answers a short-lived token of ``added_by`` (the owner who
    registered it, while they remain an owner) scoped ``publish:NAME``.

    A *pending* publisher (``extension`` null) is for a name that does not exist yet: it reserves
    ``pending_name`` against other users until ``reserved_until``, and the first publish of that
    name by ``added_by`` (through it or otherwise) creates the extension and makes it an ordinary
    publisher of it (registry.publishers)."""

    extension = models.ForeignKey(
        Extension, null=True, blank=True, on_delete=models.CASCADE, related_name="trusted_publishers"
    )
    pending_name = models.CharField(max_length=64, blank=True, db_index=True)
    # extensions.names.confusable_key(pending_name): a reservation covers the look-alikes too.
    pending_key = models.CharField(max_length=192, blank=True, db_index=True)
    reserved_until = models.DateTimeField(null=True, blank=True)
    issuer = models.CharField(max_length=255)
    audience = models.CharField(max_length=255)
    claims = models.JSONField(default=dict)  # claim name -> the exact string it must be
    # For finding the publishers a token matches with an index, not by reading every row: the
    # sorted claim names ("repository,workflow") and the sha256 of the canonical claims JSON.
    claim_names = models.CharField(max_length=1100)
    claims_digest = models.CharField(max_length=64)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("added_at", "id")
        constraints: ClassVar[list[Any]] = [
            models.CheckConstraint(
                condition=(models.Q(extension__isnull=False) & models.Q(pending_name=""))
                | (models.Q(extension__isnull=True) & ~models.Q(pending_name="")),
                name="trusted_publisher_active_or_pending",
            ),
            models.UniqueConstraint(
                fields=("extension", "issuer", "audience", "claims_digest"),
                condition=models.Q(extension__isnull=False),
                name="trusted_publisher_unique",
            ),
            models.UniqueConstraint(
                fields=("pending_name", "issuer", "audience", "claims_digest"),
                condition=models.Q(extension__isnull=True),
                name="pending_publisher_unique",
            ),
        ]
        indexes: ClassVar[list[Any]] = [
            models.Index(fields=("issuer", "claim_names", "claims_digest"), name="trusted_publisher_match"),
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.claims} -> {self.name}{' (pending)' if self.is_pending else ''}"

    @property
    def is_pending(self) -> bool:
        return self.extension_id is None

    @property
    def name(self) -> str:
        return self.extension.name if self.extension is not None else self.pending_name


class OidcTokenUse(models.Model):
    """A JWT ID (``jti``) that trusted publishing accepted: a token is exchanged once. Kept until
    the token could no longer be accepted anyway (its ``exp`` plus the leeway), then pruned."""

    # sha256 of issuer NUL jti: bounded, and one issuer's IDs never collide with another's.
    key = models.CharField(max_length=64, primary_key=True)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class AuditQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> int:
        raise PermissionError("the audit log is append-only")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise PermissionError("the audit log is append-only")


class AuditEvent(models.Model):
    """Append-only: rows are only ever inserted (no update or delete path, read-only in the admin)."""

    class Action(models.TextChoices):
        PUBLISH = "publish"
        PUBLISH_FAILED = "publish_failed"
        YANK = "yank"
        UNYANK = "unyank"
        OWNER_ADD = "owner_add"
        OWNER_REMOVE = "owner_remove"
        TOKEN_CREATE = "token_create"  # noqa: S105 - an action name
        TOKEN_REVOKE = "token_revoke"  # noqa: S105 - an action name
        AUTH_FAILURE = "auth_failure"
        PUBLISHER_ADD = "publisher_add"
        PUBLISHER_REMOVE = "publisher_remove"
        OIDC_EXCHANGE = "oidc_exchange"
        OIDC_EXCHANGE_REFUSED = "oidc_exchange_refused"

    action = models.CharField(max_length=32, choices=Action.choices, db_index=True)
    # No cascade and no database constraint: deleting a user must not rewrite history.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DO_NOTHING, db_constraint=False
    )
    actor_name = models.CharField(max_length=150, blank=True)  # kept if the user is deleted
    token_prefix = models.CharField(max_length=16, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    extension = models.CharField(max_length=64, blank=True, db_index=True)
    version = models.CharField(max_length=256, blank=True)
    details = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ("-at", "-id")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.actor_name} {self.extension}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise PermissionError("the audit log is append-only: events cannot be changed")
        self.details = nul_escaped(self.details)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise PermissionError("the audit log is append-only: events cannot be deleted")
