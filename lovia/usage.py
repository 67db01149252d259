"""Token usage per run and per session, and what it cost.

Prices come from the ``genai-prices`` package (extra ``lovia[cost]``), a maintained table of model
prices; it is imported lazily. A model the table does not know (or a missing package) gives a
:class:`Cost` whose ``amount`` is ``None`` and which prints as ``cost unknown``.

Runs record their usage per model in the session segment's ``meta["usage"]``
(see :func:`usage_meta`); :func:`session_usage` adds those up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .messages import Usage

__all__ = [
    "Cost",
    "SessionUsage",
    "add_model_usage",
    "cost_of",
    "format_usage",
    "load_session_usage",
    "run_cost",
    "session_usage",
    "usage_meta",
]

UNATTRIBUTED = "?"
"""Key for tokens whose model is not known (e.g. spent before a resume in another process)."""

# lovia provider names -> genai-prices provider ids.
_PROVIDER_IDS = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "claude": "anthropic",
    "gemini": "google",
    "google": "google",
    "groq": "groq",
    "mistral": "mistral",
    "deepseek": "deepseek",
    "openrouter": "openrouter",
}


@dataclass(frozen=True, slots=True)
class Cost:
    """A price in USD, or ``amount=None`` with the ``reason`` it is unknown."""

    amount: float | None
    currency: str = "USD"
    reason: str = ""

    @property
    def known(self) -> bool:
        """True when the amount could be priced."""
        return self.amount is not None

    def __add__(self, other: Cost) -> Cost:
        if self.amount is None:
            return self
        if other.amount is None:
            return other
        return Cost(self.amount + other.amount, self.currency)

    def __str__(self) -> str:
        if self.amount is None:
            return "cost unknown" + (f" ({self.reason})" if self.reason else "")
        return f"${self.amount:.6f}".rstrip("0").rstrip(".") if self.amount < 0.01 else f"${self.amount:.4f}"


def _split_model(model: str, provider: str | None) -> tuple[str, str | None]:
    """``"openai:gpt-4o"`` -> ``("gpt-4o", "openai")``; a bare name keeps ``provider``."""
    if ":" in model and provider is None:
        vendor, _, name = model.partition(":")
        return name, _PROVIDER_IDS.get(vendor, vendor)
    return model, _PROVIDER_IDS.get(provider, provider) if provider else None


def cost_of(usage: Usage, model: str | None, *, provider: str | None = None) -> Cost:
    """Price ``usage`` on ``model`` (``"gpt-4o"``, ``"openai:gpt-4o"``) with the genai-prices table.

    Cache reads and writes are priced at their own rates (they are part of ``input_tokens``).
    """
    if usage.total_tokens == 0:
        return Cost(0.0)
    if not model or model == UNATTRIBUTED:
        return Cost(None, reason="model not recorded")
    try:
        import genai_prices
    except ImportError:
        return Cost(None, reason="pip install 'lovia[cost]' for prices")
    name, provider_id = _split_model(model, provider)
    priced = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or None,
        cache_write_tokens=usage.cache_write_tokens or None,
    )
    try:
        calc = genai_prices.calc_price(priced, name, provider_id=provider_id)
    except LookupError:
        return Cost(None, reason=f"no price for {model}")
    total = calc.total_price
    return Cost(float(total) if isinstance(total, Decimal) else float(total))


def run_cost(by_model: Mapping[str, Usage], *, provider: str | None = None) -> Cost:
    """The summed cost of per-model usage; unknown when any part is unknown."""
    total = Cost(0.0)
    for model, usage in by_model.items():
        total = total + cost_of(usage, model, provider=provider)
    return total


def add_model_usage(by_model: dict[str, Usage], model: str | None, usage: Usage) -> None:
    """Fold one model call's usage into a per-model tally (the loop calls this after each call)."""
    key = model or UNATTRIBUTED
    slot = by_model.get(key)
    if slot is None:
        by_model[key] = usage.copy()
    else:
        slot.add(usage)


def usage_meta(total: Usage, by_model: Mapping[str, Usage]) -> dict[str, Any]:
    """The ``meta["usage"]`` record of a run: the total plus a per-model breakdown.

    Tokens in ``total`` that no model accounts for (a resumed run only tallies what it spent
    itself) are kept under ``"?"`` so they are not silently priced at zero.
    """
    models = {m: u.to_dict() for m, u in by_model.items()}
    counted = Usage()
    for u in by_model.values():
        counted.add(u)
    rest = Usage(
        max(0, total.input_tokens - counted.input_tokens),
        max(0, total.output_tokens - counted.output_tokens),
        max(0, total.cache_read_tokens - counted.cache_read_tokens),
        max(0, total.cache_write_tokens - counted.cache_write_tokens),
    )
    if rest.total_tokens:
        models[UNATTRIBUTED] = rest.to_dict()
    return {"total": total.to_dict(), "models": models}


@dataclass
class SessionUsage:
    """Tokens of every run in a session, in total and per model, and the cost."""

    total: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    runs: int = 0
    runs_without_usage: int = 0

    @property
    def cost(self) -> Cost:
        """Priced per model; unknown when a model is unknown or a run recorded no usage."""
        if self.runs_without_usage:
            return Cost(None, reason=f"{self.runs_without_usage} run(s) recorded no usage")
        return run_cost(self.by_model)


def session_usage(metas: Iterable[Mapping[str, Any] | None]) -> SessionUsage:
    """Add up the ``meta["usage"]`` records of a session's segments (``[s.meta for s in segments]``)."""
    out = SessionUsage()
    for meta in metas:
        out.runs += 1
        record = (meta or {}).get("usage")
        if not isinstance(record, Mapping):
            out.runs_without_usage += 1
            continue
        out.total.add(Usage.from_dict(record.get("total")))
        for model, data in (record.get("models") or {}).items():
            add_model_usage(out.by_model, str(model), Usage.from_dict(data))
    return out


async def load_session_usage(session: Any, session_id: str) -> SessionUsage:
    """The usage of every run stored in ``session`` under ``session_id`` (reads its segments)."""
    segments = await session.segments(session_id)
    return session_usage(seg.meta for seg in segments)


def format_usage(usage: Usage) -> str:
    """``"1,520 in (300 cache read, 0 cache write) / 321 out"``."""
    cache = ""
    if usage.cache_read_tokens or usage.cache_write_tokens:
        cache = f" ({usage.cache_read_tokens:,} cache read, {usage.cache_write_tokens:,} cache write)"
    return f"{usage.input_tokens:,} in{cache} / {usage.output_tokens:,} out"


def snapshot_cost(snapshot: Any) -> Cost:
    """The cost of a checkpointed run, when its snapshot records usage per model (``model_usage``)."""
    by_model = getattr(snapshot, "model_usage", None)
    if not by_model:
        return Cost(None, reason="the checkpoint records no model") if snapshot.usage.total_tokens else Cost(0.0)
    return run_cost({m: u if isinstance(u, Usage) else Usage.from_dict(u) for m, u in by_model.items()})


def segment_summary(meta: Mapping[str, Any] | None) -> str:
    """One run's tokens and cost from its segment meta, e.g. ``"1,520 in / 321 out · $0.0012"``."""
    single = session_usage([meta])
    if single.runs_without_usage:
        return "usage not recorded"
    return f"{format_usage(single.total)} · {single.cost}"


def session_summary(metas: Iterable[Mapping[str, Any] | None]) -> str:
    """A session's total tokens and cost over all its runs."""
    total = session_usage(list(metas))
    models = ", ".join(sorted(m for m in total.by_model if m != UNATTRIBUTED))
    return f"{total.runs} run(s) · {format_usage(total.total)} · {total.cost}" + (
        f" · models: {models}" if models else ""
    )
