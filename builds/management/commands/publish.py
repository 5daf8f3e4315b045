"""`python manage.py publish PATH...`: build extension sources from disk (or take built packages)
and publish them through the same pipeline as the API, dependencies first."""

from __future__ import annotations

import hashlib
import io
import logging
import tarfile
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from builds import services
from builds.models import Build
from extensions.archive import inspect_package, select_files
from extensions.errors import ExtensionError
from extensions.graph import DependencyCycleError, dependency_order
from extensions.manifest import Manifest, load_manifest
from extensions.versions import SemVer
from registry.errors import RegistryError
from registry.limits import archive_limits
from registry.models import Version
from registry.tokens import Actor

_SKIP_DIRS = {".git", "__pycache__", "dist", "node_modules", ".venv"}


class _Upload(io.BufferedReader):
    """A local file presented like an uploaded one (size and sha256 known)."""

    size: int
    sha256: str


def _open_upload(path: Path) -> _Upload:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    upload = _Upload(io.FileIO(path, "rb"))
    upload.size = path.stat().st_size
    upload.sha256 = digest.hexdigest()
    return upload


def _source_tarball(source: Path, manifest: Manifest, target: IO[bytes]) -> None:
    """A tar.gz of the files the builder packages (`select_files` with the [build] rules, which the
    server applies again): the same selection as `provisioning extension build`, so both build the
    same bytes. A file the builder refuses (a symlink...) raises its ExtensionError here."""
    files = select_files(source, include=manifest.build_include, exclude=manifest.build_exclude, readme=manifest.readme)
    with tarfile.open(fileobj=target, mode="w:gz") as tar:
        for rel in files:
            tar.add(source / rel, arcname=rel, recursive=False)


def _order(manifests: dict[Path, Manifest]) -> list[Path]:
    """Dependencies first (among the given sources; `extensions.graph.dependency_order`), then by
    name and version."""
    by_name: dict[str, list[Path]] = {}
    for path, manifest in manifests.items():
        by_name.setdefault(manifest.name, []).append(path)
    needs = {name: [d.name for p in paths for d in manifests[p].dependencies] for name, paths in by_name.items()}
    try:
        names = dependency_order(needs)
    except DependencyCycleError as exc:
        raise CommandError(f"dependency cycle among the sources: {' -> '.join(exc.cycle)}") from None
    return [path for name in names for path in sorted(by_name[name], key=lambda p: manifests[p].version)]


def _published(name: str, version: SemVer) -> bool:
    return Version.objects.filter(extension__name=name, canonical=str(version.without_build())).exists()


def _package_published(path: Path) -> bool:
    """Whether the built package's NAME VERSION is published (a package that cannot be read is not:
    the pipeline says why)."""
    try:
        info = inspect_package(path, limits=archive_limits())
        return _published(info.name, SemVer.parse(info.version))
    except ExtensionError:
        return False


class Command(BaseCommand):
    help = (
        "Publish extension sources (directories with extension.toml; directories holding such directories are "
        "searched) or built packages (*.tar.gz) through the build pipeline, dependencies first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--user", default="provisioning", help="publish as this user (created if missing)")
        parser.add_argument("--skip-existing", action="store_true", help="skip versions already published")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each build")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verbosity"] < 2:
            # This command prints one line per publish; the pipeline's own log lines would repeat it.
            logging.getLogger("builds").setLevel(logging.WARNING)
        sources: dict[Path, Manifest] = {}
        packages: list[Path] = []
        for raw in options["paths"]:
            path = Path(raw)
            if path.is_file() and path.name.endswith(".tar.gz"):
                packages.append(path)
                continue
            if not path.is_dir():
                raise CommandError(f"{path}: not a directory or a .tar.gz package")
            found = (
                [path]
                if (path / "extension.toml").is_file()
                else sorted(p.parent for p in path.rglob("extension.toml") if not (_SKIP_DIRS & set(p.parts)))
            )
            if not found:
                raise CommandError(f"{path}: no extension.toml in it or below it")
            for source in found:
                try:
                    sources[source] = load_manifest(source)
                except ExtensionError as exc:
                    raise CommandError(f"{source}: {exc}") from None
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            user = get_user_model().objects.create_user(username=options["user"])
            user.set_unusable_password()
            user.save()
        actor = Actor(user=user, address="127.0.0.1")
        failures = 0
        for source in _order(sources):
            manifest = sources[source]
            label = f"{manifest.name} {manifest.version}"
            if options["skip_existing"] and _published(manifest.name, manifest.version):
                self.stdout.write(f"skip     {label} (already published)")
                continue
            with tempfile.TemporaryDirectory(prefix="publish-") as tmp:
                tarball = Path(tmp) / f"{manifest.name}-{manifest.version}-source.tar.gz"
                try:
                    with tarball.open("wb") as handle:
                        _source_tarball(source, manifest, handle)
                except ExtensionError as exc:
                    self.stderr.write(f"failed   {label}: {exc.code}: {exc}")
                    failures += 1
                    continue
                failures += not self._submit(actor, Build.Kind.SOURCE, tarball, label, options["timeout"])
        for package in packages:
            if options["skip_existing"] and _package_published(package):
                self.stdout.write(f"skip     {package.name} (already published)")
                continue
            failures += not self._submit(actor, Build.Kind.PACKAGE, package, package.name, options["timeout"])
        if failures:
            raise CommandError(f"{failures} publish(es) failed")

    def _submit(self, actor: Actor, kind: str, path: Path, label: str, timeout: float) -> bool:
        with _open_upload(path) as upload:
            try:
                build = services.build_submit(actor=actor, kind=kind, upload=upload, filename=path.name)
            except RegistryError as exc:
                self.stderr.write(f"failed   {label}: {exc.message}")
                return False
        deadline = time.monotonic() + timeout
        build.refresh_from_db()
        while not build.is_final and time.monotonic() < deadline and not settings.CELERY_TASK_ALWAYS_EAGER:
            time.sleep(0.2)
            build.refresh_from_db()
        if build.status == Build.Status.SUCCEEDED:
            seconds = sum(float(step.get("seconds", 0)) for step in build.log)
            self.stdout.write(f"publish  {label} ({seconds:.2f} s, build {build.pk})")
            return True
        if not build.is_final:
            self.stderr.write(f"timeout  {label}: build {build.pk} is still {build.status}")
            return False
        self.stderr.write(f"failed   {label}: {build.error_code}: {build.error_message} (build {build.pk})")
        return False
