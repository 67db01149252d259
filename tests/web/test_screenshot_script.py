"""scripts/web_screenshots.py (which makes the docs/web.md pictures) runs and writes its PNGs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_browser import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]


def test_the_screenshot_script_writes_light_and_dark_desktop_and_narrow_theme_and_activity(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "scripts/web_screenshots.py", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's lovia, not an installed one
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == [
        "web-activity.png",
        "web-dark-390.png",
        "web-dark-desktop.png",
        "web-export.png",
        "web-light-390.png",
        "web-light-desktop.png",
        "web-theme-dark-ring.png",
    ]
    for name in names:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    docs = (ROOT / "docs" / "web.md").read_text(encoding="utf-8")
    assert all(f"img/{name}" in docs for name in names)
