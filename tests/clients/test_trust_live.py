"""The client verifies everything it uses against the registry's signed index (SPEC 6.1), over real
HTTP, with an attacker's proxy between the client and a live registry (gunicorn): a swapped
package with every sha256 rewritten, rollback, freeze, mix-and-match, a target the metadata does
not list, a bad signature, a root rotation the client follows (and a forged one it refuses), and
a stolen online key below its threshold. Every attack: exit 1, one line naming what failed,
nothing installed, the lockfile untouched."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from securesystemslib.signer import CryptoSigner
from tuf.api.metadata import Metadata, MetaFile, Root, TargetFile, Timestamp
from tuf.api.serialization.json import JSONSerializer

from clients.errors import ClientError
from registry.trust.keys import load_key
from tests.clients.client_tools import Result, run
from tests.clients.tampering_proxy import Exchange, TamperingProxy
from tests.factories import package, write_extension
from tests.live_registry import LiveRegistry

Capsys = pytest.CaptureFixture[str]
pytestmark = [pytest.mark.slow]
_SERIALIZER = JSONSerializer(compact=True)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRegistry]:
    """One signed registry for the module; its targets role needs 2 signatures of 2 keys."""
    live = LiveRegistry(tmp_path_factory.mktemp("signed-registry"), trust_args=("--threshold", "targets=2"))
    live.start()
    publish(live, tmp_path_factory.mktemp("base"), "base-ext", "1.0.0")
    yield live
    live.stop()


def publish(registry: LiveRegistry, where: Path, name: str, version: str, **kw: object) -> None:
    source = write_extension(where / f"src-{name}-{version}", name, version, **kw)  # type: ignore[arg-type]
    registry.manage("publish", str(source))


def create(capsys: Capsys, url: str, home: Path, infra: Path, name: str, *extra: str) -> Result:
    return run(capsys, "--registry", url, "--home", home, "taskserv", "create", name, "--infra", infra, *extra)


def one_line(text: str) -> str:
    return " ".join(text.split())


class Victim:
    """An infrastructure directory that already holds base-ext (so it has a lockfile), and a home."""

    def __init__(self, capsys: Capsys, url: str, tmp_path: Path) -> None:
        self.capsys, self.url = capsys, url
        self.home, self.infra = tmp_path / "home", tmp_path / "infra"
        result = create(capsys, url, self.home, self.infra, "base-ext")
        assert result.code == 0, result.err
        self.settle()

    def settle(self) -> None:
        """What the infrastructure directory holds now is what a refused command must leave."""
        self.lock = (self.infra / "extensions.lock").read_text()
        self.installed = self.names()

    def names(self) -> list[str]:
        return sorted(p.name for p in (self.infra / "extensions" / "taskservs").iterdir())

    def create(self, name: str, *extra: str) -> Result:
        return create(self.capsys, self.url, self.home, self.infra, name, *extra)

    def assert_refused(self, result: Result, *words: str) -> None:
        """Exit 1, the failure named on the error line, nothing installed, the lockfile untouched."""
        assert result.code == 1, (result.out, result.err)
        errors = result.err.split("error: ")[1:]
        assert len(errors) == 1, result.err
        message = one_line(errors[0])
        assert "nothing was installed" in message
        for word in words:
            assert word in message, message
        assert (self.infra / "extensions.lock").read_text() == self.lock
        assert self.names() == self.installed


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _metadata(url: str, name: str) -> Metadata:  # type: ignore[type-arg]
    return Metadata.from_bytes(httpx.get(f"{url}/tuf/metadata/{name}", timeout=30).content)


# --- attacks ------------------------------------------------------------------------------------------


def _swapper(registry: LiveRegistry, tmp_path: Path, name: str) -> Callable[[Exchange], Exchange]:
    """A proxy rewrite that serves another package as NAME 1.0.0, with every sha256 and size
    rewritten to match it (the index document, the API's answers, the download's headers)."""
    publish(registry, tmp_path, name, "1.0.0")
    real = httpx.get(f"{registry.url}/api/v1/index/{name}", timeout=30).json()["data"]["versions"][0]
    evil_path = package(tmp_path / "evil", name, "1.0.0", extra_files={"kcl/evil.k": "x = 1\n"})
    evil = evil_path.read_bytes()
    evil_sha = _sha256(evil)

    def swap(exchange: Exchange) -> Exchange:
        if real["sha256"].encode() not in exchange.body and not exchange.path.endswith("/download"):
            return exchange
        if exchange.path.endswith(f"/{name}/versions/1.0.0/download") and exchange.status == 200:
            headers = tuple((k, evil_sha if k.lower() == "x-checksum-sha256" else v) for k, v in exchange.headers
                            if k.lower() != "etag")  # fmt: skip
            return Exchange(exchange.method, exchange.path, 200, headers, evil)
        body = exchange.body.replace(real["sha256"].encode(), evil_sha.encode())
        body = body.replace(f'"size":{real["size"]}'.encode(), f'"size":{len(evil)}'.encode())
        body = body.replace(f'"size": {real["size"]}'.encode(), f'"size": {len(evil)}'.encode())
        return exchange.with_body(body)

    return swap


def test_a_swapped_package_with_every_sha256_rewritten_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    swap = _swapper(registry, tmp_path, "swap-me")
    with TamperingProxy(registry.url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        proxy.rewrite = swap
        unverified = create(capsys, proxy.url, tmp_path / "h0", tmp_path / "i0", "swap-me", "--no-verify")
        assert unverified.code == 0, unverified.err  # the attack works on a client that does not verify
        assert "--no-verify" in unverified.err
        assert (tmp_path / "i0" / "extensions" / "taskservs" / "swap-me" / "kcl" / "evil.k").exists()
        victim.assert_refused(victim.create("swap-me"), "mismatch", "swap-me")


def test_a_lookup_answer_naming_another_extension_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    """The lookup (which extension is `taskserv NAME`) is the registry's word only: an answer
    altered to name another signed extension must not install that one as NAME."""
    publish(registry, tmp_path, "wanted", "1.0.0")
    publish(registry, tmp_path, "planted", "1.0.0")
    with TamperingProxy(registry.url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        proxy.rewrite = lambda ex: (
            ex.replace_body(b'"name":"wanted"', b'"name":"planted"')
            if ex.path.startswith("/api/v1/extensions/taskserv/wanted")
            else ex
        )
        victim.assert_refused(victim.create("wanted"), "the registry answered planted for taskserv 'wanted'")
        proxy.rewrite = None
        assert victim.create("wanted").code == 0  # the true answer installs


def test_the_library_verifies_by_default_too(
    registry: LiveRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 5's ExtensionManager with a RegistryClient made as its docstring makes it (no trust
    options): the root is pinned under PROVISIONING_HOME, as the CLI pins it, and the swap is refused."""
    from clients.registry_client import RegistryClient
    from clients.runtime import ExtensionManager, LoadPolicy

    swap = _swapper(registry, tmp_path, "swap-lib")
    monkeypatch.setenv("PROVISIONING_HOME", str(tmp_path / "cli-home"))

    def load(home: Path, **client_options: bool) -> None:
        with RegistryClient(proxy.url, cache_dir=home / "cache", **client_options) as client:
            manager = ExtensionManager(
                home=home,
                client=client,
                runtime_version=None,
                search_paths=[],
                policy=LoadPolicy(),
                check_nushell=False,
            )
            manager.load_extension("taskserv", "swap-lib")

    with TamperingProxy(registry.url) as proxy:
        load(tmp_path / "first")  # untampered: pins the root on first contact
        assert list((tmp_path / "cli-home" / "trust").iterdir()), "the root was not pinned under PROVISIONING_HOME"
        proxy.rewrite = swap
        with pytest.raises(ClientError) as refused:
            load(tmp_path / "victim")
        assert "mismatch" in refused.value.message and "swap-lib" in refused.value.message
        assert not list((tmp_path / "victim" / "store").glob("trees/*/swap-lib")), "a tampered package was unpacked"
        load(tmp_path / "unverified", verify=False)  # the attack works on a client that does not verify
        [tree] = (tmp_path / "unverified" / "store" / "trees").glob("*/swap-lib/1.0.0")
        assert (tree / "kcl" / "evil.k").exists()


def test_older_metadata_and_an_older_index_document_replayed_are_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    publish(registry, tmp_path, "roll", "1.0.0")
    with TamperingProxy(registry.url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        assert victim.create("roll").code == 0
        old = proxy.recording()
        publish(registry, tmp_path, "roll", "1.1.0")
        assert victim.create("roll").code == 0  # the client has now seen the newer metadata
        victim.settle()
        assert '"roll"' in victim.lock or "roll" in victim.lock

        # The older timestamp (and what it names) replayed.
        proxy.replay = {path: ex for path, ex in old.items() if path.startswith("/tuf/metadata/")}
        result = victim.create("roll", "--version", "1.1.0")
        assert result.code == 1
        assert "rollback" in one_line(result.err) and "timestamp" in one_line(result.err)

        # The older index document served for the newer one (the cached copy gone).
        proxy.replay = {}
        document = httpx.get(f"{registry.url}/api/v1/index/roll", timeout=30)
        newer = f"/tuf/targets/index/{_sha256(canonical(document))}.roll.json"
        older = next(
            ex for path, ex in old.items() if re.fullmatch(r"/tuf/targets/index/[0-9a-f]{64}\.roll\.json", path)
        )
        proxy.replay = {newer: Exchange("GET", newer, 200, older.headers, older.body)}
        for cached in (victim.home / "cache" / "index").rglob("roll.json"):
            cached.unlink()
        infra_before = sorted(p.name for p in (victim.infra / "extensions" / "taskservs").iterdir())
        result = victim.create("roll", "--version", "1.1.0")
        assert result.code == 1
        assert "hash or length mismatch" in one_line(result.err)
        assert (victim.infra / "extensions.lock").read_text() == victim.lock
        assert sorted(p.name for p in (victim.infra / "extensions" / "taskservs").iterdir()) == infra_before


def canonical(response: httpx.Response) -> bytes:
    data = response.json()["data"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_metadata_mixed_from_two_points_in_time_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    publish(registry, tmp_path, "mix", "1.0.0")
    with TamperingProxy(registry.url) as proxy:
        first = Victim(capsys, proxy.url, tmp_path / "first")
        assert first.create("mix").code == 0
        old = {
            match[1]: ex
            for path, ex in proxy.recording().items()
            if (match := re.fullmatch(r"/tuf/metadata/[0-9]+\.(bin-[0-9a-f]+|snapshot)\.json", path))
        }
        publish(registry, tmp_path, "mix", "1.1.0")

        def mix(exchange: Exchange) -> Exchange:
            match = re.fullmatch(r"/tuf/metadata/[0-9]+\.(bin-[0-9a-f]+)\.json", exchange.path)
            if match and match[1] in old and exchange.body != old[match[1]].body:
                return exchange.with_body(old[match[1]].body)  # this bin as it was, under the new name
            return exchange

        proxy.rewrite = mix
        victim = Victim(capsys, proxy.url, tmp_path / "second")
        victim.assert_refused(victim.create("mix"), "mismatch")


def test_the_same_answers_replayed_after_the_timestamp_expired_are_refused(capsys: Capsys, tmp_path: Path) -> None:
    live = LiveRegistry(tmp_path / "registry", env={"REGISTRY_TUF_TIMESTAMP_EXPIRES": "3"})
    live.start()
    try:
        publish(live, tmp_path, "base-ext", "1.0.0")
        publish(live, tmp_path, "frozen", "1.0.0")
        with TamperingProxy(live.url) as proxy:
            victim = Victim(capsys, proxy.url, tmp_path)
            assert victim.create("frozen").code == 0
            victim.settle()
            recorded = proxy.recording()
            timestamp = Metadata[Timestamp].from_bytes(recorded["/tuf/metadata/timestamp.json"].body).signed
            proxy.replay = recorded  # the network now answers only what it answered then
            time.sleep(max(0.0, (timestamp.expires - datetime.now(UTC)).total_seconds()) + 1.0)
            result = victim.create("frozen")
            assert result.code == 1
            message = one_line(result.err)
            assert "expired metadata (freeze)" in message and "nothing was installed" in message
            assert (victim.infra / "extensions.lock").read_text() == victim.lock
            proxy.replay = {}
            assert victim.create("frozen").code == 0  # the registry itself re-signs in time
    finally:
        live.stop()


def test_a_target_the_signed_metadata_does_not_list_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    publish(registry, tmp_path, "realone", "1.0.0")
    with TamperingProxy(registry.url) as proxy:
        # A mirror that adds an extension of its own: every API answer about "ghost" is realone's, renamed.
        proxy.route = lambda path: path.replace("ghost", "realone")
        proxy.rewrite = lambda ex: ex.replace_body(b"realone", b"ghost") if "ghost" in ex.path else ex
        victim = Victim(capsys, proxy.url, tmp_path)
        result = victim.create("ghost")
        victim.assert_refused(result, "missing target", "'ghost'", "index/ghost.json")


def test_a_bad_signature_is_refused(capsys: Capsys, registry: LiveRegistry, tmp_path: Path) -> None:
    def tamper(exchange: Exchange) -> Exchange:
        if exchange.path != "/tuf/metadata/timestamp.json":
            return exchange
        data = json.loads(exchange.body)
        data["signed"]["expires"] = "2099-01-01T00:00:00Z"  # signed content changed, signature kept
        return exchange.with_body(json.dumps(data).encode())

    with TamperingProxy(registry.url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        publish(registry, tmp_path, "signed-one", "1.0.0")
        proxy.rewrite = tamper
        victim.assert_refused(victim.create("signed-one"), "bad signature", "timestamp")
        # The runtime loader verifies as installs do: nothing is loaded.
        loaded = run(capsys, "--registry", proxy.url, "--home", victim.home, "module", "load", "taskserv", "signed-one")
        assert loaded.code == 1 and "bad signature" in one_line(loaded.err)
        assert not (victim.home / "store" / "trees" / "taskserv" / "signed-one").exists()


def test_a_stolen_online_key_below_its_threshold_is_refused(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    """The attacker holds the snapshot and timestamp keys and one of the two targets keys: they sign
    a bin that lists their own index document; one targets signature is not enough."""
    publish(registry, tmp_path, "thr", "1.0.0")
    keys = registry.data_dir / "tuf-keys"
    stolen_targets = load_key(sorted((keys / "targets").glob("*.pem"))[0])
    snapshot_key = load_key(next((keys / "snapshot").glob("*.pem")))
    timestamp_key = load_key(next((keys / "timestamp").glob("*.pem")))
    url = registry.url
    timestamp = _metadata(url, "timestamp.json")
    snapshot = _metadata(url, f"{timestamp.signed.snapshot_meta.version}.snapshot.json")
    targets = _metadata(url, f"{snapshot.signed.meta['targets.json'].version}.targets.json")
    bin_name = targets.signed.delegations.succinct_roles.get_role_for_target("index/thr.json")
    bin_md = _metadata(url, f"{snapshot.signed.meta[f'{bin_name}.json'].version}.{bin_name}.json")
    evil_sha = "e" * 64
    document = canonical(httpx.get(f"{url}/api/v1/index/thr", timeout=30))
    real_sha = json.loads(document)["versions"][0]["sha256"]
    evil_document = document.replace(real_sha.encode(), evil_sha.encode())

    def signed(md: Metadata, *signers: CryptoSigner) -> bytes:  # type: ignore[type-arg]
        md.signed.version += 1
        md.signatures.clear()
        for signer in signers:
            md.sign(signer, append=True)
        return md.to_bytes(_SERIALIZER)

    bin_md.signed.targets["index/thr.json"] = TargetFile.from_data("index/thr.json", evil_document, ["sha256"])
    bin_data = signed(bin_md, stolen_targets)
    snapshot.signed.meta[f"{bin_name}.json"] = MetaFile(
        bin_md.signed.version, len(bin_data), {"sha256": _sha256(bin_data)}
    )
    snapshot_data = signed(snapshot, snapshot_key)
    timestamp.signed.snapshot_meta = MetaFile(
        snapshot.signed.version, len(snapshot_data), {"sha256": _sha256(snapshot_data)}
    )
    timestamp_data = signed(timestamp, timestamp_key)
    forged = {
        "/tuf/metadata/timestamp.json": timestamp_data,
        f"/tuf/metadata/{snapshot.signed.version}.snapshot.json": snapshot_data,
        f"/tuf/metadata/{bin_md.signed.version}.{bin_name}.json": bin_data,
        f"/tuf/targets/index/{_sha256(evil_document)}.thr.json": evil_document,
    }
    with TamperingProxy(url) as proxy:
        victim = Victim(capsys, proxy.url, tmp_path)
        proxy.replay = {
            p: Exchange("GET", p, 200, (("Content-Type", "application/json"),), b) for p, b in forged.items()
        }
        victim.assert_refused(victim.create("thr"), "threshold not met", f"{bin_name} was signed by 1/2 keys")


def test_the_client_follows_a_root_rotation_and_refuses_a_forged_root(capsys: Capsys, tmp_path: Path) -> None:
    live = LiveRegistry(tmp_path / "registry")
    live.start()
    try:
        publish(live, tmp_path, "base-ext", "1.0.0")
        publish(live, tmp_path, "rot", "1.0.0")
        with TamperingProxy(live.url) as proxy:
            victim = Victim(capsys, proxy.url, tmp_path)
            pinned = run(capsys, "--registry", proxy.url, "--home", victim.home, "trust", "show", "--output", "json")
            fingerprint = pinned.json()["data"]["fingerprint"]
            assert victim.create("rot").code == 0
            live.manage("trust", "rotate", "root")
            live.manage("trust", "rotate", "timestamp")
            publish(live, tmp_path, "rot", "1.1.0")
            followed = victim.create("rot")
            assert followed.code == 0, followed.err
            assert not followed.notice  # no new trust on first use
            shown = run(capsys, "--registry", proxy.url, "--home", victim.home, "trust", "show", "--output", "json")
            data = shown.json()["data"]
            assert data["trusted_root_version"] == 3 and data["fingerprint"] == fingerprint
            victim.settle()

            # An attacker's next root, signed only by a key of their own.
            current = Metadata[Root].from_bytes(httpx.get(f"{live.url}/tuf/metadata/3.root.json", timeout=30).content)
            attacker = CryptoSigner.generate_ed25519()
            root = current.signed
            for keyid in list(root.roles["root"].keyids):
                root.revoke_key(keyid, "root")
            root.add_key(attacker.public_key, "root")
            root.version = 4
            current.signatures.clear()
            current.sign(attacker)
            forged = current.to_bytes(_SERIALIZER)
            proxy.replay = {"/tuf/metadata/4.root.json": Exchange("GET", "/tuf/metadata/4.root.json", 200, (), forged)}
            publish(live, tmp_path, "rot-two", "1.0.0")
            victim.assert_refused(victim.create("rot-two"), "bad signature", "root")
    finally:
        live.stop()


def test_a_registry_without_signed_metadata_needs_no_verify(capsys: Capsys, tmp_path: Path) -> None:
    live = LiveRegistry(tmp_path / "registry", signed=False)
    live.start()
    try:
        publish(live, tmp_path, "plain", "1.0.0")
        home, infra = tmp_path / "home", tmp_path / "infra"
        refused = create(capsys, live.url, home, infra, "plain", "--output", "json")
        assert refused.code == 1
        error = refused.json()["error"]
        assert error["code"] == "verification_failed" and error["details"] == [{"reason": "no_metadata"}]
        assert "--no-verify" in error["message"] and not infra.exists()
        allowed = create(capsys, live.url, home, infra, "plain", "--no-verify")
        assert allowed.code == 0, allowed.err
        assert "warning: --no-verify" in one_line(allowed.err)
    finally:
        live.stop()


def test_trust_init_pins_a_root_given_by_the_operator_and_offline_sync_verifies_the_cache(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root_file = tmp_path / "1.root.json"
    root_file.write_bytes(httpx.get(f"{registry.url}/tuf/metadata/1.root.json", timeout=30).content)
    home, infra = tmp_path / "home", tmp_path / "infra"
    pinned = run(capsys, "--registry", registry.url, "--home", home, "trust", "init", "--root", root_file)
    assert pinned.code == 0 and "sha256:" + _sha256(root_file.read_bytes()) in pinned.out
    result = create(capsys, registry.url, home, infra, "base-ext")
    assert result.code == 0 and not result.notice  # pinned explicitly: no trust on first use
    shown = run(capsys, "--registry", registry.url, "--home", home, "trust", "show")
    assert shown.code == 0 and "pinned explicit" in one_line(shown.out)
    # Offline: the lockfile's sha256 and the cached signed metadata, verified without the network.
    synced = run(capsys, "--home", home, "extension", "sync", "--infra", infra, "--offline")
    assert synced.code == 0, synced.err
    lock = (infra / "extensions.lock").read_text()
    tampered = re.sub(r'sha256 = "[0-9a-f]{64}"', 'sha256 = "' + "0" * 64 + '"', lock)
    (infra / "extensions.lock").write_text(tampered)
    refused = run(capsys, "--home", home, "extension", "sync", "--infra", infra, "--offline")
    assert refused.code == 1 and "hash mismatch" in one_line(refused.err)
    # Another root for the same registry (an attacker's, self-signed) is refused without --force.
    attacker = CryptoSigner.generate_ed25519()
    root = Root()
    for role in ("root", "targets", "snapshot", "timestamp"):
        root.add_key(attacker.public_key, role)
    forged = Metadata(root)
    forged.sign(attacker)
    forged_file = tmp_path / "forged.root.json"
    forged_file.write_bytes(forged.to_bytes(_SERIALIZER))
    other = run(capsys, "--registry", registry.url, "--home", home, "trust", "init", "--root", forged_file)
    assert other.code == 1 and "--force" in one_line(other.err)
    monkeypatch.setenv("PROVISIONING_TRUST_ROOT", str(root_file))
    env_pinned = create(capsys, registry.url, tmp_path / "h3", tmp_path / "i3", "base-ext")
    assert env_pinned.code == 0 and not env_pinned.notice
    assert (
        json.loads(
            (tmp_path / "h3" / "trust")
            .joinpath(next(p.name for p in (tmp_path / "h3" / "trust").iterdir()), "pin.json")
            .read_text()
        )["how"]
        == "explicit"
    )


def test_first_use_prints_the_fingerprint_once(capsys: Capsys, registry: LiveRegistry, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = create(capsys, registry.url, home, tmp_path / "a", "base-ext")
    expected = "sha256:" + _sha256(httpx.get(f"{registry.url}/tuf/metadata/1.root.json", timeout=30).content)
    assert first.code == 0 and f"on first use: root fingerprint {expected}" in first.notice
    second = create(capsys, registry.url, home, tmp_path / "b", "base-ext")
    assert second.code == 0 and "fingerprint" not in second.err and not second.notice
