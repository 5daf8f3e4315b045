"""GET /api/v1/extensions/: search and browse, ranking, filters, pagination and its bounds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client

from registry import downloadcounts

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures

URL = "/api/v1/extensions/"


def search(client: Client, query: str = "", status: int = 200) -> Any:
    response = client.get(f"{URL}?{query}" if query else URL)
    assert response.status_code == status, response.content
    body = response.json()
    return body["data"] if status == 200 else body["error"]


def names(client: Client, query: str = "") -> list[str]:
    return [item["name"] for item in search(client, query)["items"]]


def test_each_item_carries_the_platforms_registry_fields(client: Client, publisher: Publisher) -> None:
    build = publisher("etcd", "3.5.9", keywords=("kv", "raft"), description="Distributed key-value store")
    got = search(client)
    assert (got["total"], got["limit"], got["offset"]) == (1, 20, 0)
    [item] = got["items"]
    assert item["published_at"]
    del item["published_at"]
    sha = build["upload"]["sha256"]
    assert item == {
        "name": "etcd",
        "type": "taskserv",
        "version": "3.5.9",
        "description": "Distributed key-value store",
        "author": "Test Author <test@example.com>",
        "repository": "https://example.com/etcd",
        "source": "registry",
        "download_url": "http://testserver/api/v1/extensions/etcd/versions/3.5.9/download",
        "checksum": f"sha256:{sha}",
        "size": build["upload"]["size"],
        "tags": ["kv", "raft"],
        "downloads": 0,
    }


def test_browsing_lists_everything_by_name(client: Client, publisher: Publisher) -> None:
    for name in ("zookeeper", "etcd", "kubernetes"):
        publisher(name, "1.0.0")
    assert names(client) == ["etcd", "kubernetes", "zookeeper"]
    assert search(client)["total"] == 3


def test_search_ranks_exact_name_then_prefix_then_substring_then_keyword_then_description(
    client: Client, publisher: Publisher
) -> None:
    publisher("flannel", "1.0.0", description="Overlay network that stores its state in etcd")
    publisher("coredns", "1.0.0", keywords=("dns", "etcd"))
    publisher("kube-etcd", "1.0.0")
    publisher("etcd-operator", "1.0.0")
    publisher("etcd", "1.0.0")
    publisher("redis", "1.0.0", keywords=("etcd-like",))  # part of a keyword: the last rank
    publisher("zookeeper", "1.0.0")  # no match at all
    assert names(client, "q=etcd") == ["etcd", "etcd-operator", "kube-etcd", "coredns", "flannel", "redis"]
    assert search(client, "q=etcd")["total"] == 6


def test_search_is_case_insensitive_and_trims_the_query(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "1.0.0", description="Distributed Key-Value store")
    publisher("redis", "1.0.0", description="In-memory store")
    assert names(client, "q=ETCD") == ["etcd"]
    assert names(client, "q=key-value") == ["etcd"]
    assert names(client, "q=+%20Store%20") == ["etcd", "redis"]


def test_within_a_rank_the_most_downloaded_comes_first(client: Client, publisher: Publisher) -> None:
    publisher("etcd-a", "1.0.0")
    publisher("etcd-b", "1.0.0")
    assert names(client, "q=etcd") == ["etcd-a", "etcd-b"]
    response = client.get("/api/v1/extensions/etcd-b/versions/1.0.0/download")
    assert response.status_code == 200
    b"".join(response.streaming_content)  # type: ignore[attr-defined]
    downloadcounts.flush()  # counts are written in batches, off the download path
    assert names(client, "q=etcd") == ["etcd-b", "etcd-a"]
    assert [i["downloads"] for i in search(client, "q=etcd")["items"]] == [1, 0]


def test_sql_wildcards_in_the_query_match_literally(client: Client, publisher: Publisher) -> None:
    publisher("etcd", "1.0.0", description="Stores 100% of the state")
    publisher("redis", "1.0.0")
    assert names(client, "q=%25") == ["etcd"]
    assert names(client, "q=_") == []


def test_type_and_keyword_filter_exactly(client: Client, publisher: Publisher) -> None:
    publisher("aws", "1.0.0", type="provider", keywords=("cloud",))
    publisher("etcd", "1.0.0", keywords=("kv", "raft"))
    publisher("consul", "1.0.0", keywords=("kvm", "raft"))
    assert names(client, "type=provider") == ["aws"]
    assert names(client, "type=taskserv") == ["consul", "etcd"]
    assert names(client, "type=taskservs") == ["consul", "etcd"]  # the plural spelling too
    assert names(client, "type=cluster") == []
    assert names(client, "keyword=kv") == ["etcd"]  # not "kvm"
    assert names(client, "keyword=RAFT") == ["consul", "etcd"]
    assert names(client, "keyword=raft&q=etc") == ["etcd"]
    assert names(client, "keyword=raft&type=provider") == []


def test_pagination_pages_through_the_results(client: Client, publisher: Publisher) -> None:
    for name in ("alpha", "bravo", "charlie"):
        publisher(name, "1.0.0")
    first = search(client, "limit=2")
    assert ([i["name"] for i in first["items"]], first["total"], first["limit"], first["offset"]) == (
        ["alpha", "bravo"],
        3,
        2,
        0,
    )
    second = search(client, "limit=2&offset=2")
    assert ([i["name"] for i in second["items"]], second["total"], second["offset"]) == (["charlie"], 3, 2)
    beyond = search(client, "offset=10")
    assert (beyond["items"], beyond["total"], beyond["offset"]) == ([], 3, 10)
    assert search(client, "limit=100")["limit"] == 100
    assert search(client, "limit=1")["limit"] == 1
    assert search(client, "limit=&offset=")["limit"] == 20  # empty means the default


@pytest.mark.parametrize(
    ("query", "name", "allowed"),
    [
        ("limit=0", "limit", "use a whole number from 1 to 100"),
        ("limit=101", "limit", "use a whole number from 1 to 100"),
        ("limit=-1", "limit", "use a whole number from 1 to 100"),
        ("limit=abc", "limit", "use a whole number from 1 to 100"),
        ("limit=1.5", "limit", "use a whole number from 1 to 100"),
        ("limit=%EF%BC%91", "limit", "use a whole number from 1 to 100"),  # a full-width digit
        ("offset=-1", "offset", "use a whole number from 0 to 1000000000"),
        ("offset=x", "offset", "use a whole number from 0 to 1000000000"),
        ("type=widget", "type", "use one of provider, taskserv, cluster, template"),
        ("keyword=Bad%20Key!", "keyword", "use lower-case letters, digits and hyphens, at most 32 characters"),
        ("keyword=caf%C3%A9", "keyword", "use lower-case letters, digits and hyphens, at most 32 characters"),
        ("keyword=" + "k" * 33, "keyword", "use lower-case letters, digits and hyphens, at most 32 characters"),
        ("q=" + "x" * 201, "q", "use at most 200 characters, none of them control characters"),
        ("q=et%00cd", "q", "use at most 200 characters, none of them control characters"),
        ("q=et%0Acd", "q", "use at most 200 characters, none of them control characters"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it_and_what_is_allowed(
    client: Client, db: None, query: str, name: str, allowed: str
) -> None:
    error = search(client, query, status=400)
    assert error["code"] == "bad_request"
    assert error["message"].startswith(f"the query parameter {name} is ")
    assert error["message"].endswith(allowed)
    assert error["details"] == [{"path": name, "message": allowed}]


def test_searching_is_not_throttled_by_the_publish_rate(
    client: Client, publisher: Publisher, settings: Any, token: str
) -> None:
    from tests.factories import publish

    settings.REGISTRY_RATE_PUBLISH = "1/minute"
    publisher("etcd", "1.0.0")
    for _ in range(5):
        assert client.get(URL).status_code == 200
    refused = publish(client, token, publisher.package("etcd", "1.0.1"))
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert client.get(URL).status_code == 200
