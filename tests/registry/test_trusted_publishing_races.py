"""Trusted publishing under concurrency, through a live registry (gunicorn, 2 workers of 4 threads)
on PostgreSQL, where nothing serialises writes by accident as SQLite does: one token exchanged at
once by many requests gives one publish token; two users reserving one name (or look-alikes) at
once leave it to one of them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_registry import LiveRegistry
from tests.oidc_issuer import Issuer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
CLAIMS = {"repository": "acme/kv-store", "workflow": "release"}


@pytest.fixture
def live(tmp_path: Path, postgres_server: Any) -> Iterator[tuple[LiveRegistry, Issuer]]:
    issuer = Issuer.start(4)
    registry = LiveRegistry(
        tmp_path / "registry",
        database_url=postgres_server.create_database("registry_oidc_races"),
        env={"REGISTRY_OIDC_ISSUERS": issuer.url, "REGISTRY_RATE_AUTH_FAILURE": "1000/minute"},
    )
    registry.start()
    try:
        yield registry, issuer
    finally:
        registry.stop()
        issuer.stop()


def at_once(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Run the calls in threads released together; their answers, in order."""
    barrier = threading.Barrier(len(calls))
    answers: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait(10)
        answers[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def register(registry: LiveRegistry, token: str, name: str, issuer: Issuer, claims: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{registry.url}/api/v1/extensions/{name}/trusted-publishers/",
        json={"issuer": issuer.url, "claims": claims},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def test_one_token_exchanged_by_many_requests_at_once_gives_one_publish_token(
    live: tuple[LiveRegistry, Issuer],
) -> None:
    registry, issuer = live
    alice = registry.createtoken("alice")
    assert register(registry, alice, "kvstore", issuer, CLAIMS).status_code == 201
    jwt = issuer.mint(audience=registry.url, **CLAIMS)
    url = f"{registry.url}/api/v1/trusted-publishing/exchange"
    answers = at_once([lambda: httpx.post(url, json={"token": jwt}, timeout=60) for _ in range(8)])
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] + [401] * 7, [a.json() for a in answers]
    assert all("already presented" in a.json()["error"]["message"] for a in answers if a.status_code == 401)


def test_two_users_reserving_one_name_at_once_leave_it_to_one(live: tuple[LiveRegistry, Issuer]) -> None:
    registry, issuer = live
    bob, carol = registry.createtoken("bob"), registry.createtoken("carol")
    calls = []
    for index in range(4):
        calls.append(lambda: register(registry, bob, "kvstore", issuer, {"repository": "bob/kv"}))
        name = "kvstore" if index % 2 else "kv-store"  # the same name and a look-alike
        calls.append(lambda name=name: register(registry, carol, name, issuer, {"repository": "carol/kv"}))
    answers = at_once(calls)
    winners = {a.json()["data"]["added_by"] for a in answers if a.status_code in (200, 201)}
    assert len(winners) == 1, [a.json() for a in answers]
    losers = [a for a in answers if a.status_code not in (200, 201)]
    assert losers and all(a.status_code == 409 for a in losers), [a.json() for a in losers]
    assert all(a.json()["error"]["code"] == "name_taken" for a in losers)
