"""Child-process entry point: compile the KCL files of one directory (one package) together.

`python -m extensions._kcl_compile DIR FILE...` exits 0 when the program compiles and evaluates
with every `check:` block satisfied, or prints KCL's message and exits 1. Run in a child process so
that a slow or crashing compile cannot take the caller down.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m extensions._kcl_compile DIR FILE...", file=sys.stderr)
        return 2
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
