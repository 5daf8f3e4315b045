"""Build provenance's cost (SPEC 6.2), each against a baseline measured in the same run:

- publish (a small package with two dependencies, over HTTP, embedded mode) to a signed registry
  that makes, signs and lists a provenance statement for every build, against a signed registry
  without a provenance key (its versions are published unsigned: ``provenance_record`` does
  nothing), so the difference is the statement alone: the dependencies resolved, the statement
  rendered and signed, its row, its target in the signed index; publishes alternate between the
  two; target <= 1.15x or + 15 ms;
- in-process, per statement: render and sign (the registry's part) and verify (the client's part:
  DSSE signature, statement type, subject), against hashing the package once, which every install
  does anyway; reported, with the envelope's size."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.bench_trust import BINS, _publish_one, _spread
from bench.common import Context, Row, blob_source, median, ms, timed

DEPENDENCIES = ("bench-base-a", "bench-base-b")
REQUIRED = tuple(f"{name} ^1.0" for name in DEPENDENCIES)


def _packages(workdir: Path, count: int) -> tuple[list[Path], list[Path]]:
    from extensions.archive import build_package

    blob = os.urandom(4096)
    bases = [
        build_package(blob_source(workdir / "src" / name, name, "1.0.0", blob), workdir / "dist").path
        for name in DEPENDENCIES
    ]
    sources = [blob_source(workdir / "src" / f"v{i}", "bench-prov", f"1.0.{i}", blob, REQUIRED) for i in range(count)]
    packages = [build_package(source, workdir / "dist").path for source in sources]
    return bases, packages


def _publish(ctx: Context) -> list[Row]:
    from tests.live_registry import LiveRegistry

    count = 8 if ctx.quick else 30
    attested = LiveRegistry(ctx.workdir / "attested", trust_args=BINS)
    unattested = LiveRegistry(ctx.workdir / "unattested", trust_args=BINS)
    bases, packages = _packages(ctx.workdir / "pkgs", count + 3)
    samples: dict[int, list[float]] = {id(attested): [], id(unattested): []}
    attested.start(workers=1, threads=2)
    unattested.start(workers=1, threads=2)
    # The baseline: a signed index without a provenance key publishes without a statement.
    unattested.manage(
        "shell", "-c", "from registry.provenance.models import ProvenanceKey as K; K.objects.all().delete()"
    )
    try:
        tokens = {id(r): r.createtoken("bench") for r in (attested, unattested)}
        for registry in (attested, unattested):
            for base in bases:
                _publish_one(registry.url, tokens[id(registry)], base)
        for i, package in enumerate(packages):
            for registry in (attested, unattested):
                seconds = _publish_one(registry.url, tokens[id(registry)], package)
                if i >= 3:  # the first three warm the workers up
                    samples[id(registry)].append(seconds)
        statements = attested.manage(
            "shell", "-c", "from registry.provenance.models import Provenance as P; print(P.objects.count())"
        ).stdout.split()[-1]
        ctx.notes.append(f"the attested registry holds {statements} statements; the baseline none")
    finally:
        attested.stop()
        unattested.stop()
    with_statement, without = samples[id(attested)], samples[id(unattested)]
    ratio = median(with_statement) / median(without)
    delta = median(with_statement) - median(without)
    return [
        Row(
            f"publish x{count} (2 dependencies), with provenance vs without",
            "median (min-max)",
            _spread(with_statement),
            _spread(without),
            f"{ratio:.2f}x (+{ms(delta)})",
            "<= 1.15x or +15 ms",
            ratio <= 1.15 or delta <= 0.015,
        )
    ]


def _in_process(ctx: Context) -> list[Row]:
    from securesystemslib.signer import CryptoSigner

    from extensions.provenance import BuildRecord, Publisher, ResolvedDependency, sign, statement, verify

    repeat = 200 if ctx.quick else 2000
    package = os.urandom(64 * 1024)
    sha256 = hashlib.sha256(package).hexdigest()
    signer = CryptoSigner.generate_ed25519()
    started = datetime(2026, 1, 1, tzinfo=UTC)
    prefix = "pvr_" + "a" * 8  # a token's displayed prefix, never a secret
    record = BuildRecord(
        name="bench-prov",
        version="1.0.0",
        sha256=sha256,
        kind="source",
        upload_name="bench-prov-1.0.0-source.tar.gz",
        upload_sha256="0" * 64,
        upload_size=len(package),
        builder_id="https://registry.example/builder",
        builder_version={"provisioning-registry": "1.0.0", "packageFormat": "1"},
        build_id="b" * 32,
        started=started,
        finished=started + timedelta(seconds=2),
        publisher=Publisher(user="alice", via="token", token_prefix=prefix),
        dependencies=tuple(ResolvedDependency(f"dep-{i}", "1.0.0", "1" * 64, f"https://r/{i}", "^1") for i in range(5)),
        reproducible=True,
        reproducible_note="built from source",
    )
    data = sign(statement(record), signer)
    key = signer.public_key
    signing = timed(lambda: sign(statement(record), signer), repeat)
    verifying = timed(lambda: verify(data, [key], name="bench-prov", version="1.0.0", sha256=sha256), repeat)
    hashing = timed(lambda: hashlib.sha256(package).hexdigest(), repeat)
    us = lambda s: f"{median(s) * 1e6:.0f} us ({min(s) * 1e6:.0f}-{max(s) * 1e6:.0f})"  # noqa: E731
    ctx.notes.append(f"a statement with 5 dependencies: {len(data)} bytes of envelope")
    return [
        Row(f"render + sign a statement x{repeat}", "median (min-max)", us(signing), us(hashing),
            f"{median(signing) / median(hashing):.1f}x hashing a 64 KiB package"),
        Row(f"verify a statement x{repeat}", "median (min-max)", us(verifying), us(hashing),
            f"{median(verifying) / median(hashing):.1f}x hashing a 64 KiB package"),
    ]  # fmt: skip


def run(ctx: Context) -> list[Row]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    return [*_in_process(ctx), *_publish(ctx)]
