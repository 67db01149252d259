"""Usage per run and per session, cost from the genai-prices table, and the CLI showing both."""

from __future__ import annotations

import asyncio
from pathlib import Path

import genai_prices
import pytest

from lovia import Agent, Runner
from lovia.checkpointer import CheckpointOptions
from lovia.cli import main
from lovia.messages import Usage
from lovia.stores import SQLiteCheckpointer, SQLiteSession
from lovia.testing import ScriptedProvider, text
from lovia.usage import Cost, cost_of, format_usage, load_session_usage, run_cost, session_usage, usage_meta


class OpenAIShaped(ScriptedProvider):
    """A scripted model that reports itself as OpenAI's, so the price table knows it."""

    @property
    def name(self) -> str:
        return "openai"


def _rates(model: str, provider: str) -> tuple[float, float, float]:
    price = genai_prices.calc_price(genai_prices.Usage(input_tokens=1), model, provider_id=provider).model_price
    return float(price.input_mtok), float(price.output_mtok), float(price.cache_read_mtok)


def test_cost_prices_input_output_and_cache_reads_at_their_rates() -> None:
    rate_in, rate_out, rate_cached = _rates("gpt-4o", "openai")
    assert rate_cached < rate_in
    got = cost_of(Usage(input_tokens=10_000, output_tokens=2_000, cache_read_tokens=4_000), "openai:gpt-4o")
    want = (6_000 * rate_in + 4_000 * rate_cached + 2_000 * rate_out) / 1e6
    assert got.known and got.amount == pytest.approx(want)
    no_cache = cost_of(Usage(input_tokens=10_000, output_tokens=2_000), "gpt-4o", provider="openai")
    assert no_cache.amount is not None and no_cache.amount > got.amount
    assert str(cost_of(Usage(), "anything")) == "$0"


def test_unknown_models_say_cost_unknown() -> None:
    unknown = cost_of(Usage(10, 5), "scripted:scripted")
    assert not unknown.known and str(unknown).startswith("cost unknown")
    assert str(cost_of(Usage(10, 5), None)) == "cost unknown (model not recorded)"
    mixed = run_cost({"openai:gpt-4o": Usage(100, 10), "acme:mystery-9": Usage(100, 10)})
    assert not mixed.known
    assert (Cost(1.0) + Cost(None)).amount is None and (Cost(1.0) + Cost(2.0)).amount == 3.0


def test_usage_meta_keeps_unattributed_tokens_separate() -> None:
    meta = usage_meta(Usage(300, 30), {"openai:gpt-4o": Usage(200, 20)})
    assert meta["models"]["?"] == Usage(100, 10).to_dict()
    summary = session_usage([{"usage": meta}, {"usage": usage_meta(Usage(50, 5), {"openai:gpt-4o": Usage(50, 5)})}])
    assert summary.total == Usage(350, 35) and summary.by_model["openai:gpt-4o"] == Usage(250, 25)
    assert not summary.cost.known  # the unattributed part cannot be priced
    assert format_usage(Usage(1520, 321, cache_read_tokens=300)) == "1,520 in (300 cache read, 0 cache write) / 321 out"


def test_runs_and_sessions_show_usage_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "lovia.db")

    async def scenario() -> None:
        session, cp = SQLiteSession(db), SQLiteCheckpointer(db)
        for i, usage in enumerate([Usage(1000, 100, cache_read_tokens=200), Usage(2000, 50)]):
            agent = Agent(name="bot", model=OpenAIShaped([text("ok", usage=usage)], model="gpt-4o"))
            await Runner.run(
                agent, f"q{i}", session=session, session_id="s1", checkpoint=CheckpointOptions(cp, f"r{i}")
            )
        per_session = await load_session_usage(session, "s1")
        assert per_session.runs == 2 and per_session.total == Usage(3000, 150, cache_read_tokens=200)
        assert per_session.cost.known
        odd = Agent(name="bot", model=ScriptedProvider([text("ok", usage=Usage(10, 1))], model="mystery"))
        await Runner.run(odd, "q", session=session, session_id="s2")
        await session.close()
        await cp.close()

    asyncio.run(scenario())
    first = cost_of(Usage(1000, 100, cache_read_tokens=200), "openai:gpt-4o")
    second = cost_of(Usage(2000, 50), "openai:gpt-4o")
    assert main(["sessions", "show", "s1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"session s1: 2 run(s) · 3,000 in (200 cache read, 0 cache write) / 150 out · {first + second}" in out
    assert "models: openai:gpt-4o" in out
    assert f"1,000 in (200 cache read, 0 cache write) / 100 out · {first}" in out
    assert main(["sessions", "show", "s2", "--db", db]) == 0
    assert "cost unknown (no price for scripted:mystery)" in capsys.readouterr().out
    assert main(["runs", "show", "r0", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "1,000 in (200 cache read, 0 cache write) / 100 out" in shown
    cost_row = next(line for line in shown.splitlines() if line.startswith("cost"))
    assert cost_row.split(None, 1)[1].strip() == str(first)  # the checkpoint head records usage per model
