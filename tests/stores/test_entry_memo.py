"""The prefix memo of entry->message conversion returns exactly what a fresh conversion would.

Transcripts grow, are rewound (a shorter prefix, then different entries), interleave (two runs
alternating) and repeat; every memoized result is compared with the unmemoized converter.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lovia.messages import ImagePart, TextPart
from lovia.providers.anthropic import _entries_to_anthropic, entries_to_anthropic
from lovia.providers.openai_chat import _entries_to_chat, entries_to_chat
from lovia.transcript import (
    AssistantTextEntry,
    InputEntry,
    ReasoningEntry,
    ToolCallEntry,
    ToolResultEntry,
    _entries_to_messages,
    entries_to_messages,
)

_t = st.text(alphabet="ab ", max_size=4)
entry = st.one_of(
    st.builds(InputEntry, role=st.sampled_from(["user", "system"]), content=_t | st.just([TextPart("p")])),
    st.builds(AssistantTextEntry, _t),
    st.builds(ReasoningEntry, _t, provider=st.just("anthropic"), metadata=st.just({"signature": "sig"})),
    st.builds(ToolCallEntry, call_id=st.sampled_from(["c1", "c2"]), name=st.just("f"), arguments=st.just("{}")),
    st.builds(
        ToolResultEntry,
        call_id=st.sampled_from(["c1", "c2"]),
        output=_t,
        parts=st.none() | st.just([ImagePart(url="http://x/i.png"), TextPart("t")]),
    ),
)
# One step: grow by some entries, or rewind to a shorter prefix, on transcript 0 or 1.
step = st.tuples(st.integers(0, 1), st.booleans(), st.lists(entry, max_size=4), st.integers(0, 30))


def _check(transcript: list) -> None:
    assert entries_to_messages(transcript) == _entries_to_messages(transcript)
    for flag in (False, True):
        for images in (False, True):
            chat = {"replay_reasoning": flag, "include_images": images}
            assert entries_to_chat(transcript, **chat) == _entries_to_chat(transcript, **chat)
            claude = {"keep_thinking": flag, "include_images": images}
            assert entries_to_anthropic(transcript, **claude) == _entries_to_anthropic(transcript, **claude)


@settings(max_examples=150, deadline=None)
@given(st.lists(step, max_size=25))
def test_memoized_conversion_equals_a_fresh_one(steps):
    transcripts: list[list] = [[], []]
    for which, rewind, new, keep in steps:
        current = transcripts[which]
        current = current[:keep] + new if rewind else current + new
        transcripts[which] = current
        _check(current)
        _check(list(current))  # the same entries in a new list object


def test_returned_lists_are_fresh():
    transcript = [InputEntry(role="user", content="hi"), AssistantTextEntry(content="yo")]
    first = entries_to_messages(transcript)
    first.append("junk")  # type: ignore[arg-type]
    assert entries_to_messages(transcript) == _entries_to_messages(transcript)


def test_an_entry_replaced_in_place_is_converted_again():
    # A context policy rewrites an old entry of the very list it hands over (a cleared tool result):
    # the memo must not serve the conversion of the entry that was there.
    transcript: list = []
    for n in range(60):
        transcript += [
            ToolCallEntry(call_id=f"c{n}", name="f", arguments="{}"),
            ToolResultEntry(call_id=f"c{n}", output=f"result {n}"),
            AssistantTextEntry(content=f"answer {n}"),
        ]
        _check(transcript)
    transcript[31] = ToolResultEntry(call_id="c10", output="[cleared]")
    _check(transcript)
    transcript.append(InputEntry(role="user", content="more"))
    _check(transcript)


def test_threads_sharing_the_memo_get_what_a_fresh_conversion_gives():
    import threading

    errors: list[BaseException] = []

    def grow(seed: int) -> None:
        transcript: list = [InputEntry(role="user", content=f"start {seed % 2}")]
        try:
            for n in range(150):
                transcript += [
                    ToolCallEntry(call_id=f"c{n}", name="f", arguments="{}"),
                    ToolResultEntry(call_id=f"c{n}", output=f"{seed}:{n}"),
                ]
                assert entries_to_messages(transcript) == _entries_to_messages(transcript)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=grow, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_call_late_in_a_long_transcript_converts_only_what_is_new():
    from lovia._entry_memo import PrefixMemo

    converted: list[int] = []

    def convert(entries: list) -> list:
        converted.append(len(entries))
        return [e.content for e in entries]

    memo = PrefixMemo(convert, lambda previous, entry: True)
    transcript: list = []
    for n in range(2_000):
        transcript.append(AssistantTextEntry(content=f"a{n}"))
        converted.clear()
        assert memo(transcript) == [e.content for e in transcript]
        assert sum(converted) <= 2, (n, converted)  # the newest entry (and a cut's neighbour), never the history
