"""FileResultStore as lovia 0.9.119 named its files, any string key, atomic overwrite; an unbounded LRU.

Real files in a temporary folder; 0.9.119's own result file comes from the shared fixtures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from lovia.context import FileResultStore, InMemoryResultStore, content_key
from lovia.context.stores import result_file_name

_WHERE = Path("shared") / "fixtures" / "lovia-0.9.119"
REF = next((p / _WHERE for p in Path(__file__).resolve().parents[2:] if (p / _WHERE).is_dir()), None)

KEYS = ["", "/", ":", "x" * 1000, "結果の要約", "a/../b", "..", "a.b", "A", "a", "-", "key:1", "key/1", "\x00"]


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.skipif(REF is None, reason="0.9.119's fixture files are not beside the checkout")
async def test_a_result_0_9_119_stored_is_read_by_its_key(tmp_path: Path) -> None:
    assert REF is not None
    expected = json.loads((REF / "expected.json").read_text())["results"]
    shutil.copytree(REF / "results", tmp_path / "results")
    store = FileResultStore(tmp_path / "results")
    assert await store.get(expected["key"]) == expected["content"]
    assert result_file_name(expected["key"]) == "207afcee6a35de0e-c6696f2dc0116f02.txt"


async def test_a_result_our_earlier_releases_stored_as_key_txt_is_read_and_replaced_by_put(tmp_path: Path) -> None:
    key = content_key("old output")
    (tmp_path / f"{key}.txt").write_text("old output", encoding="utf-8")
    store = FileResultStore(tmp_path)
    assert await store.get(key) == "old output"
    await store.put(key, "replaced")  # a put replaces it, kept under today's name
    assert await store.get(key) == "replaced"
    assert _files(tmp_path) == sorted([f"{key}.txt", result_file_name(key)])


async def test_any_string_key_maps_to_its_own_file_inside_the_folder(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path / "results")
    for key in KEYS:
        await store.put(key, f"value {key!r}")
    for key in KEYS:
        assert await store.get(key) == f"value {key!r}"
    names = _files(tmp_path / "results")
    assert len(names) == len(KEYS) == len({result_file_name(k) for k in KEYS})  # no two keys share a file
    assert all(os.sep not in n and not n.startswith(".") and len(n) < 100 for n in names)
    assert _files(tmp_path) == ["results"]  # nothing outside the folder
    assert await store.get("never stored") is None and await store.get("x" * 999) is None


async def test_put_replaces_the_stored_value_atomically_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store = FileResultStore(tmp_path)
    await store.put(":", "first")
    await store.put(":", "second")
    assert await store.get(":") == "second"
    await asyncio.gather(*(store.put("k", f"v{i}" * 1000) for i in range(20)))
    assert await store.get("k") in {f"v{i}" * 1000 for i in range(20)}  # one whole value, never a mix
    assert _files(tmp_path) == sorted([result_file_name(":"), result_file_name("k")])


async def test_in_memory_store_without_a_bound_keeps_everything() -> None:
    store = InMemoryResultStore(max_entries=None)
    for i in range(3000):
        await store.put(f"k{i}", str(i))
    assert len(store) == 3000 and await store.get("k0") == "0"
    with pytest.raises(ValueError):
        InMemoryResultStore(max_entries=0)
