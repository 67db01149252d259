"""Write ``tests/fixtures/public_surface.json`` from the reference ``api.md``.

``api.md`` lists every public module of the system we are compatible with: classes with their
fields, methods and properties, functions with their full signatures, constants and ``__all__``.
This script turns that listing into a JSON fixture that ``tests/test_public_surface.py`` holds the
live package against. Run it again only when the reference listing changes::

    python scripts/gen_public_surface.py [path/to/api.md] [--survey]

``--survey`` prints what the live package is missing instead of writing the fixture.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_API = ROOT.parent / "shared" / "spec" / "lovia-0.9.119" / "api.md"
FIXTURE = ROOT / "tests" / "fixtures" / "public_surface.json"

MODULE = re.compile(r"^## `([\w.]+)`\s*$")
ALL = re.compile(r"^- `__all__`: (.*)$")
CLASS = re.compile(r"^- `class (\w+)(?:\((.*)\))?`\s*$")
FUNC = re.compile(r"^(\s*)- `(async )?def (\w+)\((.*)\)(?: -> (.*))?`\s*$")
FIELD = re.compile(r"^  - field `(\w+): (.*?)`\s*$")
PROPERTY = re.compile(r"^  - property `(\w+) -> (.*)`\s*$")
CONSTANT = re.compile(r"^- constant `(\w+) = (.*)`\s*$")


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def split_default(text: str) -> tuple[str, str | None]:
    """``'x: int = 3'`` -> (``'x: int'``, ``'3'``); the ``=`` must be at depth 0."""
    depth, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and text[i - 1 : i + 2] == " = ":
            return text[: i - 1].strip(), text[i + 2 :].strip()
    return text.strip(), None


def parse_params(text: str) -> list[dict[str, Any]]:
    """Parameters in order: name, kind (positional / keyword / var_positional / var_keyword), default."""
    params: list[dict[str, Any]] = []
    keyword_only = False
    for raw in split_top(text):
        if raw == "*":
            keyword_only = True
            continue
        if raw == "/":
            continue
        head, default = split_default(raw)
        name = head.split(":", 1)[0].strip()
        if name.startswith("**"):
            params.append({"name": name[2:], "kind": "var_keyword", "default": None})
        elif name.startswith("*"):
            keyword_only = True
            params.append({"name": name[1:], "kind": "var_positional", "default": None})
        else:
            kind = "keyword" if keyword_only else "positional"
            params.append({"name": name, "kind": kind, "default": default})
    return params


def _callable(m: re.Match[str]) -> dict[str, Any]:
    return {"async": bool(m.group(2)), "params": parse_params(m.group(4))}


def parse(text: str) -> dict[str, Any]:
    """The api.md listing as ``{module: {"all": [...] | None, "names": {name: spec}}}``."""
    modules: dict[str, Any] = {}
    mod: dict[str, Any] | None = None
    cls: dict[str, Any] | None = None
    for line in text.splitlines():
        if m := MODULE.match(line):
            mod = modules.setdefault(m.group(1), {"all": None, "names": {}})
            cls = None
        elif mod is None:
            continue
        elif m := ALL.match(line):
            mod["all"] = re.findall(r"`([^`]+)`", m.group(1))
        elif m := CLASS.match(line):
            bases = [b.strip() for b in split_top(m.group(2) or "")]
            cls = {"kind": "class", "bases": bases, "fields": {}, "methods": {}, "properties": []}
            mod["names"][m.group(1)] = cls
        elif m := CONSTANT.match(line):
            mod["names"][m.group(1)] = {"kind": "constant", "value": m.group(2)}
            cls = None
        elif (m := FUNC.match(line)) and not m.group(1):
            # Overloads repeat the name; the last listing (the implementation) wins.
            mod["names"][m.group(3)] = {"kind": "function", **_callable(m)}
            cls = None
        elif cls is not None and (m := FUNC.match(line)):
            cls["methods"][m.group(3)] = _callable(m)
        elif cls is not None and (m := FIELD.match(line)):
            cls["fields"][m.group(1)] = split_default(m.group(2))[1]
        elif cls is not None and (m := PROPERTY.match(line)):
            cls["properties"].append(m.group(1))
    return modules


def survey(spec: dict[str, Any]) -> list[str]:
    """Dotted paths in the listing that the live package lacks (modules and names only)."""
    import importlib

    missing = []
    for modname, mod in spec.items():
        try:
            module = importlib.import_module(modname)
        except ImportError:
            missing.append(f"{modname} (module)")
            continue
        names = set(mod["names"]) | set(mod["all"] or [])
        for name in sorted(names):
            if not hasattr(module, name):
                missing.append(f"{modname}.{name}")
                continue
            obj = getattr(module, name)
            info = mod["names"].get(name, {})
            for member in [*info.get("methods", {}), *info.get("properties", [])]:
                if not hasattr(obj, member):
                    missing.append(f"{modname}.{name}.{member}")
    return missing


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    api = Path(args[0]) if args else DEFAULT_API
    spec = parse(api.read_text(encoding="utf-8"))
    if "--survey" in argv:
        print("\n".join(survey(spec)))
        return 0
    FIXTURE.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {len(spec)} modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
