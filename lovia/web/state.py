"""``WebState``: what the app hands to every router, in a module of its own.

The app builds it and the routers read it; keeping it here lets both import it without the
routers importing the app that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .agents import AgentSet
from .questions import QuestionRegistry
from .schedule_store import ScheduleStore
from .scheduler import Scheduler
from .store import ChatStore
from .supervisor import RunSupervisor

__all__ = ["WebState"]


@dataclass(eq=False)
class WebState:
    """What every route needs: the store, the supervisor, the agents and the auth token."""

    store: ChatStore
    supervisor: RunSupervisor
    agents: AgentSet
    token: str | None
    title: str
    max_upload_bytes: int = int(25 * (1 << 20))
    upload_allowed_ext: frozenset[str] | None = None
    """Extensions an upload may have (``None``: any)."""
    questions: QuestionRegistry | None = None
    """Pending ``ask_human`` questions (``None``: the app has no question channel)."""
    schedules: ScheduleStore | None = None
    scheduler: Scheduler | None = None
