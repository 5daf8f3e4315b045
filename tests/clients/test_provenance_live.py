"""The client verifies every package's signed build provenance (SPEC 6.2) before it uses it, over
real HTTP against a live registry (gunicorn): `taskserv create` and `extension verify NAME`
refuse a statement that was changed where the registry keeps it, one signed by another key and
another version's statement, even when the attacker also controls the signed index's online keys
(the statement is signed by the provenance key alone), and a statement swapped on the wire; each
with one line naming what failed and nothing installed. `extension verify NAME[@VERSION]` shows
what the registry attests; `extension verify --infra DIR` lists every installed file that is not
what the registry signed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.client_tools import run
from tests.clients.tampering_proxy import Exchange, TamperingProxy
from tests.clients.test_trust_live import Capsys, Victim, one_line, publish
from tests.live_registry import LiveRegistry

pytestmark = [pytest.mark.slow]

# What an attacker who holds the registry's database and its online (targets, snapshot,
# timestamp) keys, but not the provenance key, can do: change the stored statement of NAME VERSION
# and sign the index over it. MODE: "changed" (the publisher rewritten, signature kept), "other-key"
# (a statement of the attacker's, signed with a key of its own), "other-subject" (the statement of
# NAME 1.0.0 served as VERSION's).
TAMPER = """
import base64, json, sys
from django.db import transaction
from securesystemslib.signer import CryptoSigner
from extensions.provenance import sign
from registry.models import Extension
from registry.provenance.models import Provenance
from registry.trust import repository
import hashlib

name, version, mode = sys.argv[-3:]
row = Provenance.objects.get(version__extension__name=name, version__version=version)
document = json.loads(row.envelope)
statement = json.loads(base64.b64decode(document["payload"]))
if mode == "changed":
    statement["predicate"]["buildDefinition"]["internalParameters"]["publisher"]["user"] = "mallory"
    document["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    data = json.dumps(document).encode()
elif mode == "other-key":
    statement["predicate"]["buildDefinition"]["internalParameters"]["publisher"]["user"] = "mallory"
    data = sign(statement, CryptoSigner.generate_ed25519())
else:
    data = Provenance.objects.get(version__extension__name=name, version__version="1.0.0").envelope.encode()
with transaction.atomic():
    Provenance.objects.filter(pk=row.pk).update(
        envelope=data.decode(), sha256=hashlib.sha256(data).hexdigest(), length=len(data)
    )
    repository.record_extension(Extension.objects.get(name=name))
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRegistry]:
    live = LiveRegistry(tmp_path_factory.mktemp("provenance-registry"))
    live.start()
    publish(live, tmp_path_factory.mktemp("base"), "base-ext", "1.0.0")
    yield live
    live.stop()


def tamper(registry: LiveRegistry, name: str, version: str, mode: str) -> None:
    script = registry.data_dir / "tamper.py"
    script.write_text(TAMPER)
    registry.manage(
        "shell", "-c", f"import sys; sys.argv += {[name, version, mode]!r}; exec(open({str(script)!r}).read())"
    )


def verify(capsys: Capsys, url: str, home: Path, *argv: str) -> tuple[int, str, str]:
    result = run(capsys, "--registry", url, "--home", home, "extension", "verify", *argv)
    return result.code, result.out, result.err


def test_install_verifies_the_provenance_and_extension_verify_shows_it(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    publish(registry, tmp_path, "shown-ext", "1.0.0", dependencies=["base-ext ^1.0"])
    home = tmp_path / "home"
    created = run(
        capsys, "--registry", registry.url, "--home", home, "taskserv", "create", "shown-ext", "--infra", tmp_path / "i"
    )
    assert created.code == 0, created.err
    # The verified statement is kept by digest: a later verify needs no download of it.
    assert list((home / "trust").glob("*/targets/*.shown-ext-1.0.0.intoto.json"))

    code, out, err = verify(capsys, registry.url, home, "shown-ext@1.0.0")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("shown-ext 1.0.0: provenance verified (signed by the provenance key ")
    said = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines[1:] if ":" in line}
    assert said["package"].startswith("shown-ext-1.0.0.tar.gz sha256:")
    assert said["published by"].startswith("provisioning")  # manage.py publish's user, without a token
    assert said["built from"].startswith("source archive shown-ext-1.0.0-source.tar.gz sha256:")  # a source build
    assert said["reproducible"].startswith("yes")
    assert said["dependencies"] == "base-ext 1.0.0 (^1.0)"
    assert said["builder"].startswith("http") and "provisioning-registry" in said["builder"]

    as_json = run(
        capsys, "--registry", registry.url, "--home", home, "--output", "json", "extension", "verify", "shown-ext"
    )
    assert as_json.code == 0, as_json.err
    data = as_json.json()["data"]
    assert data["verified"] is True and data["version"] == "1.0.0"  # its latest version
    assert data["summary"]["sha256"] == said["package"].split("sha256:")[1]
    assert data["statement"]["predicateType"] == "https://slsa.dev/provenance/v1"

    unknown = verify(capsys, registry.url, home, "shown-ext@9.9.9")
    assert unknown[0] == 1 and "no version 9.9.9" in unknown[2] and "1.0.0" in unknown[2]
    assert verify(capsys, registry.url, home, "Not A Name")[0] == 2
    no_verify = run(
        capsys, "--registry", registry.url, "--home", home, "--no-verify", "extension", "verify", "shown-ext"
    )
    assert no_verify.code == 2 and "--no-verify" in no_verify.err


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("changed", ("bad signature", "the provenance of victim-{mode} 1.1.0", "provenance key")),
        ("other-key", ("bad signature", "the provenance of victim-{mode} 1.1.0")),
        ("other-subject", ("wrong subject", "victim-{mode}-1.0.0.tar.gz", "not this package's provenance")),
    ],
)
def test_a_statement_the_provenance_key_did_not_sign_for_this_package_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path, mode: str, words: tuple[str, ...]
) -> None:
    name = f"victim-{mode}"
    publish(registry, tmp_path, name, "1.0.0")
    publish(registry, tmp_path, name, "1.1.0")
    victim = Victim(capsys, registry.url, tmp_path)
    tamper(registry, name, "1.1.0", mode)
    expected = [w.format(mode=mode) for w in words]
    victim.assert_refused(victim.create(name), *expected)
    assert not list((victim.home / "store").rglob(f"*{name}*"))  # not even the package is kept as verified
    # The runtime loader verifies as installs do: nothing is loaded.
    loaded = run(capsys, "--registry", registry.url, "--home", victim.home, "module", "load", "taskserv", name)
    assert loaded.code == 1 and expected[0] in one_line(loaded.err), loaded.err
    assert not (victim.home / "store" / "trees" / "taskserv" / name).exists()
    code, out, err = verify(capsys, registry.url, victim.home, f"{name}@1.1.0")
    assert code == 1 and out == ""
    message = one_line(err)
    assert message.startswith("error: ") and all(w in message for w in expected), message
    # Its other version is untouched, and installs.
    installed = victim.create(name, "--version", "1.0.0")
    assert installed.code == 0, installed.err


def test_a_statement_swapped_on_the_wire_is_refused(capsys: Capsys, registry: LiveRegistry, tmp_path: Path) -> None:
    publish(registry, tmp_path, "wire-ext", "1.0.0")
    publish(registry, tmp_path, "wire-ext", "2.0.0")
    with TamperingProxy(registry.url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        recorded: dict[str, bytes] = {}

        def swap(exchange: Exchange) -> Exchange:
            if "/tuf/targets/provenance/wire-ext/" not in exchange.path:
                return exchange
            if "wire-ext-1.0.0" in exchange.path:
                recorded["old"] = exchange.body
                return exchange
            return exchange.with_body(recorded.get("old", b"{}"))

        proxy.rewrite = swap
        assert verify(capsys, proxy.url, victim.home, "wire-ext@1.0.0")[0] == 0
        victim.assert_refused(victim.create("wire-ext"), "wire-ext 2.0.0", "provenance")


def test_verify_infra_lists_every_installed_file_that_is_not_what_the_registry_signed(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    publish(registry, tmp_path, "infra-ext", "1.0.0", extra_files={"kcl/extra.k": "y = 2\n"})
    home, infra = tmp_path / "home", tmp_path / "infra"
    base = ["--registry", registry.url, "--home", home]
    assert run(capsys, *base, "taskserv", "create", "infra-ext", "--infra", infra).code == 0
    ok = run(capsys, *base, "extension", "verify", "--infra", infra)
    assert ok.code == 0, ok.err
    assert ok.out.startswith("ok: 1 extension pinned by ") and "signed metadata" in ok.out

    tree = infra / "extensions" / "taskservs" / "infra-ext"
    (tree / "kcl" / "extra.k").write_text("y = 3\n")
    (tree / "extension.toml").unlink()
    (tree / "kcl" / "planted.k").write_text("evil = 1\n")
    (tree / "link").symlink_to("/etc/passwd")
    found = run(capsys, *base, "--output", "json", "extension", "verify", "--infra", infra)
    assert found.code == 1
    error = json.loads(found.out)["error"]
    assert error["code"] == "integrity_error" and "4 differences" in error["message"]
    differences = {(d["extension"], d["path"], d["status"]) for d in error["details"]}
    assert differences == {
        ("infra-ext", "kcl/extra.k", "modified"),
        ("infra-ext", "extension.toml", "missing"),
        ("infra-ext", "kcl/planted.k", "extra"),
        ("infra-ext", "link", "extra"),
    }
    table = run(capsys, *base, "extension", "verify", "--infra", infra)
    assert table.code == 1 and "kcl/planted.k" in table.out and "extension sync --infra" in table.err

    (tree / "link").unlink()
    (tree / "kcl" / "planted.k").unlink()
    assert run(capsys, *base, "extension", "sync", "--infra", infra).code == 0
    assert run(capsys, *base, "extension", "verify", "--infra", infra).code == 0
    offline = run(capsys, *base, "extension", "verify", "--infra", infra, "--offline")
    assert offline.code == 0, offline.err
