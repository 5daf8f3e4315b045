"""The build steps that touch an author's bytes, as the build sandbox runs them (`extensions.sandbox`).

The registry's pipeline (`builds.pipeline`) runs two of these per build, each in a sandboxed child:

- `unpack`: for a source build, extract the source archive safely and build the reproducible
  package from it (the ``[build]`` patterns are matched here, with pathspec's linear-time re2
  backend); then inspect and extract the package in one streaming pass (`safe_extract`), which
  parses and validates ``extension.toml`` once. It returns the package's facts and the manifest
  as JSON.
- `check`: the content checks of the extracted tree (each file a step with its own CPU budget;
  KCL and Nushell run as tools with the same limits), then the README rendered to sanitized HTML
  (a step with the README budget), then the configuration interface read from the KCL schemas
  (`extensions.interface`; each file a step with its own CPU budget).

Between the two, the pipeline checks publishing rights against the database; nothing here knows
about the registry. Every function takes the `Progress` of the sandbox first and JSON-able
keyword arguments, and returns JSON-able data; `package_info_from_dict` and `Manifest.from_dict`
rebuild the typed values in the caller without reading the author's bytes again.

Modules imported here are preloaded in the sandbox's zygote, so each run only forks.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

# Preloaded in the zygote: everything a sandboxed step needs, so no child pays for the imports.
import jinja2
import jinja2.sandbox  # noqa: F401
import markdown_it  # noqa: F401
import nh3  # noqa: F401
import pathspec  # noqa: F401

from extensions.archive import (
    Limits,
    PackageInfo,
    build_package,
    extract_source_archive,
    read_readme,
    rebuild_check,
    safe_extract,
)
from extensions.archive._common import FileEntry
from extensions.checks import CheckResult, remove_private_home, run_content_checks
from extensions.interface import InterfaceLimits, extract_interface
from extensions.manifest import Manifest, ManifestLimits
from extensions.readme import render_readme
from extensions.sandbox import Progress

__all__ = [
    "check",
    "interface",
    "limits_from_dict",
    "limits_to_dict",
    "package_info_from_dict",
    "package_interface",
    "unpack",
]

MAX_REPORTED_CHECKS = 100  # results sent back beyond the counts: failed and skipped ones first


def limits_to_dict(limits: Limits) -> dict[str, Any]:
    return asdict(limits)


def limits_from_dict(data: Mapping[str, Any]) -> Limits:
    fields = dict(data)
    fields["manifest"] = ManifestLimits(**fields.get("manifest", {}))
    return Limits(**fields)


def _package_info_to_dict(info: PackageInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "version": info.version,
        "sha256": info.sha256,
        "size": info.size,
        "unpacked_size": info.unpacked_size,
        "tar_sha256": info.tar_sha256,
        "files": [[f.path, f.size, f.sha256] for f in info.files],
        "manifest_text": info.manifest_text,
        "manifest": info.manifest.to_dict(),
        "warnings": [str(w) for w in info.manifest.warnings],
    }


def package_info_from_dict(data: Mapping[str, Any]) -> PackageInfo:
    """The `PackageInfo` that `unpack` sent back (shapes checked: `ValueError` if malformed)."""
    try:
        files = tuple(FileEntry(str(p), int(s), str(h)) for p, s, h in data["files"])
        return PackageInfo(
            name=str(data["name"]),
            version=str(data["version"]),
            sha256=str(data["sha256"]),
            size=int(data["size"]),
            unpacked_size=int(data["unpacked_size"]),
            files=files,
            manifest_text=str(data["manifest_text"]),
            readme_text=None,  # the README stays in the sandbox's tree: `check` renders it there
            manifest=Manifest.from_dict(data["manifest"]),
            tar_sha256=str(data.get("tar_sha256", "")),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed package facts from the sandbox: {exc}") from None


def _done(progress: Progress, step: str, started: float, message: str) -> None:
    progress.send(
        {"type": "done", "step": step, "status": "passed", "message": message, "seconds": time.perf_counter() - started}
    )


def unpack(*, progress: Progress, kind: str, upload: str, workdir: str, limits: Mapping[str, Any]) -> dict[str, Any]:
    """(Source builds: extract and build.) Inspect and extract the package into ``workdir/content``;
    for an uploaded package, rebuild it from those files and say whether the bytes are identical."""
    archive_limits = limits_from_dict(limits)
    work = Path(workdir)
    package = Path(upload)
    warnings: list[str] = []
    if kind == "source":
        started = time.perf_counter()
        progress.step("source extraction", log="extract source")
        source = extract_source_archive(package, work / "source", limits=archive_limits)
        _done(progress, "extract source", started, f"extension source at {source.relative_to(work / 'source') or '.'}")
        started = time.perf_counter()
        progress.step("package build ([build] patterns)", log="build package")
        built = build_package(source, work / "dist", limits=archive_limits)
        warnings.extend(built.warnings)
        message = f"{built.path.name}: {len(built.files)} files, sha256:{built.sha256}"
        if built.warnings:
            message += "; " + "; ".join(built.warnings)
        _done(progress, "build package", started, message)
        package = built.path
    progress.step("archive inspection", log="inspect")
    started_inspect = time.perf_counter()
    info = safe_extract(package, work / "content", limits=archive_limits)
    _done(
        progress,
        "inspect",
        started_inspect,
        f"{info.name} {info.version}: {len(info.files)} files, {info.unpacked_size} bytes unpacked",
    )
    if kind == "source":
        reproducible = {"reproducible": True, "note": "built from its source by the registry's builder"}
    else:
        # Is it what the builder makes of its own files? (Provenance says so; never a failure.)
        started = time.perf_counter()
        progress.step("rebuild from the package's files", log="rebuild")
        rebuilt = rebuild_check(package, work / "content", work / "rebuild", limits=archive_limits)
        reproducible = {"reproducible": rebuilt.reproducible, "note": rebuilt.note}
        _done(
            progress,
            "rebuild",
            started,
            "reproducible: " + rebuilt.note if rebuilt.reproducible else "not reproducible: " + rebuilt.note,
        )
    return {
        "package": str(package),
        "info": _package_info_to_dict(info),
        "warnings": warnings,
        **reproducible,
    }


def check(
    *,
    progress: Progress,
    root: str,
    readme: str,
    readme_cpu_seconds: float,
    deadline: float | None = None,
    nu: str | None = None,
    kcl: bool | None = None,
    interface_limits: Mapping[str, Any] | None = None,
    home: str | None = None,
) -> dict[str, Any]:
    """The content checks of the tree at ``root``; then, if they all passed, its README (``readme``,
    the path extension.toml names) as sanitized HTML and, given ``interface_limits``
    (`InterfaceLimits.to_dict`), its configuration interface (see `interface`). ``nu``: the
    Nushell binary (``""``: none; None: look for it here), as
    `extensions.checks.run_content_checks` takes it. ``home`` (a directory of the build's work
    directory) is the tools' HOME and KCL's."""

    def on_check(check: str, path: str) -> None:
        progress.step("content check", path, log="check content")

    progress.step("content checks", log="check content")
    started = time.perf_counter()
    if home is not None:
        Path(home).mkdir(parents=True, exist_ok=True)
    try:
        report = run_content_checks(
            Path(root),
            nu=nu,
            kcl=kcl,
            deadline=deadline,
            on_check=on_check,
            tool_preexec=progress.tool_preexec,
            home=Path(home) if home is not None else None,
        )
    finally:
        remove_private_home()  # one made without ``home`` (a sandbox child ends with os._exit: no atexit)
    seconds = time.perf_counter() - started
    noteworthy = [r for r in report.results if r.status != "passed"]
    noteworthy.sort(key=lambda r: r.status != "failed")  # failed first, then skipped; stable
    result: dict[str, Any] = {
        "ok": report.ok,
        "counts": report.counts(),
        "seconds": seconds,
        "failed": len(report.failed),
        "results": [r.as_dict() for r in noteworthy[:MAX_REPORTED_CHECKS]],
        "readme_html": None,
    }
    if report.ok:
        progress.step("README rendering", readme, cpu_seconds=readme_cpu_seconds, log="readme")
        started = time.perf_counter()
        result["readme_html"] = render_readme(read_readme(Path(root), readme))
        result["readme_seconds"] = time.perf_counter() - started
        if interface_limits is not None:
            started = time.perf_counter()
            result["interface"] = interface(progress=progress, root=root, limits=interface_limits, home=home)
            result["interface_seconds"] = time.perf_counter() - started
    return result


def interface(*, progress: Progress, root: str, limits: Mapping[str, Any], home: str | None = None) -> dict[str, Any]:
    """The configuration interface of the extracted package at ``root`` (`extract_interface`),
    each KCL file a step with the sandbox's CPU budget. KCL's parser writes under ``$HOME``:
    ``home`` (a directory of the build's work directory) is used instead, if given."""

    def on_file(path: str) -> None:
        progress.step("interface extraction", path, log="interface")

    progress.step("interface extraction", log="interface")
    with _home(home):
        return extract_interface(Path(root), limits=InterfaceLimits.from_dict(limits), on_file=on_file)


def package_interface(
    *, progress: Progress, package: str, workdir: str, limits: Mapping[str, Any], interface_limits: Mapping[str, Any]
) -> dict[str, Any]:
    """The configuration interface of a published package (for versions published before the
    registry read interfaces): inspected and extracted into ``workdir/content`` as a publish does
    (`safe_extract`, with the archive ``limits``), then read as `interface` reads it."""
    progress.step("archive inspection", log="inspect")
    work = Path(workdir)
    safe_extract(Path(package), work / "content", limits=limits_from_dict(limits))
    return interface(progress=progress, root=str(work / "content"), limits=interface_limits, home=str(work / "home"))


@contextlib.contextmanager
def _home(home: str | None) -> Iterator[None]:
    if home is None:
        yield
        return
    Path(home).mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("HOME")
    os.environ["HOME"] = home
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


def check_result(data: Mapping[str, Any]) -> CheckResult:
    """One of the results `check` sent back, as a `CheckResult`."""
    status = data.get("status")
    return CheckResult(
        check=str(data.get("check", "")),
        path=str(data.get("path", "")),
        status=status if status in ("passed", "failed", "skipped") else "failed",
        message=str(data.get("message", "")),
        seconds=float(data.get("seconds") or 0.0),
    )
