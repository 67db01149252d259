"""``--app tests.web.app_down:agent``: an OpenAI-compatible model at ``LOVIA_TEST_BASE_URL``, no retries."""

from __future__ import annotations

import os

from lovia import Agent, RetryPolicy
from lovia.providers.openai_chat import OpenAIChatProvider

agent = Agent(
    name="assistant",
    model=OpenAIChatProvider("fake-model", api_key="sk-test", base_url=os.environ["LOVIA_TEST_BASE_URL"]),
    retry=RetryPolicy(max_attempts=1),
)
