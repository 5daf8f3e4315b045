"""Do the signed metadata and the catalogue agree? (`manage.py trust check`; issue 15's
`check_integrity` calls `check_integrity()` too.)

Checked: every target the catalogue implies (index documents, packages, provenance statements, the
provenance key) is a target row with the same digest and length, in the bin its path hashes to,
and nothing else is; every role's stored file is the committed version (digest, length), parses,
is signed by its keys (the root's, or the targets role's delegation for bins), lists exactly the
rows (bins) or the versions (snapshot, timestamp), and has not expired; the bytes of every target
are where the view serves them from. (Whether every version's provenance is valid:
`registry.provenance.integrity.check_provenance`.)"""

from __future__ import annotations

import hashlib
from typing import Any

from tuf.api.exceptions import RepositoryError
from tuf.api.metadata import Metadata, Root, Snapshot, Targets, Timestamp
from tuf.api.serialization import DeserializationError

from registry import storage
from registry.models import Extension
from registry.trust import repository
from registry.trust.models import TrustRole, TrustTarget
from registry.trust.targets import BY_NAME, Target, extension_targets, registry_targets

_BAD = (RepositoryError, DeserializationError, ValueError, KeyError, TypeError)


def check_integrity(*, files: bool = True) -> list[str]:
    """Every disagreement, one line each ([] when the signed index is consistent). ``files``: also
    read every stored file (the metadata and the target bytes)."""
    if not repository.initialized():
        return ["the signed index is not initialized: run `python manage.py trust init`"]
    problems: list[str] = []
    state = repository._load_state()
    rows = {t.path: t for t in TrustTarget.objects.all()}
    seen: set[str] = set()

    def compare(targets: dict[str, Target], whose: str) -> None:
        for path, target in targets.items():
            seen.add(path)
            row = rows.get(path)
            if row is None:
                problems.append(f"target {path} (sha256 {target.sha256}) is in {whose} but not signed")
            elif (row.sha256, row.length) != (target.sha256, target.length):
                problems.append(
                    f"target {path}: signed as sha256 {row.sha256} ({row.length} bytes), "
                    f"but {whose} has sha256 {target.sha256} ({target.length} bytes)"
                )

    for extension in Extension.objects.prefetch_related("versions").iterator(chunk_size=500):
        compare(extension_targets(extension, extension.versions.all()), "the catalogue")
    compare(registry_targets(), "the registry's own targets (its provenance key)")
    for path, row in rows.items():
        if path not in seen:
            problems.append(f"target {path} is signed but not in the catalogue")
        if row.role != state.bin_for(path):
            problems.append(f"target {path} is recorded in {row.role}, but its path hashes to {state.bin_for(path)}")
    if files:
        problems += _check_files(state, rows)
    return problems


def _read(role: TrustRole, problems: list[str]) -> Metadata[Any] | None:
    key = repository.metadata_key(role.name, role.version)
    data = storage.read_small(key)
    if data is None:
        problems.append(f"{key} is missing from storage")
        return None
    if hashlib.sha256(data).hexdigest() != role.sha256 or len(data) != role.length:
        problems.append(f"{key} in storage is not the committed {role.name} version {role.version} (digest or length)")
    try:
        md: Metadata[Any] = Metadata.from_bytes(data)
    except _BAD as exc:
        problems.append(f"{key} is not valid metadata: {exc}")
        return None
    if md.signed.version != role.version:
        problems.append(f"{key} holds version {md.signed.version}, not {role.version}")
    return md


def _check_files(state: repository._State, rows: dict[str, TrustTarget]) -> list[str]:
    problems: list[str] = []
    roles = {r.name: r for r in TrustRole.objects.exclude(name=repository.LOCK)}
    root: Root = state.root.signed
    now = repository._now()
    for name, role in sorted(roles.items()):
        if role.expires <= now:
            problems.append(f"{name} version {role.version} expired at {role.expires.isoformat()}")
    for name in ("root", "targets", "snapshot"):
        md = _read(roles[name], problems)
        if md is not None:
            _verify(root, name, md, problems)
    timestamp_data = storage.read_small(repository.TIMESTAMP_KEY)
    if timestamp_data is None:
        problems.append(f"{repository.TIMESTAMP_KEY} is missing from storage")
    else:
        if hashlib.sha256(timestamp_data).hexdigest() != roles["timestamp"].sha256:
            problems.append("the stored timestamp.json is not the committed one (a write that never committed?)")
        timestamp: Metadata[Timestamp] = Metadata.from_bytes(timestamp_data)
        _verify(root, "timestamp", timestamp, problems)
        if timestamp.signed.snapshot_meta.version != roles["snapshot"].version:
            problems.append(
                f"timestamp.json names snapshot version {timestamp.signed.snapshot_meta.version}, "
                f"the committed one is {roles['snapshot'].version}"
            )
    snapshot_md = _read(roles["snapshot"], problems)
    if snapshot_md is not None:
        snapshot: Snapshot = snapshot_md.signed
        for filename, info in snapshot.meta.items():
            committed = roles.get(filename.removesuffix(".json"))
            if committed is None or committed.version != info.version:
                problems.append(f"the snapshot lists {filename} version {info.version}, not the committed one")
    by_bin: dict[str, dict[str, TrustTarget]] = {}
    for path, row in rows.items():
        by_bin.setdefault(row.role, {})[path] = row
    targets_md = state.targets
    for name in state.succinct.get_roles():
        bin_role = roles.get(name)
        if bin_role is None:
            problems.append(f"the bin {name} has no metadata")
            continue
        md = _read(bin_role, problems)
        if md is None:
            continue
        try:
            targets_md.signed.verify_delegate(name, md.signed_bytes, md.signatures)
        except _BAD as exc:
            problems.append(f"{name} version {bin_role.version} is not signed by its keys: {exc}")
        listed: Targets = md.signed
        expected = by_bin.get(name, {})
        for path, row in expected.items():
            target = listed.targets.get(path)
            if target is None or target.hashes.get("sha256") != row.sha256 or target.length != row.length:
                problems.append(f"{name} does not list {path} as recorded")
        for path in set(listed.targets) - set(expected):
            problems.append(f"{name} lists {path}, which is not a recorded target")
    for path, row in rows.items():
        key = BY_NAME[row.kind].storage_key(path, row.sha256)
        if not storage.exists(key):
            problems.append(f"the bytes of target {path} are missing from storage ({key})")
    return problems


def _verify(root: Root, role: str, md: Metadata[Any], problems: list[str]) -> None:
    try:
        root.verify_delegate(role, md.signed_bytes, md.signatures)
    except _BAD as exc:
        problems.append(f"{role} version {md.signed.version} is not signed by its keys: {exc}")
