"""registry.serverenv: the process's environment, which granian copies into every request's
environ, is taken out before the registry answers; a request's own values stay."""

from __future__ import annotations

import os
from typing import Any

import pytest

from registry.serverenv import without_server_environment


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret and two variables named like headers in the process's environment."""
    monkeypatch.setenv("DATABASE_URL", "postgres://registry:s3cret@db/registry")
    monkeypatch.setenv("HTTP_X_FORWARDED_FOR", "10.9.9.9")
    monkeypatch.setenv("HTTP_AUTHORIZATION", "Bearer from-the-environment")


def _seen(environ: dict[str, Any]) -> dict[str, Any]:
    """The environ the registry's application gets."""
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(environ)
        return []

    without_server_environment(app)(environ, lambda *a: None)
    return seen


@pytest.mark.usefixtures("environment")
def test_under_granian_the_process_environment_is_not_part_of_a_request() -> None:
    copied = dict(os.environ) | {
        "SERVER_SOFTWARE": "Granian",
        "PATH_INFO": "/api/v1/index/redis",
        "HTTP_AUTHORIZATION": "Bearer the-clients-own",
    }
    seen = _seen(copied)
    assert "DATABASE_URL" not in seen and "HTTP_X_FORWARDED_FOR" not in seen
    assert seen["HTTP_AUTHORIZATION"] == "Bearer the-clients-own"  # what the client sent stays
    assert seen["PATH_INFO"] == "/api/v1/index/redis"
    assert (set(os.environ) - {"HTTP_AUTHORIZATION"}) & set(seen) == set()


@pytest.mark.usefixtures("environment")
def test_other_servers_environ_is_left_as_it_is() -> None:
    environ = {"SERVER_SOFTWARE": "gunicorn/27.0.1", "HTTP_X_FORWARDED_FOR": "10.9.9.9", "PATH_INFO": "/"}
    assert _seen(dict(environ)) == environ
