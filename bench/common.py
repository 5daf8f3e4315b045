"""Shared helpers for the benchmarks: timing, statistics, and the result table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Row:
    """One line of the benchmark table."""

    benchmark: str
    metric: str
    value: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    ok: bool | None = None


@dataclass
class Context:
    """What every benchmark gets: a private scratch directory and the repository root."""

    workdir: Path
    root: Path
    quick: bool = False
    notes: list[str] = field(default_factory=list)


def timed(func: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock seconds of `repeat` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def percentile(samples: list[float], pct: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def blob_source(directory: Path, name: str, version: str, blob: bytes, dependencies: tuple[str, ...] = ()) -> Path:
    """An extension source whose package is about the size of ``blob`` (give it random bytes: the
    data is stored, not compressed away), in ``directory``; ``dependencies`` as SPEC strings."""
    (directory / "data").mkdir(parents=True)
    required = ", ".join(f'"{d}"' for d in dependencies)
    (directory / "extension.toml").write_text(
        f'[extension]\nname = "{name}"\nversion = "{version}"\n'
        f'description = "A {len(blob) // 1024} KiB benchmark package"\ntype = "taskserv"\n\n'
        '[compatibility]\nprovisioning_version = ">=1.0.0"\n\n'
        f'[provides]\ntaskservs = ["{name}"]\n'
        + (f"\n[dependencies]\nextensions = [{required}]\n" if dependencies else "")
    )
    (directory / "README.md").write_text(f"# {name}\n")
    (directory / "data" / "blob.bin").write_bytes(blob)
    return directory
