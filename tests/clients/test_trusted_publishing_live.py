"""Trusted publishing end to end: a live registry (migrate + gunicorn) that trusts an OIDC issuer
on loopback (tests/oidc_issuer.py), and the CLI as a user and a CI job run it: the owner reserves
a new name with a pending trusted publisher, then a job with no registry token at all publishes
with its OIDC token (``--oidc-token FILE``, then ``PROVISIONING_OIDC_TOKEN``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.clients.client_tools import Result, run
from tests.clients.test_publishing_live import build
from tests.oidc_issuer import Issuer

if TYPE_CHECKING:
    from tests.live_registry import LiveRegistry

Capsys = pytest.CaptureFixture[str]
CLAIMS = {"repository": "acme/kv-store", "workflow": "release", "ref": "refs/heads/main"}


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    started = Issuer.start(3)
    yield started
    started.stop()


@pytest.fixture
def registry(tmp_path: Path, issuer: Issuer) -> Iterator[LiveRegistry]:
    from tests.live_registry import LiveRegistry

    live = LiveRegistry(tmp_path / "registry", env={"REGISTRY_OIDC_ISSUERS": issuer.url})
    live.start()
    yield live
    live.stop()


def cli(capsys: Capsys, registry: LiveRegistry, home: Path, *argv: str | Path) -> Result:
    return run(capsys, "--registry", registry.url, "--home", home, *argv)


def test_a_ci_job_publishes_a_new_extension_with_nothing_but_its_oidc_token(
    capsys: Capsys, registry: LiveRegistry, issuer: Issuer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROVISIONING_TOKEN", raising=False)
    monkeypatch.delenv("PROVISIONING_OIDC_TOKEN", raising=False)
    home = tmp_path / "home"
    alice = registry.createtoken("alice")
    claims = [arg for name, value in CLAIMS.items() for arg in ("--claim", f"{name}={value}")]

    # The owner-to-be reserves the name with a pending trusted publisher.
    added = cli(capsys, registry, home, "--token", alice, "extension", "trusted-publishers", "add", "kvstore",
                "--issuer", issuer.url, *claims)  # fmt: skip
    assert added.code == 0, added.err
    assert "pending trusted publisher 1 of kvstore" in added.out
    assert f"tokens must have the audience {registry.url}" in added.out
    assert "kvstore is reserved for you until" in added.out

    # The CI job: no registry token, only the OIDC token its provider issued (audience: the registry).
    package = build(capsys, tmp_path / "v1", "kvstore", "0.1.0")
    jwt_file = tmp_path / "oidc-token"
    first = issuer.mint(audience=registry.url, **CLAIMS)
    jwt_file.write_text(first + "\n", encoding="utf-8")
    published = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", jwt_file, "--wait")
    assert published.code == 0, published.err
    assert "trusted publishing: publishing kvstore as alice (a token scoped publish:kvstore, until " in published.out
    assert published.out.splitlines()[-1] == "published kvstore 0.1.0"
    detail = httpx.get(f"{registry.url}/api/v1/extensions/kvstore/", timeout=30).json()["data"]
    assert detail["owners"] == ["alice"]  # the first publish created it, owned by who reserved it

    listed = cli(capsys, registry, home, "--token", alice, "extension", "trusted-publishers", "list", "kvstore")
    assert listed.code == 0, listed.err
    assert "repository=acme/kv-store" in listed.out and "active" in listed.out and "pending" not in listed.out

    # The token in the environment works the same; the short-lived token is nowhere on disk.
    monkeypatch.setenv("PROVISIONING_OIDC_TOKEN", issuer.mint(audience=registry.url, **CLAIMS))
    package = build(capsys, tmp_path / "v2", "kvstore", "0.2.0")
    assert cli(capsys, registry, home, "extension", "publish", package, "--wait").code == 0
    assert not home.exists() or all("pvr_" not in p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())
    monkeypatch.delenv("PROVISIONING_OIDC_TOKEN")

    # A token is exchanged once; another repository's token gets nothing; each says why.
    package = build(capsys, tmp_path / "v3", "kvstore", "0.3.0")
    replayed = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", jwt_file)
    assert replayed.code == 1
    assert "already presented" in replayed.err and "Traceback" not in replayed.err
    jwt_file.write_text(issuer.mint(audience=registry.url, **{**CLAIMS, "repository": "mallory/kv-store"}))
    stranger = cli(
        capsys, registry, home, "--output", "json", "extension", "publish", package, "--oidc-token", jwt_file
    )
    assert stranger.code == 1
    error = stranger.json()["error"]
    assert error["code"] == "forbidden" and "no trusted publisher of 'kvstore' matches this token" in error["message"]
    assert "repository='mallory/kv-store'" in error["message"]
    versions = httpx.get(f"{registry.url}/api/v1/extensions/kvstore/", timeout=30).json()["data"]["versions"]
    assert sorted(v["version"] for v in versions) == ["0.1.0", "0.2.0"]

    # The owner removes the publisher: the job's next token is refused.
    removed = cli(capsys, registry, home, "--token", alice, "extension", "trusted-publishers", "remove", "kvstore", "1")
    assert removed.code == 0, removed.err
    assert "removed trusted publisher 1 of kvstore" in removed.out
    jwt_file.write_text(issuer.mint(audience=registry.url, **CLAIMS))
    after = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", jwt_file)
    assert after.code == 1 and "no trusted publisher of 'kvstore' matches this token" in after.err


def test_bad_oidc_token_files_and_options_are_usage_errors(
    capsys: Capsys, registry: LiveRegistry, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    package = tmp_path / "kvstore-0.1.0.tar.gz"
    package.write_bytes(b"not used")
    missing = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", tmp_path / "nope")
    assert missing.code == 2 and "cannot read the OIDC token file" in missing.err
    (tmp_path / "empty").write_text("\n")
    empty = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", tmp_path / "empty")
    assert empty.code == 2 and "is empty" in empty.err
    (tmp_path / "junk").write_text("hello world")
    junk = cli(capsys, registry, home, "extension", "publish", package, "--oidc-token", tmp_path / "junk")
    assert junk.code == 2 and "does not hold a JWT" in junk.err
    no_claim = cli(capsys, registry, home, "extension", "trusted-publishers", "add", "x", "--issuer", "https://i")
    assert no_claim.code == 2 and "--claim NAME=VALUE" in no_claim.err
    bad_claim = cli(
        capsys, registry, home, "extension", "trusted-publishers", "add", "x", "--issuer", "https://i", "--claim", "x"
    )
    assert bad_claim.code == 2 and "is not NAME=VALUE" in bad_claim.err
    no_id = cli(capsys, registry, home, "extension", "trusted-publishers", "remove", "x")
    assert no_id.code == 2 and "needs its ID" in no_id.err
    anonymous = cli(capsys, registry, home, "extension", "trusted-publishers", "list", "x")
    assert anonymous.code == 1 and "needs an API token" in anonymous.err
