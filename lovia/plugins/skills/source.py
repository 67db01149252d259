"""Where skills come from: the :class:`SkillSource` protocol and the directory-backed source.

A ``SKILL.md`` starts with a front-matter block between ``---`` lines. Only a small, safe subset of
YAML is read (no dependency): ``key: value`` scalars (quoted or plain, numbers, booleans),
``[a, b]`` and ``- item`` lists, ``|`` / ``>`` block text, and one level of nested mapping.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .model import Skill, SkillMetadata, SkillNotFoundError, SkillsError

__all__ = ["DirectorySkillSource", "SkillSource", "parse_skill_md"]

logger = logging.getLogger("lovia.plugins.skills")

SKILL_FILE = "SKILL.md"
MAX_SKILL_MD_BYTES = 256_000
NAME_RE = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024


@runtime_checkable
class SkillSource(Protocol):
    """Storage of skills: current truth on every call (there is no refresh to call)."""

    async def list_skills(self) -> list[SkillMetadata]:
        """Every skill's metadata."""
        ...

    async def load_skill(self, name: str) -> Skill:
        """One skill with its body; unknown names raise :class:`SkillNotFoundError`."""
        ...


# ----------------------------------------------------------------------------- front matter


def _scalar(text: str) -> Any:
    text = text.strip()
    if not text:
        return ""
    if text[0] in "\"'" and text[-1] == text[0] and len(text) >= 2:
        inner = text[1:-1]
        return inner.replace('\\"', '"').replace("\\n", "\n") if text[0] == '"' else inner.replace("''", "'")
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(p) for p in _split_inline(text[1:-1]) if p.strip()]
    low = text.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low in ("null", "~"):
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    return re.sub(r"\s+#.*$", "", text)


def _split_inline(text: str) -> list[str]:
    parts, buf, quote = [], "", ""
    for ch in text:
        if quote:
            buf += ch
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            buf += ch
        elif ch == ",":
            parts.append(buf)
            buf = ""
        else:
            buf += ch
    parts.append(buf)
    return parts


def _parse_block(lines: list[str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        if line[0] in " \t":
            raise SkillsError(f"{where}: unexpected indentation: {line.strip()[:60]!r}", path=where)
        key, sep, rest = line.partition(":")
        if not sep or not key.strip() or " " in key.strip():
            raise SkillsError(f"{where}: not a 'key: value' line: {line.strip()[:60]!r}", path=where)
        key, rest = key.strip(), rest.strip()
        i += 1
        nested = []
        while i < len(lines) and (not lines[i].strip() or lines[i][0] in " \t"):
            nested.append(lines[i])
            i += 1
        while nested and not nested[-1].strip():
            nested.pop()
        if rest in ("|", ">", "|-", ">-"):
            body = [n.strip() for n in nested]
            out[key] = ("\n" if rest[0] == "|" else " ").join(body).strip()
        elif rest:
            if nested:
                out[key] = _scalar(rest + " " + " ".join(n.strip() for n in nested))
            else:
                out[key] = _scalar(rest)
        elif nested and all(n.strip().startswith("- ") or n.strip() == "-" for n in nested if n.strip()):
            out[key] = [_scalar(n.strip()[1:]) for n in nested if n.strip()]
        elif nested:
            out[key] = _parse_block([n.strip() for n in nested], where)
        else:
            out[key] = None
    return out


def parse_skill_md(text: str, *, where: str = SKILL_FILE) -> tuple[dict[str, Any], str]:
    """Split a ``SKILL.md`` into (front matter, body); a missing or broken block raises SkillsError."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillsError(f"{where}: no front matter", path=where, hint="start SKILL.md with a '---' block")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise SkillsError(f"{where}: the front matter is not closed", path=where, hint="end it with '---'") from None
    meta = _parse_block(lines[1:end], where)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return meta, body


def check_name(name: object, *, where: str) -> str:
    """A valid skill name, or SkillsError."""
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > MAX_NAME:
        raise SkillsError(
            f"{where}: invalid skill name {name!r}",
            path=where,
            hint=f"letters and digits in segments joined by '-' or '_', at most {MAX_NAME} characters",
        )
    return name


def _metadata(meta: dict[str, Any], dirname: str, where: str) -> tuple[str, str, dict[str, Any]]:
    name = check_name(meta.get("name") or dirname, where=where)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillsError(
            f"{where}: 'description' is missing",
            skill_name=name,
            path=where,
            hint="say in one or two sentences when the skill applies",
        )
    if len(description) > MAX_DESCRIPTION:
        raise SkillsError(
            f"{where}: 'description' is longer than {MAX_DESCRIPTION} characters",
            skill_name=name,
            path=where,
            hint="shorten it; details belong in the body",
        )
    extra = {k: v for k, v in meta.items() if k not in ("name", "description")}
    return name, description.strip(), extra


# ----------------------------------------------------------------------------- directories


class DirectorySkillSource:
    """Skills as directories holding a ``SKILL.md``, under one or more roots (scanned in order).

    Every listing scans the roots again and every load reads the file again, so added, edited and
    removed skills take effect at once. A malformed skill is skipped with a warning; on a duplicate
    name the first root wins.
    """

    def __init__(self, *roots: str | Path) -> None:
        self.roots = [Path(r).expanduser() for r in roots]

    def _scan(self) -> dict[str, tuple[Path, SkillMetadata]]:
        found: dict[str, tuple[Path, SkillMetadata]] = {}
        for root in self.roots:
            if not root.is_dir():
                continue
            for entry in sorted(root.iterdir()):
                md = entry / SKILL_FILE
                if not entry.is_dir() or not md.is_file():
                    continue
                try:
                    name, description, extra = self._read_meta(md, entry.name)
                except SkillsError as exc:
                    logger.warning("skipping skill at %s: %s", entry, exc)
                    continue
                if name in found:
                    logger.warning("skipping skill %r at %s: the name is taken by %s", name, entry, found[name][0])
                    continue
                found[name] = (entry, SkillMetadata(name, description, extra))
        return found

    def _read(self, md: Path) -> str:
        if md.stat().st_size > MAX_SKILL_MD_BYTES:
            raise SkillsError(
                f"{md}: larger than {MAX_SKILL_MD_BYTES} bytes",
                path=str(md),
                hint="move details into files under references/",
            )
        try:
            return md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillsError(f"{md}: unreadable: {exc}", path=str(md), hint="save SKILL.md as UTF-8 text") from exc

    def _read_meta(self, md: Path, dirname: str) -> tuple[str, str, dict[str, Any]]:
        meta, _ = parse_skill_md(self._read(md), where=str(md))
        return _metadata(meta, dirname, str(md))

    async def list_skills(self) -> list[SkillMetadata]:
        """Scan the roots now."""
        return [meta for _, meta in self._scan().values()]

    async def load_skill(self, name: str) -> Skill:
        """Scan, find ``name`` and read its ``SKILL.md`` now."""
        found = self._scan()
        if name not in found:
            raise SkillNotFoundError(name, available=sorted(found))
        directory, _ = found[name]
        md = directory / SKILL_FILE
        meta, body = parse_skill_md(self._read(md), where=str(md))
        skill_name, description, extra = _metadata(meta, directory.name, str(md))
        return Skill(skill_name, description, body, path=directory, extra=extra)


def as_source(item: str | Path | SkillSource) -> SkillSource:
    """A path becomes a :class:`DirectorySkillSource`; a source stays itself."""
    if isinstance(item, (str, Path)):
        return DirectorySkillSource(item)
    if isinstance(item, SkillSource):
        return item
    raise SkillsError(
        f"{item!r} is neither a directory nor a SkillSource", hint="pass a path, a SkillSource or a SkillCatalog"
    )


class CombinedSource:
    """Several sources as one; the first source holding a name wins."""

    def __init__(self, sources: Sequence[SkillSource]) -> None:
        self.sources = list(sources)

    async def list_skills(self) -> list[SkillMetadata]:
        seen: dict[str, SkillMetadata] = {}
        for source in self.sources:
            for meta in await source.list_skills():
                if meta.name in seen:
                    logger.warning("skipping duplicate skill %r from %r", meta.name, source)
                    continue
                seen[meta.name] = meta
        return list(seen.values())

    async def load_skill(self, name: str) -> Skill:
        available: list[str] = []
        for source in self.sources:
            try:
                return await source.load_skill(name)
            except SkillNotFoundError as exc:
                available += [n for n in exc.available if n not in available]
        raise SkillNotFoundError(name, available=available)
