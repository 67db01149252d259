"""``describe_image``: a text-only chat model looks at a picture through a vision model.

When the chat model cannot read images but a vision model is configured, the default agent gets
this tool: it reads an image from the run's workspace (an upload in its ``uploads/`` folder or any
other file there), sends it to the vision model as :mod:`lovia.parts`, and hands back the text.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any

from ..agent import Agent
from ..exceptions import ToolError
from ..messages import user
from ..parts import ImagePart, TextPart
from ..run_context import RunContext
from ..tools import Tool, tool
from .media import MODEL_IMAGE_MIME_BY_EXT, model_image_mime

if TYPE_CHECKING:
    from ..providers.base import Provider

__all__ = ["DEFAULT_QUESTION", "VISION_INSTRUCTIONS", "make_describe_image_tool"]

DEFAULT_QUESTION = "Describe this image in detail, including any text it contains."
"""What ``describe_image`` asks when the model names no question."""

VISION_INSTRUCTIONS = (
    "You are a vision assistant. Study the image and answer the question accurately and completely. "
    "Transcribe any text you can read. Say so plainly when something is unclear; never invent details."
)
"""The system prompt of the vision model behind ``describe_image``."""

MAX_IMAGE_BYTES = 10 * 1024 * 1024
"""The largest image ``describe_image`` sends (bigger files are refused)."""

_KINDS = ", ".join(f".{ext}" for ext in sorted(MODEL_IMAGE_MIME_BY_EXT))


def _workspace_relative(ctx: RunContext[Any], path: str) -> str:
    """``path`` inside the run's workspace (as a workspace-relative path), or a :class:`ToolError`."""
    from ..workspace.paths import resolve_path

    ws = getattr(ctx, "workspace", None)
    if ws is None:
        raise ToolError(
            "this run has no workspace to read the image from",
            hint="attach the image to the chat, or give the agent a workspace",
        )
    root = getattr(ws, "root_path", None)
    if root is None:
        return path
    resolved = resolve_path(root, path)
    if resolved.rel is None:
        raise ToolError(
            f"{path!r} is outside the workspace",
            hint="pass a path inside the workspace, e.g. 'uploads/photo.png'",
        )
    return resolved.rel


def make_describe_image_tool(vision_model: str | Provider) -> Tool[Any]:
    """A ``describe_image(path, question=DEFAULT_QUESTION)`` tool answered by ``vision_model``.

    The image must be a workspace file of a type vision models take (PNG, JPEG, GIF, WebP);
    anything else, a path outside the workspace, or a run without one is a :class:`ToolError`
    with a hint the model can act on.
    """
    helper: Agent[Any] = Agent(name="describe-image", instructions=VISION_INSTRUCTIONS, model=vision_model)

    @tool(name="describe_image")
    async def describe_image(
        ctx: RunContext[Any],
        path: Annotated[str, "The image file: workspace-relative (uploads are under 'uploads/') or absolute."],
        question: Annotated[str, "What to find out about the image."] = DEFAULT_QUESTION,
    ) -> str:
        """Look at an image file (PNG, JPEG, GIF, WebP) and describe it or answer a question about it."""
        from ..runner import Runner

        rel = _workspace_relative(ctx, path)
        mime = model_image_mime(rel)
        if mime is None:
            raise ToolError(f"{path!r} is not an image the vision model can read", hint=f"pass a {_KINDS} file")
        data = await ctx.workspace.read_bytes(rel, max_bytes=MAX_IMAGE_BYTES)
        image = ImagePart(data=base64.b64encode(data.data).decode(), mime_type=mime)
        result = await Runner.run(helper, [user([TextPart(question or DEFAULT_QUESTION), image])], max_turns=1)
        answer = str(result.output or "").strip()
        if not answer:
            raise ToolError("the vision model gave no description", hint="ask a more specific question, or retry")
        return answer

    return describe_image
