"""The publish pipeline (SPEC 3.3), one pass:

fetch → (extract source → build package) → inspect → validate → check content → readme →
interface → store → commit.

Every step that touches the author's bytes runs in the build sandbox (`extensions.sandbox`), a
child process with hard CPU, memory, file, output and wall-time limits: `unpack` (the source
extraction, the ``[build]`` patterns and the package build, then one streaming `safe_extract`
into the work directory, which parses extension.toml once) and `check` (the content checks of
that tree, file by file, then the README rendered to sanitized HTML, then the configuration
interface read from the KCL schemas, file by file). What this process does is
bookkeeping: fetch the staged upload, check publishing rights against the database, store the
package write-once and commit. Each step is timed in the build log; an error fails the build
through `registry.errors.classify_error` (see `builds.services.build_run`).

Embedded mode runs the same sandbox: the in-process "worker" is a web request, which waits for
the child."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction

from builds import workspace
from builds.lifecycle import mark_succeeded
from builds.models import Build
from builds.steplog import StepLog
from extensions import checks, sandbox, sandboxed_steps
from extensions import interface as kcl_interface
from extensions.archive import PackageInfo
from extensions.manifest import Manifest
from extensions.readme import MAX_README_HTML, shown_as_text
from registry import services as catalog
from registry import storage
from registry.errors import RegistryError
from registry.limits import archive_limits, interface_limits, sandbox_limits
from registry.provenance import records as provenance
from registry.tokens import Actor
from registry.trust import repository as trust

log = logging.getLogger(__name__)

_COMMIT_MARGIN_SECONDS = 30
_MAX_LOGGED_CHECKS = 50  # each failed or skipped check is a log line, up to this many


class ContentCheckFailed(RegistryError):
    code = "invalid_archive"


class _Sandboxed:
    """Runs the sandboxed steps for one build and turns their events into the build log: every
    step the child finishes is logged as it happens; the step a failure happened in is logged as
    failed (by the caller's `StepLog.step`, under the name the child gave it)."""

    def __init__(self, steps: StepLog, deadline: float) -> None:
        self.steps = steps
        self.deadline = deadline
        self.current_log = ""
        self.started = time.perf_counter()

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "step":
            log_step = str(event.get("log") or event.get("step") or "")
            if log_step != self.current_log:
                self.current_log = log_step
                self.started = time.perf_counter()
        elif event.get("type") == "done":
            self.steps.add(
                str(event.get("step")), "passed", str(event.get("message", "")), float(event.get("seconds") or 0)
            )
            self.current_log = ""

    def run(self, target: str, kwargs: dict[str, Any]) -> Any:
        if settings.REGISTRY_SANDBOX == "off":
            return _run_inline(target, kwargs, self.on_event)
        result = sandbox.run_sandboxed(
            target, kwargs, limits=sandbox_limits(), deadline=self.deadline, on_event=self.on_event
        )
        if not result.isolated and settings.REGISTRY_SANDBOX_ISOLATE_NETWORK:
            _warn_not_isolated()
        return result.value

    def fail_current(self, exc: BaseException, fallback: str) -> None:
        """Log the step the sandbox was in as failed."""
        from registry.errors import classify_error

        self.steps.add(
            self.current_log or fallback, "failed", classify_error(exc).message, time.perf_counter() - self.started
        )


_warned: list[bool] = []


def _warn_not_isolated() -> None:
    if not _warned:
        _warned.append(True)
        log.warning("the build sandbox cannot cut the network here (no permission to unshare it); other limits apply")


def _run_inline(target: str, kwargs: dict[str, Any], on_event: Any) -> Any:
    """REGISTRY_SANDBOX=off: the same steps in this process, without limits (benchmarks only)."""

    class _Inline:
        def step(self, step: str, path: str = "", **kw: Any) -> None:
            on_event({"type": "step", "step": step, "path": path, "log": kw.get("log") or step})

        def send(self, event: dict[str, Any]) -> None:
            on_event(dict(event))

        def tool_preexec(self) -> None:
            return None

    module, _, name = target.rpartition(".")
    func = getattr(__import__(module, fromlist=[name]), name)
    return func(progress=_Inline(), **kwargs)


def run(*, build: Build, attempt: int, actor: Actor, steps: StepLog) -> None:
    """Upload → (build) → inspect → validate → check content → readme → interface → store → commit."""
    workdir = workspace.build_dir(build.pk, attempt)
    # The sandboxed steps get the build's time budget, less a margin for storing and committing
    # (in-process builds have no Celery time limit to stop them).
    deadline = time.monotonic() + max(1, settings.REGISTRY_BUILD_TIME_LIMIT - _COMMIT_MARGIN_SECONDS)
    sandboxed = _Sandboxed(steps, deadline)
    try:
        upload = workdir / "upload.tar.gz"
        with steps.step("fetch") as note, upload.open("wb") as target:
            storage.download_to(build.upload_key, target)
            note["message"] = f"{upload.stat().st_size} bytes"
        unpacked = _unpack(build, upload, workdir, sandboxed)
        info, package = unpacked.info, unpacked.package
        Build.objects.filter(pk=build.pk).update(name=info.name, version_text=info.version)
        build.name, build.version_text = info.name, info.version
        with steps.step("validate") as note:
            manifest = info.manifest
            catalog.publish_check(actor=actor, manifest=manifest)
            note["message"] = f"{manifest.name} {manifest.version} ({manifest.type})" + (
                f"; {len(manifest.warnings)} warning(s): " + "; ".join(str(w) for w in manifest.warnings)
                if manifest.warnings
                else ""
            )
        checked = _check_content(workdir, manifest, steps, sandboxed)
        with steps.step("store") as note:
            with package.open("rb") as handle:
                key = storage.put_package(info.sha256, handle, info.size)
            note["message"] = f"sha256:{info.sha256} at {key}"
        with steps.final_step("commit") as passed:
            version_id = _commit(build, attempt, actor, unpacked, key, checked, passed)
        log.info("build %s published %s %s (version id %s)", build.pk, manifest.name, manifest.version, version_id)
        try:
            storage.delete(build.upload_key)
        except RegistryError:
            log.warning("build %s: staged upload left for the sweeper", build.pk)
    finally:
        workspace.remove_tree(workdir)


@dataclass(frozen=True)
class Unpacked:
    info: PackageInfo  # the package's facts, with its parsed manifest
    package: Path  # the package (the upload, or what a source build built)
    reproducible: bool | None  # whether the builder makes these bytes of the package's own files
    note: str  # how that was found, or why not


def _unpack(build: Build, upload: Path, workdir: Path, sandboxed: _Sandboxed) -> Unpacked:
    """The sandboxed `unpack`."""
    kwargs = {
        "kind": "source" if build.kind == Build.Kind.SOURCE else "package",
        "upload": str(upload),
        "workdir": str(workdir),
        "limits": sandboxed_steps.limits_to_dict(archive_limits()),
    }
    try:
        value = sandboxed.run("extensions.sandboxed_steps.unpack", kwargs)
    except Exception as exc:
        sandboxed.fail_current(exc, "inspect")
        raise
    info = sandboxed_steps.package_info_from_dict(value["info"])
    package = Path(value["package"])
    if not package.resolve().is_relative_to(workdir.resolve()):
        raise RuntimeError(f"the sandbox named a package outside the work directory: {package}")
    reproducible = value.get("reproducible")
    return Unpacked(info, package, reproducible if isinstance(reproducible, bool) else None, str(value.get("note", "")))


@dataclass(frozen=True)
class Checked:
    readme_html: str  # sanitized
    interface: dict[str, Any]  # extensions.interface's document, as interface_from_dict rebuilt it


def _check_content(workdir: Path, manifest: Manifest, steps: StepLog, sandboxed: _Sandboxed) -> Checked:
    """The sandboxed `check`: content checks (each failed or skipped one logged), then the README,
    then the configuration interface."""
    limits = interface_limits()
    kwargs = {
        "root": str(workdir / "content"),
        "readme": manifest.readme,
        "readme_cpu_seconds": settings.REGISTRY_SANDBOX_README_CPU_SECONDS,
        "deadline": sandboxed.deadline,
        # Found here, with this process's environment (the sandbox's zygote has the one it started with).
        "nu": checks.find_nu() or "",
        "interface_limits": limits.to_dict(),
        "home": str(workdir / "home"),  # KCL's parser writes under $HOME
    }
    try:
        value = sandboxed.run("extensions.sandboxed_steps.check", kwargs)
    except Exception as exc:
        sandboxed.fail_current(exc, "check content")
        raise
    results = [sandboxed_steps.check_result(r) for r in value.get("results") or [] if isinstance(r, dict)]
    for result in results[:_MAX_LOGGED_CHECKS]:
        steps.add(f"check {result.check}", result.status, f"{result.path}: {result.message}", result.seconds)
    counts = value.get("counts") or {}
    noteworthy = int(counts.get("failed", 0)) + int(counts.get("skipped", 0))
    if noteworthy > _MAX_LOGGED_CHECKS:
        steps.add(
            "check", "failed" if not value.get("ok") else "skipped", f"... and {noteworthy - _MAX_LOGGED_CHECKS} more"
        )
    summary = f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped"
    if not value.get("ok"):
        failed = [r for r in results if r.status == "failed"]
        total = int(value.get("failed") or len(failed))
        first = failed[0] if failed else None
        error = ContentCheckFailed(
            f"content check failed: {first.path}: {first.message}" + (f" (and {total - 1} more)" if total > 1 else "")
            if first is not None
            else "content check failed",
            details=[r.as_dict() for r in failed],
        )
        steps.add("check content", "failed", error.message, float(value.get("seconds") or 0))
        raise error
    steps.add("check content", "passed", summary, float(value.get("seconds") or 0))
    readme_html = value.get("readme_html") or ""
    steps.add(
        "readme",
        "passed",
        _readme_said(str(readme_html)),
        float(value.get("readme_seconds") or 0),
    )
    interface = kcl_interface.interface_from_dict(value.get("interface"), limits=limits)
    steps.add("interface", "passed", kcl_interface.summary(interface), float(value.get("interface_seconds") or 0))
    return Checked(str(readme_html), interface)


def _readme_said(readme_html: str) -> str:
    if not readme_html:
        return "no README"
    if shown_as_text(readme_html):
        return f"shown as text: its HTML would be more than {MAX_README_HTML:,} characters (allowed: at most that)"
    return "rendered and sanitized"


def _commit(
    build: Build,
    attempt: int,
    actor: Actor,
    unpacked: Unpacked,
    key: str,
    checked: Checked,
    passed: Callable[[str], None],
) -> int:
    """One transaction: the version rows, the commit step's log entry and the build's final state.
    If it fails, the stored object is removed unless another version references it."""
    info = unpacked.info

    def reupload() -> IO[bytes]:
        return unpacked.package.open("rb")

    # What the build's provenance attests besides the version's row (SPEC 6.2), its dependencies
    # resolved now, before the transaction.
    facts = provenance.build_facts(
        build,
        dependencies=[
            (d.name, str(d.constraint), d.constraint.written or str(d.constraint)) for d in info.manifest.dependencies
        ],
    )
    try:
        with transaction.atomic():
            version = catalog.version_create(
                actor=actor,
                manifest=info.manifest,
                package=info,
                storage_key=key,
                readme_html=checked.readme_html,
                interface=checked.interface,
                reupload=reupload,
                reproducible=unpacked.reproducible,
                reproducible_note=unpacked.note,
                provenance=facts,
            )
            passed(f"published {info.manifest.name} {info.manifest.version}")
            if not mark_succeeded(build=build, attempt=attempt, version_id=version.pk):
                raise _LostClaim(f"build {build.pk} is no longer owned by attempt {attempt}")
            return int(version.pk)
    except BaseException:
        try:
            catalog.package_discard(sha256=info.sha256, key=key)
        except Exception:
            log.warning("build %s: could not remove %s after a failed commit", build.pk, key, exc_info=True)
        try:  # the signed index may already cover what was rolled back: re-sign it from the rows now
            trust.maintain()
        except Exception:
            log.warning("build %s: signed index left for the sweeper to repair", build.pk, exc_info=True)
        raise


class _LostClaim(Exception):
    """Another attempt took the build over (this worker was thought dead); roll back."""
