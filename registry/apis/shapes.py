"""The shapes of the API's answers, each defined once: a serializer that both renders it (views
answer ``ok(render(Shape, value))``) and documents it in the OpenAPI document, so what is sent and
what is documented cannot drift. The builders below (``extension_item`` ...) gather the raw values
from the models; the serializer decides which keys are sent and how each is written (a key the
builder lacks fails loudly, a key it adds that the shape does not declare is never sent).

Also here: the error envelope and the statuses each operation may answer (``answers``), the
documented path and query parameters, with the same patterns and bounds the views enforce."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers

from extensions.kinds import KINDS, TYPES
from extensions.names import NAME_PATTERN
from registry import selectors
from registry.apis.base import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET
from registry.models import ApiToken, Extension, Provide, Version
from registry.provenance.selectors import provenance_link

SOURCE = "registry"


def download_url(base: str, version: Version) -> str:
    return base + reverse("version-download", kwargs={"name": version.extension.name, "version": version.canonical})


def iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


# --- how things are shown -------------------------------------------------------------------------


def extension_item(extension: Extension, display: Version | None, base: str) -> dict[str, Any]:
    """A search result: the platform's registry fields. ``version`` and the download fields are
    those of the latest non-yanked version (None when every version is yanked); author,
    repository and tags come from that version, else from the newest version."""
    latest = extension.latest_version
    if latest is not None:
        latest.extension = extension  # already loaded; saves a query for download_url
    manifest: dict[str, Any] = display.manifest if display is not None else {}
    return {
        "name": extension.name,
        "type": extension.type,
        "version": latest.version if latest else None,
        "description": extension.description,
        "author": ", ".join(manifest.get("authors") or []) or None,
        "repository": manifest.get("repository"),
        "source": SOURCE,
        "published_at": iso(latest.published_at) if latest else None,
        "download_url": download_url(base, latest) if latest else None,
        "checksum": f"sha256:{latest.sha256}" if latest else None,
        "size": latest.size if latest else None,
        "tags": list(manifest.get("keywords") or []),
        "downloads": extension.downloads,
    }


def version_summary(version: Version, base: str) -> dict[str, Any]:
    return {
        "version": version.version,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "published_at": iso(version.published_at),
        "sha256": version.sha256,
        "size": version.size,
        "downloads": version.downloads,
        "download_url": download_url(base, version),
    }


def extension_detail(extension: Extension, base: str) -> dict[str, Any]:
    """One extension: the search fields plus owners, versions (newest first) and metadata."""
    versions = selectors.sort_versions(extension.versions.all())
    for version in versions:
        version.extension = extension  # already loaded; saves a query per download_url
    display = selectors.display_version(extension)
    manifest: dict[str, Any] = display.manifest if display is not None else {}
    data = extension_item(extension, display, base)
    data.update(
        {
            "latest_version": data["version"],
            "license": manifest.get("license"),
            "homepage": manifest.get("homepage"),
            "provides": selectors.version_provides(display),
            "owners": sorted(o.user.get_username() for o in extension.ownerships.all()),
            "versions": [version_summary(v, base) for v in versions],
            "created_at": iso(extension.created_at),
            "updated_at": iso(extension.updated_at),
        }
    )
    return data


def version_detail(version: Version, base: str) -> dict[str, Any]:
    dependencies = sorted(version.dependencies.all(), key=lambda d: d.extension.name)
    return {
        "name": version.extension.name,
        "version": version.version,
        "type": version.type,
        "description": version.description,
        "manifest": version.manifest,
        "dependencies": [
            {"name": d.extension.name, **constraint_fields(d.constraint, d.written)} for d in dependencies
        ],
        "provides": selectors.version_provides(version),
        "provisioning_version": version.provisioning_version or None,
        "sha256": version.sha256,
        "checksum": f"sha256:{version.sha256}",
        "size": version.size,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "yanked_at": iso(version.yanked_at),
        "published_at": iso(version.published_at),
        "published_by": version.published_by.get_username() if version.published_by else None,
        "build": selectors.version_build_id(version),
        "downloads": version.downloads,
        "readme_html": version.readme_html,
        "files": version.files,
        "download_url": download_url(base, version),
        "reproducible": {"verified": version.reproducible, "note": version.reproducible_note},
        "provenance": provenance_link(version, base),
    }


def constraint_fields(normal: str, written: str = "") -> dict[str, str]:
    """A dependency's constraint as its author wrote it (``constraint``: ``^1.7``), and its normal
    form (``normal``: ``>=1.7.0, <2.0.0-0``). Rows stored before the written form was kept show
    the normal form in both."""
    return {"constraint": written or normal, "normal": normal}


def provided_item(row: Provide) -> dict[str, Any]:
    extension = row.version.extension
    return {
        "name": row.name,
        "extension": extension.name,
        "version": row.version.version,
        "description": extension.description,
    }


# --- the shapes -----------------------------------------------------------------------------------


def render(shape: type[serializers.Serializer], value: Any, *, many: bool = False) -> Any:
    """``value`` (a mapping of raw values, or a list of them) as ``shape`` writes it."""
    if many:
        return [shape().to_representation(item) for item in value]
    return shape().to_representation(value)


class ApiError(serializers.Serializer):
    code = serializers.CharField(help_text="a SPEC 3.1 error code, e.g. not_found")
    message = serializers.CharField(help_text="what is wrong and what is allowed")
    details = serializers.ListField(child=serializers.JSONField())


class ErrorEnvelope(serializers.Serializer):
    success = serializers.BooleanField(default=False)
    error = ApiError()


class ExtensionItem(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    version = serializers.CharField(allow_null=True, help_text="latest non-yanked version; null if all are yanked")
    description = serializers.CharField()
    author = serializers.CharField(allow_null=True)
    # Not format: uri: extension.toml allows any http(s) URL text, which is not always a valid URI.
    repository = serializers.CharField(allow_null=True)
    # `source` is also an attribute of Field; DRF's metaclass takes declared fields out of the class.
    source = serializers.CharField(default=SOURCE)  # type: ignore[assignment]
    published_at = serializers.DateTimeField(allow_null=True)
    download_url = serializers.URLField(allow_null=True)
    checksum = serializers.CharField(allow_null=True, help_text='"sha256:" and the hex digest of the package')
    size = serializers.IntegerField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), help_text="the keywords")
    downloads = serializers.IntegerField()


class VersionSummary(serializers.Serializer):
    version = serializers.CharField()
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField(allow_blank=True)
    published_at = serializers.DateTimeField()
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    downloads = serializers.IntegerField()
    download_url = serializers.URLField()


class Provides(serializers.Serializer):
    providers = serializers.ListField(child=serializers.CharField())
    taskservs = serializers.ListField(child=serializers.CharField())
    clusters = serializers.ListField(child=serializers.CharField())
    templates = serializers.ListField(child=serializers.CharField())


class ExtensionDetail(ExtensionItem):
    latest_version = serializers.CharField(allow_null=True)
    license = serializers.CharField(allow_null=True)
    homepage = serializers.CharField(allow_null=True, help_text="as written in extension.toml (an http(s) URL)")
    provides = Provides()
    owners = serializers.ListField(child=serializers.CharField(), help_text="usernames")
    versions = VersionSummary(many=True, help_text="newest first")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ProvidedBy(serializers.Serializer):
    # A CharField: the same choices as `type` under another name would be a second enum component.
    kind = serializers.CharField(help_text="the singular kind: " + " | ".join(TYPES))
    name = serializers.CharField()
    extension = serializers.CharField()
    version = serializers.CharField(allow_null=True)


class ExtensionLookup(ExtensionDetail):
    provided_by = ProvidedBy()


class DependencyItem(serializers.Serializer):
    name = serializers.CharField()
    constraint = serializers.CharField(help_text="as its author wrote it, e.g. ^1.7")
    normal = serializers.CharField(help_text="the normal form, e.g. >=1.7.0, <2.0.0-0")


class PackageFile(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()


class Reproducibility(serializers.Serializer):
    verified = serializers.BooleanField(
        allow_null=True,
        help_text="whether the registry's builder makes these bytes of the package's own files (null: not checked)",
    )
    note = serializers.CharField(allow_blank=True, help_text="how that was found, or how the package differs")


class ProvenanceSubject(serializers.Serializer):
    name = serializers.CharField(help_text="NAME-VERSION.tar.gz")
    sha256 = serializers.CharField(help_text="the package's sha256, as the statement attests it")


class ProvenanceLink(serializers.Serializer):
    url = serializers.URLField(help_text="GET it: the DSSE envelope (application/vnd.in-toto+json)")
    media_type = serializers.CharField()
    sha256 = serializers.CharField(help_text="of the envelope: its ETag, and what the signed index lists")
    target = serializers.CharField(help_text="its path in the signed index (TUF target)")
    subject = ProvenanceSubject()
    keyid = serializers.CharField(help_text="the provenance key that signed it")


class DsseSignature(serializers.Serializer):
    keyid = serializers.CharField(help_text="the provenance key's id (keys/provenance.pub in the signed index)")
    sig = serializers.CharField(help_text="base64 Ed25519 signature over DSSE's PAE(payloadType, payload)")


class DsseEnvelope(serializers.Serializer):
    """A version's signed build provenance: a DSSE envelope (canonical JSON)."""

    payload = serializers.CharField(help_text="base64 of the in-toto Statement v1 (SLSA Provenance v1 predicate)")
    payloadType = serializers.ChoiceField(choices=["application/vnd.in-toto+json"])  # DSSE names it so
    signatures = DsseSignature(many=True)


class VersionDetail(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    description = serializers.CharField()
    manifest = serializers.DictField(help_text="extension.toml as validated (Manifest.to_dict())")
    dependencies = DependencyItem(many=True)
    provides = Provides()
    provisioning_version = serializers.CharField(allow_null=True)
    sha256 = serializers.CharField()
    checksum = serializers.CharField()
    size = serializers.IntegerField()
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField(allow_blank=True)
    yanked_at = serializers.DateTimeField(allow_null=True)
    published_at = serializers.DateTimeField()
    published_by = serializers.CharField(allow_null=True)
    build = serializers.UUIDField(allow_null=True, help_text="the build that published it")
    downloads = serializers.IntegerField()
    readme_html = serializers.CharField(allow_blank=True, help_text="sanitized HTML")
    files = PackageFile(many=True)
    download_url = serializers.URLField()
    reproducible = Reproducibility()
    provenance = ProvenanceLink(allow_null=True, help_text="the signed build provenance (null: none yet)")


class DependentVersion(serializers.Serializer):
    version = serializers.CharField()
    constraint = serializers.CharField(help_text="as its author wrote it")
    normal = serializers.CharField(help_text="the normal form")
    yanked = serializers.BooleanField()


class Dependent(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    description = serializers.CharField()
    latest_version = serializers.CharField(allow_null=True)
    versions = DependentVersion(many=True, help_text="its versions that depend on the extension, newest first")


class ProvidedItem(serializers.Serializer):
    name = serializers.CharField(help_text="the provided name")
    extension = serializers.CharField()
    version = serializers.CharField(help_text="the extension's latest version")
    description = serializers.CharField()


class YankState(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    yanked = serializers.BooleanField()
    yanked_reason = serializers.CharField(allow_blank=True)
    yanked_at = serializers.DateTimeField(allow_null=True)


def yank_state(version: Version) -> dict[str, Any]:
    return {
        "name": version.extension.name,
        "version": version.version,
        "yanked": version.yanked,
        "yanked_reason": version.yanked_reason,
        "yanked_at": iso(version.yanked_at),
    }


class Owner(serializers.Serializer):
    username = serializers.CharField()
    added_at = serializers.DateTimeField()
    added_by = serializers.CharField(allow_null=True)


class Owners(serializers.Serializer):
    name = serializers.CharField()
    owners = Owner(many=True, help_text="by username")


def owners_of(extension: Extension) -> dict[str, Any]:
    owners = extension.ownerships.select_related("user", "added_by").order_by("user__username")
    return {
        "name": extension.name,
        "owners": [
            {
                "username": o.user.get_username(),
                "added_at": iso(o.added_at),
                "added_by": o.added_by.get_username() if o.added_by else None,
            }
            for o in owners
        ],
    }


class Token(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="the first 12 characters of the secret, to recognise it")
    scopes = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class TokenCreated(Token):
    token = serializers.CharField(help_text="the secret (pvr_...), shown this once")


def token_row(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "scopes": token.scopes,
        "created_at": iso(token.created_at),
        "expires_at": iso(token.expires_at),
        "last_used_at": iso(token.last_used_at),
        "revoked_at": iso(token.revoked_at),
    }


class ResolvedItem(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    sha256 = serializers.CharField()
    size = serializers.IntegerField()
    yanked = serializers.BooleanField()
    download_url = serializers.URLField()
    dependencies = serializers.ListField(
        child=serializers.CharField(), help_text="its requirements, constraints as written (`etcd ^3.5`)"
    )


class Resolution(serializers.Serializer):
    resolved = ResolvedItem(many=True, help_text="in install order")
    install_order = serializers.ListField(child=serializers.CharField(), help_text="dependencies first")
    locked_ignored = serializers.ListField(child=serializers.DictField(), help_text="locked pins not used, and why")
    skipped = serializers.ListField(child=serializers.DictField(), help_text="candidates passed over, and why")


class PlannedItem(ResolvedItem):
    system_packages = serializers.ListField(child=serializers.CharField())
    required_env = serializers.ListField(child=serializers.CharField())
    optional_env = serializers.ListField(child=serializers.CharField())


class InstallPlan(serializers.Serializer):
    name = serializers.CharField(help_text="the provided name asked for")
    kind = serializers.CharField(help_text="the singular kind: " + " | ".join(TYPES))
    extension = serializers.CharField(help_text="the extension that provides it")
    version = serializers.CharField()
    install_order = serializers.ListField(child=serializers.CharField())
    extensions = PlannedItem(many=True, help_text="in install order")
    system_packages = serializers.ListField(child=serializers.CharField())
    required_env = serializers.ListField(child=serializers.CharField())


def page_of(name: str, item: serializers.Serializer) -> Any:
    return inline_serializer(
        name,
        {
            "items": item,
            "total": serializers.IntegerField(),
            "limit": serializers.IntegerField(),
            "offset": serializers.IntegerField(),
        },
    )


def envelope(name: str, data: Any) -> Any:
    return inline_serializer(name, {"success": serializers.BooleanField(default=True), "data": data})


# --- statuses ---------------------------------------------------------------------------------------

_ERROR_STATUSES = {
    400: "bad_request: a malformed parameter or body (details name it and say what is allowed)",
    401: "unauthenticated: a token is needed and none was sent, or the one sent is unknown, expired or revoked",
    403: "forbidden: not an owner, or the token's scopes do not cover the action (details name the scope)",
    404: "not_found: no such extension, version, build, owner or token",
    409: "version_exists or name_taken",
    413: "archive_too_large: over a size limit (refused while streaming)",
    415: "unsupported_media_type: the body is not of a documented media type",
    422: "the request is well-formed but cannot be done (resolution_failed, too_complex, ...)",
    429: "rate_limited: throttled; Retry-After says when to retry",
    503: (
        "storage_unavailable or database_unavailable: object storage or the database is down "
        "(Retry-After says when to try again); nothing was changed"
    ),
}
#: Every operation may answer these: a bad token is refused wherever it is sent, and failed
#: authentications are throttled per address.
ALWAYS = (401, 429)


def answers(success: dict[Any, Any], *errors: int) -> dict[Any, Any]:
    """The responses of an operation: ``success`` plus the error envelope for each status in
    ``errors`` and in ALWAYS."""
    documented = dict(success)
    for status in sorted({*errors, *ALWAYS}):
        documented[status] = OpenApiResponse(ErrorEnvelope, description=_ERROR_STATUSES[status])
    return documented


# --- parameters --------------------------------------------------------------------------------------

#: The SemVer 2.0.0 grammar (semver.org's regular expression), for version path parameters.
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


PAGING = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        description=f"page size, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})",
    ),
    OpenApiParameter(
        "offset",
        {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
        description="items to skip, at least 0 (default 0)",
    ),
]
NAME_PARAM = OpenApiParameter(
    "name",
    {"type": "string", "pattern": NAME_PATTERN, "minLength": 2, "maxLength": 64},
    OpenApiParameter.PATH,
    description="extension name",
)
VERSION_PARAM = OpenApiParameter(
    "version",
    {"type": "string", "pattern": SEMVER_PATTERN, "maxLength": 256},
    OpenApiParameter.PATH,
    description="SemVer 2.0.0 version (build metadata is ignored)",
)
KINDS_PARAM = OpenApiParameter(
    "kinds", str, OpenApiParameter.PATH, enum=[k for k in KINDS if k != "templates"], description="plural kind"
)
