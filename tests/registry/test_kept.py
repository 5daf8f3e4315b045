"""`registry.kept`: what a web process keeps between requests stays within its bound, whatever
the requests ask for."""

from __future__ import annotations

from registry.kept import Kept


def test_the_least_recently_used_entry_goes_first() -> None:
    kept: Kept[str, int] = Kept(3)
    for key, value in (("a", 1), ("b", 2), ("c", 3)):
        kept.put(key, value)
    assert kept.get("a") == 1  # used: now the most recent
    kept.put("d", 4)
    assert (kept.get("a"), kept.get("b"), kept.get("c"), kept.get("d")) == (1, None, 3, 4)
    assert len(kept) == 3


def test_a_size_bound_counts_what_the_values_weigh_and_refuses_a_value_above_it() -> None:
    kept: Kept[str, bytes] = Kept(100, getsizeof=len)
    kept.put("a", b"x" * 60)
    kept.put("b", b"x" * 30)
    kept.put("c", b"x" * 30)  # 120 > 100: the oldest goes
    assert kept.get("a") is None and kept.get("b") is not None and kept.get("c") is not None
    kept.put("huge", b"x" * 101)  # bigger than everything allowed: not kept, nothing pushed out
    assert kept.get("huge") is None and len(kept) == 2


def test_with_a_ttl_an_entry_ages_out() -> None:
    now = [0.0]
    kept: Kept[str, int] = Kept(10, ttl=60, timer=lambda: now[0])
    kept.put("a", 1)
    now[0] = 59.0
    assert kept.get("a") == 1
    now[0] = 60.5
    assert kept.get("a") is None and len(kept) == 0


def test_clear_drops_everything() -> None:
    kept: Kept[int, int] = Kept(10)
    for i in range(5):
        kept.put(i, i)
    kept.clear()
    assert len(kept) == 0 and kept.get(1) is None
