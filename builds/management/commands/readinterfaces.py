"""`python manage.py readinterfaces [NAME | NAME@VERSION ...] [--all]`: read the configuration
interface of versions published before the registry read interfaces, from their stored packages,
in the build sandbox (`builds.interfaces`). Without names, every version that has none; ``--all``
reads the named versions (or every version) again even if they have one."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import QuerySet

from builds.interfaces import version_interface_read
from extensions.errors import ExtensionError
from extensions.interface import summary
from extensions.sandbox import SandboxCrash
from extensions.versions import SemVer
from registry.errors import RegistryError
from registry.models import Version


class Command(BaseCommand):
    help = "Read the configuration interface of published versions from their packages, in the build sandbox."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", metavar="NAME[@VERSION]", help="only these extensions or versions")
        parser.add_argument("--all", action="store_true", help="read them again even if they have an interface")

    def handle(self, *args: Any, **options: Any) -> None:
        versions = _selected(options["names"])
        if not options["all"]:
            versions = versions.filter(interface__isnull=True)
        failed = 0
        for version in versions.select_related("extension").order_by("extension__name", "id"):
            label = f"{version.extension.name} {version.version}"
            try:
                interface = version_interface_read(version=version)
            except (ExtensionError, RegistryError) as exc:  # the package's fault, or storage down
                failed += 1
                self.stderr.write(f"{label}: not read: {exc}")
                continue
            except (SandboxCrash, ValueError) as exc:  # ours: said as such, and the others go on
                failed += 1
                self.stderr.write(f"{label}: not read, on the registry's side: {exc}")
                continue
            self.stdout.write(f"{label}: {summary(interface)}")
        if failed:
            raise CommandError(f"{failed} version(s) could not be read")


def _selected(names: list[str]) -> QuerySet[Version]:
    if not names:
        return Version.objects.all()
    query = Version.objects.none()
    for spec in names:
        name, _, version = spec.partition("@")
        rows = Version.objects.filter(extension__name=name)
        if version:
            try:
                canonical = str(SemVer.parse(version).without_build())
            except ValueError:
                raise CommandError(f"{spec}: {version!r} is not a SemVer version") from None
            rows = rows.filter(canonical=canonical)
        if not rows.exists():
            raise CommandError(f"{spec}: no such extension or version")
        query = query | rows
    return query
