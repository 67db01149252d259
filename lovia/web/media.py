"""Which files are images, for two audiences: the model (what a vision model accepts) and the page
(what the browser previews inline in the files panel)."""

from __future__ import annotations

from pathlib import Path

from ..parts import IMAGE_MIME_BY_SUFFIX

__all__ = [
    "MODEL_IMAGE_MIME",
    "MODEL_IMAGE_MIME_BY_EXT",
    "PREVIEW_IMAGE_EXT",
    "PREVIEW_IMAGE_MIME_BY_EXT",
    "is_preview_image",
    "model_image_mime",
    "preview_image_mime",
]

MODEL_IMAGE_MIME_BY_EXT = IMAGE_MIME_BY_SUFFIX
"""Image types a vision model accepts as an image part, by lower-case extension (no dot)."""

MODEL_IMAGE_MIME = frozenset(MODEL_IMAGE_MIME_BY_EXT.values())
"""The mime types of :data:`MODEL_IMAGE_MIME_BY_EXT`."""

PREVIEW_IMAGE_MIME_BY_EXT = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "avif": "image/avif",
    "bmp": "image/bmp",
    "svg": "image/svg+xml",
}
"""Image types the page shows as a picture, by lower-case extension (no dot): a wider set than the
model's, since a browser draws AVIF, BMP and SVG too."""

PREVIEW_IMAGE_EXT = frozenset(PREVIEW_IMAGE_MIME_BY_EXT)
"""The extensions of :data:`PREVIEW_IMAGE_MIME_BY_EXT`."""


def _ext(name: str | Path) -> str:
    return Path(name).suffix.lower().lstrip(".")


def model_image_mime(name: str | Path) -> str | None:
    """The mime type to send a file with to a vision model, or ``None`` when it is no such image."""
    return MODEL_IMAGE_MIME_BY_EXT.get(_ext(name))


def preview_image_mime(name: str | Path) -> str | None:
    """The mime type the page previews a file as, or ``None`` when it is not a previewable image."""
    return PREVIEW_IMAGE_MIME_BY_EXT.get(_ext(name))


def is_preview_image(name: str | Path) -> bool:
    """Whether the page shows this file as a picture."""
    return _ext(name) in PREVIEW_IMAGE_EXT
