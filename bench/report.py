"""docs/benchmarks.md: each benchmark that reports there owns one section of it, between
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``, rewritten whole by its latest run (the
others' sections are kept)."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

HEADER = """# Benchmarks

Written by `make bench` (`python -m bench`); each section by its benchmark, with the machine it
ran on. Ratios are against baselines measured in the same run. Figures taken on a shared, busy
machine are noisy: compare ratios, and re-run on a quiet machine for absolute numbers.
"""


def machine() -> str:
    """One line about the machine: CPU, cores, memory, kernel, Python, load average."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kib / 1024**2:.0f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{model}, {os.cpu_count()} cores{memory}, Linux {platform.release()}, "
        f"Python {platform.python_version()}; load average {load}"
    )


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def write_section(root: Path, name: str, text: str) -> Path:
    path = root / "docs" / "benchmarks.md"
    current = path.read_text(encoding="utf-8") if path.exists() else HEADER
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in current and end in current:
        before, rest = current.split(start, 1)
        current = before + block + rest.split(end, 1)[1]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    path.write_text(current, encoding="utf-8")
    return path
