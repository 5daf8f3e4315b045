"""Packages: build time against `tar czf`, inspection throughput against plain `tarfile` extraction,
and peak memory while a gzip bomb is refused.

1. build_package on 1,000 text files / 5 MB (median of 5) vs `tar czf` of the same tree (same run).
2. inspect_package and safe_extract of a ~50 MB package of mostly random data (median of 3), in MB/s of
   compressed and uncompressed bytes, vs `tarfile.open(...).extractall(dir, filter="data")`.
3. Peak RSS (VmHWM) of a child process inspecting a gzip bomb of 1 GiB of zeros (~1 MB compressed):
   it must be refused with ArchiveTooLargeError and stay under 100 MB.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import zlib
from pathlib import Path

from bench.common import Context, Row, median, ms, timed
from extensions.archive import Limits, build_package, inspect_package, safe_extract

MB = 1_000_000
MiB = 1 << 20
BOMB_LIMIT_BYTES = 100 * MB

WORDS = (  # noqa: SIM905 - a word list reads better as text
    "server cluster node taskserv provider kubernetes etcd containerd network storage volume config "
    "template schema version install upgrade remove check status health endpoint address port "
    "certificate key secret token user group role policy firewall route subnet zone region image "
    "disk memory cpu label annotation service deployment replica backup restore snapshot log metric"
).split()

EXTENSION_TOML = """\
[extension]
name = "bench"
version = "1.0.0"
description = "A generated extension for the archive benchmark"
type = "taskserv"
license = "MIT"

[provides]
taskservs = ["bench"]
"""


def _text(rng: random.Random, size: int) -> str:
    """Code-like text: indented lines of words, identifiers and numbers (compresses ~3-4x, not 100x)."""
    lines: list[str] = []
    total = 0
    while total < size:
        indent = "    " * rng.randrange(4)
        words = [rng.choice(WORDS) for _ in range(rng.randrange(3, 10))]
        if rng.random() < 0.3:
            words.append(f"{rng.choice(WORDS)}_{rng.randrange(10_000)} = {rng.randrange(1 << 20)}")
        line = indent + " ".join(words)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size] + "\n"


def _make_text_tree(root: Path, files: int, total_bytes: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    root.mkdir(parents=True)
    (root / "extension.toml").write_text(EXTENSION_TOML)
    (root / "README.md").write_text("# bench\n\n" + _text(rng, 2000))
    kinds = [("kcl", ".k"), ("nulib", ".nu"), ("templates", ".j2"), ("docs", ".md"), ("examples", ".toml")]
    per_file = total_bytes // files
    for i in range(files - 2):
        top, ext = kinds[i % len(kinds)]
        path = root / top / f"group{i % 17:02d}" / f"file{i:04d}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(rng, rng.randrange(per_file // 2, per_file * 3 // 2)))


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def bench_build(ctx: Context) -> list[Row]:
    files, total = (200, 1 * MB) if ctx.quick else (1000, 5 * MB)
    repeat = 3 if ctx.quick else 5
    source = ctx.workdir / "build-src" / "bench"
    _make_text_tree(source, files, total)
    size = _tree_bytes(source)
    out = ctx.workdir / "build-out"
    built = build_package(source, out)
    ours = median(timed(lambda: build_package(source, out), repeat))
    tar = shutil.which("tar")
    label = f"build {files} files / {size / MB:.1f} MB"
    if tar is None:
        ctx.notes.append("tar not found: no baseline for the build benchmark")
        return [Row(label, "build_package (median)", ms(ours), target="informational")]
    tar_out = ctx.workdir / "tar-czf.tar.gz"
    cmd = [tar, "czf", os.fspath(tar_out), "-C", os.fspath(source.parent), source.name]
    theirs = median(timed(lambda: subprocess.run(cmd, check=True), repeat))
    return [
        Row(
            label,
            "build_package (median)",
            ms(ours),
            baseline=f"tar czf {ms(theirs)}",
            ratio=f"{ours / theirs:.2f}x",
            target="<= 3x tar czf",
            ok=ours <= 3 * theirs,
        ),
        Row(
            label,
            "package size",
            f"{built.size / MB:.2f} MB",
            baseline=f"tar czf {tar_out.stat().st_size / MB:.2f} MB",
            ratio=f"{built.size / tar_out.stat().st_size:.2f}x",
            target="informational",
        ),
    ]


def bench_inspect(ctx: Context) -> list[Row]:
    target_mb = 10 if ctx.quick else 50
    repeat = 3
    source = ctx.workdir / "inspect-src" / "bench"
    _make_text_tree(source, 100, 1 * MB)
    rng = random.Random(11)
    blobs = source / "blobs"
    blobs.mkdir()
    remaining = target_mb * MB - 1 * MB
    i = 0
    while remaining > 0:
        chunk = min(remaining, rng.randrange(200_000, 2 * MB))
        (blobs / f"blob{i:03d}.bin").write_bytes(os.urandom(chunk))  # incompressible
        remaining -= chunk
        i += 1
    limits = Limits(max_package_bytes=(target_mb + 20) * MiB)
    built = build_package(source, ctx.workdir / "inspect-out", limits=limits)
    info = inspect_package(built.path, limits=limits)
    compressed, unpacked = built.size, info.unpacked_size

    def extract_ours() -> None:
        dest = Path(tempfile.mkdtemp(dir=ctx.workdir)) / "x"
        safe_extract(built.path, dest, limits=limits)
        shutil.rmtree(dest.parent)

    def extract_tarfile() -> None:
        dest = Path(tempfile.mkdtemp(dir=ctx.workdir))
        with tarfile.open(built.path) as tar:
            tar.extractall(dest, filter="data")
        shutil.rmtree(dest)

    t_inspect = median(timed(lambda: inspect_package(built.path, limits=limits), repeat))
    t_extract = median(timed(extract_ours, repeat))
    t_tarfile = median(timed(extract_tarfile, repeat))
    label = f"inspect {compressed / MB:.0f} MB package"

    def speed(seconds: float) -> str:
        return f"{compressed / MB / seconds:.0f} MB/s gz, {unpacked / MB / seconds:.0f} MB/s raw"

    return [
        Row(
            label,
            "inspect_package (median)",
            f"{ms(t_inspect)} ({speed(t_inspect)})",
            baseline=f"tarfile extractall {ms(t_tarfile)} ({speed(t_tarfile)})",
            ratio=f"{t_inspect / t_tarfile:.2f}x time",
            target="<= 2x tarfile",
            ok=t_inspect <= 2 * t_tarfile,
        ),
        Row(
            label,
            "safe_extract (median)",
            f"{ms(t_extract)} ({speed(t_extract)})",
            baseline=f"tarfile extractall {ms(t_tarfile)}",
            ratio=f"{t_extract / t_tarfile:.2f}x time",
            target="<= 2x tarfile",
            ok=t_extract <= 2 * t_tarfile,
        ),
    ]


def _write_bomb(path: Path, zeros: int = 1 << 30) -> None:
    """A package whose one empty member is followed by ``zeros`` bytes of zeros: ~1 MB compressed.
    One compressed block is repeated after full flushes (each starts the compressor afresh)."""
    info = tarfile.TarInfo("bench-1.0.0/empty.bin")
    prefix = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "strict")
    chunk = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")
        f.write(c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH))
        block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(prefix)
        for _ in range(zeros // MiB):
            f.write(block)
            crc = zlib.crc32(chunk, crc)
        f.write(c.flush())
        f.write(struct.pack("<II", crc, (len(prefix) + zeros) & 0xFFFFFFFF))


CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    def hwm_kb():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

    from extensions.archive import inspect_package
    from extensions.errors import ExtensionError
    before = hwm_kb()
    try:
        inspect_package(Path(sys.argv[1]))
        error = None
    except ExtensionError as exc:
        error = type(exc).__name__
    print(json.dumps({"error": error, "before_kb": before, "peak_kb": hwm_kb()}))
    """
)


def bench_bomb(ctx: Context) -> list[Row]:
    bomb = ctx.workdir / "bomb.tar.gz"
    _write_bomb(bomb)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, os.fspath(bomb)],
        cwd=ctx.root,
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(result.stdout)
    peak = report["peak_kb"] * 1024
    refused = report["error"] == "ArchiveTooLargeError"
    return [
        Row(
            f"gzip bomb: 1 GiB of zeros in {bomb.stat().st_size / MB:.1f} MB",
            "peak RSS of the inspecting process",
            f"{peak / MB:.0f} MB (refused: {report['error']})",
            baseline=f"after imports {report['before_kb'] * 1024 / MB:.0f} MB",
            target="< 100 MB, ArchiveTooLargeError",
            ok=peak < BOMB_LIMIT_BYTES and refused,
        )
    ]


def run(ctx: Context) -> list[Row]:
    return [*bench_build(ctx), *bench_inspect(ctx), *bench_bomb(ctx)]
