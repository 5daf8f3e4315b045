"""Settings come from the environment through typed helpers; bad values stop start-up with one
clear line, and a secret key is generated on first start and kept with mode 0600."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from registry import env

ROOT = Path(__file__).resolve().parents[2]


def manage(tmp_path: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "DJANGO_", "DATABASE_URL"))}
    clean.update({"REGISTRY_DATA_DIR": str(tmp_path / "data"), "DJANGO_SETTINGS_MODULE": "registry.settings"})
    clean.update(environ)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_a_nonsense_database_url_stops_start_up_with_one_clear_line(tmp_path: Path) -> None:
    proc = manage(tmp_path, "check", DATABASE_URL="nonsense")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "DATABASE_URL='nonsense' is not a database URL" in lines[0]
    assert "postgres://" in lines[0] and "sqlite:///" in lines[0]


def test_a_database_url_error_never_shows_the_password(tmp_path: Path) -> None:
    proc = manage(tmp_path, "check", DATABASE_URL="mysql://bob:hunter2@db/registry")
    assert proc.returncode == 2
    assert "hunter2" not in proc.stderr
    assert "***" in proc.stderr


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("REGISTRY_MAX_PACKAGE_BYTES", "fifty", "is not a size"),
        ("REGISTRY_MAX_MEMBERS", "many", "is not a whole number"),
        ("REGISTRY_MAX_MEMBERS", "0", "must be at least 1"),
        ("REGISTRY_RATE_PUBLISH", "lots", "is not a rate"),
        ("REGISTRY_STORAGE", "ftp", "use one of files, s3"),
        ("DJANGO_DEBUG", "maybe", "is not a boolean"),
        ("REGISTRY_RESOLVE_TIMEOUT", "soon", "is not a number of seconds"),
        ("REGISTRY_RESOLVE_TIMEOUT", "0", "use 0.05 to 60 seconds"),
        ("REGISTRY_RESOLVE_TIMEOUT", "nan", "use 0.05 to 60 seconds"),
        ("REGISTRY_SANDBOX", "docker", "use one of process, off"),
        ("REGISTRY_SANDBOX_CPU_SECONDS", "0", "must be at least 1"),
        ("REGISTRY_SANDBOX_README_CPU_SECONDS", "lots", "is not a whole number"),
        ("REGISTRY_SANDBOX_MEMORY", "64MiB", "must be at least 134217728 bytes"),
        ("REGISTRY_SANDBOX_WALL_SECONDS", "1", "must be at least 5"),
        ("REGISTRY_SANDBOX_OUTPUT", "1KiB", "must be at least 65536 bytes"),
        ("REGISTRY_SANDBOX_OPEN_FILES", "8", "must be at least 32"),
        ("REGISTRY_SANDBOX_ISOLATE_NETWORK", "perhaps", "is not a boolean"),
        ("REGISTRY_MAX_PROVIDES", "0", "must be at least 1"),
        ("REGISTRY_MAX_BUILD_PATTERN_WILDCARDS", "none", "is not a whole number"),
        ("REGISTRY_HOUSEKEEPING", "sometimes", "is not a boolean"),
    ],
)
def test_bad_values_stop_start_up(tmp_path: Path, name: str, value: str, needle: str) -> None:
    proc = manage(tmp_path, "check", **{name: value})
    assert proc.returncode == 2
    assert name in proc.stderr and needle in proc.stderr


def test_a_secret_key_is_generated_once_and_kept_private(tmp_path: Path) -> None:
    assert manage(tmp_path, "check").returncode == 0
    key_file = tmp_path / "data" / "secret_key"
    first = key_file.read_text()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(first.strip()) >= 50
    assert manage(tmp_path, "check").returncode == 0
    assert key_file.read_text() == first


def test_a_configured_secret_key_is_used_and_nothing_is_written(tmp_path: Path) -> None:
    assert manage(tmp_path, "check", DJANGO_SECRET_KEY="x" * 40).returncode == 0
    assert not (tmp_path / "data" / "secret_key").exists()


def test_a_short_configured_secret_key_is_refused(tmp_path: Path) -> None:
    proc = manage(tmp_path, "check", DJANGO_SECRET_KEY="short")
    assert proc.returncode == 2
    assert "too short" in proc.stderr


def test_size_helper_reads_units(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, expected in [("52428800", 52428800), ("50MiB", 50 * 1024**2), ("64KiB", 65536), ("1GB", 10**9)]:
        monkeypatch.setenv("X_SIZE", raw)
        assert env.env_size("X_SIZE", 1) == expected
    monkeypatch.setenv("X_SIZE", "0")
    with pytest.raises(ImproperlyConfigured, match="greater than zero"):
        env.env_size("X_SIZE", 1)


def test_postgres_urls_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_DB", "postgres://reg:pw@db.internal:5433/registry")
    config = env.database_from_url("X_DB", "sqlite:///x")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["PORT"], config["NAME"]) == ("db.internal", 5433, "registry")
    monkeypatch.setenv("X_DB", "postgres://reg:pw@db.internal:5433/")
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        env.database_from_url("X_DB", "sqlite:///x")


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("LOG_LEVEL", "LOUD", "use one of debug, info, warning, error, critical"),
        ("CACHE_URL", "foo://x", "use redis://, rediss://, unix://"),
        ("CELERY_BROKER_URL", "nope", "use redis://"),
        ("CELERY_BROKER_URL", "redis://:hunter2@h:6379/0x", None),  # a well-formed URL passes
        ("REGISTRY_PUBLIC_URL", "notaurl", "use http(s)://HOST[:PORT][/PATH]"),
        ("REGISTRY_PUBLIC_URL", "ftp://registry.example.com", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com:port", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com/?a=1", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com/mirror/", None),
        ("REGISTRY_PUBLIC_URL", "https://exa mple.com", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com%2f", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com:", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "https://registry.example.com:0", "is not a base URL"),
        ("REGISTRY_PUBLIC_URL", "http://[::1]:8000", None),
        ("REGISTRY_PUBLIC_URL", "http://registry:8000", None),
    ],
)
def test_urls_and_log_levels_are_checked_at_start_up(tmp_path: Path, name: str, value: str, needle: str | None) -> None:
    proc = manage(tmp_path, "check", **{name: value})
    if needle is None:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert name in proc.stderr and needle in proc.stderr


def test_an_unusable_data_dir_stops_start_up_with_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for value, needle in [(str(a_file), "is not a directory"), ("/proc/nope/deeper", "cannot be used")]:
        proc = manage(tmp_path, "check", REGISTRY_DATA_DIR=value)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "REGISTRY_DATA_DIR" in proc.stderr and needle in proc.stderr


def test_an_empty_key_file_left_by_a_crash_is_replaced(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "secret_key").write_text("")
    assert manage(tmp_path, "check").returncode == 0
    key = (data / "secret_key").read_text().strip()
    assert len(key) >= 50
    assert manage(tmp_path, "check").returncode == 0
    assert (data / "secret_key").read_text().strip() == key
    assert [p.name for p in data.iterdir() if p.name.startswith(".secret_key")] == []


def test_the_embedded_broker_is_described_without_a_kombu_warning(tmp_path: Path) -> None:
    """In embedded mode nothing is sent, but the connection is described (health, reaper...):
    kombu warns "No hostname was supplied" for a broker URL without a host."""
    code = (
        "import logging; logging.basicConfig(); from django.conf import settings; from kombu import Connection; "
        "Connection(settings.CELERY_BROKER_URL).info(); print(settings.CELERY_BROKER_URL)"
    )
    proc = manage(tmp_path, "shell", "-c", code, REGISTRY_DATA_DIR=str(tmp_path / "data"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("memory://")
    assert "kombu" not in proc.stderr and "No hostname" not in proc.stderr


def test_make_run_on_a_busy_port_says_so_in_one_line_and_changes_nothing(tmp_path: Path) -> None:
    import shutil
    import socket

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            ["make", "-s", "port-free", f"PORT={port}"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
    assert proc.returncode != 0
    first = proc.stderr.splitlines()[0]
    assert first == (
        f"port {port} on 127.0.0.1 is in use (another registry?): stop it, or run make run PORT=8001; "
        "nothing was changed"
    )
    free = subprocess.run(["make", "-s", "port-free", f"PORT={port}"], cwd=ROOT, capture_output=True, text=True)
    assert free.returncode == 0, free.stderr
    rule = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("run:"))
    prerequisites = rule.split(":", 1)[1].split()
    assert prerequisites[0] == "port-free"  # before anything is installed, and before the data is touched
