"""`extensions.names`: the naming rule, reserved names, suggestions, confusable names (SPEC 2.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extensions.errors import InvalidNameError
from extensions.names import (
    NAME_RE,
    RESERVED_NAMES,
    are_confusable,
    canonicalize,
    confusable_key,
    confusable_keys,
    find_confusable,
    suggest_name,
    validate_name,
)

RULE = "use lower-case letters, digits and single hyphens, starting with a letter, 2 to 64 characters"

SPEC_RESERVED = {
    "provider",
    "providers",
    "taskserv",
    "taskservs",
    "cluster",
    "clusters",
    "template",
    "templates",
    "loaded",
    "reload",
    "install",
    "publish",
    "search",
    "api",
    "admin",
    "static",
    "new",
    "v2",
}


# --- the naming rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["ab", "kubernetes", "cert-manager", "k8s", "x1-2", "a" + "b" * 63, "oauth2-proxy", "v3"]
)
def test_it_accepts_names_that_follow_the_rule(name: str) -> None:
    assert validate_name(name) == name
    assert NAME_RE.match(name)


@pytest.mark.parametrize(
    "name",
    [
        "a",  # too short
        "a" * 65,  # too long
        "Kubernetes",
        "cert_manager",
        "cert--manager",
        "-cert",
        "cert-",
        "1password",
        "my.ext",
        "my ext",
        "kubernetes\n",  # `$` would let a final newline through
        "",
        "kübernetes",
        "k8s/",
    ],
)
def test_it_refuses_names_that_break_the_rule(name: str) -> None:
    assert not NAME_RE.match(name)
    with pytest.raises(InvalidNameError) as caught:
        validate_name(name)
    assert RULE in caught.value.message
    assert caught.value.path == "extension.name"
    assert caught.value.code == "invalid_manifest"


def test_it_suggests_the_valid_spelling_of_cert_manager() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name("cert_manager")
    assert caught.value.message == (
        "'cert_manager' is not a valid name: use lower-case letters, digits and single hyphens, "
        "starting with a letter, 2 to 64 characters; did you mean 'cert-manager'?"
    )
    assert caught.value.suggestion == "cert-manager"


def test_it_carries_the_key_path_it_is_given() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name("Foo", path="provides.taskservs[2]")
    assert caught.value.path == "provides.taskservs[2]"
    assert str(caught.value).startswith("provides.taskservs[2]: 'Foo' is not a valid name")
    assert caught.value.suggestion == "foo"


def test_it_says_how_long_a_too_long_name_is() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name("a" * 70)
    assert "(70 characters)" in caught.value.message
    assert caught.value.suggestion == "a" * 64


def test_it_offers_no_suggestion_when_nothing_valid_remains() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name("日本")
    assert caught.value.suggestion is None
    assert caught.value.message == f"'日本' is not a valid name: {RULE}"


def test_it_refuses_a_name_that_is_not_a_string() -> None:
    with pytest.raises(InvalidNameError, match="must be a string, not int"):
        validate_name(42)  # type: ignore[arg-type]


# --- reserved names --------------------------------------------------------------------------------


def test_the_reserved_names_are_exactly_the_specs() -> None:
    assert RESERVED_NAMES == SPEC_RESERVED


@pytest.mark.parametrize("name", sorted(SPEC_RESERVED))
def test_it_refuses_every_reserved_name_saying_why(name: str) -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name(name)
    message = caught.value.message
    assert message.startswith(f"{name!r} is reserved (it would clash with the registry's URLs")
    assert "choose another name" in message
    assert "api, admin" not in message  # listed sorted
    assert "admin, api, cluster" in message
    assert caught.value.suggestion is None


def test_it_accepts_a_reserved_name_where_reserved_names_are_allowed() -> None:
    assert validate_name("install", path="provides.taskservs[0]", allow_reserved=True) == "install"


def test_it_does_not_suggest_a_reserved_name() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_name("Install")
    assert caught.value.suggestion is None
    assert "did you mean" not in caught.value.message


# --- suggestions and canonical names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("cert_manager", "cert-manager"),
        ("Foo", "foo"),
        ("my.ext name", "my-ext-name"),
        ("a__b--c", "a-b-c"),
        ("-kube-", "kube"),
        ("3scale", "scale"),
        ("42-things", "things"),
        ("Kübernetes", "kubernetes"),
        ("Crème-Brûlée", "creme-brulee"),
        ("Straße", "strasse"),
        ("Øresund", "oresund"),
        ("c++", None),  # one letter is not a name
        ("kubernetes", "kubernetes"),
        ("__", None),
        ("123", None),
        ("日本", None),
        ("", None),
    ],
)
def test_it_suggests_a_valid_spelling(name: str, suggestion: str | None) -> None:
    assert suggest_name(name) == suggestion


def test_a_suggestion_is_cut_to_64_characters_without_a_trailing_hyphen() -> None:
    suggestion = suggest_name("a" * 63 + "_bcd")
    assert suggestion == "a" * 63
    assert suggestion is not None
    assert NAME_RE.match(suggestion)


@given(st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_every_suggestion_follows_the_rule(name: str) -> None:
    suggestion = suggest_name(name)
    assert suggestion is None or NAME_RE.match(suggestion)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("Cert_Manager", "cert-manager"), (" etcd ", "etcd"), ("my.ext", "my-ext"), ("kubernetes", "kubernetes")],
)
def test_it_canonicalizes_names_for_lookups(name: str, canonical: str) -> None:
    assert canonicalize(name) == canonical


# --- confusable names ------------------------------------------------------------------------------

CONFUSABLE = [
    ("cert-manager", "certmanager"),  # a dropped hyphen
    ("etcd", "etc-d"),  # an added hyphen
    ("c0redns", "coredns"),  # 0 / o
    ("he1m", "helm"),  # 1 / l
    ("redi5", "redis"),  # 5 / s
    ("kubemetes", "kubernetes"),  # m / rn
    ("vvireguard", "wireguard"),  # vv / w
    ("redis", "rediss"),  # a doubled letter
    ("cilium", "cillium"),
    ("grafana", "grafnaa"),  # swapped letters whose double then collapses
    ("kubernetes", "kuberentes"),  # swapped letters
    ("prometheus", "pormetheus"),
    ("hello", "hlelo"),
    ("column", "colunm"),  # a swap next to an m
    ("kuberentes", "kubemetes"),  # a swap inside an rn read as m
    ("Cert_Manager", "cert-manager"),  # case and separators (not valid names, still folded)
    ("kub\N{CYRILLIC SMALL LETTER IE}rnetes", "kubernetes"),  # a Cyrillic homoglyph
    ("\N{GREEK SMALL LETTER OMICRON}pensearch", "opensearch"),  # a Greek homoglyph
    ("\N{FULLWIDTH LATIN SMALL LETTER K}8s", "k8s"),  # NFKC
]

NOT_CONFUSABLE = [
    ("ku8ernetes", "kubernetes"),  # 8 is not folded to b
    ("etcd", "etcd3"),  # a digit appended is a different name
    ("redis", "radis"),  # a substituted letter
    ("mail", "mal"),  # i is not folded to l
    ("prometheus", "promtheus"),  # a dropped letter
    ("kubernetes", "containerd"),
    ("abab", "ab"),
    ("k3s", "k0s"),
    ("calico", "cilium"),
]


@pytest.mark.parametrize(("a", "b"), CONFUSABLE)
def test_it_finds_confusable_names_whichever_was_first(a: str, b: str) -> None:
    assert confusable_key(a) in confusable_keys(b)
    assert confusable_key(b) in confusable_keys(a)
    assert are_confusable(a, b)
    assert are_confusable(b, a)
    assert find_confusable(a, ["nginx", b, "vault"]) == b
    assert find_confusable(b, ["nginx", a]) == a


@pytest.mark.parametrize(("a", "b"), NOT_CONFUSABLE)
def test_it_tells_apart_names_that_only_look_related(a: str, b: str) -> None:
    assert not are_confusable(a, b)
    assert not are_confusable(b, a)
    assert find_confusable(a, [b]) is None
    assert find_confusable(b, [a]) is None


def test_the_same_name_is_not_reported_as_confusable_with_itself() -> None:
    assert find_confusable("kubernetes", ["kubernetes"]) is None
    assert find_confusable("kubernetes", ["kubernetes", "kuberentes"]) == "kuberentes"


def test_it_returns_the_first_confusable_name() -> None:
    assert find_confusable("redis", ["etcd", "rediss", "redis-s", "red1s"]) == "rediss"
    assert find_confusable("redis", []) is None


def test_real_extension_names_do_not_collide_with_each_other() -> None:
    real_names = (
        "kubernetes containerd etcd cilium calico coredns redis postgres mysql grafana prometheus nginx "
        "haproxy rook ceph helm istio linkerd vault consul nomad traefik envoy kafka zookeeper rabbitmq "
        "mongodb mariadb minio harbor gitea jenkins argocd flux longhorn openebs metallb kubevirt crio "
        "podman docker runc crun youki kata gvisor falco trivy velero thanos loki tempo jaeger fluentd "
        "fluentbit opensearch keycloak dex oauth2-proxy cert-manager external-dns ingress-nginx aws gcp "
        "azure upcloud hetzner local libvirt proxmox vsphere openstack linode vultr k3s k0s kind rke2 talos "
        "memcached valkey cassandra clickhouse airflow spark flink ray dask jupyter mlflow ollama vllm"
    )
    names = real_names.split()
    for index, name in enumerate(names):
        assert find_confusable(name, names[index + 1 :]) is None, name


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("cert-manager", "certmanager"),
        ("rediss", "redis"),
        ("c0redns", "coredns"),
        ("Cert_Manager", "certmanager"),
        ("vvord", "word"),
        ("kubernetes", "kubemetes"),
        ("rnodule", "module"),
    ],
)
def test_the_key_is_a_documented_skeleton(name: str, key: str) -> None:
    assert confusable_key(name) == key


NAMES = st.text(alphabet="abcelmnorsuvw015-", min_size=1, max_size=9)


@given(NAMES, NAMES)
@settings(max_examples=200, deadline=None)
def test_confusability_is_symmetric(a: str, b: str) -> None:
    assert (confusable_key(a) in confusable_keys(b)) == (confusable_key(b) in confusable_keys(a))


@given(NAMES)
@settings(max_examples=200, deadline=None)
def test_a_key_is_its_own_key_and_among_its_keys(name: str) -> None:
    key = confusable_key(name)
    assert confusable_key(key) == key
    assert key in confusable_keys(name)
    assert confusable_keys(key) == confusable_keys(name)


@given(st.text(alphabet="abcelmnosu", min_size=1, max_size=9))  # no r: "rn" reads as "m"
@settings(max_examples=200, deadline=None)
def test_every_adjacent_swap_is_confusable(name: str) -> None:
    for i in range(len(name) - 1):
        swapped = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
        if 0 < i < len(name) - 2 and any(w[i - 1] == w[i] and w[i + 1] == w[i + 2] for w in (name, swapped)):
            continue  # "aabb" <-> "abab": two letters apart once doubles collapse (a known limit)
        assert are_confusable(name, swapped), swapped
