"""``safe_window`` as lovia 0.9.119 states it: a negative head is 0, a tail opening on results pulls
their calls in (repeatedly), orphan results go, a call the head keeps answers for the tail, and a
tail that reaches the head gives back the whole list."""

from __future__ import annotations

from lovia.transcript import AssistantTextEntry, InputEntry, ToolCallEntry, ToolResultEntry, safe_window


def c(call_id: str) -> ToolCallEntry:
    return ToolCallEntry(call_id=call_id, name="f", arguments="{}")


def r(call_id: str) -> ToolResultEntry:
    return ToolResultEntry(call_id=call_id, output=f"out {call_id}")


U = InputEntry(role="user", content="go")
A = AssistantTextEntry(content="ok")


def test_negative_head_counts_as_zero():
    entries = [U, A, U, A, U, A]
    assert safe_window(entries, head=-3, tail=2) == entries[-2:]


def test_a_tail_pulls_in_calls_repeatedly_and_drops_results_whose_call_exists_nowhere():
    entries = [U, A, U, c("a"), c("b"), r("a"), r("b"), A]
    # tail 2 opens on r("b"): its call c("b") comes in, which brings r("a") in, so c("a") too
    assert safe_window(entries, tail=2) == entries[3:]
    orphaned = [U, A, U, A, r("ghost"), U, A]
    assert safe_window(orphaned, head=1, tail=3) == [U, U, A]


def test_a_call_kept_by_the_head_answers_for_the_tail_and_a_tail_reaching_the_head_gives_all():
    entries = [c("x"), U, A, U, A, r("x"), A]
    window = safe_window(entries, head=1, tail=2)
    assert window == [c("x"), r("x"), A]  # nothing duplicated, nothing pulled in between
    reaching = [U, c("a"), A, U, A, r("a"), A]
    assert safe_window(reaching, head=1, tail=2) == reaching
