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

from pydantic_core import ValidationError  # the class ValidationError names

from .exceptions import OutputValidationError, UserError

__all__ = [
    "REPAIR_PROMPT",
    "DefaultOutputRepair",
    "OutputRepairStrategy",
    "OutputSpec",
    "RepairOnce",
    "StructuredOutput",
    "extract_json",
    "format_output_instructions",
    "loads_lenient",
    "parse_structured_output",
    "resolve_structured_output",
    "response_format_for",
]

REPAIR_PROMPT = (
    "Your previous answer could not be used as the final output: "
    "{error}\nReply again with only the corrected final answer in the required format."
)
"""The corrective user message of :class:`DefaultOutputRepair`; ``{error}`` quotes the validation error."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.S)


@runtime_checkable
class OutputRepairStrategy(Protocol):
    """Decides the corrective prompt after a failed parse (``None`` = give up)."""

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """``attempt`` is 1-based."""
        ...


@dataclass(frozen=True, slots=True)
class DefaultOutputRepair:
    """The default strategy (``output_repair=True``): corrective turns that quote the error.

    ``max_attempts`` is how many repair prompts are sent before the error is raised.
    """

    max_attempts: int = 1

    def build_prompt(self, exc: OutputValidationError, attempt: int) -> str | None:
        """Quote the error while ``attempt`` (1-based) is within ``max_attempts``; then give up."""
        if attempt > self.max_attempts:
            return None
        return REPAIR_PROMPT.format(error=exc.message)


RepairOnce = DefaultOutputRepair
"""Our earlier name for :class:`DefaultOutputRepair` (one attempt)."""


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
        from pydantic import TypeAdapter  # imported on first use: import lovia does not need it

        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
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
            except ValidationError as exc:
                first_error = first_error or exc
        try:  # scalars and Literals given as bare text
            return self.adapter.validate_python(raw.strip())
        except ValidationError as exc:
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
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
    return str(exc) if exc else "no JSON value found"


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """How one run's output contract reaches the model.

    ``use_native`` means the provider gets ``schema`` as a native response format; otherwise the
    contract travels as an instruction block in the system prompt.
    """

    output_type: Any
    use_native: bool
    schema: dict[str, Any]

    @property
    def spec(self) -> OutputSpec:
        """The validating contract behind this description."""
        return _spec_for(self.output_type)


def _spec_for(output_type: Any) -> OutputSpec:
    return OutputSpec(output_type)


def resolve_structured_output(output_type: Any, supports_response_format: bool) -> StructuredOutput | None:
    """The output contract for ``output_type`` (``None`` for ``str``: no contract).

    Native mode needs both a provider that takes JSON Schema and an object-shaped schema.

    Raises:
        UserError: The type cannot be described as JSON Schema.
    """
    if output_type is None or output_type is str:
        return None
    spec = _spec_for(output_type)
    return StructuredOutput(output_type, bool(supports_response_format and spec.is_object), spec.schema)


def format_output_instructions(spec: StructuredOutput) -> str:
    """The system-prompt block that states the contract on the prompt path."""
    return spec.spec.prompt_contract()


def response_format_for(spec: StructuredOutput) -> dict[str, Any]:
    """The native ``response_format`` payload handed to providers."""
    return spec.spec.response_format()


def parse_structured_output(spec: StructuredOutput, payload: Any) -> Any:
    """Validate the model's answer: raw text is parsed leniently, parsed JSON is validated as is.

    Raises:
        OutputValidationError: Nothing in the answer matches the contract.
    """
    contract = spec.spec
    if isinstance(payload, str):
        return contract.parse(payload)
    try:
        return contract.adapter.validate_python(payload)
    except ValidationError as exc:
        raise contract._error(_summarize(exc), json.dumps(payload, default=str)[:500]) from None


def loads_lenient(text: str) -> Any:
    """Parse JSON the way final answers are parsed: as is, from a fenced block, or embedded in prose.

    Raises:
        ValueError: No JSON value could be found.
    """
    for candidate in extract_json(text):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON value found in the text")
