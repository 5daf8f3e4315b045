"""The registry as a TUF repository (specification 1.0, python-tuf), with consistent snapshots and
hashed-bin delegations (succinct roles, as PEP 458 proposes for PyPI).

    root (offline key)  ->  targets, snapshot, timestamp (online keys)
    targets             ->  2**bits bins ``bin-00`` ... ``bin-ff`` (signed with the targets key)
    a bin               ->  the targets whose path hashes into it (`registry.trust.targets`)

Files in storage (servable as they are by nginx or a CDN; every name but timestamp.json is
written once and never changes):

    tuf/metadata/N.root.json  N.targets.json  N.snapshot.json  N.bin-3f.json  timestamp.json
    tuf/targets/index/<sha256>.NAME.json   (packages stay at sha256/ab/<sha256>.tar.gz)

**Ordering with the catalogue.** A publish, yank or unyank changes the catalogue in one database
transaction; `record_extension` runs inside it, last: it takes the signed index's lock (an UPDATE
of one row, so writers queue on it: a writer's bins, snapshot and timestamp never interleave with
another's), diffs the extension's targets against the committed rows, stores the new target files,
the affected bins (one to three), the snapshot and finally timestamp.json, then updates the rows.
The transaction then commits. So by the time a reader can see the new index document, signed
metadata that covers it is already served. If the transaction does not commit (a crash, a
failed constraint), storage is *ahead* of the rows: timestamp.json names a snapshot the database
never recorded. Every writer and `maintain()` (the sweeper, the periodic task) look at the stored
timestamp first; when it is ahead they re-sign from the rows (the bins that the lost write
touched, a snapshot, a timestamp) with versions above the stored ones, so a client that already
saw the lost write moves on without a rollback error, and the lost targets are gone again.
Versions are never reused: a versioned name that is taken (a lost write's) is skipped.

**Durability.** The rows commit durably; the files are written without waiting for the disk
(everything but the root can be signed again from the rows), so a publish does not pay a flush
per file. A crash that loses files the rows name is repaired by `maintain()`, which finds them by
their size and signs them again (new versions), and writes lost target bytes again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from securesystemslib.signer import CryptoSigner
from tuf.api.exceptions import RepositoryError
from tuf.api.metadata import (
    Delegations,
    Metadata,
    MetaFile,
    Root,
    Snapshot,
    SuccinctRoles,
    TargetFile,
    Targets,
    Timestamp,
)
from tuf.api.serialization import DeserializationError
from tuf.api.serialization.json import JSONSerializer

from registry import storage
from registry.errors import StorageUnavailable
from registry.models import Extension
from registry.provenance import records as provenance_records
from registry.trust import keys
from registry.trust.models import TrustRole, TrustTarget
from registry.trust.targets import BY_NAME, TARGETS_PREFIX, Target, extension_targets, registry_targets

log = logging.getLogger(__name__)

METADATA_PREFIX = "tuf/metadata"
TIMESTAMP_KEY = f"{METADATA_PREFIX}/timestamp.json"
BIN_PREFIX = "bin"
DEFAULT_BIT_LENGTH = 8
LOCK = "~lock"  # the row every writer of the signed index updates first
TOP_LEVEL = ("root", "targets", "snapshot", "timestamp")
_SERIALIZER = JSONSerializer(compact=True)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
JSON = "application/json"
_BAD_METADATA = (RepositoryError, DeserializationError, ValueError, KeyError, TypeError)


class TrustError(Exception):
    """An operation on the signed index that cannot be done as asked (said for the operator)."""


def metadata_key(role: str, version: int | None = None) -> str:
    if role == "timestamp" or version is None:
        return f"{METADATA_PREFIX}/{role}.json"
    return f"{METADATA_PREFIX}/{version}.{role}.json"


def lifetime(role: str) -> timedelta:
    seconds = {
        "root": settings.REGISTRY_TUF_ROOT_EXPIRES,
        "targets": settings.REGISTRY_TUF_TARGETS_EXPIRES,
        "snapshot": settings.REGISTRY_TUF_SNAPSHOT_EXPIRES,
        "timestamp": settings.REGISTRY_TUF_TIMESTAMP_EXPIRES,
    }.get(role, settings.REGISTRY_TUF_TARGETS_EXPIRES)
    return timedelta(seconds=seconds)


def _now() -> datetime:
    return timezone.now().astimezone(UTC).replace(microsecond=0)


def initialized() -> bool:
    return TrustRole.objects.filter(name="root").exists()


def _take_lock() -> None:
    """The signed index's lock, inside the current transaction (a row lock on PostgreSQL, the write
    lock on SQLite). Always the last lock a writer takes, so it cannot deadlock with the catalogue's."""
    assert transaction.get_connection().in_atomic_block, "the signed index is written inside a transaction"
    while True:
        if TrustRole.objects.filter(name=LOCK).update(touched_at=timezone.now()) == 1:
            return
        TrustRole.objects.bulk_create(
            [TrustRole(name=LOCK, version=0, expires=_EPOCH, sha256="", length=0)], ignore_conflicts=True
        )


def _put_target(kind: str, path: str, sha256: str, data: bytes) -> None:
    """The bytes of a stored target (an index document), written once under its digest."""
    target_kind = BY_NAME[kind]
    storage.put_small(target_kind.storage_key(path, sha256), data, content_type=target_kind.media_type, durable=False)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- the state a writer works from ------------------------------------------------------------------


@dataclass
class _State:
    root: Metadata[Root]
    targets: Metadata[Targets]
    rows: dict[str, TrustRole]
    now: datetime = field(default_factory=_now)
    changed: dict[str, TrustRole] = field(default_factory=dict)
    snapshot_listing: dict[str, int] = field(default_factory=dict)  # bin -> version, as the next snapshot lists

    @property
    def succinct(self) -> SuccinctRoles:
        delegations = self.targets.signed.delegations
        assert delegations is not None and delegations.succinct_roles is not None
        return delegations.succinct_roles

    def bin_for(self, path: str) -> str:
        return self.succinct.get_role_for_target(path)

    def row(self, role: str) -> TrustRole | None:
        if role in self.changed:
            return self.changed[role]
        if role not in self.rows:
            found = TrustRole.objects.filter(name=role).first()
            if found is None:
                return None
            self.rows[role] = found
        return self.rows[role]


def _load_state() -> _State:
    rows = {r.name: r for r in TrustRole.objects.filter(name__in=TOP_LEVEL)}
    if "root" not in rows:
        raise TrustError("the signed index is not initialized: run `python manage.py trust init`")
    root = Metadata[Root].from_bytes(rows["root"].content.encode())
    targets = Metadata[Targets].from_bytes(rows["targets"].content.encode())
    return _State(root=root, targets=targets, rows=rows)


def _signers(state: _State, role: str) -> list[CryptoSigner]:
    if role.startswith(f"{BIN_PREFIX}-"):
        return keys.online_signers("targets", list(state.succinct.keyids))
    return keys.online_signers(role, list(state.root.signed.roles[role].keyids))


def _sign(md: Metadata[Any], signers: Iterable[CryptoSigner]) -> bytes:
    md.signatures.clear()
    for signer in signers:
        md.sign(signer, append=True)
    return md.to_bytes(_SERIALIZER)


def _store_versioned(role: str, version: int, make: Callable[[int], bytes]) -> tuple[int, bytes]:
    """Store the role's next version write-once, skipping a version whose name a lost write took."""
    while True:
        data = make(version)
        if storage.put_small(metadata_key(role, version), data, content_type=JSON, durable=False):
            return version, data
        log.warning(
            "signed index: %s is taken (a write that never committed); using the next version",
            metadata_key(role, version),
        )
        version += 1


def _write(state: _State, role: str, render: Callable[[int, datetime], Metadata[Any]], floor: int = 0) -> TrustRole:
    row = state.row(role)
    version = max(row.version if row is not None else 0, floor) + 1
    expires = state.now + lifetime(role)
    signers = _signers(state, role)

    def make(v: int) -> bytes:
        return _sign(render(v, expires), signers)

    if role == "timestamp":
        data = make(version)
        storage.replace(TIMESTAMP_KEY, data, content_type=JSON, durable=False)
    else:
        version, data = _store_versioned(role, version, make)
    if row is None:
        row = TrustRole(name=role)
    row.version, row.expires, row.sha256, row.length = version, expires, _digest(data), len(data)
    if role == "targets":
        row.content = data.decode()
        state.targets = Metadata[Targets].from_bytes(data)
    elif role == "snapshot":
        row.content = json.dumps(state.snapshot_listing, sort_keys=True, separators=(",", ":"))
    state.changed[role] = row
    return row


def _bin_metadata(role: str) -> Callable[[int, datetime], Metadata[Targets]]:
    rows = list(TrustTarget.objects.filter(role=role).order_by("path").values_list("path", "sha256", "length"))

    def render(version: int, expires: datetime) -> Metadata[Targets]:
        files = {path: TargetFile(length, {"sha256": sha256}, path) for path, sha256, length in rows}
        return Metadata(Targets(version=version, expires=expires, targets=files))

    return render


def _snapshot_metadata(state: _State) -> Callable[[int, datetime], Metadata[Snapshot]]:
    """The next snapshot: what the committed one lists (kept on its row, so a publish reads one row,
    not one per bin), with the roles this write re-signed. Bins are listed by version only (as PEP
    458 does: a snapshot of 256 bins stays small); targets.json with its length and sha256."""
    snapshot = state.row("snapshot")
    listed: dict[str, int] = json.loads(snapshot.content) if snapshot is not None and snapshot.content else {}
    if not listed:
        listed = dict(TrustRole.objects.filter(name__startswith=f"{BIN_PREFIX}-").values_list("name", "version"))
    for name, row in state.changed.items():
        if name.startswith(f"{BIN_PREFIX}-"):
            listed[name] = row.version
    state.snapshot_listing = listed
    targets = state.row("targets")
    assert targets is not None
    meta = {f"{name}.json": MetaFile(version=version) for name, version in sorted(listed.items())}
    meta["targets.json"] = MetaFile(version=targets.version, length=targets.length, hashes={"sha256": targets.sha256})

    def render(version: int, expires: datetime) -> Metadata[Snapshot]:
        return Metadata(Snapshot(version=version, expires=expires, meta=meta))

    return render


def _timestamp_metadata(snapshot: TrustRole) -> Callable[[int, datetime], Metadata[Timestamp]]:
    def render(version: int, expires: datetime) -> Metadata[Timestamp]:
        snapshot_meta = MetaFile(version=snapshot.version, length=snapshot.length, hashes={"sha256": snapshot.sha256})
        return Metadata(Timestamp(version=version, expires=expires, snapshot_meta=snapshot_meta))

    return render


@dataclass
class _Head:
    """Versions that storage holds beyond the committed rows (a lost write's): the next writer goes above them."""

    floors: dict[str, int] = field(default_factory=dict)

    @property
    def ahead(self) -> bool:
        return bool(self.floors)


def _stored_head(state: _State) -> _Head:
    head = _Head()
    data = storage.read_small(TIMESTAMP_KEY)
    committed = state.row("timestamp")
    if committed is None:
        return head
    if data is None:  # lost (a crash before it reached the disk): written again above the committed version
        head.floors["timestamp"] = committed.version
        return head
    try:
        stored = Metadata[Timestamp].from_bytes(data).signed
    except _BAD_METADATA:  # an unreadable timestamp.json is simply replaced
        log.warning("signed index: the stored timestamp.json is not valid metadata; replacing it")
        return head
    if stored.version <= committed.version and _digest(data) == committed.sha256:
        return head
    head.floors["timestamp"] = max(stored.version, committed.version)
    snapshot_version = stored.snapshot_meta.version
    snapshot_row = state.row("snapshot")
    if snapshot_row is not None and snapshot_version > snapshot_row.version:
        head.floors["snapshot"] = snapshot_version
        snapshot_data = storage.read_small(metadata_key("snapshot", snapshot_version))
        if snapshot_data is not None:
            try:
                meta = Metadata[Snapshot].from_bytes(snapshot_data).signed.meta
            except _BAD_METADATA:
                meta = {}
            for filename, info in meta.items():
                role = filename.removesuffix(".json")
                row = state.row(role)
                if row is not None and info.version > row.version:
                    head.floors[role] = info.version
    log.warning("signed index: storage is ahead of the database (a write that never committed): %s", head.floors)
    return head


def _publish(state: _State, roles: Iterable[str] = (), *, head: _Head | None = None) -> list[str]:
    """Re-sign ``roles`` (bins, targets), the snapshot when any changed, and the timestamp; then
    update the rows (committed by the caller's transaction). Returns the roles written."""
    head = head if head is not None else _stored_head(state)
    todo = set(roles) | {r for r in head.floors if r not in ("snapshot", "timestamp")}
    if "targets" in todo:
        _write(state, "targets", lambda v, e: _targets_metadata(state, v, e), head.floors.get("targets", 0))
    for role in sorted(todo - {"targets", "snapshot", "timestamp"}):
        _write(state, role, _bin_metadata(role), head.floors.get(role, 0))
    if todo or "snapshot" in roles or "snapshot" in head.floors:
        _write(state, "snapshot", _snapshot_metadata(state), head.floors.get("snapshot", 0))
    snapshot = state.row("snapshot")
    assert snapshot is not None
    _write(state, "timestamp", _timestamp_metadata(snapshot), head.floors.get("timestamp", 0))
    for row in state.changed.values():
        row.save()
    return sorted(state.changed)


def _targets_metadata(state: _State, version: int, expires: datetime) -> Metadata[Targets]:
    signed = state.targets.signed
    return Metadata(
        Targets(
            version=version,
            expires=expires,
            targets={},
            delegations=signed.delegations,
        )
    )


# --- the hook: a publish, yank or unyank --------------------------------------------------------------


def take_lock() -> None:
    """The signed index's lock, for a writer that must hold it before it reaches `record_extension`
    (the provenance signer: a key rotation must not interleave). Taken last, as always."""
    _take_lock()


def record_extension(extension: Extension) -> list[str]:
    """Sign the extension's targets as they are in this transaction (its index document, its
    packages, their provenance). Call last inside the transaction that changes the catalogue.
    Returns the metadata roles re-signed ([] when nothing changed or the registry has no signed
    index)."""
    return record_extensions([extension])


def record_extensions(extensions: Iterable[Extension], *, registry: bool = False) -> list[str]:
    """`record_extension` for several extensions (and, with ``registry``, the targets that belong to
    no extension: the provenance key), re-signing the bins they touch, a snapshot and the timestamp
    once."""
    _take_lock()
    if not initialized():
        return []
    state = _load_state()
    affected: set[str] = set()
    for extension in extensions:
        desired = extension_targets(extension)
        current = {t.path: t for t in TrustTarget.objects.filter(extension=extension.name)}
        affected |= _apply(state, desired, current)
    if registry:
        current = {t.path: t for t in TrustTarget.objects.filter(extension="")}
        affected |= _apply(state, registry_targets(), current)
    if not affected:
        return []
    return _publish(state, affected)


def _apply(state: _State, desired: dict[str, Target], current: dict[str, TrustTarget]) -> set[str]:
    """Store new target files and make the target rows ``desired``; the bins that changed."""
    affected: set[str] = set()
    removed = [path for path in current if path not in desired]
    if removed:
        TrustTarget.objects.filter(path__in=removed).delete()
        affected.update(current[path].role for path in removed)
    for path, target in desired.items():
        row = current.get(path)
        if row is not None and row.sha256 == target.sha256 and row.length == target.length:
            continue
        if target.data is not None:
            _put_target(target.kind, path, target.sha256, target.data)
        role = state.bin_for(path)
        TrustTarget.objects.update_or_create(
            path=path,
            defaults={
                "kind": target.kind,
                "extension": target.extension,
                "role": role,
                "sha256": target.sha256,
                "length": target.length,
            },
        )
        affected.add(role)
    return affected


# --- maintenance: expiry, and storage ahead of the rows -----------------------------------------------


def due(role: TrustRole, now: datetime) -> bool:
    """A role is re-signed once less than half of its lifetime is left."""
    return role.expires - now < lifetime(role.name) / 2


def timestamp_due() -> bool:
    """One query: whether the timestamp should be re-signed (for the lazy refresh on a request)."""
    row = TrustRole.objects.filter(name="timestamp").only("name", "expires").first()
    return row is not None and due(row, _now())


def _lost_files(state: _State) -> set[str]:
    """What a crash lost: the signed index writes its files without waiting for the disk (the
    rows, committed durably, say what they must be), so after a crash a committed role's file, or
    a stored target's bytes, may be missing or short. Writes the lost target bytes again (from the
    catalogue) and returns the roles to re-sign. Nothing to do with S3, whose writes are durable."""
    if storage.is_s3():
        return set()
    lost = set()
    for row in TrustRole.objects.exclude(name__in=(LOCK, "root", "timestamp")).only("name", "version", "length"):
        key = metadata_key(row.name, row.version)
        try:
            size = storage.size(key)
        except (StorageUnavailable, OSError):
            size = -1
        if size != row.length:
            lost.add(row.name)
    stored = {
        t.path: t for t in TrustTarget.objects.exclude(kind="packages").only("path", "kind", "extension", "sha256")
    }
    missing = [t for t in stored.values() if not storage.exists(BY_NAME[t.kind].storage_key(t.path, t.sha256))]
    for target in missing:
        if target.extension:
            extension = Extension.objects.filter(name=target.extension).first()
            if extension is None:
                continue
            again = extension_targets(extension).get(target.path)
        else:
            again = registry_targets().get(target.path)
        if again is not None and again.data is not None and again.sha256 == target.sha256:
            _put_target(target.kind, target.path, target.sha256, again.data)
    if lost or missing:
        log.warning("signed index: files lost (a crash?): %s roles, %s targets written again", len(lost), len(missing))
    return lost


def maintain() -> list[str]:
    """Re-sign what is close to expiry (timestamp, snapshot, targets, bins), repair storage that is
    ahead of the rows, and write again what a crash lost. What Celery beat runs (trust.maintain),
    the sweeper too, and in embedded mode a request for timestamp.json that finds it due (or
    missing). Returns the roles re-signed."""
    with transaction.atomic():
        _take_lock()
        if not initialized():
            return []
        state = _load_state()
        head = _stored_head(state)
        roles = [r.name for r in TrustRole.objects.exclude(name__in=("root", "timestamp", LOCK)) if due(r, state.now)]
        roles += sorted(_lost_files(state) - set(roles))
        timestamp = state.row("timestamp")
        if not roles and not head.ahead and timestamp is not None and not due(timestamp, state.now):
            return []
        written = _publish(state, roles, head=head)
    log.info("signed index: re-signed %s", ", ".join(written))
    return written


_VERSIONED = re.compile(r"(?P<version>[0-9]+)\.(?P<role>[a-z0-9-]+)\.json")


def sweep_files(*, grace_seconds: int | None = None) -> int:
    """Remove what no client needs any more, once older than the grace period: metadata versions
    older than the committed one (every root version stays: clients walk them), and stored target
    files (old index documents) that no target row names. Returns how many files were removed."""
    if not initialized():
        return 0
    grace = timedelta(seconds=settings.REGISTRY_SWEEP_GRACE_SECONDS if grace_seconds is None else grace_seconds)
    cutoff = timezone.now() - grace
    committed = dict(TrustRole.objects.values_list("name", "version"))
    removed = 0
    for key, modified in storage.list_keys(METADATA_PREFIX):
        match = _VERSIONED.fullmatch(key.rsplit("/", 1)[-1])
        if match is None or match["role"] == "root" or (modified is not None and modified > cutoff):
            continue
        current = committed.get(match["role"])
        if current is not None and int(match["version"]) < current:
            storage.delete(key)
            removed += 1
    wanted = {
        BY_NAME[kind].storage_key(path, sha256)
        for path, kind, sha256 in TrustTarget.objects.values_list("path", "kind", "sha256")
        if BY_NAME[kind].storage_key(path, sha256).startswith(TARGETS_PREFIX)
    }
    for key, modified in storage.list_keys(TARGETS_PREFIX):
        if key in wanted or (modified is not None and modified > cutoff):
            continue
        storage.delete(key)
        removed += 1
    return removed


# --- trust init -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Initialized:
    root_key: Path
    online_keys: dict[str, list[Path]]
    fingerprint: str
    targets: int
    bins: int
    provenance_key: Path | None = None


def init(
    *, root_key_dir: Path, bit_length: int = DEFAULT_BIT_LENGTH, thresholds: dict[str, int] | None = None
) -> Initialized:
    """Create the keys and version 1 of every role, signing every target the catalogue has."""
    thresholds = thresholds or {}
    with transaction.atomic():
        _take_lock()
        if initialized():
            raise TrustError("the signed index is already initialized (`trust show` describes it)")
        now = _now()
        root_signer = keys.generate()
        root_key = keys.write_key(root_signer, root_key_dir / f"root-{root_signer.public_key.keyid[:16]}.pem")
        online: dict[str, list[CryptoSigner]] = {
            role: [keys.generate() for _ in range(max(1, thresholds.get(role, 1)))] for role in keys.ONLINE_ROLES
        }
        online_paths = {role: [keys.write_online_key(role, s) for s in signers] for role, signers in online.items()}
        root = Root(version=1, expires=now + lifetime("root"), consistent_snapshot=True)
        root.add_key(root_signer.public_key, "root")
        for role, signers in online.items():
            for signer in signers:
                root.add_key(signer.public_key, role)
            root.roles[role].threshold = len(signers)
        root_md = Metadata(root)
        root_data = _sign(root_md, [root_signer])
        storage.replace(metadata_key("root", 1), root_data, content_type=JSON)  # an empty repository: nothing to keep
        targets_keys = online["targets"]
        succinct = SuccinctRoles(
            keyids=[s.public_key.keyid for s in targets_keys],
            threshold=len(targets_keys),
            bit_length=bit_length,
            name_prefix=BIN_PREFIX,
        )
        delegations = Delegations(
            keys={s.public_key.keyid: s.public_key for s in targets_keys}, succinct_roles=succinct
        )
        TrustRole.objects.create(
            name="root", version=1, expires=root.expires, sha256=_digest(root_data), length=len(root_data),
            content=root_data.decode(),
        )  # fmt: skip
        state = _State(
            root=root_md,
            targets=Metadata(Targets(version=1, expires=now, delegations=delegations)),
            rows={},
            now=now,
        )
        state.rows["targets"] = TrustRole(name="targets", version=0, expires=now, sha256="", length=0)
        state.rows["snapshot"] = TrustRole(name="snapshot", version=0, expires=now, sha256="", length=0)
        state.rows["timestamp"] = TrustRole(name="timestamp", version=0, expires=now, sha256="", length=0)
        # The provenance key (SPEC 6.2), and a statement for every version published before it.
        provenance_key, provenance_signer = provenance_records.create_key()
        provenance_records.backfill(provenance_signer)
        _sign_catalogue(state)
        _write(state, "targets", lambda v, e: _targets_metadata(state, v, e))
        state.rows["targets"] = state.changed["targets"]
        for role in succinct.get_roles():
            _write(state, role, _bin_metadata(role))
        _publish(state, ["snapshot"], head=_Head())
    return Initialized(
        root_key=root_key,
        online_keys=online_paths,
        fingerprint=_digest(root_data),
        targets=TrustTarget.objects.count(),
        bins=succinct.number_of_bins,
        provenance_key=provenance_records.key_path(provenance_key.keyid),
    )


def _sign_catalogue(state: _State) -> None:
    """Target rows (and stored target files) for every extension of the catalogue, in bulk."""
    batch: list[TrustTarget] = []
    for extension in Extension.objects.prefetch_related("versions").order_by("name").iterator(chunk_size=500):
        for path, target in extension_targets(extension, extension.versions.all()).items():
            if target.data is not None:
                _put_target(target.kind, path, target.sha256, target.data)
            batch.append(
                TrustTarget(
                    path=path,
                    kind=target.kind,
                    extension=target.extension,
                    role=state.bin_for(path),
                    sha256=target.sha256,
                    length=target.length,
                )
            )
        if len(batch) >= 2000:
            TrustTarget.objects.bulk_create(batch)
            batch = []
    for path, target in registry_targets().items():
        if target.data is not None:
            _put_target(target.kind, path, target.sha256, target.data)
        batch.append(
            TrustTarget(
                path=path, kind=target.kind, extension="", role=state.bin_for(path), sha256=target.sha256,
                length=target.length,
            )
        )  # fmt: skip
    TrustTarget.objects.bulk_create(batch)


# --- trust rotate -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rotated:
    role: str
    root_version: int
    new_keys: list[Path]
    removed_keys: list[Path]
    resigned: list[str]


def rotate(role: str, *, root_keys: list[Path], new_root_key_dir: Path | None = None) -> Rotated:
    """Replace ROLE's keys: the next root (N+1.root.json, signed by the current root keys and, for a
    root rotation, the new ones), then what the new keys sign (targets: targets.json and every bin;
    snapshot; timestamp)."""
    if role not in keys.ROLES:
        raise TrustError(f"no role named {role!r}: rotate one of {', '.join(keys.ROLES)}")
    with transaction.atomic():
        _take_lock()
        state = _load_state()
        root = state.root.signed
        old_root_signers = keys.root_signers(root_keys, list(root.roles["root"].keyids))
        if len(old_root_signers) < root.roles["root"].threshold:
            raise TrustError(
                f"signing root version {root.version + 1} needs {root.roles['root'].threshold} of the current root "
                f"keys ({', '.join(root.roles['root'].keyids)}); the key files given hold {len(old_root_signers)}: "
                "pass the root key with --root-key FILE"
            )
        count = len(root.roles[role].keyids) if role != "root" else 1
        threshold = root.roles[role].threshold
        new_signers = [keys.generate() for _ in range(max(count, threshold))]
        old_keyids = list(root.roles[role].keyids)
        if role == "root":
            folder = new_root_key_dir or root_keys[0].parent
            new_paths = [keys.write_key(s, folder / f"root-{s.public_key.keyid[:16]}.pem") for s in new_signers]
        else:
            new_paths = [keys.write_online_key(role, s) for s in new_signers]
        for keyid in old_keyids:
            root.revoke_key(keyid, role)
        for signer in new_signers:
            root.add_key(signer.public_key, role)
        root.roles[role].threshold = min(threshold, len(new_signers))
        root.version += 1
        root.expires = state.now + lifetime("root")
        signers = old_root_signers + (new_signers if role == "root" else [])
        data = _sign(state.root, signers)
        storage.replace(metadata_key("root", root.version), data, content_type=JSON)
        row = state.rows["root"]
        row.version, row.expires, row.sha256, row.length, row.content = (
            root.version, root.expires, _digest(data), len(data), data.decode()
        )  # fmt: skip
        row.save()
        resigned: list[str] = []
        if role == "targets":
            delegations = state.targets.signed.delegations
            assert delegations is not None and delegations.succinct_roles is not None
            delegations.keys = {s.public_key.keyid: s.public_key for s in new_signers}
            delegations.succinct_roles.keyids = [s.public_key.keyid for s in new_signers]
            resigned = _publish(state, ["targets", *delegations.succinct_roles.get_roles()])
        elif role in ("snapshot", "timestamp"):
            resigned = _publish(state, ["snapshot"] if role == "snapshot" else [])
        removed: list[Path] = []
        if role != "root":
            for keyid in old_keyids:
                path = keys.keys_dir() / role / f"{keyid}.pem"
                if path.exists():
                    removed.append(path)
    for path in removed:  # after the commit: a failed rotation keeps the keys that still sign
        path.unlink()
    return Rotated(role=role, root_version=root.version, new_keys=new_paths, removed_keys=removed, resigned=resigned)


# --- reading --------------------------------------------------------------------------------------------


def root_fingerprint(version: int = 1) -> str | None:
    data = storage.read_small(metadata_key("root", version))
    return None if data is None else _digest(data)


def describe() -> dict[str, Any]:
    """What `trust show` prints: the fingerprint a client checks, the roles, keys, versions and expiry."""
    state = _load_state()
    root = state.root.signed
    rows = {r.name: r for r in TrustRole.objects.filter(name__in=TOP_LEVEL)}
    key = provenance_records.current_key()
    return {
        "provenance_key": {"keyid": key.keyid, "created": key.created_at.isoformat()} if key is not None else None,
        "fingerprint": root_fingerprint(1),
        "root_version": root.version,
        "consistent_snapshot": root.consistent_snapshot,
        "bins": state.succinct.number_of_bins,
        "targets": TrustTarget.objects.count(),
        "roles": {
            name: {
                "version": rows[name].version,
                "expires": rows[name].expires.isoformat(),
                "keyids": list(root.roles[name].keyids),
                "threshold": root.roles[name].threshold,
            }
            for name in TOP_LEVEL
        },
    }
