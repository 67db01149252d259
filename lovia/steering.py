"""Steering a live run: a :class:`Mailbox` of user messages the runner drains at each turn start.

A push never interrupts the model or a tool; it waits for the next turn boundary, where the runner
takes everything queued (oldest first), stores each item as an ordinary user message and emits one
``UserMessageInjected`` per item. Content left in a mailbox you own stays there for a later run.
"""

from __future__ import annotations

import itertools
import threading

from .parts import ContentPart, normalize_content

__all__ = ["InjectedContent", "Mailbox"]

InjectedContent = str | list[ContentPart]
"""What a mailbox holds: text, or a list of content parts."""


class Mailbox:
    """Steering messages for a live run, drained at the start of each turn.

    Safe to push from another thread (a web handler, a CLI reader) while the run is going.
    """

    def __init__(self) -> None:
        self._items: dict[int, InjectedContent] = {}
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()

    def push(self, content: InjectedContent | ContentPart) -> int:
        """Queue a user message (text, a part or a list of parts); returns a token for :meth:`remove`.

        Raises:
            TypeError: ``content`` is not text or parts.
        """
        normalized = normalize_content(content)
        if normalized is None:
            raise TypeError("Mailbox.push() needs text or content parts, got None")
        with self._lock:
            token = next(self._tokens)
            self._items[token] = normalized
        return token

    def remove(self, token: int) -> bool:
        """Take back a queued message; False if it was already drained (or never existed)."""
        with self._lock:
            return self._items.pop(token, None) is not None

    def drain(self) -> list[InjectedContent]:
        """Take every queued message, oldest first."""
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        return items

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)
