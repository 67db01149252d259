"""A long conversation in one SQLite session: cheap run starts, and damage on disk is caught.

Runs offline (ScriptedProvider). It prints:

* 30 runs into one session id, each a tool call and an answer, with the time of the first and
  the last runs' starts (the store serves the history from its cache: only new rows are read);
* a second process-like reader (a new store) that reads the file cold and agrees;
* one byte flipped inside a stored tool output, in the file itself: a new store refuses to serve
  that session with a CorruptRecordError naming it, and the hint says what to do.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from lovia import Agent, Runner, tool
from lovia.exceptions import CorruptRecordError
from lovia.stores import SQLiteSession
from lovia.testing import ScriptedProvider, call, text


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"weather in {city}: 18C, light rain"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chat.db"
        agent = Agent("weather", instructions="Answer with the weather.", tools=[lookup])
        starts = []
        async with SQLiteSession(path) as session:
            await session.load("u1")  # opens (and creates) the file
            for i in range(30):
                model = ScriptedProvider([call("lookup", {"city": f"City-{i}"}), text(f"It rains in City-{i}.")])
                t0 = time.perf_counter()
                await session.load("u1")  # what a run start reads
                starts.append(time.perf_counter() - t0)
                await Runner.run(agent.clone(model=model), f"Weather in City-{i}?", session=session, session_id="u1")
            entries = await session.load("u1")
        print(
            f"30 runs, {len(entries)} entries; history read at run 1: {starts[0] * 1e3:.2f} ms, at run 30: "
            f"{starts[-1] * 1e3:.2f} ms"
        )
        async with SQLiteSession(path) as cold:
            print("a new store reads the same history:", await cold.load("u1") == entries)

        data = bytearray(path.read_bytes())
        at = data.find(b"City-17: 18C")
        data[at + 6] ^= 0x01  # 'City-17' becomes 'City-16' in that run's stored tool output
        path.write_bytes(bytes(data))
        async with SQLiteSession(path) as cold:
            try:
                await cold.load("u1")
            except CorruptRecordError as err:
                print(f"damaged on disk: session {err.session_id!r}, run named: {err.run_id is not None}")
                print(f"hint: {err.hint}")


if __name__ == "__main__":
    asyncio.run(main())
