"""Store contract tests: subclass one, provide the fixture, and pytest checks your store.

::

    from lovia.testing import SessionContract, CheckpointerContract

    class TestMySession(SessionContract):
        @pytest.fixture
        async def session(self, tmp_path):
            return MySession(tmp_path / "s.db")

    class TestMyCheckpointer(CheckpointerContract):
        @pytest.fixture
        async def checkpointer(self, tmp_path):
            return MyCheckpointer(tmp_path / "c.db")

The fixture must return a fresh, empty store. Optional features are tested only when the store
has them: ``trim_tool_results``, ``rewind`` and ``list_sessions`` on a session; ``list_runs`` and
the :class:`~lovia.checkpointer.LeasingCheckpointer` methods on a checkpointer. Needs pytest and
pytest-asyncio (``asyncio_mode = "auto"``, or mark the tests yourself).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ..checkpointer import Checkpointer, LeasingCheckpointer, RunHead
from ..exceptions import LeaseLostError, RunBusy
from ..messages import FilePart, ImagePart, TextPart, Usage
from ..session import Session
from ..transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

__all__ = ["CheckpointerContract", "SessionContract", "every_entry_kind"]


def every_entry_kind() -> list[TranscriptEntry]:
    """One entry of each kind, with parts, raw, metadata and optional fields set."""
    return [
        InputEntry(role="system", content="You are terse."),
        InputEntry(
            role="user",
            content=[
                TextPart("what is in these?"),
                ImagePart(url="https://example.invalid/cat.png", detail="low"),
                FilePart(data="aGVsbG8=", mime_type="text/plain", filename="hello.txt"),
            ],
        ),
        ReasoningEntry(
            content="look first", id="rs_1", provider="anthropic", metadata={"signature": "c2ln", "n": [1, 2]}
        ),
        AssistantTextEntry(content="Looking. \u00e9\u00e0 \u2713", id="msg_1"),
        ToolCallEntry(call_id="call_1", name="inspect", arguments='{"path": "cat.png"}'),
        ToolResultEntry(
            call_id="call_1",
            output="a cat",
            raw={"label": "cat", "scores": [0.9, 0.1], "nested": {"ok": True, "none": None}},
            is_error=True,
            parts=[TextPart("a cat"), ImagePart(data="iVBORw0=", mime_type="image/png")],
        ),
        AssistantTextEntry(content="A cat."),
    ]


def _text(n: int) -> list[TranscriptEntry]:
    return [InputEntry(role="user", content=f"message {n}"), AssistantTextEntry(content=f"answer {n}")]


def _tool_run(call_id: str, output: str, *, raw: Any = None) -> list[TranscriptEntry]:
    return [
        InputEntry(role="user", content="go"),
        ToolCallEntry(call_id=call_id, name="fetch", arguments="{}"),
        ToolResultEntry(call_id=call_id, output=output, raw=raw),
        AssistantTextEntry(content="done"),
    ]


class SessionContract:
    """The :class:`~lovia.session.Session` contract; subclass it and define a ``session`` fixture."""

    pytestmark = [pytest.mark.asyncio]

    async def test_is_a_session(self, session: Session) -> None:
        assert isinstance(session, Session)

    async def test_unknown_session_is_empty(self, session: Session) -> None:
        assert await session.segments("nobody") == []
        assert await session.load("nobody") == []

    async def test_round_trip_every_entry_kind(self, session: Session) -> None:
        entries = every_entry_kind()
        await session.append("s", entries, run_id="r1")
        assert await session.load("s") == entries
        [segment] = await session.segments("s")
        assert (segment.run_id, segment.entries, segment.meta) == ("r1", entries, None)

    async def test_segments_keep_append_order_and_load_concatenates(self, session: Session) -> None:
        for n in range(5):
            await session.append("s", _text(n), run_id=f"run-{4 - n}")
        segments = await session.segments("s")
        assert [s.run_id for s in segments] == [f"run-{4 - n}" for n in range(5)]
        assert await session.load("s") == [e for n in range(5) for e in _text(n)]

    async def test_append_is_idempotent_by_run_id(self, session: Session) -> None:
        assert await session.append("s", _text(1), run_id="r", meta={"v": 1}) == "r"
        assert await session.append("s", _text(2), run_id="r", meta={"v": 2}) == "r"
        [segment] = await session.segments("s")
        assert segment.entries == _text(1) and segment.meta == {"v": 1}

    async def test_generated_run_ids_are_returned_and_unique(self, session: Session) -> None:
        ids = [await session.append("s", _text(n)) for n in range(3)]
        assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == 3
        assert [s.run_id for s in await session.segments("s")] == ids

    async def test_meta_is_stored_verbatim(self, session: Session) -> None:
        meta = {
            "context_state": {"stage": 2, "ids": ["a", "b"]},
            "timing": {"started_at": 1.5, "finished_at": 2.25},
            "u": "\u2603",
            "none": None,
        }
        await session.append("s", _text(1), run_id="a", meta=meta)
        await session.append("s", _text(2), run_id="b")
        segments = await session.segments("s")
        assert segments[0].meta == meta and segments[1].meta is None

    async def test_empty_run_is_a_segment(self, session: Session) -> None:
        await session.append("s", [], run_id="empty")
        assert [(s.run_id, s.entries) for s in await session.segments("s")] == [("empty", [])]

    async def test_clear_forgets_only_that_session(self, session: Session) -> None:
        await session.append("a", _text(1), run_id="r")
        await session.append("b", _text(2), run_id="r")
        await session.clear("a")
        await session.clear("never-existed")
        assert await session.segments("a") == []
        assert await session.load("b") == _text(2)
        await session.append("a", _text(3), run_id="r")
        assert await session.load("a") == _text(3)

    async def test_sessions_are_isolated(self, session: Session) -> None:
        await session.append("a", _text(1), run_id="same")
        await session.append("b", _text(2), run_id="same")
        assert await session.load("a") == _text(1)
        assert await session.load("b") == _text(2)

    async def test_caller_mutation_cannot_change_stored_state(self, session: Session) -> None:
        entries = _tool_run("c", "out", raw={"k": [1]})
        meta: dict[str, Any] = {"k": [1]}
        await session.append("s", entries, run_id="r", meta=meta)
        entries.clear()
        meta["k"].append(2)
        first = await session.segments("s")
        first[0].entries.clear()
        assert first[0].meta is not None
        first[0].meta["k"].append(3)
        [segment] = await session.segments("s")
        assert segment.entries == _tool_run("c", "out", raw={"k": [1]}) and segment.meta == {"k": [1]}

    async def test_concurrent_appends_lose_and_duplicate_nothing(self, session: Session) -> None:
        distinct = [session.append("s", _text(n), run_id=f"r{n}") for n in range(40)]
        duplicates = [session.append("s", _text(99), run_id="dup") for _ in range(10)]
        await asyncio.gather(*distinct, *duplicates)
        runs = [s.run_id for s in await session.segments("s")]
        assert sorted(runs) == sorted([f"r{n}" for n in range(40)] + ["dup"])

    # ------------------------------------------------------------------ maintenance (optional)

    async def test_trim_tool_results(self, session: Session) -> None:
        trim = _require(session, "trim_tool_results")
        long = "x" * 2_000
        await session.append("s", _tool_run("c1", long, raw={"big": long}) + _tool_run("c2", "short"), run_id="old")
        await session.append("s", _tool_run("c3", long), run_id="new")
        assert await trim("s") == 1
        old, new = await session.segments("s")
        result = old.entries[2]
        assert isinstance(result, ToolResultEntry)
        assert result.output.startswith("x" * 400) and "1600" in result.output and "archived" in result.output
        assert len(result.output) < len(long) and result.raw is None
        assert (result.call_id, result.is_error) == ("c1", False)
        assert [type(e) for e in old.entries] == [type(e) for e in _tool_run("c1", long) * 2]
        assert old.entries[6] == ToolResultEntry(call_id="c2", output="short")
        assert new.entries == _tool_run("c3", long)
        assert await trim("s") == 0
        assert await session.segments("s") == [old, new]

    async def test_trim_scope_and_arguments(self, session: Session) -> None:
        trim = _require(session, "trim_tool_results")
        await session.append("s", _tool_run("c1", "y" * 500), run_id="a")
        await session.append("s", _tool_run("c2", "z" * 5_000), run_id="b")
        assert await trim("s", keep_chars=450, keep_runs=0) == 1  # a's marker would not save space
        a, b = await session.load("s"), None
        assert a[2] == ToolResultEntry(call_id="c1", output="y" * 500)
        b = a[6]
        assert isinstance(b, ToolResultEntry) and b.output.startswith("z" * 450) and len(b.output) < 1_000
        assert await trim("s", keep_chars=0, keep_runs=0) == 1
        for bad in ({"keep_chars": -1}, {"keep_runs": -1}):
            with pytest.raises(ValueError):
                await trim("s", **bad)

    async def test_rewind_cuts_inside_a_run(self, session: Session) -> None:
        rewind = _require(session, "rewind")
        await session.append("s", _text(1), run_id="a", meta={"keep": True})
        await session.append("s", _tool_run("c", "out"), run_id="b", meta={"context_state": {"x": 1}})
        await session.append("s", _text(3), run_id="c")
        # keep 2 + 2: "go" and the call; the call has no result at the cut, so it goes too
        assert await rewind("s", keep_entries=4) == 5
        segments = await session.segments("s")
        assert [(s.run_id, s.entries, s.meta) for s in segments] == [
            ("a", _text(1), {"keep": True}),
            ("b", [InputEntry(role="user", content="go")], None),
        ]
        assert await rewind("s", keep_entries=3) == 0
        await session.append("s", _text(4), run_id="c")
        assert await session.load("s") == _text(1) + [InputEntry(role="user", content="go")] + _text(4)

    async def test_rewind_on_boundary_keeps_meta_and_edges(self, session: Session) -> None:
        rewind = _require(session, "rewind")
        await session.append("s", _text(1), run_id="a", meta={"m": 1})
        await session.append("s", _text(2), run_id="b")
        assert await rewind("s", keep_entries=2) == 2
        assert [(s.run_id, s.meta) for s in await session.segments("s")] == [("a", {"m": 1})]
        assert await rewind("s", keep_entries=10) == 0
        with pytest.raises(ValueError):
            await rewind("s", keep_entries=-1)
        assert await rewind("s", keep_entries=0) == 2
        assert await session.segments("s") == []

    async def test_list_sessions(self, session: Session) -> None:
        list_sessions = _require(session, "list_sessions")
        await session.append("user-1", _text(1), run_id="a")
        await session.append("user-2", _text(2) + _text(3), run_id="a")
        await session.append("bot-9", _text(4), run_id="a")
        await session.append("user-1", _text(5), run_id="b")
        infos = await list_sessions()
        assert [(i.session_id, i.runs, i.entries) for i in infos] == [
            ("user-1", 2, 4),
            ("bot-9", 1, 2),
            ("user-2", 1, 4),
        ]
        assert infos[0].created_at <= infos[0].updated_at
        assert [i.session_id for i in await list_sessions(query="user")] == ["user-1", "user-2"]
        assert [i.session_id for i in await list_sessions(limit=1, offset=1)] == ["bot-9"]


def _require(store: object, name: str) -> Any:
    method = getattr(store, name, None)
    if method is None:
        pytest.skip(f"{type(store).__name__} has no {name}()")
    return method


def _head(**fields: Any) -> RunHead:
    return RunHead(**{"agent_name": "agent", "started_at": 100.0, "updated_at": 100.0, **fields})


class CheckpointerContract:
    """The :class:`~lovia.checkpointer.Checkpointer` contract; subclass it and define a ``checkpointer`` fixture."""

    pytestmark = [pytest.mark.asyncio]

    async def test_is_a_checkpointer(self, checkpointer: Checkpointer) -> None:
        assert isinstance(checkpointer, Checkpointer)

    async def test_unknown_run_loads_none(self, checkpointer: Checkpointer) -> None:
        assert await checkpointer.load("nope") is None

    async def test_batches_append_and_head_is_overwritten(self, checkpointer: Checkpointer) -> None:
        await checkpointer.append("r", _text(1), _head(turns=1))
        await checkpointer.append("r", _tool_run("c", "out"), _head(turns=2, status="interrupted"))
        snap = await checkpointer.load("r")
        assert snap is not None
        assert (snap.run_id, snap.entries, snap.turns, snap.status) == (
            "r",
            _text(1) + _tool_run("c", "out"),
            2,
            "interrupted",
        )

    async def test_empty_batches_only_move_the_head(self, checkpointer: Checkpointer) -> None:
        await checkpointer.append("r", [], _head(turns=0))
        snap = await checkpointer.load("r")
        assert snap is not None and snap.entries == [] and snap.agent_name == "agent"
        await checkpointer.append("r", _text(1), _head(turns=1))
        await checkpointer.append("r", [], _head(turns=2, status="completed", output="fine"))
        snap = await checkpointer.load("r")
        assert snap is not None and (snap.entries, snap.turns, snap.output) == (_text(1), 2, "fine")

    async def test_every_head_field_round_trips(self, checkpointer: Checkpointer) -> None:
        head = RunHead(
            agent_name="triage",
            usage=Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, cache_write_tokens=7),
            turns=4,
            status="failed",
            output={"answer": [1, "two", None]},
            error={"type": "ToolError", "message": "boom \u2603"},
            last_input_tokens=118,
            context_state={"stage": "offload", "ids": ["call_1"]},
            pending_handoff="billing",
            started_calls=["call_9"],
            repair_attempts=1,
            started_at=1_700_000_000.25,
            updated_at=1_700_000_123.5,
            model_usage={"openai:gpt-4o": Usage(input_tokens=100, output_tokens=20), "anthropic:claude": Usage(20, 10)},
            trace={"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"},
        )
        await checkpointer.append("r", every_entry_kind(), head)
        snap = await checkpointer.load("r")
        assert snap is not None and snap.head == head and snap.entries == every_entry_kind()

    async def test_stored_entries_are_never_rewritten(self, checkpointer: Checkpointer) -> None:
        batch = _text(0)
        await checkpointer.append("r", batch, _head())
        batch.clear()
        seen: list[TranscriptEntry] = _text(0)
        for n in range(1, 20):
            await checkpointer.append("r", _text(n), _head(turns=n))
            snap = await checkpointer.load("r")
            assert snap is not None and snap.entries[: len(seen)] == seen
            seen = snap.entries
        assert len(seen) == 40
        seen.clear()
        again = await checkpointer.load("r")
        assert again is not None and len(again.entries) == 40

    async def test_delete(self, checkpointer: Checkpointer) -> None:
        await checkpointer.append("r", _text(1), _head())
        await checkpointer.append("other", _text(2), _head())
        await checkpointer.delete("r")
        await checkpointer.delete("never-existed")
        assert await checkpointer.load("r") is None
        other = await checkpointer.load("other")
        assert other is not None and other.entries == _text(2)
        await checkpointer.append("r", _text(3), _head())
        fresh = await checkpointer.load("r")
        assert fresh is not None and fresh.entries == _text(3)

    async def test_concurrent_saves_lose_nothing(self, checkpointer: Checkpointer) -> None:
        await asyncio.gather(*(checkpointer.append(f"r{n % 4}", _text(n), _head(turns=n)) for n in range(40)))
        for r in range(4):
            snap = await checkpointer.load(f"r{r}")
            assert snap is not None
            assert sorted(e.text for e in snap.entries if isinstance(e, InputEntry)) == sorted(
                f"message {n}" for n in range(r, 40, 4)
            )

    async def test_list_runs(self, checkpointer: Checkpointer) -> None:
        list_runs = _require(checkpointer, "list_runs")
        await checkpointer.append("a", _text(1), _head(updated_at=10.0, turns=1))
        await checkpointer.append("b", _text(1) + _text(2), _head(updated_at=30.0, status="completed"))
        await checkpointer.append("c", [], _head(updated_at=20.0, status="interrupted", agent_name="x"))
        runs = await list_runs()
        assert [(r.run_id, r.entries, r.status) for r in runs] == [
            ("b", 4, "completed"),
            ("c", 0, "interrupted"),
            ("a", 2, "running"),
        ]
        assert (runs[2].agent_name, runs[2].turns, runs[2].started_at, runs[2].updated_at) == ("agent", 1, 100.0, 10.0)
        assert [r.run_id for r in await list_runs(status="interrupted")] == ["c"]
        assert [r.run_id for r in await list_runs(limit=1, offset=1)] == ["c"]

    # ------------------------------------------------------------------ leases (optional)

    def _leasing(self, checkpointer: Checkpointer) -> LeasingCheckpointer:
        if not isinstance(checkpointer, LeasingCheckpointer):
            pytest.skip(f"{type(checkpointer).__name__} is not a LeasingCheckpointer")
        return checkpointer

    async def test_lease_excludes_other_owners_and_renews_for_its_own(self, checkpointer: Checkpointer) -> None:
        cp = self._leasing(checkpointer)
        lease = await cp.acquire_lease("r", owner="w1", ttl=30)
        with pytest.raises(RunBusy) as busy:
            await cp.acquire_lease("r", owner="w2", ttl=30)
        assert busy.value.hint and busy.value.expires_in is not None and 0 < busy.value.expires_in <= 30
        again = await cp.acquire_lease("r", owner="w1", ttl=60)
        assert again.token == lease.token and again.expires_at > lease.expires_at
        renewed = await cp.renew_lease(again, ttl=90)
        assert renewed.token == lease.token and renewed.expires_at >= again.expires_at
        other = await cp.acquire_lease("other-run", owner="w2", ttl=30)
        assert other.owner == "w2"

    async def test_expired_lease_is_taken_over_and_fenced(self, checkpointer: Checkpointer) -> None:
        cp = self._leasing(checkpointer)
        stale = await cp.acquire_lease("r", owner="w1", ttl=0.05)
        await cp.append_fenced("r", _text(1), _head(turns=1), lease=stale)
        await asyncio.sleep(0.1)
        fresh = await cp.acquire_lease("r", owner="w2", ttl=30)
        assert fresh.token == stale.token + 1
        with pytest.raises(LeaseLostError):
            await cp.append_fenced("r", _text(2), _head(turns=9), lease=stale)
        with pytest.raises(LeaseLostError):
            await cp.renew_lease(stale, ttl=30)
        await cp.release_lease(stale)  # lost already: no error, no effect
        await cp.append_fenced("r", _text(3), _head(turns=2), lease=fresh)
        snap = await cp.load("r")
        assert snap is not None and (snap.entries, snap.turns) == (_text(1) + _text(3), 2)

    async def test_release_hands_the_run_over(self, checkpointer: Checkpointer) -> None:
        cp = self._leasing(checkpointer)
        first = await cp.acquire_lease("r", owner="w1", ttl=30)
        await cp.release_lease(first)
        with pytest.raises(LeaseLostError):
            await cp.append_fenced("r", _text(1), _head(), lease=first)
        assert await cp.load("r") is None
        second = await cp.acquire_lease("r", owner="w2", ttl=30)
        assert second.token > first.token
        await cp.delete("r")  # a live lease survives delete, so a restart keeps its fence
        await cp.append_fenced("r", _text(1), _head(), lease=second)

    async def test_concurrent_acquire_has_one_winner(self, checkpointer: Checkpointer) -> None:
        cp = self._leasing(checkpointer)
        results = await asyncio.gather(
            *(cp.acquire_lease("r", owner=f"w{n}", ttl=30) for n in range(10)), return_exceptions=True
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        assert len(winners) == 1 and all(isinstance(r, RunBusy) for r in results if r not in winners)
