"""The surface check itself catches renames, removed keywords and changed defaults."""

from __future__ import annotations

import pytest

import lovia.parts
import lovia.session
from tests import test_public_surface as surface


def test_clean_module_has_no_problems() -> None:
    assert surface.open_problems("lovia.parts") == []


def test_a_renamed_keyword_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def image_mime(filename: str) -> str | None:  # reference name is ``path``
        return None

    monkeypatch.setattr(lovia.parts, "image_mime", image_mime)
    problems = surface.open_problems("lovia.parts")
    assert "lovia.parts.image_mime(path): missing parameter" in problems
    assert "lovia.parts.image_mime(filename): required here but not in the reference" in problems


def test_a_removed_name_and_a_changed_constant_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(lovia.parts, "text_of")
    monkeypatch.setattr(lovia.session, "TIMING_META_KEY", "time")
    assert "lovia.parts.text_of: missing" in surface.open_problems("lovia.parts")
    assert any(
        p.startswith("lovia.session.TIMING_META_KEY: value 'time'") for p in surface.open_problems("lovia.session")
    )


def test_a_changed_default_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    original = lovia.parts.FilePart.from_url.__func__  # type: ignore[attr-defined]

    def from_url(cls, url, *, mime_type="text/plain", filename=None):  # type: ignore[no-untyped-def]
        return original(cls, url, mime_type=mime_type, filename=filename)

    monkeypatch.setattr(lovia.parts.FilePart, "from_url", classmethod(from_url))
    problems = surface.open_problems("lovia.parts")
    assert any("FilePart.from_url(mime_type): default 'text/plain'" in p for p in problems)


def test_pending_names_never_fail_the_check() -> None:
    pending = ["lovia.web.sse", "lovia.web.supervisor.RunSupervisor"]  # a module line and a class line
    assert surface._covered("lovia.web.sse.DoneData", pending)
    assert surface._covered("lovia.web.supervisor.RunSupervisor.drain(timeout)", pending)
    assert not surface._covered("lovia.web.supervisor.RunController", pending)
    assert not surface._covered("lovia.parts.TextPart", pending)
