"""Child-process entry point: compile the KCL files of one directory (one package) together.

`python -m extensions._kcl_compile DIR FILE...` exits 0 when the program compiles and evaluates
with every `check:` block satisfied, or prints KCL's message and exits 1. Run in a child process so
that a slow or crashing compile cannot take the caller down.
"""

from __future__ import annotations

import sys

CPU_SECONDS = 60
MEMORY_BYTES = 2 * 1024**3


def _limit_resources() -> None:
    """An author's KCL program runs here: bound its CPU time and memory (the parent also bounds
    the wall time), so a pathological program cannot exhaust the machine."""
    try:
        import resource
    except ImportError:  # not on POSIX: the parent's timeout still applies
        return
    for which, value in ((resource.RLIMIT_CPU, CPU_SECONDS), (resource.RLIMIT_AS, MEMORY_BYTES)):
        # Only ever lower a limit: inside the build sandbox the inherited ones are tighter.
        soft, hard = resource.getrlimit(which)
        soft = value if soft == resource.RLIM_INFINITY else min(soft, value)
        hard = value if hard == resource.RLIM_INFINITY else min(hard, value)
        resource.setrlimit(which, (min(soft, hard), hard))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m extensions._kcl_compile DIR FILE...", file=sys.stderr)
        return 2
    _limit_resources()
    from kcl_lib.api import API, ExecProgramArgs

    directory, files = argv[0], argv[1:]
    try:
        result = API().exec_program(ExecProgramArgs(k_filename_list=files, work_dir=directory))
    except Exception as exc:  # noqa: BLE001 - syntax and type errors arrive as plain exceptions
        print(str(exc))
        return 1
    if result.err_message:
        print(result.err_message)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
