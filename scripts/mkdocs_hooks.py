"""mkdocs hooks for this site (named in ``mkdocs.yml``; run only by ``mkdocs build``/``serve``).

- The runnable examples (``examples/``) and ``bench/README.md`` are published as generated pages,
  and a page's repository-relative link to one (``../examples/mcp_tools.py``) is pointed at its
  page, so the Markdown reads the same on a code host and on the site.
- The ``# runnable`` marker that ``tests/test_docs.py`` looks for is dropped from the shown code.
- Sphinx roles in docstrings (``:class:`~lovia.Agent```) become cross-references to the API
  reference (plain code when the target is not documented).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
# Folders outside docs/ whose files get a page each, and the suffixes shown.
PUBLISHED = {"examples": (".py", ".md"), "bench": ("README.md",)}
_LINK = re.compile(r"\]\((?:\.\./)+((?:examples|bench)/[^)#\s]+)(#[^)\s]*)?\)")
_MARKER = re.compile(r"^(```python[^\n]*\n)# runnable[^\n]*\n", re.MULTILINE)
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):<code>(~?)([\w.]+)(\(\))?</code>")


def _published() -> list[Path]:
    found: list[Path] = []
    for folder, suffixes in PUBLISHED.items():
        found += [p for p in sorted((ROOT / folder).rglob("*")) if p.is_file() and p.name.endswith(suffixes)]
    return [p for p in found if "__pycache__" not in p.parts]


def _page_uri(path: Path) -> str:
    """Where a repository file is published: ``examples/mcp_tools.py`` -> ``examples/mcp_tools.py.md``."""
    rel = path.relative_to(ROOT).as_posix()
    return rel if rel.endswith(".md") and not rel.endswith("SKILL.md") else f"{rel}.md"


def _page(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md" and not path.name == "SKILL.md":
        return text
    lang = "python" if path.suffix == ".py" else "markdown"
    fence = "````" if "```" in text else "```"
    return f"# {rel}\n\nThis file is in the repository at `{rel}`.\n\n{fence}{lang}\n{text}{fence}\n"


def on_files(files: Files, config: Any) -> Files:
    for path in _published():
        files.append(File.generated(config, _page_uri(path), content=_page(path)))
    index = [
        "# Examples",
        "",
        "Runnable scripts from the repository's `examples/` folder (offline unless they say so).",
        "",
    ]
    index += [
        f"- [{p.relative_to(ROOT / 'examples').as_posix()}]({_page_uri(p).removeprefix('examples/')})"
        for p in _published()
        if p.parts[len(ROOT.parts)] == "examples" and p.suffix == ".py"
    ]
    files.append(File.generated(config, "examples/index.md", content="\n".join(index) + "\n"))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    depth = page.file.src_uri.count("/")

    def relink(match: re.Match[str]) -> str:
        target = ROOT / match.group(1)
        if not target.is_file():
            return match.group(0)  # left for mkdocs to report
        return f"]({'../' * depth}{_page_uri(target)}{match.group(2) or ''})"

    return _MARKER.sub(r"\1", _LINK.sub(relink, markdown))


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    def role(match: re.Match[str]) -> str:
        short, ident, call = match.group(1), match.group(2), match.group(3) or ""
        shown = (ident.rsplit(".", 1)[-1] if short else ident) + call
        target = ident if "." in ident else f"lovia.{ident}"
        return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'

    return _ROLE.sub(role, html)
