"""The one rule for NUL and lone surrogates in what the registry stores (registry/storedtext.py)."""

from __future__ import annotations

from registry.storedtext import holds_lone_surrogate, nul_escaped, nul_paths


def test_nul_is_written_as_json_writes_it_in_names_and_values_at_any_depth() -> None:
    sent = {"pa\x00th": ["a\x00", ("b", 1, None, {"k": "\x00\x00"})], "n": 2.5}
    assert nul_escaped(sent) == {"pa\\u0000th": ["a\\u0000", ["b", 1, None, {"k": "\\u0000\\u0000"}]], "n": 2.5}
    assert nul_escaped("no nul") == "no nul"


def test_nul_paths_name_every_place_holding_nul() -> None:
    manifest = {"name": "ok", "tags": ["a", "b\x00"], "deps": {"x\x00": "1", "y": "\x00"}}
    assert list(nul_paths(manifest, "extension")) == [
        "extension.tags[1]",
        'extension.deps."x\\u0000"',
        "extension.deps.y",
    ]


def test_a_lone_surrogate_is_found_anywhere_and_a_pair_is_text() -> None:
    assert holds_lone_surrogate({"a": ["x", {"\ud800": 1}]})
    assert holds_lone_surrogate(["\udfff"])
    assert not holds_lone_surrogate({"emoji": "\U0001f600", "text": "caf\u00e9"})
