"""The signed index's keys: Ed25519 private keys in PEM (PKCS#8) files, one per key.

- The root key is written apart (``--root-key-dir``, default ``REGISTRY_DATA_DIR/tuf-root/``) and
  should then be moved offline: it is needed only to sign a new root (``trust rotate``).
- The online keys (targets, which also signs the hashed bins; snapshot; timestamp) live under
  ``REGISTRY_TUF_KEYS_DIR/{role}/{keyid}.pem`` (mode 0600), on every machine that publishes.

A role is signed with every key file of its directory whose key id the current root lists."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from securesystemslib.signer import CryptoSigner, Key, SSlibKey

ONLINE_ROLES = ("targets", "snapshot", "timestamp")
ROLES = ("root", *ONLINE_ROLES)


class KeyProblem(Exception):
    """A key file that is missing, unreadable or not the key it should be."""


def keys_dir() -> Path:
    return Path(settings.REGISTRY_TUF_KEYS_DIR)


def default_root_key_dir() -> Path:
    return Path(settings.REGISTRY_DATA_DIR) / "tuf-root"


def generate() -> CryptoSigner:
    return CryptoSigner.generate_ed25519()


def write_key(signer: CryptoSigner, path: Path) -> Path:
    """Write the private key to a new file that only its owner can read (never over a file)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(signer.private_bytes)
    return path


def write_online_key(role: str, signer: CryptoSigner) -> Path:
    return write_key(signer, keys_dir() / role / f"{signer.public_key.keyid}.pem")


def load_key(path: Path) -> CryptoSigner:
    try:
        private = load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise KeyProblem(f"cannot read the key {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise KeyProblem(f"{path} is not an unencrypted PEM private key: {exc}") from None
    try:
        return CryptoSigner(private)
    except ValueError as exc:
        raise KeyProblem(f"{path} is not an Ed25519 key: {exc}") from None


_cache: dict[tuple[str, tuple[str, ...]], list[CryptoSigner]] = {}


def online_signers(role: str, keyids: list[str]) -> list[CryptoSigner]:
    """The signers of an online role for the key ids the root lists (cached per process, so a key
    rotation, which changes the key ids, is picked up by the next signature)."""
    cache_key = (role, tuple(sorted(keyids)))
    if cache_key in _cache:
        return _cache[cache_key]
    folder = keys_dir() / role
    signers = []
    for keyid in sorted(keyids):
        path = folder / f"{keyid}.pem"
        if path.exists():
            signer = load_key(path)
            if signer.public_key.keyid != keyid:
                raise KeyProblem(f"{path} holds the key {signer.public_key.keyid}, not {keyid}")
            signers.append(signer)
    if not signers:
        raise KeyProblem(
            f"no key of the {role} role is under {folder} (the root lists {', '.join(sorted(keyids))}): "
            "copy the online keys to every machine that publishes (REGISTRY_TUF_KEYS_DIR)"
        )
    _cache[cache_key] = signers
    return signers


def root_signers(paths: list[Path], keyids: list[str]) -> list[CryptoSigner]:
    """The given root key files that hold keys the root lists (others are ignored)."""
    found = []
    for path in paths:
        signer = load_key(path)
        if signer.public_key.keyid in keyids:
            found.append(signer)
    return found


def public(signer: CryptoSigner) -> Key:
    key: SSlibKey = signer.public_key
    return key
