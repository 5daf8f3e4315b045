"""What authors run on their own machine: validate, test and build an extension source tree.

The same `extensions` functions run in the registry's build pipeline, so what passes here passes
there, and `build` produces the bytes the registry would."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clients.errors import ClientError, os_error_message
from extensions.archive import BuiltPackage, Limits, build_package
from extensions.checks import CheckReport, CheckResult, run_content_checks, run_extension_tests
from extensions.errors import ExtensionError, Problem
from extensions.manifest import Manifest, check_manifest


@dataclass
class Validation:
    """The outcome of `extension validate`: the manifest when valid, and every problem found."""

    path: Path
    manifest: Manifest | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.errors


def _manifest_file(path: Path) -> Path:
    """PATH/extension.toml (PATH may also be the file itself); ClientError saying what is missing."""
    path = Path(path)
    if not path.exists():
        raise ClientError(
            f"{path} does not exist: give an extension source directory (one holding extension.toml)",
            code="not_found",
        )
    target = path / "extension.toml" if path.is_dir() else path
    if not target.is_file():
        raise ClientError(
            f"no extension.toml in {path}: an extension source directory must contain extension.toml",
            code="not_found",
        )
    return target


def validate_extension(path: Path) -> Validation:
    """Schema and semantic checks of PATH/extension.toml, offline; every problem is listed."""
    manifest_path = _manifest_file(path)
    try:
        data = manifest_path.read_bytes()
    except OSError as exc:
        raise ClientError(f"cannot read {manifest_path}: {exc.strerror}") from None
    manifest, problems = check_manifest(data)
    return Validation(path=manifest_path.parent, manifest=manifest, problems=problems)


def build_extension(path: Path, out_dir: Path, *, source_date_epoch: int | None = None) -> BuiltPackage:
    """A reproducible ``out_dir/NAME-VERSION.tar.gz`` from the source tree at PATH."""
    validation = validate_extension(path)
    if not validation.ok:
        raise ClientError(
            f"{validation.path / 'extension.toml'} has {len(validation.errors)} error(s); "
            "fix them before building (see `provisioning extension validate`)",
            code="invalid_manifest",
            details=[p.as_dict() for p in validation.problems],
        )
    out_dir = Path(out_dir)
    if os.path.lexists(out_dir) and not out_dir.is_dir():
        raise ClientError(f"cannot write the package into {out_dir}: it exists and is not a directory")
    try:
        return build_package(validation.path, out_dir, source_date_epoch=source_date_epoch)
    except ExtensionError as exc:
        raise ClientError.from_extension_error(exc) from None
    except OSError as exc:
        raise ClientError(f"cannot write the package into {out_dir}: {os_error_message(exc, about=out_dir)}") from None


@dataclass
class ExtensionTestRun:
    """The outcome of `extension test`: validation, content checks, packaging, the extension's tests."""

    validation: Validation
    report: CheckReport

    @property
    def ok(self) -> bool:
        return self.validation.ok and self.report.ok


def run_extension_test(path: Path) -> ExtensionTestRun:
    """Validate; check every file's content; check that it packages; run its own ``tests/*.nu``."""
    validation = validate_extension(path)
    root = validation.path
    report = CheckReport()
    report.results.append(
        CheckResult(
            "manifest",
            "extension.toml",
            "passed" if validation.ok else "failed",
            "" if validation.ok else "; ".join(str(p) for p in validation.errors),
        )
    )
    report.extend(run_content_checks(root))
    if validation.ok:
        with tempfile.TemporaryDirectory(prefix="provisioning-test-build-") as tmp:
            try:
                built = build_package(root, Path(tmp), limits=Limits())
                report.results.append(
                    CheckResult("package", built.path.name, "passed", f"{len(built.files)} files, {built.size} bytes")
                )
            except ExtensionError as exc:
                report.results.append(CheckResult("package", ".", "failed", str(exc)))
    else:
        report.results.append(CheckResult("package", ".", "skipped", "extension.toml is invalid"))
    report.extend(run_extension_tests(root))
    return ExtensionTestRun(validation=validation, report=report)
