"""Benchmarks, run by `make bench` (`python -m bench`). Each module `bench/bench_*.py` defines
`run(ctx) -> list[Row]`; figures are reported with a baseline measured in the same run."""
