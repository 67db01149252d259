"""Structured output: the output contract, lenient parsing, and repair prompts.

``str`` means no contract. Anything else (pydantic models, dataclasses, TypedDicts, containers,
Literals, unions, scalars) is validated with a pydantic ``TypeAdapter``. Providers that support
JSON Schema get it natively (object schemas only); the others get an "output format" block in the
system prompt. Parsing is lenient: the raw text, then a fenced block, then the first balanced JSON
object or array found in prose.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pydantic

from .exceptions import OutputValidationError, UserError

__all__ = ["OutputRepairStrategy", "OutputSpec", "RepairOnce", "extract_json"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.S)


@runtime_checkable
class OutputRepairStrategy(Protocol):
    """Decides the corrective prompt after a failed parse (``None`` = give up)."""

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """``attempt`` is 1-based."""
        ...


@dataclass(frozen=True, slots=True)
class RepairOnce:
    """The default strategy: one corrective turn quoting the error."""

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """Quote the error once; give up on the second failure."""
        if attempt > 1:
            return None
        return (
            "Your previous answer could not be used as the final output: "
            f"{exc.message}\nReply again with only the corrected final answer in the required format."
        )


def extract_json(text: str) -> list[str]:
    """Candidate JSON texts in ``text``: itself, fenced blocks, then balanced objects/arrays."""
    candidates = [text.strip()]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(text))
    for opener in "{[":
        start = text.find(opener)
        if start >= 0:
            end = _balanced_end(text, start)
            if end is not None:
                candidates.append(text[start : end + 1])
    return candidates


def _balanced_end(text: str, start: int) -> int | None:
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


class OutputSpec:
    """The output contract of one run (``output_type`` other than ``str``)."""

    def __init__(self, output_type: Any) -> None:
        self.output_type = output_type
        self.name = (
            getattr(output_type, "__name__", None) or re.sub(r"\W+", "_", str(output_type)).strip("_") or "output"
        )
        try:
            self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            self.schema: dict[str, Any] = self.adapter.json_schema()
        except Exception as exc:
            raise UserError(
                f"cannot use {output_type!r} as output_type: {exc}",
                hint="use a pydantic model, dataclass, TypedDict, container, Literal or scalar type",
            ) from exc

    @property
    def is_object(self) -> bool:
        """Whether the schema describes a JSON object (required for native mode)."""
        return self.schema.get("type") == "object"

    def response_format(self) -> dict[str, Any]:
        """The native ``response_format`` handed to providers."""
        return {"name": self.name[:64], "schema": self.schema, "strict": False}

    def prompt_contract(self) -> str:
        """The system-prompt block used when the provider has no native JSON Schema support."""
        return (
            "## Output format\n"
            "When you give your final answer, reply with only a JSON value that matches this JSON Schema "
            "(no prose, no code fences):\n" + json.dumps(self.schema, ensure_ascii=False)
        )

    def parse(self, raw: str) -> Any:
        """Validate the model's final text; raise :class:`OutputValidationError` on failure."""
        if not raw.strip():
            raise self._error("the answer was empty", raw)
        first_error: Exception | None = None
        for candidate in extract_json(raw):
            try:
                return self.adapter.validate_json(candidate)
            except pydantic.ValidationError as exc:
                first_error = first_error or exc
        try:  # scalars and Literals given as bare text
            return self.adapter.validate_python(raw.strip())
        except pydantic.ValidationError as exc:
            first_error = first_error or exc
        detail = _summarize(first_error)
        raise self._error(detail, raw)

    def _error(self, detail: str, raw: str) -> OutputValidationError:
        return OutputValidationError(
            f"final answer does not match {self.name}: {detail}",
            raw=raw,
            output_type_name=self.name,
            hint="loosen output_type, enable output_repair, or check the model follows JSON instructions",
        )


def _summarize(exc: Exception | None) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
    return str(exc) if exc else "no JSON value found"
