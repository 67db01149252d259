"""The docs site's link checker (scripts/check_site_links.py, run by .ci/run) finds what is broken."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_site_links.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_site_links", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _site(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, html in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(html)
    return tmp_path


def test_sound_site_passes(tmp_path: Path) -> None:
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="guide/">g</a><a href="guide/#step">s</a><a href="https://x.invalid/">e</a>',
            "guide/index.html": '<h2 id="step">Step</h2><a href="../index.html">home</a><img src="../img/a.png">',
            "img/a.png": "",
        },
    )
    assert _checker().check(site) == []


def test_missing_page_asset_and_anchor_are_reported(tmp_path: Path) -> None:
    site = _site(
        tmp_path,
        {
            "index.html": '<a href="gone/">x</a><a href="guide/#nowhere">y</a><script src="js/app.js"></script>',
            "guide/index.html": '<h2 id="step">Step</h2><a href="../../outside.html">z</a>',
        },
    )
    broken = _checker().check(site)
    assert any("gone/" in line and "missing file" in line for line in broken)
    assert any("#nowhere" in line and "no element" in line for line in broken)
    assert any("js/app.js" in line for line in broken)
    assert any("outside.html" in line for line in broken)
    assert len(broken) == 4
