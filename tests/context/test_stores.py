"""Result stores: one contract over both backends, plus what differs (files, LRU)."""

from __future__ import annotations

import pytest

from lovia.context import FileResultStore, InMemoryResultStore, ResultStore, content_key
from lovia.context.stores import result_file_name
from lovia.exceptions import StoreError


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path) -> ResultStore:
    if request.param == "memory":
        return InMemoryResultStore()
    return FileResultStore(tmp_path / "results")


async def test_round_trip_by_content_digest(store):
    text = "résultat 🚀\r\nline two\n" * 500
    key = content_key(text)
    assert len(key) == 64
    assert await store.get(key) is None
    await store.put(key, text)
    await store.put(key, text)  # storing again is harmless
    assert await store.get(key) == text
    assert isinstance(store, ResultStore)


@pytest.mark.parametrize("key", ["../escape", "a/b", "..", ".", "", "x" * 129, "a.b", "/etc/passwd", "c:\\x", "a\x00b"])
async def test_keys_that_could_escape_stay_inside_the_store(store, key, tmp_path):
    # 0.9.119 takes any string key; one that looks like a path still lands inside the folder.
    await store.put(key, f"value of {key!r}")
    assert await store.get(key) == f"value of {key!r}"
    assert {p.parent for p in tmp_path.rglob("*") if p.is_file()} <= {tmp_path / "results"}
    assert list(tmp_path.rglob("*escape*")) == []


async def test_a_key_that_is_not_a_string_is_a_store_error(store):
    with pytest.raises(StoreError) as caught:
        await store.put(7, "x")  # type: ignore[arg-type]
    assert caught.value.hint


async def test_file_store_writes_one_file_atomically(tmp_path):
    store = FileResultStore(tmp_path / "nested" / "dir")
    key = content_key("payload")
    await store.put(key, "payload")
    files = sorted(p.name for p in (tmp_path / "nested" / "dir").iterdir())
    assert files == [result_file_name(key)]  # no temp file left behind
    assert await FileResultStore(tmp_path / "nested" / "dir").get(key) == "payload"  # durable across instances
    assert list(tmp_path.rglob("*escape*")) == []


async def test_file_store_errors_are_store_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError):
        await FileResultStore(blocker).put(content_key("x"), "x")


async def test_memory_store_evicts_least_recently_used():
    store = InMemoryResultStore(max_entries=2)
    await store.put("a", "1")
    await store.put("b", "2")
    assert await store.get("a") == "1"  # a is now the most recent
    await store.put("c", "3")
    assert await store.get("b") is None
    assert await store.get("a") == "1" and await store.get("c") == "3"
    assert len(store) == 2
    with pytest.raises(ValueError):
        InMemoryResultStore(max_entries=0)
