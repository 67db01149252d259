"""An offline eval suite: run it with `lovia eval examples/eval_suite.py`, or directly with Python.

Every case carries its own scripted model (and the tone case a scripted judge), so the suite runs
without network or keys. Swap the `model=` factories for real model strings to run it live.

As a script it evaluates the cases, prints the report, saves it as a baseline, then shows what a
regression looks like: one answer gets worse and `Report.compare` names it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path

from lovia import Agent, tool
from lovia.eval import Case, Report, contains, evaluate, llm_judge, matches, tool_called, tool_not_called
from lovia.testing import ScriptedProvider, ScriptedTurn, call, text

SUITE = "support-desk"


@tool
def order_status(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped", "eta": "Friday"}


def scripted(*turns: ScriptedTurn) -> Callable[[], ScriptedProvider]:
    """A factory of fresh scripted models (one per sample)."""
    return lambda: ScriptedProvider(list(turns))


def build_cases(refund_answer: str = "You can ask for a refund within 30 days under Billing.") -> list[Case]:
    return [
        Case(
            "Where is order A-17?",
            checks=[tool_called("order_status"), contains("Friday")],
            model=scripted(
                call("order_status", {"order_id": "A-17"}), text("Order A-17 has shipped; it arrives Friday.")
            ),
        ),
        Case(
            "How do refunds work?",
            name="refund policy",
            checks=[contains("30 days"), tool_not_called("order_status")],
            model=scripted(text(refund_answer)),
        ),
        Case(
            "Classify: 'my parcel never came'",
            name="triage",
            checks=[matches({"category": "delivery"})],
            model=scripted(text('{"category": "delivery", "urgent": true}')),
            output_type=dict,
        ),
        Case(
            "I am furious, nothing works!",
            name="tone",
            checks=[
                llm_judge(
                    "Calm, apologetic, and offers a concrete next step",
                    model=scripted(text('{"score": 0.85, "reasoning": "apologises and offers a callback"}')),
                )
            ],
            model=scripted(text("I'm sorry about this. I can arrange a callback today; what time suits you?")),
        ),
    ]


cases = build_cases()
agent = Agent(name="support", instructions="Help customers briefly.", tools=[order_status])


async def main() -> None:
    report = await evaluate(agent, cases)
    print(report)
    with tempfile.TemporaryDirectory() as tmp:
        baseline = Path(tmp) / "baseline.json"
        report.save(baseline)
        worse = await evaluate(agent, build_cases(refund_answer="Refunds? Ask someone else."))
        print(worse.compare(Report.load(baseline)))


if __name__ == "__main__":
    asyncio.run(main())
