"""The bulk decode of a session load (``decode_segments``): the same entries and the same errors as
decoding row by row, the direct entry builders equal to ``entry_from_dict``, the compact row form
read back exactly (and alike by both paths), and the cyclic garbage collector paused only inside
the decode and restored afterwards, also when the load raises.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib.util
import json
import pickle
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lovia.exceptions import CorruptRecordError
from lovia.parts import ImagePart, TextPart
from lovia.session import Segment
from lovia.stores import PostgresSession, SQLiteSession, _codec
from lovia.stores._codec import checksum, decode_segment, decode_segments, encode_entries, encode_meta, gc_paused
from lovia.transcript import (
    _BUILDERS,
    _DIRECT_BUILDERS,
    _ROW_CODES,
    _ROW_DEFAULTS,
    _ROW_FIELDS,
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    _entries_direct,
    _entries_direct_rows,
    _entry_from_stored,
    _entry_to_row,
    entry_from_dict,
    entry_to_dict,
)

_spec = importlib.util.spec_from_file_location("_lovia_pg_support", Path(__file__).parents[1] / "pg_support.py")
assert _spec is not None and _spec.loader is not None
_pg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pg)

BIG = _codec.PAUSE_GC_FROM + 36  # rows: enough for the bulk path to pause the collector


def _run(n: int) -> list[Any]:
    return [
        InputEntry(role="user", content=f"question {n}"),
        ReasoningEntry(content="think", provider="p", metadata={"sig": n}),
        ToolCallEntry(call_id=f"c{n}", name="lookup", arguments='{"q": 1}'),
        ToolResultEntry(call_id=f"c{n}", output=f"answer {n}", raw={"n": n}, is_error=n % 2 == 0),
        AssistantTextEntry(content=f"done {n}", id=None if n % 3 else f"msg_{n}"),
    ]


def _row(i: int, entries: list[Any], meta: dict[str, Any] | None = None, *, signed: bool = True) -> tuple:
    text, meta_json = encode_entries(entries), encode_meta(meta)
    return (i, f"r{i}", text, meta_json, checksum(text, meta_json) if signed else None)


def _one_by_one(session_id: str, rows: list[tuple]) -> list[tuple[int, Segment]]:
    return [decode_segment(session_id, *row) for row in rows]


def _error_of(call: Any) -> tuple[str, str | None, str | None, str | None]:
    with pytest.raises(CorruptRecordError) as err:
        call()
    return str(err.value), err.value.session_id, err.value.run_id, err.value.hint


# ---------------------------------------------------------------------------- direct builders

_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False))
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_part = st.sampled_from(
    [
        {"type": "text", "text": "hi"},
        {"type": "image", "url": "https://x/y.png"},
        {"type": "file", "data": "QQ==", "mime_type": "text/plain"},
    ]
)
_FIELD_VALUES = {
    "role": st.sampled_from(["user", "system"]) | _scalar,
    "content": st.text(max_size=10) | st.lists(_part, max_size=2) | _scalar,
    "id": st.none() | st.text(max_size=5),
    "provider": st.none() | st.text(max_size=5),
    "metadata": st.none() | st.dictionaries(st.text(max_size=4), _scalar, max_size=3) | st.just([]) | st.just(0),
    "call_id": st.text(max_size=5),
    "name": st.text(max_size=5),
    "arguments": st.text(max_size=10),
    "output": st.text(max_size=10) | _scalar,
    "raw": _json,
    "is_error": st.booleans() | st.sampled_from([0, 1, "", "yes", None, [], [1]]),
    "parts": st.none() | st.just([]) | st.lists(_part, min_size=1, max_size=2),
    "extra": _json,
}
_KEYS = {
    "input": ["role", "content", "extra"],
    "assistant_text": ["content", "id", "extra"],
    "reasoning": ["content", "id", "provider", "metadata", "extra"],
    "tool_call": ["call_id", "name", "arguments", "extra"],
    "tool_result": ["call_id", "output", "raw", "is_error", "parts", "extra"],
}


@st.composite
def _entry_dicts(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(_KEYS)))
    keys = draw(st.lists(st.sampled_from(_KEYS[kind]), unique=True))  # any subset: missing keys too
    return {"type": kind, **{key: draw(_FIELD_VALUES[key]) for key in keys}}


def _outcome(build: Any, data: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", build(data)
    except Exception as exc:  # which exception does not matter: the bulk decode starts over on any
        return "error", type(exc).__name__


@settings(max_examples=400, deadline=None)
@given(_entry_dicts())
def test_direct_builders_build_what_the_builders_build(data):
    kind = data["type"]
    slow, fast = _outcome(_BUILDERS[kind], data), _outcome(_DIRECT_BUILDERS[kind], data)
    if slow[0] == "error":
        assert fast[0] == "error"
        return
    assert fast[0] == "ok", fast
    built, expected = fast[1], slow[1]
    assert type(built) is type(expected) and built == expected
    for name in expected.__dataclass_fields__:
        # Same values of the same types (True vs 1 compare equal but must not slip through).
        assert type(getattr(built, name)) is type(getattr(expected, name)), name
        assert getattr(built, name) == getattr(expected, name), name


@settings(max_examples=200, deadline=None)
@given(st.lists(_entry_dicts(), max_size=6))
def test_entries_direct_builds_what_entry_from_dict_builds(items):
    slow = _outcome(lambda ds: [entry_from_dict(d, strict=False) for d in ds], items)
    fast = _outcome(_entries_direct, items)
    assert fast[0] == slow[0]
    if slow[0] == "ok":
        assert fast[1] == slow[1] and [type(e) for e in fast[1]] == [type(e) for e in slow[1]]


def test_direct_builders_refuse_what_entry_from_dict_refuses():
    for bad in ({"type": "tool_call", "name": "x"}, {"type": "input", "content": "no role"}):
        with pytest.raises(ValueError):
            entry_from_dict(bad, strict=False)
        with pytest.raises(KeyError):
            _DIRECT_BUILDERS[bad["type"]](bad)


def test_direct_builders_keep_entries_frozen_and_parts_typed():
    entry = _DIRECT_BUILDERS["input"]({"type": "input", "role": "user", "content": [{"type": "text", "text": "a"}]})
    assert entry == InputEntry(role="user", content=[TextPart("a")])
    image = {"type": "image", "url": "u"}
    result = _DIRECT_BUILDERS["tool_result"]({"type": "tool_result", "call_id": "c", "output": "o", "parts": [image]})
    assert result.parts == [ImagePart(url="u")]
    plain = _DIRECT_BUILDERS["tool_call"]({"type": "tool_call", "call_id": "c", "name": "n", "arguments": "{}"})
    with pytest.raises(AttributeError):
        plain.name = "other"  # type: ignore[misc]
    # Built through a slots twin, the entries are ordinary instances of the entry classes.
    for built in _entries_direct([entry_to_dict(e) for e in _run(7)]):
        assert pickle.loads(pickle.dumps(built)) == built
        assert dataclasses.replace(built) == built
        if isinstance(built, (InputEntry, AssistantTextEntry, ToolCallEntry)):  # the others hold dicts
            assert hash(built) == hash(dataclasses.replace(built))
        assert repr(built) == repr(entry_from_dict(entry_to_dict(built)))


# ---------------------------------------------------------------------------- the row form


def _stored_entry(data: dict[str, Any]) -> Any:
    """The entry ``data`` describes, as it is stored (``None`` when it describes no entry)."""
    try:
        entry = entry_from_dict(data, strict=False)
        return entry_from_dict(json.loads(json.dumps(entry_to_dict(entry))))  # JSON-safe values only
    except Exception:
        return None


def _same_fields(built: Any, expected: Any) -> None:
    assert type(built) is type(expected) and built == expected
    for name in expected.__dataclass_fields__:
        assert type(getattr(built, name)) is type(getattr(expected, name)), name


@settings(max_examples=400, deadline=None)
@given(_entry_dicts())
def test_every_entry_reads_back_from_its_row_form_by_both_paths(data):
    entry = _stored_entry(data)
    if entry is None:
        return
    row = json.loads(json.dumps(_entry_to_row(entry)))  # exactly what a store writes and reads
    _same_fields(_entry_from_stored(row), entry)  # row by row
    (built,), ends = _entries_direct_rows([[row]])  # the bulk decoder
    _same_fields(built, entry)
    assert ends == [1]


@settings(max_examples=300, deadline=None)
@given(_entry_dicts())
def test_the_row_form_is_the_dict_form_in_field_order_without_trailing_defaults(data):
    entry = _stored_entry(data)
    if entry is None:
        return
    d = entry_to_dict(entry)
    expected = [_ROW_CODES[d["type"]], *(d.get(name) for name in _ROW_FIELDS[d["type"]])]
    defaults = _ROW_DEFAULTS[d["type"]]
    first_optional = len(expected) - len(defaults)
    while len(expected) > first_optional:
        value, default = expected[-1], defaults[len(expected) - 1 - first_optional]
        if not (value is default or (default == {} and isinstance(value, dict) and not value)):
            break
        expected.pop()
    assert _entry_to_row(entry) == expected


_ROW_VALUES = st.lists(st.one_of(*_FIELD_VALUES.values()), max_size=7)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([0, 1, 2, 3, 4, 5, -1, True, 3.0, "3", None, [3]]), _ROW_VALUES)
def test_any_row_shaped_array_reads_alike_by_both_paths(code, values):
    row = [code, *values]
    slow = _outcome(_entry_from_stored, row)
    fast = _outcome(lambda r: _entries_direct_rows([[r]])[0][0], row)
    assert fast[0] == slow[0], (fast, slow)
    if slow[0] == "ok":
        _same_fields(fast[1], slow[1])


def test_row_form_leaves_out_trailing_defaults_and_ignores_fields_it_does_not_know():
    assert encode_entries([ToolCallEntry(call_id="c1", name="add", arguments="{}")]) == '[[3,"c1","add","{}"]]'
    assert encode_entries([ToolResultEntry(call_id="c1", output="5")]) == '[[4,"c1","5"]]'
    assert encode_entries([AssistantTextEntry(content="hi")]) == '[[1,"hi"]]'
    failed = ToolResultEntry(call_id="c1", output="boom", is_error=True)
    assert encode_entries([failed]) == '[[4,"c1","boom",null,true]]'
    assert len(encode_entries(_run(1))) < 0.75 * len(json.dumps([entry_to_dict(e) for e in _run(1)]))
    # A newer lovia may add fields at the end of a row: both paths ignore them.
    newer = '[[3,"c1","add","{}","later"],[4,"c1","5",null,false,null,{"x":1}],[1,"hi",null,7]]'
    expected = [
        ToolCallEntry(call_id="c1", name="add", arguments="{}"),
        ToolResultEntry(call_id="c1", output="5"),
        AssistantTextEntry(content="hi"),
    ]
    assert _codec.decode_entries(newer, session_id="s", run_id="r") == expected
    rows = [(1, "r1", newer, None, checksum(newer)), *(_row(i, _run(i)) for i in range(2, BIG))]
    assert decode_segments("s", rows) == _one_by_one("s", rows)
    assert decode_segments("s", rows)[0][1].entries == expected


def test_a_session_reads_rows_of_both_forms_in_one_load():
    # Rows written before the row form existed (dict form) beside rows written after it.
    old = [(i, f"r{i}", json.dumps([entry_to_dict(e) for e in _run(i)]), None, None) for i in range(BIG)]
    old = [(i, run_id, text, None, checksum(text)) for i, run_id, text, _, _ in old]
    rows = [row if i % 2 else _row(i, _run(i)) for i, row in enumerate(old)]
    decoded = decode_segments("s", rows)
    assert decoded == _one_by_one("s", rows)
    assert [e for _, segment in decoded for e in segment.entries] == [e for i in range(BIG) for e in _run(i)]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[9,"x"]]', "unknown transcript entry type 9"),
        ('[[[3],"x"]]', "unknown transcript entry type [3]"),
        ("[[]]", "unknown transcript entry type None"),
        ('[[3,"c1"]]', "missing field 'name'"),
        ('[[0,"user"]]', "missing field 'content'"),
    ],
)
def test_a_malformed_row_is_a_corrupt_record_naming_the_entry(text, needle):
    message, session_id, run_id, hint = _error_of(lambda: _codec.decode_entries(text, session_id="s", run_id="r7"))
    assert needle in message and "entry 0" in message and (session_id, run_id) == ("s", "r7") and hint
    rows = [*(_row(i, _run(i)) for i in range(BIG)), (BIG, "r-bad", text, None, checksum(text))]
    assert _error_of(lambda: decode_segments("s", rows)) == _error_of(lambda: _one_by_one("s", rows))


# ---------------------------------------------------------------------------- decode_segments


@pytest.mark.parametrize("count", [1, 3, BIG])
def test_bulk_decode_equals_row_by_row(count):
    rows = [_row(i, _run(i), {"turn": i, "nested": {"x": [1.5, None]}} if i % 2 else None) for i in range(count)]
    rows.append(_row(count, []))  # an empty run
    assert decode_segments("s", rows) == _one_by_one("s", rows)


def _as_bytes(rows: list[tuple]) -> list[tuple]:
    """Rows as SQLite's load selects them: both JSON texts as their UTF-8 bytes."""
    return [(i, rid, text.encode(), None if meta is None else meta.encode(), crc) for i, rid, text, meta, crc in rows]


_meta_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.none() | st.dictionaries(st.text(max_size=5), _meta_values, max_size=4), min_size=1, max_size=80))
def test_metas_read_in_bulk_as_json_loads_reads_them(metas):
    # Floats to the last bit, integers past 64 bits, any text, null and nested values: the one
    # parse of every meta gives what json.loads gives row by row, from text or from bytes.
    rows = [_row(i, _run(i) if i % 4 == 0 else [], meta) for i, meta in enumerate(metas)]
    expected = _one_by_one("s", rows)
    assert decode_segments("s", rows) == expected
    assert decode_segments("s", _as_bytes(rows)) == expected


def test_a_meta_stored_as_null_reads_as_none_in_bulk(monkeypatch):
    rows = [_row(i, _run(i), {"i": i}) for i in range(BIG)]
    rows = _damaged(rows, 7, **_signed(rows[7][2], "null"))  # decode_meta's reading: no meta
    monkeypatch.setattr(_codec, "decode_segment", lambda *a: pytest.fail("decoded row by row"))
    decoded = decode_segments("s", _as_bytes(rows))
    assert [seg.meta for _, seg in decoded] == [None if i == 7 else {"i": i} for i in range(BIG)]


def test_rows_without_checksum_are_decoded_in_place():
    rows = [_row(i, _run(i), signed=i % 5 != 0) for i in range(BIG)]
    assert decode_segments("s", rows) == _one_by_one("s", rows)


def _damaged(rows: list[tuple], at: int, **change: Any) -> list[tuple]:
    row_id, run_id, text, meta_json, stored = rows[at]
    fields = {"text": text, "meta_json": meta_json, "stored": stored, **change}
    rows = list(rows)
    rows[at] = (row_id, run_id, fields["text"], fields["meta_json"], fields["stored"])
    return rows


def _signed(text: str, meta_json: str | None = None) -> dict[str, Any]:
    """A row edited by someone who also recomputed its checksum: verified, but still malformed."""
    return {"text": text, "meta_json": meta_json, "stored": checksum(text, meta_json)}


_ENTRY = '{"type":"tool_call","call_id":"c","name":"n","arguments":"{}"}'

DAMAGE = {
    "flipped byte": lambda text: {"text": text.replace("question", "questiom", 1)},
    "edited meta": lambda text: {"meta_json": '{"turn":999}'},
    "no longer JSON": lambda text: _signed(text[:-1]),
    "not an array": lambda text: _signed('{"type":"input"}'),
    "an empty object": lambda text: _signed("{}"),
    "array of non-entries": lambda text: _signed("[1,2]"),
    "unknown entry type": lambda text: _signed('[{"type":"hologram","content":"x"}]'),
    "entry missing a field": lambda text: _signed('[{"type":"tool_call","call_id":"c"}]'),
    "two arrays in one row": lambda text: _signed(f"[{_ENTRY}],[{_ENTRY}]"),
    "meta not an object": lambda text: _signed(text, "[1]"),
    "meta a string": lambda text: _signed(text, '"x"'),
    "meta no longer JSON": lambda text: _signed(text, '{"turn":'),
    "meta two objects": lambda text: _signed(text, '{"a":1},{"b":2}'),
    "unverified and broken": lambda text: {"text": "[{", "stored": None},
    "entries NULL": lambda text: {"text": None},
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("count", [2, BIG])
def test_a_damaged_row_is_reported_as_row_by_row_would(damage, count):
    rows = [_row(i, _run(i), {"turn": i}) for i in range(count)]
    at = count // 2
    rows = _damaged(rows, at, **DAMAGE[damage](rows[at][2]))
    expected = _error_of(lambda: _one_by_one("s", rows))
    assert _error_of(lambda: decode_segments("s", rows)) == expected
    if rows[at][2] is not None:  # as SQLite hands them over: the same error
        assert _error_of(lambda: decode_segments("s", _as_bytes(rows))) == expected
    message, session_id, run_id, hint = expected
    assert (session_id, run_id) == ("s", f"r{at}") and hint


def test_the_first_damaged_row_is_the_one_reported():
    rows = [_row(i, _run(i)) for i in range(BIG)]
    rows = _damaged(rows, 70, **DAMAGE["entry missing a field"](""))  # found only when parsing
    rows = _damaged(rows, 20, text=rows[20][2].replace("question", "questiom"))  # a checksum mismatch
    rows = _damaged(rows, 10, text="[{", stored=None)  # unverified
    _, _, run_id, _ = _error_of(lambda: decode_segments("s", rows))
    assert run_id == "r10"


# ---------------------------------------------------------------------------- the collector


@pytest.fixture
def collector():
    """Restore the collector's state and thresholds whatever a test does."""
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def test_gc_paused_restores_the_state_it_found(collector):
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()  # a collector the application turned off stays off


def test_gc_paused_restores_the_collector_when_the_block_raises(collector):
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_on_several_threads_end_with_the_collector_on(collector):
    gc.enable()
    inside, release = threading.Barrier(4), threading.Event()

    def hold() -> None:
        with gc_paused():
            inside.wait()
            release.wait(5)

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for t in threads:
        t.join()
    assert gc.isenabled() and _codec._gc_pausers == 0


def test_no_collection_runs_inside_a_bulk_decode_and_none_is_lost(collector):
    rows = [_row(i, _run(i)) for i in range(BIG)]
    seen: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(_codec._gc_pausers)

    gc.enable()
    gc.set_threshold(5, 1, 1)  # without the pause the decode would collect many times
    gc.callbacks.append(watch)
    try:
        decoded = decode_segments("s", rows)
        [object() for _ in range(10)]  # noqa: B018 -- allocate after the decode
        for _ in range(3):
            decoded.append((0, Segment("x", [])))
    finally:
        gc.callbacks.remove(watch)
    assert seen, "the deferred collections did run after the decode"
    assert all(pausers == 0 for pausers in seen), "a collection ran while the decode had paused it"


async def test_a_store_load_that_raises_leaves_the_collector_as_it_was(tmp_path, collector):
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        for i in range(BIG):
            await session.append("s", _run(i), run_id=f"r{i}")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE session_runs SET entries_json = replace(entries_json, 'question 77', 'question 7!')")
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        async with SQLiteSession(path) as fresh:
            with pytest.raises(CorruptRecordError) as err:
                await fresh.load("s")
        assert err.value.run_id == "r77" and err.value.hint
        assert gc.isenabled() is enabled


# ---------------------------------------------------------------------------- stores end to end


async def test_sqlite_cold_load_of_a_long_session_matches_what_was_appended(tmp_path):
    path = tmp_path / "s.db"
    expected: list[Any] = []
    async with SQLiteSession(path) as session:
        for i in range(BIG):
            await session.append("s", _run(i), run_id=f"r{i}", meta={"i": i} if i % 3 else None)
            expected += _run(i)
        warm = await session.segments("s")
    async with SQLiteSession(path) as cold:
        assert await cold.load("s") == expected
        assert await cold.segments("s") == warm


@pytest.fixture
def schema():
    name = _pg.new_schema("bulk")
    yield name
    _pg.drop_schema(name)


@pytest.mark.postgres
@_pg.requires_pg
async def test_postgres_cold_load_and_a_damaged_row_in_a_long_session(schema):
    import psycopg

    expected: list[Any] = []
    async with PostgresSession(_pg.DSN, schema=schema) as session:
        for i in range(BIG):
            await session.append("s", _run(i), run_id=f"r{i}", meta={"i": i})
            expected += _run(i)
    async with PostgresSession(_pg.DSN, schema=schema) as cold:
        assert await cold.load("s") == expected
    with psycopg.connect(_pg.DSN, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("UPDATE session_runs SET meta_json = %s WHERE run_id = 'r40'", (json.dumps({"i": 41}),))
    async with PostgresSession(_pg.DSN, schema=schema) as cold:
        with pytest.raises(CorruptRecordError) as err:
            await cold.load("s")
    assert (err.value.session_id, err.value.run_id) == ("s", "r40") and "checksum" in str(err.value)
    assert err.value.hint and "rewind or clear" in err.value.hint


@pytest.mark.parametrize("signed", [True, False])
async def test_sqlite_entries_that_are_not_utf8_name_their_row(tmp_path, signed):
    # A load reads the entries as their bytes: bytes that are not UTF-8 (the file edited by hand)
    # are a CorruptRecordError naming the row, and the other sessions still load.
    path = tmp_path / "s.db"
    async with SQLiteSession(path) as session:
        for i in range(BIG):
            await session.append("s", _run(i), run_id=f"r{i}")
        await session.append("other", _run(0), run_id="o")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE session_runs SET entries_json = CAST(x'5b5b302c227573657222ff5d5d' AS TEXT)"
            + ("" if signed else ", checksum = NULL")
            + " WHERE run_id = 'r9'"
        )
    async with SQLiteSession(path) as cold:
        with pytest.raises(CorruptRecordError) as err:
            await cold.load("s")
        assert (err.value.session_id, err.value.run_id) == ("s", "r9") and err.value.hint
        assert await cold.load("other") == _run(0)


async def test_sqlite_meta_that_is_not_utf8_names_its_row(tmp_path):
    path = tmp_path / "m.db"
    async with SQLiteSession(path) as session:
        for i in range(BIG):
            await session.append("s", _run(i), run_id=f"r{i}", meta={"i": i})
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE session_runs SET meta_json = CAST(x'7b2269223aff7d' AS TEXT) WHERE run_id = 'r5'")
    async with SQLiteSession(path) as cold:
        with pytest.raises(CorruptRecordError) as err:
            await cold.load("s")
        assert (err.value.session_id, err.value.run_id) == ("s", "r5") and err.value.hint


@pytest.mark.parametrize("count", [1, 2, BIG])
def test_well_formed_rows_never_leave_the_bulk_path(count, monkeypatch):
    # The row-by-row decoder gives the same answer, so only this shows the fast path was taken.
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("decoded row by row")

    monkeypatch.setattr(_codec, "decode_segment", refuse)
    rows = [_row(i, _run(i), {"i": i} if i % 2 else None) for i in range(count)]
    decoded = _codec.decode_history("s", rows)
    assert decoded.entries == [e for i in range(count) for e in _run(i)]
    assert [end for _, _, end in decoded.marks] == [5 * (i + 1) for i in range(count)]
