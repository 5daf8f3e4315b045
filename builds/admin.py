from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from builds.models import Build


@admin.register(Build)
class BuildAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "status", "name", "version_text", "submitted_by", "created_at", "attempts")
    list_filter = ("status", "kind")
    search_fields = ("name", "id", "upload_sha256")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
