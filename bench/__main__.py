"""`python -m bench [NAME...] [--quick]`: run the benchmarks and print one table."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import tempfile
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

import bench
from bench.common import Context, Row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="only these benchmark modules (e.g. archive)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, smaller inputs")
    args = parser.parse_args(argv)
    modules = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    if args.names:
        modules = [m for m in modules if m.removeprefix("bench_") in args.names]
    rows: list[Row] = []
    failed = False
    console = Console()
    for name in modules:
        module = importlib.import_module(f"bench.{name}")
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
            ctx = Context(workdir=Path(tmp), root=Path(__file__).resolve().parent.parent, quick=args.quick)
            console.print(f"[bold]running {name}[/bold]")
            try:
                rows.extend(module.run(ctx))
            except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
                failed = True
                traceback.print_exc()
                rows.append(Row(name, "error", "see traceback above", ok=False))
            for note in ctx.notes:
                console.print(f"  {note}")
    table = Table(title="make bench")
    for column in ("benchmark", "metric", "value", "baseline (same run)", "ratio", "target", "ok"):
        table.add_column(column)
    for row in rows:
        verdict = "" if row.ok is None else ("yes" if row.ok else "NO")
        table.add_row(row.benchmark, row.metric, row.value, row.baseline, row.ratio, row.target, verdict)
    Console(width=200).print(table)
    return 1 if failed or any(row.ok is False for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
