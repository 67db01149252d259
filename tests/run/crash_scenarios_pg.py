"""The crash-kit scenario on PostgreSQL: the same agents as ``crash_scenarios``, other stores.

The kit hands a factory one string naming the store; here it is ``"<schema>|<dsn>"`` so that
every test works in its own throwaway schema.
"""

from __future__ import annotations

from lovia import Agent
from lovia.stores import PostgresCheckpointer, PostgresSession
from lovia.testing import ScriptedProvider
from lovia.testing.crash import CrashScenario

from .crash_scenarios import _triage_turn, _worker_turn, fetch, slow_sum


def pg_location(schema: str, dsn: str) -> str:
    """The store string this factory understands."""
    return f"{schema}|{dsn}"


def open_pg(store: str) -> tuple[PostgresSession, PostgresCheckpointer]:
    """Both stores in the schema named by ``store``."""
    schema, _, dsn = store.partition("|")
    return PostgresSession(dsn, schema=schema, max_size=2), PostgresCheckpointer(dsn, schema=schema, max_size=2)


def pg_scenario(store: str) -> CrashScenario:
    """Triage hands off to a worker that fetches two numbers in parallel, then sums them slowly."""
    worker_model = ScriptedProvider(_worker_turn)
    triage_model = ScriptedProvider(_triage_turn)
    worker = Agent(name="worker", instructions="Sum numbers.", model=worker_model, tools=[fetch, slow_sum])
    triage = Agent(name="triage", instructions="Route.", model=triage_model, handoffs=[worker])
    session, checkpointer = open_pg(store)

    async def close() -> None:
        await session.close()
        await checkpointer.close()

    return CrashScenario(
        agent=triage,
        input="Add x and y.",
        session=session,
        checkpointer=checkpointer,
        model_calls=lambda: len(worker_model.calls) + len(triage_model.calls),
        close=close,
    )
