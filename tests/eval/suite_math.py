"""An offline eval suite file for `lovia eval` tests: 24 scripted cases (and one scripted judge).

Env knobs: EVAL_CALL_LOG (append one line per model call), EVAL_DELAY (seconds per scripted
delta, to make a suite slow enough to kill), EVAL_BREAK (a case name whose answer goes wrong).
"""

from __future__ import annotations

import os
from typing import Any

from lovia import Agent, tool
from lovia.eval import Case, contains, equals, llm_judge, max_turns, no_error, tool_called
from lovia.testing import ScriptedProvider, ScriptedTurn, call, text
from lovia.transcript import ToolResultEntry

SUITE = "math"
DELAY = float(os.environ.get("EVAL_DELAY", "0"))
BROKEN = os.environ.get("EVAL_BREAK", "")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _logged(name: str, turns: list[ScriptedTurn]) -> Any:
    """A provider factory whose calls are appended to $EVAL_CALL_LOG (so tests can count them).

    It answers by the transcript, as a model would: the n-th turn after n tool results, so a case
    resumed from its checkpoint after its tool ran gets its final answer, not the first turn again.
    """

    def make() -> ScriptedProvider:
        def respond(entries: Any, tools: Any) -> ScriptedTurn:
            log = os.environ.get("EVAL_CALL_LOG")
            if log:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(name + "\n")
            done = sum(1 for e in entries if isinstance(e, ToolResultEntry))
            turn = turns[min(done, len(turns) - 1)]
            return ScriptedTurn(turn.deltas, delay=DELAY)

        return ScriptedProvider(respond)

    return make


def _case(a: int, b: int) -> Case:
    name = f"add {a} {b}"
    answer = a + b + (1 if name == BROKEN else 0)
    return Case(
        f"What is {a} + {b}?",
        name=name,
        checks=[contains(str(a + b)), tool_called("add"), max_turns(2), no_error()],
        model=_logged(name, [call("add", {"a": a, "b": b}), text(f"{a} + {b} = {answer}")]),
    )


cases = [_case(a, a * 3 + 1) for a in range(22)]
cases.append(Case("Say hi", name="greeting", checks=[equals("hi")], model=_logged("greeting", [text("hi")])))
cases.append(
    Case(
        "Write a polite refusal",
        name="polite refusal",
        checks=[
            llm_judge(
                "A polite refusal",
                model=_logged("judge", [text('{"score": 0.9, "reasoning": "polite and clear"}')]),
            )
        ],
        model=_logged("polite refusal", [text("I am sorry, but I cannot help with that.")]),
    )
)

agent = Agent(name="calc", instructions="Use the add tool for sums.", tools=[add])
