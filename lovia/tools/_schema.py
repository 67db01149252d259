"""Internal: turn a Python function signature into a JSON Schema and a validator.

Owns the mapping from type hints to pydantic: defaults make a parameter optional,
``Annotated[T, "text"]`` and ``Annotated[T, Field(...)]`` describe it, models, dataclasses,
TypedDicts, Literals and unions are accepted. One parameter annotated ``RunContext`` is
injected by the runner and left out of the schema.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

from ..exceptions import InvalidToolArguments, UserError
from ..run_context import RunContext

if TYPE_CHECKING:
    from pydantic import BaseModel

# pydantic is imported where a tool is built or called, not here: ``import lovia`` stays cheap.

__all__ = ["FunctionSignature", "inspect_function"]


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    """What the runner needs to call a function tool."""

    parameters: dict[str, Any]
    model: type[BaseModel]
    context_param: str | None
    arg_names: tuple[str, ...]

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validate and coerce model-supplied arguments into keyword arguments."""
        import pydantic

        try:
            parsed = self.model.model_validate(args)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise InvalidToolArguments(
                f"invalid arguments: {problems}", hint="fix the arguments to match the tool's schema"
            ) from None
        return {name: getattr(parsed, name) for name in self.arg_names}


def _is_run_context(annotation: Any) -> bool:
    target = get_origin(annotation) or annotation
    if get_origin(annotation) is Annotated:
        target = get_origin(get_args(annotation)[0]) or get_args(annotation)[0]
    return isinstance(target, type) and issubclass(target, RunContext)


def _doc_params(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section."""
    out: dict[str, str] = {}
    match = re.search(r"^\s*(Args|Arguments|Parameters):\s*$(.*?)(?=^\s*\w+:\s*$|\Z)", doc, re.M | re.S)
    if not match:
        return out
    current = None
    for line in match.group(2).splitlines():
        m = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if m and (current is None or len(line) - len(line.lstrip()) <= 8):
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.strip():
            out[current] += " " + line.strip()
    return out


def _describe(annotation: Any, doc: str | None) -> Any:
    """Turn ``Annotated[T, "text"]`` into ``Annotated[T, Field(description=...)]``; add docstring text."""
    from pydantic import Field

    if get_origin(annotation) is Annotated:
        base, *meta = get_args(annotation)
        texts = [m for m in meta if isinstance(m, str)]
        others = [m for m in meta if not isinstance(m, str)]
        if texts:
            others.append(Field(description=" ".join(texts)))
        elif doc and not any(getattr(m, "description", None) for m in others):
            others.append(Field(description=doc))
        return Annotated.__class_getitem__((base, *others)) if others else base
    if doc:
        return Annotated[annotation, Field(description=doc)]
    return annotation


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _forbid_extra(schema: dict[str, Any]) -> None:
    """Make every object in the schema closed and fully required (OpenAI strict mode)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def inspect_function(fn: Callable[..., Any], *, name: str, strict: bool) -> FunctionSignature:
    """Build the schema and validator of a function tool."""
    import pydantic

    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UserError(
            f"cannot resolve type hints of tool {name!r}: {exc}", hint="import the annotated types at module level"
        ) from exc
    docs = _doc_params(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(f"tool {name!r} cannot take *args/**kwargs", hint="declare each argument explicitly")
        annotation = hints.get(pname, inspect.Parameter.empty)
        if annotation is not inspect.Parameter.empty and _is_run_context(annotation):
            if context_param is not None:
                raise UserError(
                    f"tool {name!r} has more than one RunContext parameter",
                    hint="annotate exactly one parameter as RunContext",
                )
            context_param = pname
            continue
        if annotation is inspect.Parameter.empty:
            if strict:
                raise UserError(
                    f"strict tool {name!r}: parameter {pname!r} has no annotation", hint="annotate every parameter"
                )
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (_describe(annotation, docs.get(pname)), default)
    config = pydantic.ConfigDict(extra="forbid" if strict else "ignore", arbitrary_types_allowed=True)
    try:
        model = pydantic.create_model(f"{name}_args", __config__=config, **fields)
        schema = _strip_titles(model.model_json_schema())
    except Exception as exc:
        raise UserError(
            f"cannot build a JSON schema for tool {name!r}: {exc}", hint="use JSON-friendly argument types"
        ) from exc
    schema.setdefault("properties", {})
    schema.setdefault("type", "object")
    if strict:
        _forbid_extra(schema)
    return FunctionSignature(parameters=schema, model=model, context_param=context_param, arg_names=tuple(fields))
