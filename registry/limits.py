"""The limits on packages, on extension.toml, on the build sandbox (SPEC 2.4) and on a version's
configuration interface, built from the settings: what the build pipeline enforces and the JSON
Schema the registry serves."""

from __future__ import annotations

from django.conf import settings

from extensions.archive import Limits
from extensions.interface import InterfaceLimits
from extensions.manifest import ManifestLimits
from extensions.sandbox import SandboxLimits


def manifest_limits() -> ManifestLimits:
    return ManifestLimits(
        max_provides=settings.REGISTRY_MAX_PROVIDES,
        max_dependencies=settings.REGISTRY_MAX_DEPENDENCIES,
        max_system_packages=settings.REGISTRY_MAX_SYSTEM_PACKAGES,
        max_env_vars=settings.REGISTRY_MAX_ENV_VARS,
        max_build_patterns=settings.REGISTRY_MAX_BUILD_PATTERNS,
        max_pattern_length=settings.REGISTRY_MAX_BUILD_PATTERN_LENGTH,
        max_pattern_wildcards=settings.REGISTRY_MAX_BUILD_PATTERN_WILDCARDS,
    )


def archive_limits() -> Limits:
    return Limits(
        max_package_bytes=settings.REGISTRY_MAX_PACKAGE_BYTES,
        max_unpacked_bytes=settings.REGISTRY_MAX_UNPACKED_BYTES,
        max_members=settings.REGISTRY_MAX_MEMBERS,
        max_path_bytes=settings.REGISTRY_MAX_PATH_BYTES,
        max_depth=settings.REGISTRY_MAX_DEPTH,
        max_manifest_bytes=settings.REGISTRY_MAX_MANIFEST_BYTES,
        manifest=manifest_limits(),
    )


def sandbox_limits() -> SandboxLimits:
    archive = archive_limits()
    return SandboxLimits(
        cpu_seconds=settings.REGISTRY_SANDBOX_CPU_SECONDS,
        memory_bytes=settings.REGISTRY_SANDBOX_MEMORY,
        wall_seconds=settings.REGISTRY_SANDBOX_WALL_SECONDS,
        output_bytes=settings.REGISTRY_SANDBOX_OUTPUT,
        open_files=settings.REGISTRY_SANDBOX_OPEN_FILES,
        # the largest file a build writes: an extracted member, or the package it builds
        file_bytes=max(archive.max_package_bytes, archive.max_unpacked_bytes) + 1024 * 1024,
        isolate_network=settings.REGISTRY_SANDBOX_ISOLATE_NETWORK,
    )


def interface_limits() -> InterfaceLimits:
    return InterfaceLimits(
        max_files=settings.REGISTRY_INTERFACE_MAX_FILES,
        max_file_bytes=settings.REGISTRY_INTERFACE_MAX_FILE_SIZE,
        max_source_bytes=settings.REGISTRY_INTERFACE_MAX_SOURCE,
        max_schemas=settings.REGISTRY_INTERFACE_MAX_SCHEMAS,
        max_fields=settings.REGISTRY_INTERFACE_MAX_FIELDS,
        max_checks=settings.REGISTRY_INTERFACE_MAX_CHECKS,
        max_text=settings.REGISTRY_INTERFACE_MAX_TEXT,
        max_bytes=settings.REGISTRY_INTERFACE_MAX_SIZE,
    )
