"""JSON Schema and validation for plain Python types and function signatures.

The same machinery ``@tool`` and ``output_type`` use, usable on its own: a schema for a type, the
argument schema of a function (one ``RunContext`` parameter is left out, as the runner injects
it), and validators that coerce model-supplied JSON into Python values with pydantic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pydantic

from .exceptions import OutputValidationError, UserError
from .tools._schema import FunctionSignature, inspect_function
from .types import JsonObject, JsonSchema

__all__ = ["build_args_validator", "coerce_output", "function_args_schema", "model_json_schema", "validate_args"]


@functools.lru_cache(maxsize=256)
def _adapter(tp: Any) -> pydantic.TypeAdapter[Any]:
    try:
        return pydantic.TypeAdapter(tp)
    except Exception as exc:
        raise UserError(
            f"cannot build a schema for {tp!r}: {exc}",
            hint="use a pydantic model, dataclass, TypedDict, container, Literal or scalar type",
        ) from exc


def model_json_schema(tp: object) -> JsonSchema:
    """The JSON Schema of a type (a pydantic model, dataclass, TypedDict, container, scalar...).

    Raises:
        UserError: pydantic cannot describe the type.
    """
    try:
        return _adapter(tp).json_schema()
    except TypeError:  # unhashable type objects (rare): skip the cache
        return pydantic.TypeAdapter(tp).json_schema()  # type: ignore[arg-type]


def _signature(fn: Callable[..., object], strict: bool = False) -> FunctionSignature:
    return inspect_function(fn, name=getattr(fn, "__name__", "function"), strict=strict)


def function_args_schema(fn: Callable[..., object], *, strict: bool = False) -> tuple[JsonSchema, list[str]]:
    """The JSON Schema of ``fn``'s arguments and the argument names, in declaration order.

    A parameter annotated ``RunContext`` is not part of either. ``strict=True`` closes every object
    (no extra keys, all properties required) and insists on annotations.

    Raises:
        UserError: The function takes ``*args``/``**kwargs``, or an annotation has no schema.
    """
    sig = _signature(fn, strict)
    return sig.parameters, list(sig.arg_names)


def build_args_validator(fn: Callable[..., object]) -> Callable[[JsonObject], dict[str, object]]:
    """A reusable validator: JSON arguments in, coerced keyword arguments for ``fn`` out.

    The returned callable raises :class:`~lovia.exceptions.InvalidToolArguments` on bad input.
    """
    sig = _signature(fn)
    return sig.validate


def validate_args(fn: Callable[..., object], data: JsonObject) -> dict[str, object]:
    """Validate one set of JSON arguments against ``fn``'s signature (see :func:`build_args_validator`)."""
    return build_args_validator(fn)(data)


def coerce_output(tp: object, data: object) -> object:
    """Validate already-parsed data as ``tp`` (``str`` and ``Any`` pass through unchanged).

    Raises:
        OutputValidationError: ``data`` does not match ``tp``.
    """
    if tp is str or tp is Any or tp is object:
        return data
    name = getattr(tp, "__name__", None) or str(tp)
    try:
        return _adapter(tp).validate_python(data)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
        raise OutputValidationError(
            f"value does not match {name}: {problems}",
            raw=repr(data)[:500],
            output_type_name=name,
            hint="fix the data or loosen the type",
        ) from None
