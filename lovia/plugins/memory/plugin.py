"""The ``Memory`` plugin: a small hot tier of notes in the prompt, a searchable archive of past runs.

State is cross-run and lives on the plugin object (the stores); per-run pieces are built in
``setup()``. Notes writes are serialized by one lock. Model side-queries (digest, dream, query
expansion, recall summary) run as plain ``Runner.run`` calls of a tool-less, plugin-less agent,
so they cannot recurse into memory, and every one of them fails open.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ... import events
from ...exceptions import UserError
from ...hooks import AgentHooks
from ...providers.base import ModelSettings
from ...run_context import RunContext
from ...tools import Tool, tool
from ...transcript import AssistantTextEntry, InputEntry, TranscriptEntry
from ..base import PluginInstance
from .index import Doc, Index, KeywordIndex

if TYPE_CHECKING:
    from ...providers import Provider
    from .vector import Embedder

__all__ = ["FileNotesStore", "Memory", "NotesStore"]

logger = logging.getLogger("lovia.plugins.memory")

_DEFAULT_ROOT = "./.lovia/memory"
_NOTES_FILENAME = "MEMORY.md"
_DEFAULT_NOTES_BUDGET = 8000
_DEFAULT_DREAM_EVERY_DAYS = 3.0
_DEFAULT_NOTES_REFRESH_AFTER = 300.0
_STAMP = re.compile(r"^\[(\d{4}-\d{2})\]\s*")


@runtime_checkable
class NotesStore(Protocol):
    """Where the notes live: load and save the whole fact list (one fact per item)."""

    async def load(self) -> list[str]:
        """All facts, stamped ``[YYYY-MM] text``."""
        ...

    async def save(self, facts: list[str]) -> None:
        """Replace all facts."""
        ...


class FileNotesStore:
    """Notes as ``- fact`` bullets in a Markdown file; other lines are ignored; writes are atomic."""

    def __init__(self, path: str | os.PathLike[str] = f"{_DEFAULT_ROOT}/{_NOTES_FILENAME}") -> None:
        self.path = Path(path)

    async def load(self) -> list[str]:
        """Read the bullets (a missing file is no notes)."""
        return await asyncio.to_thread(self._load)

    def _load(self) -> list[str]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return parse_bullets(text)

    async def save(self, facts: list[str]) -> None:
        """Write all bullets atomically (temp file + rename)."""
        await asyncio.to_thread(_atomic_write, self.path, render_bullets(facts))


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def parse_bullets(text: str) -> list[str]:
    """The ``- `` / ``* `` bullet lines of a notes body, as facts."""
    facts = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("- ", "* ")) and stripped[2:].strip():
            facts.append(stripped[2:].strip())
    return facts


def render_bullets(facts: Iterable[str]) -> str:
    """Facts as a notes body."""
    return "".join(f"- {f}\n" for f in facts)


def _clean(fact: str) -> str:
    return re.sub(r"\s+", " ", fact).strip()


def _key(fact: str) -> str:
    return _STAMP.sub("", _clean(fact)).casefold().rstrip(".!?;: ")


def _stamp(fact: str, today: str) -> str:
    fact = _clean(fact)
    return fact if _STAMP.match(fact) else f"[{today}] {fact}"


def normalize_facts(facts: Iterable[str], today: str) -> list[str]:
    """Clean, stamp and de-duplicate (the first spelling of a fact wins)."""
    out: list[str] = []
    seen: set[str] = set()
    for fact in facts:
        if not _clean(fact):
            continue
        k = _key(fact)
        if k and k not in seen:
            seen.add(k)
            out.append(_stamp(fact, today))
    return out


def _digest(facts: list[str]) -> str:
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


_DIGEST_PROMPT = """You curate long-term notes about a user from one finished conversation.
Admit a fact only if the USER said it or explicitly confirmed it, it will matter in future
conversations, and it cannot be re-derived (preferences, standing rules, stable facts about them).
Never admit the assistant's own conclusions or anything taken from tool output. Most
conversations add nothing. Also list existing notes that the conversation proved wrong, and
write a short self-contained summary of the conversation for a searchable archive.
Answer with JSON only: {"facts": [...], "retire": [...exact existing note texts...], "episode": "..."}"""

_DREAM_PROMPT = """You tidy a list of long-term notes. Merge near-duplicates into one well-phrased
note, resolve contradictions (the newer [YYYY-MM] stamp wins), drop notes about one-off events or
things that expired. Never invent facts and never drop the user's explicit rules or preferences.
Keep each note's [YYYY-MM] stamp (the newest, when merging).
Answer with JSON only: {"notes": ["[YYYY-MM] ...", ...]}"""

_EXPAND_PROMPT = """Rewrite a search query for a keyword index: add synonyms, related terms and
translations (English and the query's language). Answer with one line of space-separated terms."""

_SUMMARY_PROMPT = """Summarize what these archived excerpts say that is relevant to the query.
Be brief and factual; say so when nothing is relevant. Quote dates when given."""

_USAGE = (
    "Call `remember` only when the user asks you to remember something or corrects a note, and "
    "`forget` when a note is wrong; other durable facts are picked up after the conversation."
)
_RECALL_USAGE = " Call `recall` to search earlier conversations when the user refers to them."


@dataclass(eq=False)
class Memory:
    """Long-term memory across sessions: notes in the prompt, an archive searched with ``recall``."""

    root: str | os.PathLike[str] = _DEFAULT_ROOT
    notes: NotesStore | None = None
    index: Index | EllipsisType | None = ...
    embedder: Embedder | None = None
    auto_curate: bool = True
    curate_in_background: bool = False
    expand_query: bool | Literal["auto"] = "auto"
    summarize_recall: bool = True
    recall_k: int = 5
    notes_budget: int = _DEFAULT_NOTES_BUDGET
    dream_every_days: float | None = _DEFAULT_DREAM_EVERY_DAYS
    notes_refresh_after: float = _DEFAULT_NOTES_REFRESH_AFTER
    model: str | Provider | None = None
    name: str = "memory"

    _store: NotesStore = field(init=False, repr=False)
    _archive: Index | None = field(init=False, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _pins: dict[str, tuple[str, float]] = field(default_factory=dict, init=False, repr=False)
    _pending: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.embedder is not None and self.index is not ...:
            raise UserError(
                "Memory: embedder= and index= cannot be combined",
                hint="pass embedder= for the default hybrid index, or build your own index with `|`",
            )
        if self.recall_k < 1:
            raise UserError("Memory: recall_k must be at least 1", hint="the default is 5")
        root = Path(self.root)
        self._store = self.notes if self.notes is not None else FileNotesStore(root / _NOTES_FILENAME)
        if self.index is ...:
            keyword = KeywordIndex(root / "archive.db")
            if self.embedder is not None:
                from .vector import VectorIndex

                self._archive = keyword | VectorIndex(root / "vectors.db", self.embedder)
            else:
                self._archive = keyword
        else:
            self._archive = self.index

    # ------------------------------------------------------------------ notes, no model involved

    @staticmethod
    def _today() -> str:
        return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m")

    async def remember(self, fact: str) -> bool:
        """Add a note (stamped with this month); ``False`` when it was already there or empty."""
        if not _clean(fact):
            return False
        async with self._lock:
            facts = await self._store.load()
            if _key(fact) in {_key(f) for f in facts}:
                return False
            await self._store.save(normalize_facts([*facts, fact], self._today()))
        return True

    async def forget(self, fact: str) -> bool:
        """Drop notes equal to ``fact`` or containing it (case-insensitive); ``True`` if any went."""
        wanted = _key(fact)
        if not wanted:
            return False
        async with self._lock:
            facts = await self._store.load()
            kept = [f for f in facts if wanted not in _key(f)]
            if len(kept) == len(facts):
                return False
            await self._store.save(kept)
        return True

    async def notes_body(self) -> str:
        """The notes as an editable Markdown body."""
        return render_bullets(await self._store.load())

    async def replace_notes(self, body: str) -> str:
        """Replace all notes from an edited body (normalized, de-duplicated); unpins every session."""
        facts = normalize_facts(parse_bullets(body), self._today())
        async with self._lock:
            await self._store.save(facts)
            self._pins.clear()
        return render_bullets(facts)

    # ------------------------------------------------------------------ the plugin

    def _notes_block(self, facts: list[str]) -> str:
        used = sum(len(f) + 3 for f in facts)
        head = f"## Memory\n\nNotes from earlier conversations ({used}/{self.notes_budget} chars):"
        body = render_bullets(facts).rstrip() if facts else "(no notes yet)"
        usage = _USAGE + (_RECALL_USAGE if self._archive is not None else "")
        return f"{head}\n{body}\n\n{usage}"

    async def _pinned_block(self, session_id: str | None) -> str:
        now = time.monotonic()
        pin = self._pins.get(session_id) if session_id else None
        if pin is not None and now - pin[1] < self.notes_refresh_after:
            block = pin[0]
        else:
            block = self._notes_block(await self._store.load())
        if session_id:
            self._pins[session_id] = (block, now)
        return block

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        """Notes into the prompt (pinned per session), the tools, and the run-end curation hook."""
        block = await self._pinned_block(ctx.session_id)
        memory = self

        @tool
        async def remember(fact: str) -> str:
            """Save a durable fact about the user for future conversations (only when they ask)."""
            return "Remembered." if await memory.remember(fact) else "Already in the notes."

        @tool
        async def forget(fact: str) -> str:
            """Remove notes that match this text (when the user says a note is wrong)."""
            return "Forgotten." if await memory.forget(fact) else "No matching note."

        tools: list[Tool[Any]] = [remember, forget]
        if self._archive is not None:

            @tool
            async def recall(run: RunContext[Any], query: str) -> str:
                """Search earlier conversations for what was said about something."""
                return await memory._recall(query, run)

            tools.append(recall)

        hooks = AgentHooks()

        @hooks.on(events.RunCompleted)
        async def curate(ev: events.RunCompleted, run: RunContext[Any]) -> None:
            if ctx.session_id:
                memory._pins[ctx.session_id] = (block, time.monotonic())
            job = memory._after_run(list(ev.result.entries), run, ev.result.run_id or run.run_id or uuid.uuid4().hex)
            if memory.curate_in_background:
                task = asyncio.get_running_loop().create_task(job)
                memory._pending.add(task)
                task.add_done_callback(memory._pending.discard)
            else:
                await job

        return PluginInstance(tools=tools, instructions=block, hooks=hooks)

    async def drain(self) -> None:
        """Wait for background curation still in flight."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # ------------------------------------------------------------------ run end

    async def _after_run(self, entries: list[TranscriptEntry], ctx: RunContext[Any], run_id: str) -> None:
        try:
            await self._archive_messages(entries, ctx, run_id)
            if self.auto_curate:
                await self._curate(entries, ctx, run_id)
            await self._maybe_dream(ctx)
        except Exception:
            logger.exception("memory curation failed (ignored)")

    async def _archive_messages(self, entries: list[TranscriptEntry], ctx: RunContext[Any], run_id: str) -> None:
        if self._archive is None:
            return
        now = time.time()
        docs = []
        for seq, entry in enumerate(entries):
            if isinstance(entry, InputEntry) and entry.role == "user" and isinstance(entry.content, str):
                role, body = "user", entry.content
            elif isinstance(entry, AssistantTextEntry):
                role, body = "assistant", entry.content
            else:
                continue
            if body.strip() and "<system-reminder>" not in body:
                meta = {"role": role, "run_id": run_id, "session_id": ctx.session_id or ""}
                docs.append(Doc(id=f"{run_id}:{seq}", text=body, when=now, meta=meta))
        await self._archive.add(docs)

    async def _curate(self, entries: list[TranscriptEntry], ctx: RunContext[Any], run_id: str) -> None:
        talk = _transcript_text(entries)
        if not talk:
            return
        facts = await self._store.load()
        prompt = f"Existing notes:\n{render_bullets(facts) or '(none)'}\nConversation:\n{talk}"
        answer = await self._ask(_DIGEST_PROMPT, prompt, ctx)
        parsed = _json_object(answer or "")
        if parsed is None:
            return
        new, retire = _strings(parsed.get("facts")), {_key(r) for r in _strings(parsed.get("retire"))}
        if new or retire:
            async with self._lock:
                current = [f for f in await self._store.load() if _key(f) not in retire]
                await self._store.save(normalize_facts([*current, *new], self._today()))
        episode = parsed.get("episode")
        if self._archive is not None and isinstance(episode, str) and episode.strip():
            meta = {"role": "episode", "run_id": run_id, "session_id": ctx.session_id or ""}
            await self._archive.add([Doc(id=f"{run_id}:episode", text=episode.strip(), when=time.time(), meta=meta)])

    # ------------------------------------------------------------------ dreaming

    @property
    def _marker(self) -> Path:
        return Path(self.root) / ".dreamed"

    def dreamed_at(self) -> float | None:
        """When the last dream ran (epoch seconds), or ``None``."""
        try:
            return self._marker.stat().st_mtime
        except FileNotFoundError:
            return None

    async def _maybe_dream(self, ctx: RunContext[Any]) -> None:
        facts = await self._store.load()
        if not facts:
            return
        over = sum(len(f) + 3 for f in facts) > self.notes_budget
        due = False
        if self.dream_every_days is not None:
            last = self.dreamed_at()
            changed = not self._marker.exists() or self._marker.read_text(encoding="utf-8").strip() != _digest(facts)
            due = changed and (last is None or time.time() - last >= self.dream_every_days * 86400)
        if over or due:
            await self._dream(ctx.agent.model if self.model is None else self.model)

    async def dream(self, model: str | Provider | None = None) -> tuple[int, int]:
        """Rewrite the notes now with one model call; returns (notes before, notes after)."""
        chosen = model if model is not None else self.model
        if chosen is None:
            raise UserError("Memory.dream() needs a model", hint="pass dream(model=...) or Memory(model=...)")
        return await self._dream(chosen)

    async def _dream(self, model: str | Provider | None) -> tuple[int, int]:
        async with self._lock:
            facts = await self._store.load()
            answer = await self._ask_model(_DREAM_PROMPT, render_bullets(facts) or "(no notes)", model)
            parsed = _json_object(answer or "")
            rewritten = _strings(parsed.get("notes")) if parsed else []
            if parsed is None or (facts and not rewritten):
                logger.warning("memory dream gave no usable notes; keeping them as they are")
                return len(facts), len(facts)
            root = Path(self.root)
            await asyncio.to_thread(_atomic_write, root / f"{_NOTES_FILENAME}.bak", render_bullets(facts))
            after = normalize_facts(rewritten, self._today())
            await self._store.save(after)
            await asyncio.to_thread(_atomic_write, self._marker, _digest(after) + "\n")
            self._pins.clear()
        return len(facts), len(after)

    # ------------------------------------------------------------------ recall

    async def _recall(self, query: str, ctx: RunContext[Any]) -> str:
        assert self._archive is not None
        terms = query
        expand = self.expand_query == "auto" and isinstance(self._archive, KeywordIndex) or self.expand_query is True
        if expand:
            more = await self._ask(_EXPAND_PROMPT, query, ctx)
            if more:
                terms = f"{query} {more.splitlines()[0]}"
        hits = await self._archive.search(terms, self.recall_k)
        if not hits:
            return "Nothing about that in earlier conversations."
        excerpts = "\n".join(
            f"- ({dt.datetime.fromtimestamp(h.doc.when, dt.timezone.utc):%Y-%m-%d}, {h.doc.meta.get('role', '?')}) "
            f"{_clean(h.doc.text)[:600]}"
            for h in hits
        )
        if self.summarize_recall:
            summary = await self._ask(_SUMMARY_PROMPT, f"Query: {query}\nExcerpts:\n{excerpts}", ctx)
            if summary:
                return summary
        return excerpts

    # ------------------------------------------------------------------ side queries

    async def _ask(self, system: str, prompt: str, ctx: RunContext[Any]) -> str | None:
        return await self._ask_model(system, prompt, self.model if self.model is not None else ctx.agent.model)

    async def _ask_model(self, system: str, prompt: str, model: str | Provider | None) -> str | None:
        from ...agent import Agent
        from ...runner import Runner

        try:
            helper: Agent[Any] = Agent(
                name="memory-helper", instructions=system, model=model, settings=ModelSettings(temperature=0)
            )
            result = await Runner.run(helper, prompt, max_turns=1)
        except Exception as exc:
            logger.warning("memory side query failed (ignored): %s", exc)
            return None
        return str(result.output).strip() or None


def _transcript_text(entries: list[TranscriptEntry]) -> str:
    lines = []
    for entry in entries:
        if isinstance(entry, InputEntry) and entry.role == "user" and isinstance(entry.content, str):
            if "<system-reminder>" not in entry.content:
                lines.append(f"USER: {entry.content}")
        elif isinstance(entry, AssistantTextEntry) and entry.content.strip():
            lines.append(f"ASSISTANT: {entry.content}")
    return "\n".join(lines)
