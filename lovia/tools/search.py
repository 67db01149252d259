"""``web_search``: a pluggable search tool, with DuckDuckGo (``lovia[ddg]``) and Tavily backends."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx

from ..exceptions import ToolError, UserError
from ._tool import Tool
from .fence import FENCE_NOTE, fence

__all__ = [
    "DuckDuckGoSearch",
    "SearchResult",
    "TavilySearch",
    "WebSearch",
    "duckduckgo_search",
    "tavily_search",
    "web_search",
]

_TIME_RANGES = ("d", "w", "m", "y")


@dataclass
class SearchResult:
    """One hit: title, URL and a snippet."""

    title: str
    url: str
    snippet: str = ""


@runtime_checkable
class WebSearch(Protocol):
    """A search backend (must be safe for concurrent calls)."""

    async def search(
        self, query: str, *, max_results: int = 5, time_range: str | None = None
    ) -> list[SearchResult]: ...


class DuckDuckGoSearch:
    """Keyless search through the ``ddgs`` package (``pip install 'lovia[ddg]'``)."""

    def __init__(self) -> None:
        try:
            from ddgs import DDGS  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise UserError("the DuckDuckGo backend needs the ddgs package", hint="pip install 'lovia[ddg]'") from None
        self._ddgs = DDGS

    async def search(self, query: str, *, max_results: int = 5, time_range: str | None = None) -> list[SearchResult]:
        """Search the web (runs the synchronous client on a worker thread)."""

        def run() -> list[dict[str, Any]]:
            return list(self._ddgs().text(query, max_results=max_results, timelimit=time_range) or [])

        try:
            rows = await asyncio.to_thread(run)
        except Exception as exc:
            raise ToolError(f"DuckDuckGo search failed: {type(exc).__name__}: {exc}", hint="try again later") from None
        return [
            SearchResult(
                title=str(r.get("title", "")), url=str(r.get("href", r.get("url", ""))), snippet=str(r.get("body", ""))
            )
            for r in rows
        ]


class TavilySearch:
    """Search through the Tavily API (``TAVILY_API_KEY`` or ``api_key=``)."""

    def __init__(
        self, *, api_key: str | None = None, timeout: float = 30.0, base_url: str = "https://api.tavily.com"
    ) -> None:
        key = api_key or os.environ.get("TAVILY_API_KEY")
        if not key:
            raise UserError(
                "Tavily search needs an API key", hint="set TAVILY_API_KEY or pass tavily_search(api_key=...)"
            )
        self._key = key
        self.timeout = timeout
        self.base_url = base_url.rstrip("/")

    async def search(self, query: str, *, max_results: int = 5, time_range: str | None = None) -> list[SearchResult]:
        """One search request."""
        body: dict[str, Any] = {"query": query, "max_results": max_results}
        if time_range:
            body["time_range"] = time_range
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                resp = await client.post(
                    f"{self.base_url}/search", json=body, headers={"Authorization": f"Bearer {self._key}"}
                )
        except httpx.HTTPError as exc:
            raise ToolError(f"Tavily search failed: {type(exc).__name__}", hint="try again later") from None
        if resp.status_code >= 400:
            raise ToolError(
                f"Tavily search failed with HTTP {resp.status_code}: {resp.text[:200]}", hint="check the API key"
            )
        try:
            rows = resp.json().get("results") or []
        except ValueError:
            raise ToolError("Tavily returned a response that is not JSON", hint="try again later") from None
        return [
            SearchResult(title=str(r.get("title", "")), url=str(r.get("url", "")), snippet=str(r.get("content", "")))
            for r in rows
            if isinstance(r, dict)
        ]


def render_results(query: str, results: list[SearchResult]) -> str:
    """Readable title/URL/snippet blocks, fenced."""
    if not results:
        return f'No results for "{query}".'
    blocks = [f"{i}. {r.title}\n   {r.url}\n   {r.snippet}".rstrip() for i, r in enumerate(results, 1)]
    return f'Results for "{query}":\n' + fence("\n\n".join(blocks))


def web_search(impl: WebSearch, *, name: str = "web_search") -> Tool[Any]:
    """A search tool over ``impl``."""
    if not isinstance(impl, WebSearch):
        raise UserError(
            f"{type(impl).__name__} is not a WebSearch backend", hint="it needs an async search(query, ...) method"
        )

    async def invoke(args: dict[str, Any], ctx: Any) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("'query' must be a non-empty string", hint="search for a few keywords")
        count = args.get("max_results", 5)
        if not isinstance(count, int) or not 1 <= count <= 20:
            raise ToolError("'max_results' must be between 1 and 20", hint="the default is 5")
        time_range = args.get("time_range")
        if time_range is not None and time_range not in _TIME_RANGES:
            raise ToolError("'time_range' must be one of d, w, m, y", hint="or leave it out")
        results = await impl.search(query.strip(), max_results=count, time_range=time_range)
        return render_results(query.strip(), results[:count])

    return Tool(
        name=name,
        description=f"Search the public web; returns titles, URLs and snippets.\n{FENCE_NOTE}",
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                "time_range": {
                    "type": "string",
                    "enum": list(_TIME_RANGES),
                    "description": "Only recent results: d(ay), w(eek), m(onth) or y(ear).",
                },
            },
            "required": ["query"],
        },
        invoke=invoke,
    )


def duckduckgo_search(*, name: str = "web_search") -> Tool[Any]:
    """A DuckDuckGo search tool (raises ``UserError`` now when ``ddgs`` is missing)."""
    return web_search(DuckDuckGoSearch(), name=name)


def tavily_search(*, api_key: str | None = None, name: str = "web_search") -> Tool[Any]:
    """A Tavily search tool (raises ``UserError`` now when no API key is configured)."""
    return web_search(TavilySearch(api_key=api_key), name=name)
