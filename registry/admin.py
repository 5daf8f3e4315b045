"""The admin: the catalog is browsable and read-only. Every change to it (yanking, owners, names,
index documents) goes through the services, which keep the index documents and the audit log in
step; the admin offers no path around them. Published versions cannot be deleted, and the audit
log is read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from registry.models import ApiToken, AuditEvent, Extension, Ownership, TrustedPublisher, Version


class OwnershipInline(admin.TabularInline):
    model = Ownership
    fk_name = "extension"
    extra = 0
    readonly_fields = ("user", "added_by", "added_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # owners change through the API (audited), not here

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Extension)
class ExtensionAdmin(admin.ModelAdmin):
    list_display = ("name", "type", "latest_version", "downloads", "updated_at")
    list_filter = ("type",)
    search_fields = ("name", "description")
    readonly_fields = tuple(f.name for f in Extension._meta.concrete_fields)
    inlines = (OwnershipInline,)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Version)
class VersionAdmin(admin.ModelAdmin):
    list_display = ("extension", "version", "type", "yanked", "published_at", "downloads")
    list_filter = ("yanked", "type")
    search_fields = ("extension__name", "version", "sha256")
    # Yanking goes through the API (it rewrites the index document and is audited).
    readonly_fields = tuple(f.name for f in Version._meta.concrete_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "created_at", "expires_at", "last_used_at", "revoked_at")
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = tuple(f.name for f in ApiToken._meta.concrete_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tokens are created through the API or `manage.py createtoken`, which show the secret

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoke instead (the API): a deleted token must leave a trace for its builds


@admin.register(TrustedPublisher)
class TrustedPublisherAdmin(admin.ModelAdmin):
    list_display = ("id", "extension", "pending_name", "issuer", "added_by", "reserved_until", "last_used_at")
    list_filter = ("issuer",)
    search_fields = ("extension__name", "pending_name", "added_by__username")
    readonly_fields = tuple(f.name for f in TrustedPublisher._meta.concrete_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # through the API or the catalog page (checked and audited)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # likewise: removing one also revokes its live tokens


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "action", "actor_name", "address", "extension", "version")
    list_filter = ("action",)
    search_fields = ("actor_name", "extension", "address")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
