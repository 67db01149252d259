"""``lovia.web.media``: the model's image table and the page's preview table."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient

from lovia.parts import IMAGE_MIME_BY_SUFFIX
from lovia.web import create_app
from lovia.web.media import (
    MODEL_IMAGE_MIME,
    MODEL_IMAGE_MIME_BY_EXT,
    PREVIEW_IMAGE_EXT,
    PREVIEW_IMAGE_MIME_BY_EXT,
    is_preview_image,
    model_image_mime,
    preview_image_mime,
)
from lovia.web.routes_uploads import DEFAULT_UPLOAD_EXTENSIONS

from .helpers import scripted_agent


def test_the_model_table_is_the_parts_table() -> None:
    assert MODEL_IMAGE_MIME_BY_EXT is IMAGE_MIME_BY_SUFFIX
    assert MODEL_IMAGE_MIME == {"image/png", "image/jpeg", "image/gif", "image/webp"}
    assert model_image_mime("a/B.JPG") == "image/jpeg"
    assert model_image_mime(Path("x.png")) == "image/png"
    assert model_image_mime("x.svg") is None and model_image_mime("noext") is None
    assert set(MODEL_IMAGE_MIME_BY_EXT) <= DEFAULT_UPLOAD_EXTENSIONS


def test_the_preview_table_is_wider() -> None:
    assert set(MODEL_IMAGE_MIME_BY_EXT) < PREVIEW_IMAGE_EXT
    assert PREVIEW_IMAGE_EXT == frozenset(PREVIEW_IMAGE_MIME_BY_EXT)
    assert preview_image_mime("logo.SVG") == "image/svg+xml"
    assert preview_image_mime("a.avif") == "image/avif"
    assert preview_image_mime("a.txt") is None
    assert is_preview_image("p.bmp") and not is_preview_image("p.pdf") and not is_preview_image("bmp")


def test_the_page_gets_the_preview_table(tmp_path: Path) -> None:
    with TestClient(create_app({"s": scripted_agent()}, db_path=str(tmp_path / "m.db"))) as client:
        html = client.get("/").text
    raw = re.search(r'<script[^>]*id="lovia-config"[^>]*>(.*?)</script>', html, re.S)
    assert raw is not None
    assert json.loads(raw.group(1))["previewImageExt"] == sorted(PREVIEW_IMAGE_EXT)
