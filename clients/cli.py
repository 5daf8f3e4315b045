"""The `provisioning` command. It parses arguments and calls the library; nothing else.

Commands live in `clients/commands/*.py`; each module's ``register(cli)`` adds its subcommands
with `Commands.leaf`. A handler receives the parsed arguments and a `Context` (configuration,
output) and returns the exit status.

Exit status: 0 on success, 1 on failure, 2 on usage errors. Errors are one clear line on stderr,
or the SPEC error envelope with ``--output json``.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, NoReturn

from clients.config import Config, load_config
from clients.errors import ClientError, UsageError, os_error_message
from clients.output import Output
from extensions.errors import ExtensionError

# Modules under clients/commands/ that register subcommands, in help order.
COMMAND_MODULES = ("authoring", "publishing", "trusted_publishers", "install", "verify", "account", "runtime", "trust")

# The groups each module adds commands to. A command line naming a group imports only the modules
# that add to it, so `module discover` does not pay for the authoring tools' imports (a module not
# listed here is imported whatever the group). tests/clients/test_runtime_cli.py checks this against
# what the modules really register.
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "authoring": ("extension",),
    "publishing": ("extension",),
    "trusted_publishers": ("extension",),
    "install": ("extension", "taskserv", "cluster", "providers"),
    "verify": ("extension",),
    "account": ("registry",),
    "runtime": ("module", "runtime"),
    "trust": ("trust",),
}

# Each group's description starts with its commands, as `--help` lists them (tests/clients/test_cli.py).
GROUPS = {
    "extension": "validate, test, build, publish, yank, search, info, owners, trusted-publishers, sync and verify "
    "extensions",
    "module": "discover, load, list and reload extensions in the runtime",
    "taskserv": "create and list taskservs: install one (and its dependencies) into an infrastructure directory",
    "cluster": "create and list clusters: install one (and its dependencies) into an infrastructure directory",
    "providers": "create, list and validate providers",
    "registry": "login and logout: keep or forget an API token for a registry",
    "runtime": "serve the runtime's loaded-extension API on loopback",
    "trust": "init and show: the registry's root of trust (signed metadata) pinned by this client",
}


@dataclass
class Context:
    """What a handler gets besides its arguments."""

    args: argparse.Namespace
    out: Output
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        """The effective configuration (options, environment, stored credentials), read on first use."""
        if self._config is None:
            no_verify = bool(getattr(self.args, "no_verify", False))
            self._config = load_config(
                registry=getattr(self.args, "registry", None),
                token=getattr(self.args, "token", None),
                home=getattr(self.args, "home", None),
                output=self.out.mode,
                verify=not no_verify,
            )
            if no_verify:
                self.out.warn(
                    f"--no-verify: index documents, packages and their provenance from {self._config.registry} are "
                    "not checked against its signed metadata; use it only for a registry that has none"
                )
        return self._config


Handler = Callable[[argparse.Namespace, Context], int]


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors raised (exit 2 through the one error path), not printed raw."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Global options, accepted before or after the subcommand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--registry",
        metavar="URL",
        default=default(None),
        help="registry URL (env PROVISIONING_REGISTRY; default http://127.0.0.1:8000)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default(None),
        help="API token (env PROVISIONING_TOKEN, or `registry login`)",
    )
    parser.add_argument(
        "--home",
        metavar="DIR",
        default=default(None),
        help="local store and runtime state (env PROVISIONING_HOME)",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        default=default(False),
        help="do not verify index documents, packages and their provenance against the registry's signed "
        "metadata (only for a registry that has none)",
    )
    parser.add_argument(
        "--output",
        choices=("table", "json"),
        default=default("table"),
        help="human tables or the JSON envelope",
    )


class Commands:
    """The parser under construction; command modules add their subcommands through it."""

    def __init__(self) -> None:
        self.parser = _Parser(
            prog="provisioning", description="Author, publish, install and load provisioning extensions."
        )
        _global_options(self.parser, suppress=False)
        self._groups_action = self.parser.add_subparsers(dest="group", metavar="COMMAND", parser_class=_Parser)
        self._groups: dict[str, Any] = {}

    def group(self, name: str) -> Any:
        """The subparsers action of a command group (``extension``, ``module``, ...)."""
        if name not in self._groups:
            parser = self._groups_action.add_parser(name, help=GROUPS.get(name, ""), description=GROUPS.get(name))
            self._groups[name] = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
        return self._groups[name]

    def leaf(self, group: str, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self.group(group).add_parser(name, help=help_text, description=help_text)
        _global_options(parser, suppress=True)
        parser.set_defaults(handler=handler)
        return parser


_VALUED_OPTIONS = ("--registry", "--token", "--home", "--output")


def _group_of(argv: Sequence[str]) -> str | None:
    """The command group a command line names (its first positional argument), if any."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED_OPTIONS:
            skip = True
        elif arg == "--":
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only with the command modules its group needs."""
    group = _group_of(argv) if argv is not None else None
    commands = Commands()
    for name in GROUPS:
        commands.group(name)
    for module in COMMAND_MODULES:
        if group in GROUPS and group not in COMMAND_GROUPS.get(module, (group,)):
            continue
        importlib.import_module(f"clients.commands.{module}").register(commands)
    return commands.parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (a service manager, `timeout`, `kill`), raised where the command is, so that it
    cleans up as it does for Ctrl-C: no temporary download, no partly installed directory."""


def _terminate(signum: int, frame: FrameType | None) -> NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup short
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    if threading.current_thread() is not threading.main_thread():  # only there can a handler be set
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)  # None: set in C


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_json = any(a == "--output=json" for a in argv) or any(
        a == "--output" and b == "json" for a, b in itertools.pairwise(argv)
    )
    out = Output("json" if wants_json else "table")
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        out = Output(getattr(args, "output", None) or "table")
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            where = " ".join(x for x in (getattr(args, "group", None), getattr(args, "command", None)) if x)
            raise UsageError(f"a command is required (see `provisioning {where + ' ' if where else ''}--help`)")
        return handler(args, Context(args=args, out=out))
    except ClientError as exc:
        out.failure(exc)
        return exc.exit_code
    except ExtensionError as exc:
        out.failure(ClientError.from_extension_error(exc))
        return 1
    except Terminated:
        out.failure(ClientError("terminated (SIGTERM)", code="interrupted"))
        return 143
    except KeyboardInterrupt:
        out.failure(ClientError("interrupted", code="interrupted"))
        return 130
    except BrokenPipeError:
        return 1
    except OSError as exc:
        # A file system error the library had no better words for: one line, never a traceback.
        out.failure(ClientError(f"cannot continue: {os_error_message(exc)}", code="os_error"))
        return 1
    except Exception as exc:
        # An HTTP failure the library had no better words for (a connection cut while signed metadata
        # streams in, a redirect loop): one line too. httpx is looked up, not imported: only the
        # commands that talk to a registry load it.
        httpx = sys.modules.get("httpx")
        if httpx is None or not isinstance(exc, httpx.HTTPError):
            raise
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        out.failure(ClientError(f"the exchange with the registry failed: {said}", code="unavailable"))
        return 1


if __name__ == "__main__":
    sys.exit(main())
