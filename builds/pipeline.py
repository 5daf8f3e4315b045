"""The publish pipeline (SPEC 3.3), one small function per step. Each step is timed and logged on
the build. Author errors (`extensions` errors, `RegistryError`s) fail the build with their message;
anything else is ours and fails it with a generic message (see builds.services.build_run)."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import transaction

from builds.models import Build
from builds.services import StepLog, build_mark_succeeded
from extensions.archive import (
    Limits,
    PackageInfo,
    build_package,
    extract_source_archive,
    inspect_package,
    safe_extract,
)
from extensions.checks import run_content_checks
from extensions.errors import ArchiveError, ManifestError
from extensions.manifest import Manifest, parse_manifest
from extensions.names import RESERVED_NAMES
from registry import services as catalog
from registry import storage
from registry.errors import NameTaken, RegistryError
from registry.readme import render_readme
from registry.tokens import Actor

log = logging.getLogger(__name__)


def limits() -> Limits:
    return Limits(
        max_package_bytes=settings.REGISTRY_MAX_PACKAGE_BYTES,
        max_unpacked_bytes=settings.REGISTRY_MAX_UNPACKED_BYTES,
        max_members=settings.REGISTRY_MAX_MEMBERS,
        max_path_bytes=settings.REGISTRY_MAX_PATH_BYTES,
        max_depth=settings.REGISTRY_MAX_DEPTH,
        max_manifest_bytes=settings.REGISTRY_MAX_MANIFEST_BYTES,
    )


_COMMIT_MARGIN_SECONDS = 30
_MAX_LOGGED_CHECKS = 50  # each failed or skipped check is a log line, up to this many


class ContentCheckFailed(RegistryError):
    code = "invalid_archive"


def run(*, build: Build, attempt: int, actor: Actor, steps: StepLog) -> None:
    """Upload → inspect → validate → check content → (build) → store → commit."""
    workdir = Path(tempfile.mkdtemp(prefix=f"build-{build.pk}-"))
    # The content checks run authors' files through tools: they get the build's time budget, less
    # a margin for storing and committing (in-process builds have no Celery time limit to stop them).
    deadline = time.monotonic() + max(1, settings.REGISTRY_BUILD_TIME_LIMIT - _COMMIT_MARGIN_SECONDS)
    try:
        upload = workdir / "upload.tar.gz"
        with steps.step("fetch") as note, upload.open("wb") as target:
            storage.download_to(build.upload_key, target)
            note["message"] = f"{upload.stat().st_size} bytes"
        package = _build_from_source(upload, workdir, steps) if build.kind == Build.Kind.SOURCE else upload
        with steps.step("inspect") as note, _reserved_name_taken():
            info = inspect_package(package, limits=limits())
            note["message"] = (
                f"{info.name} {info.version}: {len(info.files)} files, {info.unpacked_size} bytes unpacked"
            )
        Build.objects.filter(pk=build.pk).update(name=info.name, version_text=info.version)
        build.name, build.version_text = info.name, info.version
        with steps.step("validate") as note, _reserved_name_taken():
            manifest = _validate(info, actor)
            note["message"] = f"{manifest.name} {manifest.version} ({manifest.type})" + (
                f"; {len(manifest.warnings)} warning(s): " + "; ".join(str(w) for w in manifest.warnings)
                if manifest.warnings
                else ""
            )
        _check_content(package, workdir, steps, deadline)
        with steps.step("readme") as note:
            readme_html = render_readme(info.readme_text)
            note["message"] = "rendered and sanitized" if readme_html else "no README"
        with steps.step("store") as note:
            with package.open("rb") as handle:
                key = storage.put_package(info.sha256, handle, info.size)
            note["message"] = f"sha256:{info.sha256} at {key}"
        with steps.step("commit") as note:
            version_id = _commit(build, attempt, actor, manifest, info, key, readme_html, package)
            note["message"] = f"published {manifest.name} {manifest.version}"
        log.info("build %s published %s %s (version id %s)", build.pk, manifest.name, manifest.version, version_id)
        try:
            storage.delete(build.upload_key)
        except RegistryError:
            log.warning("build %s: staged upload left for the sweeper", build.pk)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _build_from_source(upload: Path, workdir: Path, steps: StepLog) -> Path:
    with steps.step("extract source") as note:
        source = extract_source_archive(upload, workdir / "source", limits=limits())
        note["message"] = f"extension source at {source.relative_to(workdir / 'source') or '.'}"
    with steps.step("build package") as note, _reserved_name_taken():
        built = build_package(source, workdir / "dist", limits=limits())
        note["message"] = f"{built.path.name}: {len(built.files)} files, sha256:{built.sha256}"
    return built.path


@contextlib.contextmanager
def _reserved_name_taken() -> Iterator[None]:
    """A reserved extension name is a name clash (name_taken, SPEC 3.1), not a malformed manifest,
    wherever extension.toml is parsed (inspecting a package, building one from source)."""
    try:
        yield
    except ManifestError as exc:
        for problem in exc.errors:
            if problem.path != "extension.name":
                continue
            for name in RESERVED_NAMES:
                if problem.message.startswith(f"{name!r} is reserved"):
                    raise NameTaken(
                        f"{name!r} is a reserved name and cannot be used for an extension; "
                        f"the reserved names are {', '.join(sorted(RESERVED_NAMES))}",
                        details=[{"path": problem.path, "name": name}],
                    ) from None
        raise


def _validate(info: PackageInfo, actor: Actor) -> Manifest:
    manifest = parse_manifest(info.manifest_text, max_bytes=settings.REGISTRY_MAX_MANIFEST_BYTES)
    if manifest.name != info.name or str(manifest.version) != info.version:
        raise ArchiveError(
            f"the package's top directory {info.name}-{info.version}/ does not match extension.toml "
            f"({manifest.name} {manifest.version}); rebuild it with `provisioning extension build`"
        )
    catalog.publish_check(actor=actor, manifest=manifest)
    return manifest


def _check_content(package: Path, workdir: Path, steps: StepLog, deadline: float) -> None:
    with steps.step("check content") as note:
        tree = workdir / "content"
        safe_extract(package, tree, limits=limits())
        report = run_content_checks(tree, deadline=deadline)
        counts = report.counts()
        noteworthy = [r for r in report.results if r.status != "passed"]
        for result in noteworthy[:_MAX_LOGGED_CHECKS]:
            steps.add(f"check {result.check}", result.status, f"{result.path}: {result.message}", result.seconds)
        if len(noteworthy) > _MAX_LOGGED_CHECKS:
            steps.add(
                "check",
                "failed" if not report.ok else "skipped",
                f"... and {len(noteworthy) - _MAX_LOGGED_CHECKS} more",
            )
        note["message"] = f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
        if not report.ok:
            failed = report.failed
            first = failed[0]
            raise ContentCheckFailed(
                f"content check failed: {first.path}: {first.message}"
                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""),
                details=[r.as_dict() for r in failed],
            )


def _commit(
    build: Build,
    attempt: int,
    actor: Actor,
    manifest: Manifest,
    info: PackageInfo,
    key: str,
    readme_html: str,
    package: Path,
) -> int:
    """One transaction: the version rows and the build's final state. If it fails, the stored
    object is removed unless another version references it."""

    def reupload() -> IO[bytes]:
        return package.open("rb")

    try:
        with transaction.atomic():
            version = catalog.version_create(
                actor=actor,
                manifest=manifest,
                package=info,
                storage_key=key,
                readme_html=readme_html,
                reupload=reupload,
            )
            if not build_mark_succeeded(build=build, attempt=attempt, version_id=version.pk):
                raise _LostClaim(f"build {build.pk} is no longer owned by attempt {attempt}")
            return int(version.pk)
    except BaseException:
        try:
            catalog.package_discard(sha256=info.sha256, key=key)
        except Exception:
            log.warning("build %s: could not remove %s after a failed commit", build.pk, key, exc_info=True)
        raise


class _LostClaim(Exception):
    """Another attempt took the build over (this worker was thought dead); roll back."""
