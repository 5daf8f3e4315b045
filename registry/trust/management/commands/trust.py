"""`python manage.py trust init|rotate|show|check|maintain`: the signed index's keys and metadata.

trust init [--if-missing] [--root-key-dir DIR] [--bins N] [--threshold ROLE=N]...
trust rotate ROLE [--root-key FILE]...       ROLE: root, targets, snapshot, timestamp, provenance
trust show [--json]
trust check                                   exit 1 when the metadata and the catalogue disagree
trust maintain                                re-sign what is close to expiry; repair storage

`trust init` also creates the provenance key (SPEC 6.2), which signs every build's provenance and
is published as the signed target ``keys/provenance.pub``; ``--if-missing`` on a signed index
initialized before provenance existed creates just that key (and the versions' statements).
`trust rotate provenance` needs no root key: the public key is a target, signed by the targets key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.provenance import services as provenance
from registry.provenance.integrity import check_provenance
from registry.trust import keys, repository
from registry.trust.integrity import check_integrity

ROTATABLE = (*keys.ROLES, "provenance")

OFFLINE_ADVICE = (
    "Move it offline now (a USB key in a safe, a hardware token): it is needed only to sign a new root "
    "(`trust rotate`), and whoever holds it controls what every client trusts."
)


class Command(BaseCommand):
    help = "Keys and metadata of the signed index (TUF): init, rotate, show, check, maintain."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        init = sub.add_parser("init", help="create the keys and the first metadata, signing the whole catalogue")
        init.add_argument("--if-missing", action="store_true", help="do nothing when already initialized")
        init.add_argument(
            "--root-key-dir", type=Path, default=None, help="where the root key is written (default var/tuf-root/)"
        )
        bins = 2**repository.DEFAULT_BIT_LENGTH
        init.add_argument("--bins", type=int, default=bins, help=f"hashed bins, a power of 2 (default {bins})")
        init.add_argument(
            "--threshold", action="append", default=[], metavar="ROLE=N",
            help="keys (and signatures required) for an online role, e.g. targets=2",
        )  # fmt: skip
        rotate = sub.add_parser("rotate", help="replace a role's keys (a new root version signed by old and new)")
        rotate.add_argument("role", choices=ROTATABLE)
        rotate.add_argument(
            "--root-key", type=Path, action="append", default=[],
            help="a current root key file (default: every *.pem under var/tuf-root/; not needed for provenance)",
        )  # fmt: skip
        show = sub.add_parser("show", help="the root fingerprint clients check, roles, keys, versions, expiry")
        show.add_argument("--json", action="store_true")
        sub.add_parser("check", help="verify that the signed metadata and the catalogue agree")
        sub.add_parser("maintain", help="re-sign what is close to expiry and repair storage ahead of the database")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"_{options['action']}")(options)
        except (repository.TrustError, keys.KeyProblem) as exc:
            raise CommandError(str(exc)) from None

    def _init(self, options: dict[str, Any]) -> None:
        if options["if_missing"] and repository.initialized():
            self.stdout.write("the signed index is already initialized")
            added = provenance.key_ensure()
            if added is not None:
                self.stdout.write(f"provenance key: {added.key_file}")
                self.stdout.write(f"signed the provenance of {added.signed} versions published before it existed")
            return
        bins = options["bins"]
        if bins < 2 or bins & (bins - 1) or bins > 2**16:
            raise CommandError("--bins must be a power of 2 between 2 and 65536")
        thresholds: dict[str, int] = {}
        for item in options["threshold"]:
            role, _, number = item.partition("=")
            if role not in keys.ONLINE_ROLES or not number.isdigit() or not 1 <= int(number) <= 16:
                raise CommandError(f"--threshold {item!r}: use ROLE=N with ROLE one of {', '.join(keys.ONLINE_ROLES)}")
            thresholds[role] = int(number)
        root_dir = options["root_key_dir"] or keys.default_root_key_dir()
        done = repository.init(root_key_dir=root_dir, bit_length=bins.bit_length() - 1, thresholds=thresholds)
        self.stdout.write(f"signed index initialized: {done.targets} targets in {done.bins} bins")
        self.stdout.write(f"root key written to {done.root_key}")
        self.stdout.write(OFFLINE_ADVICE)
        for role, paths in done.online_keys.items():
            for path in paths:
                self.stdout.write(f"{role} key: {path}")
        if done.provenance_key is not None:
            self.stdout.write(f"provenance key: {done.provenance_key}")
        self.stdout.write(f"root fingerprint (1.root.json): sha256:{done.fingerprint}")

    def _rotate(self, options: dict[str, Any]) -> None:
        if options["role"] == "provenance":
            change = provenance.key_rotate()
            self.stdout.write(f"provenance key rotated: {change.keyid[:16]}, published as keys/provenance.pub")
            self.stdout.write(f"new provenance key: {change.key_file}")
            if change.removed is not None:
                self.stdout.write(f"removed the old key {change.removed}")
            self.stdout.write(f"signed {change.signed} provenance statements again with it")
            return
        paths = options["root_key"] or sorted(keys.default_root_key_dir().glob("*.pem"))
        if not paths:
            raise CommandError(
                f"no root key given and none under {keys.default_root_key_dir()}: pass --root-key FILE "
                "(the key trust init wrote)"
            )
        done = repository.rotate(options["role"], root_keys=list(paths))
        self.stdout.write(f"{done.role} key rotated: root is now version {done.root_version}")
        for path in done.new_keys:
            self.stdout.write(f"new {done.role} key: {path}")
        for path in done.removed_keys:
            self.stdout.write(f"removed the old key {path}")
        if done.role == "root":
            self.stdout.write(f"Destroy the old root key files once clients follow: {', '.join(map(str, paths))}")
            self.stdout.write(OFFLINE_ADVICE)
        if done.resigned:
            self.stdout.write(f"re-signed: {', '.join(done.resigned[:8])}" + (" ..." if len(done.resigned) > 8 else ""))

    def _show(self, options: dict[str, Any]) -> None:
        info = repository.describe()
        if options["json"]:
            self.stdout.write(json.dumps(info, indent=2))
            return
        self.stdout.write(f"root fingerprint (1.root.json): sha256:{info['fingerprint']}")
        self.stdout.write(f"root version {info['root_version']}; {info['targets']} targets in {info['bins']} bins")
        for name, role in info["roles"].items():
            self.stdout.write(
                f"{name:10} v{role['version']:<6} expires {role['expires']}  "
                f"threshold {role['threshold']} of {', '.join(k[:16] for k in role['keyids'])}"
            )
        key = info["provenance_key"]
        shown = f"{key['keyid'][:16]}, since {key['created']}" if key else "none (run `trust init --if-missing`)"
        self.stdout.write(f"provenance key {shown}; published as keys/provenance.pub")

    def _check(self, options: dict[str, Any]) -> None:
        problems = check_integrity() + check_provenance()
        if problems:
            for problem in problems:
                self.stderr.write(problem)
            raise CommandError(f"{len(problems)} problem(s) in the signed index")
        self.stdout.write("the signed metadata and the catalogue agree; every version has a valid signed provenance")

    def _maintain(self, options: dict[str, Any]) -> None:
        written = repository.maintain()
        self.stdout.write(f"re-signed: {', '.join(written)}" if written else "nothing to re-sign")
