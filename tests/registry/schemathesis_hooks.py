"""Schemathesis hooks for tests/registry/test_openapi_conformance.py (SCHEMATHESIS_HOOKS names
this module; it runs inside the schemathesis process, not pytest's).

Authentication: a fresh token created with the user's password (HTTP Basic), so that the run may
revoke tokens (the token endpoints are tested too) and carry on: a 401 makes schemathesis fetch a
new one. The registry's URL and the user's credentials come from the environment."""

from __future__ import annotations

import os
from typing import Any

import httpx
import schemathesis

URL = os.environ["CONFORMANCE_REGISTRY_URL"]
USERNAME = os.environ["CONFORMANCE_USERNAME"]
PASSWORD = os.environ["CONFORMANCE_PASSWORD"]


@schemathesis.auth(refresh_interval=3600)  # refetched at once after a 401 (a revoked token)
class FreshToken:
    def get(self, case: Any, context: Any) -> str:
        response = httpx.post(
            f"{URL}/api/v1/tokens/", json={"name": "conformance"}, auth=(USERNAME, PASSWORD), timeout=30
        )
        response.raise_for_status()
        return str(response.json()["data"]["token"])

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"
