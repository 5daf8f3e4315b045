"""The OpenAPI document tells the truth: schemathesis (``--checks all``: every status code, header,
content type and body documented; schema-valid requests accepted, invalid ones refused; auth not
ignored; 405 with Allow for undocumented methods) against a live gunicorn serving the bundled
examples, authenticated with a token. Bounded: a few dozen cases per operation and phase, a few
minutes at most. Run it alone with ``pytest -m conformance``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_registry import EXAMPLES, LiveRegistry
from tests.services import BASE_DIR

pytestmark = [pytest.mark.conformance, pytest.mark.slow]

HERE = Path(__file__).parent
PASSWORD = "conformance horse battery"
TIME_LIMIT = 420  # seconds: the run takes well under a minute on an idle machine
# Throttling is tested elsewhere (tests/registry/test_throttling.py); here it would only turn the
# later cases into 429s.
UNTHROTTLED = dict.fromkeys(
    ("REGISTRY_RATE_PUBLISH", "REGISTRY_RATE_AUTH_FAILURE", "REGISTRY_RATE_WRITE", "REGISTRY_RATE_RESOLVE"),
    "1000000/minute",
)


def test_the_registry_answers_as_its_openapi_document_says(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    database = None
    if request.config.getoption("postgres"):
        database = request.getfixturevalue("postgres_server").create_database("conformance")
    registry = LiveRegistry(tmp_path / "registry", database_url=database, env=UNTHROTTLED)
    request.addfinalizer(registry.stop)
    registry.start()
    registry.manage("publish", "--skip-existing", *EXAMPLES)
    registry.createtoken("alice")
    registry.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model as m; u = m().objects.get(username='alice'); "
        f"u.set_password({PASSWORD!r}); u.save()",
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(BASE_DIR),
        "SCHEMATHESIS_HOOKS": "tests.registry.schemathesis_hooks",
        "CONFORMANCE_REGISTRY_URL": registry.url,
        "CONFORMANCE_USERNAME": "alice",
        "CONFORMANCE_PASSWORD": PASSWORD,
    }
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file", str(HERE / "schemathesis.toml"),
        "run", f"{registry.url}/api/v1/openapi.json",
        "--checks", "all",
        "--workers", "1",  # (two threads can crash CPython 3.11: "AST constructor recursion depth mismatch")
        "--seed", "20261201",
        "--request-timeout", "60",
    ]  # fmt: skip
    try:
        # The working directory takes schemathesis's and hypothesis's caches.
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIME_LIMIT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"schemathesis did not finish within {TIME_LIMIT} s:\n{exc.stdout!s}"[-20000:])
    output = result.stdout + result.stderr
    (tmp_path / "schemathesis.txt").write_text(output)
    report = output[output.find("=== FAILURES") if "=== FAILURES" in output else 0 :]
    assert result.returncode == 0, report[:15000] + "\n...\n" + output[-3000:]
    assert " 0 unique failures" in output or "No issues found" in output or "passed" in output, output[-5000:]
