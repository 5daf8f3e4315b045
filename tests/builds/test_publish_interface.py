"""A version's configuration interface, end to end: a publish reads the KCL schemas in the build
sandbox (a build log step), stores them on the version, and the API
(GET /api/v1/extensions/{name}/versions/{version}/interface) and the version page show them,
author text escaped; past a limit the version is published with a truncated interface and says
so; a version published before interfaces were read says that instead."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client

from extensions.archive import build_package
from extensions.checks import kcl_available
from registry.models import Version
from tests.conftest import require

if TYPE_CHECKING:
    from tests.factories import Publisher

pytest_plugins = ["tests.factories"]  # the user, token and publisher fixtures
pytestmark = pytest.mark.usefixtures("private_storage")

EXAMPLES = Path(__file__).resolve().parents[2] / "extensions"
SCRIPT = "<script>alert(1)</script>"
SCHEMAS = f'''\
schema Node:
    """A machine. {SCRIPT}

    Attributes
    ----------
    name : str
        Its host name; <b>not</b> bold.
    """
    name: str
    port?: int = 22  # the "SSH" port & more
    role: "worker" | "control-plane" = "worker"

    check:
        len(name) > 0, "name must not be empty {SCRIPT}"

schema Cluster(Node):
    """Nodes together."""
    nodes: [Node] = []
'''


@pytest.fixture(autouse=True)
def _kcl() -> None:
    require(kcl_available(), "kcl-lib (KCL's parser)")


def interface(client: Client, name: str, version: str, status: int = 200) -> Any:
    response = client.get(f"/api/v1/extensions/{name}/versions/{version}/interface")
    assert response.status_code == status, response.content[:500]
    body = response.json()
    return body["data"] if status == 200 else body["error"]


def version_page(client: Client, name: str, version: str) -> str:
    response = client.get(f"/extensions/{name}/{version}/")
    assert response.status_code == 200
    return response.content.decode("utf-8")


def test_a_published_version_s_schemas_are_in_its_build_log_the_api_and_its_page(
    client: Client, publisher: Publisher
) -> None:
    build = publisher("nodes", "1.0.0", extra_files={"kcl/nodes.k": SCHEMAS, "tests/t.k": "schema T:\n    t: int\n"})
    step = next(e for e in build["log"] if e["step"] == "interface")
    assert (step["status"], step["message"]) == (
        "passed",
        "2 schemas (4 attributes, 1 check rule) from 1 KCL file",
    )
    data = interface(client, "nodes", "1.0.0")
    assert (data["name"], data["version"], data["available"], data["truncated"]) == ("nodes", "1.0.0", True, False)
    assert data["files"] == ["kcl/nodes.k"]  # tests/ is not the interface
    assert data["parser"].startswith("kcl-lib ")
    assert [s["name"] for s in data["schemas"]] == ["Node", "Cluster"]
    node, cluster = data["schemas"]
    assert node["doc"] == f"A machine. {SCRIPT}"  # stored as written; escaped when shown
    assert [(f["name"], f["type"], f["required"], f["default"]) for f in node["fields"]] == [
        ("name", "str", True, None),
        ("port", "int", False, "22"),
        ("role", '"worker" | "control-plane"', False, '"worker"'),
    ]
    assert node["fields"][1]["doc"] == 'the "SSH" port & more'
    assert node["checks"] == [
        {"rule": "len(name) > 0", "message": f"name must not be empty {SCRIPT}", "condition": None, "line": 14}
    ]
    assert cluster["parent"] == "Node"
    assert data["environment"] == {"required": [], "optional": []}
    assert data["system_packages"] == []

    text = version_page(client, "nodes", "1.0.0")
    section = text.split('<section class="section" aria-labelledby="interface-title" id="interface">')[1]
    section = section.split("</section>")[0]
    assert "<script>" not in text.split("</footer>")[0].replace('<script src="', "")
    assert html.escape(SCRIPT) in section
    assert "Its host name; &lt;b&gt;not&lt;/b&gt; bold." in section
    assert "the &quot;SSH&quot; port &amp; more" in section
    assert '<h3 id="interface-0-title"><code>Node</code></h3>' in section
    assert 'extends <a href="#interface-0"><code>Node</code></a>' in section
    assert "<code>len(name) &gt; 0</code>: name must not be empty " + html.escape(SCRIPT) in section
    assert '<a href="/api/v1/extensions/nodes/versions/1.0.0/interface">The interface as JSON</a>' in section


def test_the_bundled_aws_example_shows_its_servers_interface_and_environment(
    client: Client, token: str, tmp_path: Path
) -> None:
    from tests.factories import publish

    built = build_package(EXAMPLES / "providers" / "aws" / "1.0.0", tmp_path)
    response = publish(client, token, built.path)
    assert response.json()["data"]["status"] == "succeeded", response.content[:2000]
    data = interface(client, "aws", "1.0.0")
    assert [s["name"] for s in data["schemas"]] == ["AwsVolume", "AwsServer", "AwsProvider"]
    server = data["schemas"][1]
    assert [f["name"] for f in server["fields"] if f["required"]] == ["name", "ami"]
    assert next(f for f in server["fields"] if f["name"] == "key_name")["doc"] == "an EC2 key pair for SSH"
    assert 'ami.startswith("ami-")' in [c["rule"] for c in server["checks"]]
    assert data["environment"]["required"] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
    text = version_page(client, "aws", "1.0.0")
    assert "<code>AwsServer</code>" in text
    assert "<code>AWS_REGION</code>" in text.split('id="interface"')[1]


def test_an_interface_past_its_limits_is_published_truncated_and_says_what_was_left_out(
    client: Client, publisher: Publisher, settings: Any
) -> None:
    settings.REGISTRY_INTERFACE_MAX_SCHEMAS = 2
    schemas = "".join(f"schema S{i}:\n    a: int = {i}\n" for i in range(5))
    build = publisher("many", "1.0.0", extra_files={"kcl/many.k": schemas})
    step = next(e for e in build["log"] if e["step"] == "interface")
    assert step["status"] == "passed"
    assert step["message"] == (
        "2 schemas (2 attributes, 0 check rules) from 1 KCL file (truncated); only the first 2 schemas are shown"
    )
    data = interface(client, "many", "1.0.0")
    assert ([s["name"] for s in data["schemas"]], data["truncated"]) == (["S0", "S1"], True)
    assert data["warnings"] == ["only the first 2 schemas are shown"]
    assert "Part of the interface was left out:" in version_page(client, "many", "1.0.0")


def test_a_hostile_schema_file_costs_a_warning_not_the_build(client: Client, publisher: Publisher) -> None:
    deep = "schema Deep:\n    x: any = " + "[" * 70 + "1" + "]" * 70 + "\n"  # legal KCL, over the nesting limit
    publisher("deep", "1.0.0", extra_files={"kcl/deep.k": deep, "kcl/ok.k": "schema Ok:\n    a: int\n"})
    data = interface(client, "deep", "1.0.0")
    assert [s["name"] for s in data["schemas"]] == ["Ok"]
    assert data["warnings"] == ["kcl/deep.k: not read: brackets nest deeper than 64 levels"]


def test_a_version_published_before_interfaces_were_read_says_so(client: Client, publisher: Publisher) -> None:
    publisher("old", "1.0.0", extra_files={"kcl/old.k": "schema Old:\n    a: int\n"})
    Version.objects.filter(extension__name="old").update(interface=None)  # as the migration leaves it
    data = interface(client, "old", "1.0.0")
    assert (data["available"], data["schemas"], data["files"]) == (False, [], [])
    assert "published before the registry read configuration interfaces" in version_page(client, "old", "1.0.0")


def test_a_package_without_schemas_says_it_has_none(client: Client, publisher: Publisher) -> None:
    publisher("plain", "1.0.0")
    data = interface(client, "plain", "1.0.0")
    assert (data["available"], data["schemas"]) == (True, [])
    assert "This version has no KCL schemas." in version_page(client, "plain", "1.0.0")


def test_the_interface_of_an_unknown_extension_or_version_is_a_404(client: Client, publisher: Publisher) -> None:
    publisher("known", "1.0.0")
    assert interface(client, "unknown", "1.0.0", 404)["code"] == "not_found"
    assert interface(client, "known", "9.9.9", 404)["message"].startswith("known has no version 9.9.9")
    assert interface(client, "known", "1.0.0+build", 200)["version"] == "1.0.0"


# --- python manage.py readinterfaces ---------------------------------------------------------------


def readinterfaces(*args: str) -> tuple[str, str, str | None]:
    from django.core.management import CommandError, call_command

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("readinterfaces", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), str(exc)
    return out.getvalue(), err.getvalue(), None


def test_readinterfaces_reads_the_versions_published_before_from_their_packages(
    client: Client, publisher: Publisher
) -> None:
    publisher("old", "1.0.0", extra_files={"kcl/old.k": SCHEMAS})
    publisher("old", "1.1.0", extra_files={"kcl/old.k": "schema Newer:\n    a: int\n"})
    publisher("fresh", "1.0.0", extra_files={"kcl/new.k": "schema New:\n    a: int\n"})
    stored = interface(client, "old", "1.0.0")
    Version.objects.filter(extension__name="old").update(interface=None)
    etag = client.get("/extensions/old/1.0.0/")["ETag"]

    out, err, error = readinterfaces()
    assert (err, error) == ("", None)
    assert out.splitlines() == [
        "old 1.0.0: 2 schemas (4 attributes, 1 check rule) from 1 KCL file",
        "old 1.1.0: 1 schema (1 attribute, 0 check rules) from 1 KCL file",
    ]  # fresh 1.0.0 has one
    assert interface(client, "old", "1.0.0") == stored
    assert client.get("/extensions/old/1.0.0/")["ETag"] != etag  # the page is not answered 304 with the old one
    assert readinterfaces() == ("", "", None)  # nothing left to read
    out, _, _ = readinterfaces("--all", "fresh@1.0.0+meta")
    assert out == "fresh 1.0.0: 1 schema (1 attribute, 0 check rules) from 1 KCL file\n"


def test_readinterfaces_names_what_it_cannot_find_or_read(client: Client, publisher: Publisher, settings: Any) -> None:
    assert readinterfaces("ghost")[2] == "ghost: no such extension or version"
    assert readinterfaces("ghost@x")[2] == "ghost@x: 'x' is not a SemVer version"
    publisher("slow", "1.0.0", extra_files={"kcl/a.k": "schema A:\n    a: int\n"})
    Version.objects.filter(extension__name="slow").update(interface=None)
    settings.REGISTRY_SANDBOX_MEMORY = 16 * 1024 * 1024  # too little for any run: the package's fault, as for a build
    out, err, error = readinterfaces("slow")
    assert (out, error) == ("", "1 version(s) could not be read")
    assert err.startswith("slow 1.0.0: not read: ")
    assert interface(client, "slow", "1.0.0")["available"] is False  # nothing stored
