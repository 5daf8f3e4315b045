"""Does what is stored agree with the catalogue? (`python manage.py check_integrity`, docs/deploy.md.)

Checked, each disagreement one line of the report:
- every version's package object exists, with the version's size and sha256 (read and hashed
  unless ``hash_objects`` is off);
- every package object belongs to a version: one that no row references and is older than the
  grace period (the sweeper's, so an in-flight publish is never counted) is an orphan (staged
  uploads are the builds' concern: `builds.sweeper.leftover_uploads`);
- the signed index (registry.trust.integrity): every version covered by the signed metadata and
  the metadata by versions, every role signed by its keys and not expired;
- download counts: none negative, a version's total at least the sum of its daily counts, an
  extension's at least the sum of its versions' (counts only ever grow, in one transaction), and,
  given the totals of an earlier run (``previous``), none smaller than it was.

Reading never writes: the report says what the sweeper (`manage.py sweepstorage`) or an
operator should repair."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from registry import storage
from registry.models import DailyDownloads, Extension, Version
from registry.trust.integrity import check_integrity as signed_index_problems

_CHUNK = 1024 * 1024


@dataclass
class IntegrityReport:
    """The problems found (none: everything agrees) and how much was checked."""

    problems: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    #: name@version → total downloads (what a later run's ``previous`` compares against).
    downloads: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"problems": self.problems, "checked": self.checked, "downloads": self.downloads}


def _sha256_of(key: str) -> str:
    digest = hashlib.sha256()
    with storage.open_file(key) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _versions(report: IntegrityReport, *, hash_objects: bool) -> set[str]:
    referenced: set[str] = set()
    count = 0
    rows = Version.objects.select_related("extension").only(
        "version", "sha256", "size", "storage_key", "downloads", "extension__name"
    )
    for version in rows.iterator(chunk_size=500):
        count += 1
        label = f"{version.extension.name}@{version.version}"
        referenced.add(version.storage_key)
        report.downloads[label] = version.downloads
        address = storage.package_key(version.sha256)
        if version.storage_key != address:
            report.problems.append(f"{label}: stored at {version.storage_key}, not at its content address {address}")
        if not storage.exists(version.storage_key):
            report.problems.append(f"{label}: its package {version.storage_key} is missing from storage")
            continue
        size = storage.size(version.storage_key)
        if size != version.size:
            report.problems.append(
                f"{label}: its package is {size} bytes in storage, the catalogue says {version.size}"
            )
            continue
        if hash_objects:
            actual = _sha256_of(version.storage_key)
            if actual != version.sha256:
                report.problems.append(
                    f"{label}: its package's sha256 is {actual} in storage, the catalogue says {version.sha256}"
                )
    report.checked["versions"] = count
    return referenced


def _objects(report: IntegrityReport, referenced: set[str], *, grace_seconds: int) -> None:
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    objects = 0
    for key, modified in storage.list_keys(storage.PACKAGES_PREFIX):
        objects += 1
        if key not in referenced and (modified is None or modified <= cutoff):
            report.problems.append(f"object {key} belongs to no version (`manage.py sweepstorage` removes it)")
    report.checked["objects"] = objects


def _downloads(report: IntegrityReport, previous: dict[str, int] | None) -> None:
    for model, what in ((Extension, "extension"), (Version, "version")):
        for pk, downloads in model.objects.filter(downloads__lt=0).values_list("pk", "downloads"):
            report.problems.append(f"{what} {pk} has a negative download count ({downloads})")
    for row in DailyDownloads.objects.filter(count__lt=0).select_related("version__extension"):
        report.problems.append(
            f"{row.version.extension.name}@{row.version.version}: {row.count} downloads on {row.day} (negative)"
        )
    daily = Version.objects.annotate(daily=Sum("daily_downloads__count")).filter(daily__gt=0)
    for version in daily.select_related("extension").only("version", "downloads", "extension__name"):
        if version.downloads < version.daily:
            report.problems.append(
                f"{version.extension.name}@{version.version}: {version.downloads} downloads in all, fewer than "
                f"the {version.daily} its days add up to"
            )
    per_extension = Extension.objects.annotate(of_versions=Sum("versions__downloads"))
    for extension in per_extension.only("name", "downloads"):
        of_versions = extension.of_versions or 0
        if extension.downloads < of_versions:
            report.problems.append(
                f"{extension.name}: {extension.downloads} downloads in all, fewer than the {of_versions} "
                "its versions add up to"
            )
    for label, before in sorted((previous or {}).items()):
        now = report.downloads.get(label)
        if now is not None and now < before:
            report.problems.append(f"{label}: {now} downloads, fewer than the {before} of the earlier run")


def integrity_check(
    *, hash_objects: bool = True, grace_seconds: int | None = None, previous: dict[str, int] | None = None
) -> IntegrityReport:
    """The whole check (see the module docstring). ``grace_seconds`` defaults to
    REGISTRY_SWEEP_GRACE_SECONDS."""
    grace = settings.REGISTRY_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds
    report = IntegrityReport()
    referenced = _versions(report, hash_objects=hash_objects)
    _objects(report, referenced, grace_seconds=grace)
    report.problems += [f"signed index: {problem}" for problem in signed_index_problems()]
    _downloads(report, previous)
    return report
