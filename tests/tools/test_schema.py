"""JSON Schema from type hints, validation before the call, strict mode."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from lovia import InvalidToolArguments, RunContext, Tool, UserError, tool


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^\d{5}$")


@dataclasses.dataclass
class Window:
    start: int
    end: int


class Options(TypedDict):
    verbose: bool


@tool
def everything(
    ctx: RunContext,
    name: Annotated[str, "who to greet"],
    count: Annotated[int, Field(ge=1, le=5, description="how many times")] = 1,
    mode: Literal["loud", "quiet"] = "quiet",
    where: Address | None = None,
    window: Window | None = None,
    options: Options | None = None,
    tag: int | str = 0,
) -> str:
    """Greet someone.

    Args:
        mode: how to say it.
    """
    return name


def test_schema_from_type_hints():
    schema = everything.parameters
    props = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["name"]
    assert "ctx" not in props
    assert props["name"] == {"description": "who to greet", "type": "string"}
    assert props["count"]["minimum"] == 1 and props["count"]["maximum"] == 5 and props["count"]["default"] == 1
    assert props["mode"]["enum"] == ["loud", "quiet"] and props["mode"]["description"] == "how to say it."
    assert {"$ref": "#/$defs/Address"} in props["where"]["anyOf"]
    assert set(schema["$defs"]) >= {"Address", "Window", "Options"}
    assert {s.get("type") for s in props["tag"]["anyOf"]} == {"integer", "string"}
    assert everything.description == "Greet someone."


def test_validation_coerces_and_rejects():
    sig = everything.signature
    assert sig is not None
    kwargs = sig.validate(
        {
            "name": "ada",
            "count": "3",
            "where": {"street": "Main", "zip_code": "12345"},
            "window": {"start": 1, "end": 2},
        }
    )
    assert kwargs["count"] == 3 and kwargs["where"] == Address(street="Main", zip_code="12345")
    assert kwargs["window"] == Window(1, 2)
    with pytest.raises(InvalidToolArguments, match="count"):
        sig.validate({"name": "ada", "count": 9})
    with pytest.raises(InvalidToolArguments, match="zip_code"):
        sig.validate({"name": "ada", "where": {"street": "x", "zip_code": "abc"}})
    with pytest.raises(InvalidToolArguments, match="name"):
        sig.validate({})


def test_strict_tools():
    @tool(strict=True)
    def strict_one(a: int, b: str = "x") -> str:
        """Strict."""
        return b * a

    schema = strict_one.parameters
    assert schema["additionalProperties"] is False and schema["required"] == ["a", "b"]
    with pytest.raises(InvalidToolArguments):
        strict_one.signature.validate({"a": 1, "b": "y", "extra": True})

    with pytest.raises(UserError, match="no annotation"):

        @tool(strict=True)
        def loose(a):  # type: ignore[no-untyped-def]
            return a


def test_misuse_is_caught_at_definition():
    with pytest.raises(UserError, match="more than one RunContext"):

        @tool
        def two(a: RunContext, b: RunContext) -> None:
            """Two contexts."""

    with pytest.raises(UserError, match=r"\*args"):

        @tool
        def star(*args: int) -> None:
            """Varargs."""

    with pytest.raises(UserError):
        Tool(name="", description="", parameters={}, invoke=None)  # type: ignore[arg-type]


def test_options_and_names():
    @tool(
        name="renamed",
        description="Custom.",
        retries=2,
        timeout=1.5,
        parallel=False,
        needs_approval=True,
        idempotent=False,
    )
    async def original() -> None:
        """Docstring."""

    assert (original.name, original.description, original.retries, original.timeout) == ("renamed", "Custom.", 2, 1.5)
    assert not original.parallel and original.needs_approval and not original.idempotent
