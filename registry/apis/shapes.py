"""How the read API shows things (the dicts it renders) and how the OpenAPI document describes
them: the shapes, the envelope, the common errors and path parameters."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, inline_serializer
from rest_framework import serializers

from extensions.kinds import TYPES
from registry import selectors
from registry.apis.base import DEFAULT_LIMIT, MAX_LIMIT
from registry.models import Extension, Provide, Version

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
        "dependencies": [{"name": d.extension.name, "constraint": d.constraint} for d in dependencies],
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
    }


def provided_item(row: Provide) -> dict[str, Any]:
    extension = row.version.extension
    return {
        "name": row.name,
        "extension": extension.name,
        "version": row.version.version,
        "description": extension.description,
    }


# --- OpenAPI documentation of the shapes ----------------------------------------------------------


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
    homepage = serializers.URLField(allow_null=True)
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
    constraint = serializers.CharField()


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


class DependentVersion(serializers.Serializer):
    version = serializers.CharField()
    constraint = serializers.CharField()
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


ERRORS = {
    400: OpenApiResponse(ErrorEnvelope, description="bad_request: a malformed parameter"),
    404: OpenApiResponse(ErrorEnvelope, description="not_found"),
}
PAGING = [
    OpenApiParameter("limit", int, description=f"page size, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"),
    OpenApiParameter("offset", int, description="items to skip, at least 0 (default 0)"),
]
NAME_PARAM = OpenApiParameter("name", str, OpenApiParameter.PATH, description="extension name")
VERSION_PARAM = OpenApiParameter(
    "version", str, OpenApiParameter.PATH, description="SemVer 2.0.0 version (build metadata is ignored)"
)
