"""The process-wide per-sandbox caches (`_lifecycle._caches.SandboxCache`) are bounded (least
recently used out first) and safe to use and `forget` from many threads at once; they are the
core's one bounded map (`_lru.LruCache`), which the page indexes and terminal-tool registry use
too."""

from __future__ import annotations

import threading

from opensandbox_core._lifecycle import _caches
from opensandbox_core._lifecycle._caches import SandboxCache
from opensandbox_core._lru import LruCache


def _cache(what: str, **kwargs: int) -> SandboxCache[tuple[str, str], int]:
    cache: SandboxCache[tuple[str, str], int] = SandboxCache(what, **kwargs)
    _caches._CACHES.remove(cache)  # a test's own: not one `forget` walks for the others
    return cache


def test_a_cache_keeps_at_most_its_bound_least_recently_used_out_first() -> None:
    cache = _cache("test bound", max_entries=3)
    for i in range(3):
        cache[("d", f"s{i}")] = i
    assert cache[("d", "s0")] == 0  # used: now the most recent
    cache[("d", "s3")] = 3
    assert sorted(cache) == [("d", "s0"), ("d", "s2"), ("d", "s3")]
    assert ("d", "s1") not in cache and cache.get(("d", "s1")) is None
    default = SandboxCache[tuple[str, str], int]("test default")
    _caches._CACHES.remove(default)
    for i in range(_caches.MAX_ENTRIES + 10):
        default[("d", str(i))] = i
    assert len(default) == _caches.MAX_ENTRIES and ("d", "0") not in default


def test_peek_and_in_are_not_a_use_and_pop_takes_an_entry_out() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.peek("a") == 1 and "a" in cache  # neither makes "a" the most recent
    cache["c"] = 3
    assert list(cache) == ["b", "c"] and cache.peek("a") is None
    assert cache.pop("b") == 2 and cache.pop("b", None) is None and list(cache) == ["c"]
    assert cache != LruCache[str, int](2) and cache == cache  # a cache equals only itself


def test_forget_while_other_threads_fill_the_cache() -> None:
    cache = _cache("test threads", max_entries=1_000_000)
    errors: list[BaseException] = []
    start = threading.Barrier(5)

    def fill(tag: int) -> None:
        start.wait()
        try:
            for i in range(20_000):
                cache[("d", f"{tag}-{i}")] = i
                cache.get(("d", f"{tag}-{i // 2}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(tag,)) for tag in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    try:
        while any(thread.is_alive() for thread in threads):
            cache.forget("d", "0-0")
            list(cache)
    except BaseException as exc:
        errors.append(exc)
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 80_000 - (("d", "0-0") not in cache)
