"""Our public surface against the frozen reference listing (``tests/fixtures/public_surface.json``).

The fixture comes from the reference ``api.md`` through ``scripts/gen_public_surface.py``: every
module, name, field, method, property, keyword and default it lists. Each one must exist here
with a compatible signature: promised positional parameters keep their place and name, promised
keywords are accepted, promised defaults are defaults here too (equal when they are literals),
and nothing we add is required. Renaming or removing one of ours fails this test.

Two files list what is not held (yet):

- ``public_surface_pending.txt``: names other work will add (owner in brackets). The integrator
  deletes lines as that work lands; :func:`test_pending_list_is_current` names the ones to drop.
  A pending name may appear at any time without breaking anything.
- ``public_surface_divergent.txt``: names we deliberately do not offer, with the reason.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SPEC: dict[str, Any] = json.loads((FIXTURES / "public_surface.json").read_text(encoding="utf-8"))
_MISSING = object()


def _listed(name: str) -> list[str]:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


PENDING = _listed("public_surface_pending.txt")
DIVERGENT = _listed("public_surface_divergent.txt")


def _covered(path: str, prefixes: list[str]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "(")) for p in prefixes)


def _literal(text: str | None) -> Any:
    if text is None:
        return _MISSING
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _MISSING


# ------------------------------------------------------------------ signature comparison


def _compare_params(path: str, promised: list[dict[str, Any]], live: inspect.Signature) -> Iterator[str]:
    params = list(live.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: p for p in params}
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    has_var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    promised_pos = [p for p in promised if p["kind"] == "positional"]
    for want in promised:
        where = f"{path}({want['name']})"
        kind = want["kind"]
        if kind == "var_keyword":
            # Explicit keyword-only parameters are an acceptable spelling of a promised **kwargs.
            if not has_var_kw and not any(p.kind is p.KEYWORD_ONLY for p in params):
                yield f"{where}: **{want['name']} not accepted"
            continue
        if kind == "var_positional":
            if not has_var_pos:
                yield f"{where}: *{want['name']} not accepted"
            continue
        got = by_name.get(want["name"])
        if got is None:
            if not (kind == "keyword" and has_var_kw):
                yield f"{where}: missing parameter"
            continue
        if kind == "positional":
            index = promised_pos.index(want)
            if got not in positional or positional.index(got) != index:
                yield f"{where}: not positional parameter #{index + 1}"
        elif got.kind not in (got.KEYWORD_ONLY, got.POSITIONAL_OR_KEYWORD):
            yield f"{where}: not accepted as a keyword"
        yield from _compare_default(where, want["default"], got.default)
    promised_names = {p["name"] for p in promised}
    for extra in params:
        if extra.name in promised_names or extra.kind in (extra.VAR_KEYWORD, extra.VAR_POSITIONAL):
            continue
        if extra.default is inspect.Parameter.empty:
            yield f"{path}({extra.name}): required here but not in the reference"


def _compare_default(where: str, promised: str | None, live: Any) -> Iterator[str]:
    if promised is None:
        return
    if live is inspect.Parameter.empty:
        yield f"{where}: the reference has a default ({promised}), ours is required"
        return
    value = _literal(promised)
    if value is not _MISSING and not _same_value(value, live):
        yield f"{where}: default {live!r} differs from the reference's {promised}"


def _same_value(value: Any, live: Any) -> bool:
    if isinstance(live, dataclasses.Field):  # a dataclass field default seen through the class
        live = live.default
    return bool(value == live and type(value) is type(live)) or (isinstance(value, float) and value == live)


def _signature_of_member(cls: type, name: str) -> inspect.Signature | None:
    raw = inspect.getattr_static(cls, name)
    func = getattr(cls, name)
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    if isinstance(raw, (staticmethod, classmethod)):
        return sig
    params = list(sig.parameters.values())
    return sig.replace(parameters=params[1:]) if params and params[0].name in ("self", "cls") else sig


def _is_async(obj: Any) -> bool:
    target = inspect.unwrap(obj)
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


# ------------------------------------------------------------------ per-kind checks


def _check_function(path: str, obj: Any, spec: dict[str, Any]) -> Iterator[str]:
    if not callable(obj):
        yield f"{path}: not callable"
        return
    if spec["async"] and not _is_async(obj):
        yield f"{path}: should be async"
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return
    yield from _compare_params(path, spec["params"], sig)


def _class_has(cls: type, name: str) -> bool:
    if hasattr(cls, name):
        return True
    if issubclass(cls, BaseException):  # exception details are instance attributes
        try:
            return hasattr(cls("probe"), name)
        except Exception:
            return False
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "model_fields", {}):
            return True
    return name in {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else False


def _bare_field(text: str) -> bool:
    """Whether ``text`` is a pydantic ``Field(...)`` call that sets constraints but no default."""
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "Field"
        and not call.args
        and not any(k.arg in ("default", "default_factory") for k in call.keywords)
    )


def _check_fields(path: str, cls: type, fields: dict[str, str | None], protocol: bool) -> Iterator[str]:
    try:
        ctor = None if protocol else inspect.signature(cls)
    except (TypeError, ValueError):
        ctor = None
    for name, default in fields.items():
        if default is not None and _bare_field(default):
            default = None  # ``Field(max_length=...)`` without a default: a required pydantic field
        if not _class_has(cls, name):
            yield f"{path}.{name}: missing field"
            continue
        if ctor is not None and name in ctor.parameters:
            yield from _compare_default(f"{path}.{name}", default, ctor.parameters[name].default)


def _check_class(path: str, cls: Any, spec: dict[str, Any]) -> Iterator[str]:
    if not inspect.isclass(cls):
        yield f"{path}: not a class"
        return
    protocol = "Protocol" in spec["bases"] or bool(getattr(cls, "_is_protocol", False))
    yield from _check_fields(path, cls, spec["fields"], protocol)
    for name in spec["properties"]:
        if not _class_has(cls, name):
            yield f"{path}.{name}: missing property"
    for name, method in spec["methods"].items():
        where = f"{path}.{name}"
        if not hasattr(cls, name):
            yield f"{where}: missing method"
            continue
        if method["async"] and not _is_async(getattr(cls, name)):
            yield f"{where}: should be async"
        sig = None if protocol and name == "__init__" else _signature_of_member(cls, name)
        if sig is not None:
            yield from _compare_params(where, method["params"], sig)


def _check_constant(path: str, obj: Any, spec: dict[str, Any]) -> Iterator[str]:
    value = _literal(spec["value"])
    if value is not _MISSING and obj != value:
        yield f"{path}: value {obj!r} differs from the reference's {spec['value']}"


CHECKS = {"function": _check_function, "class": _check_class, "constant": _check_constant}


def module_problems(modname: str) -> list[str]:
    """Every way the live module differs from the reference listing (pending/divergent names kept)."""
    spec = SPEC[modname]
    try:
        module = importlib.import_module(modname)
    except ImportError as exc:
        return [f"{modname}: cannot import ({exc})"]
    problems = []
    for name in spec["all"] or []:
        if not hasattr(module, name):
            problems.append(f"{modname}.{name}: listed in the reference __all__ but missing")
    for name, item in spec["names"].items():
        path = f"{modname}.{name}"
        obj = getattr(module, name, _MISSING)
        if obj is _MISSING:
            problems.append(f"{path}: missing")
            continue
        problems.extend(CHECKS[item["kind"]](path, obj, item))
    return problems


def _problem_path(problem: str) -> str:
    return problem.split(":", 1)[0].split(" ", 1)[0]


def open_problems(modname: str) -> list[str]:
    """Problems not explained by the pending or divergent lists."""
    skip = PENDING + DIVERGENT
    return [p for p in module_problems(modname) if not _covered(_problem_path(p), skip)]


HELD = [m for m in sorted(SPEC) if not _covered(m, PENDING + DIVERGENT)]


@pytest.mark.parametrize("modname", HELD)
def test_module_matches_reference(modname: str) -> None:
    problems = open_problems(modname)
    assert not problems, "\n".join(problems)


def test_lists_name_real_reference_paths() -> None:
    """Every pending/divergent line names a module of the reference (no stale typos)."""
    unknown = [p for p in PENDING + DIVERGENT if not any(p == m or p.startswith(m + ".") for m in SPEC)]
    assert not unknown, unknown


def test_pending_list_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    """Reports (never fails on) pending lines whose names now match; the integrator deletes those."""
    done = []
    for entry in PENDING:
        modname = max((m for m in SPEC if entry == m or entry.startswith(m + ".")), key=len, default=None)
        if modname is None:
            continue
        still = [p for p in module_problems(modname) if _covered(_problem_path(p), [entry])]
        if not still and (entry != modname or importlib.util.find_spec(modname) is not None):
            done.append(entry)
    if done:
        with capsys.disabled():
            print("\npublic_surface_pending.txt lines now satisfied (delete them):", *done, sep="\n  ")


def test_fixture_is_the_generated_one() -> None:
    """The fixture is what the generator writes from the reference listing, when that file is at hand."""
    from scripts.gen_public_surface import DEFAULT_API, parse

    if not DEFAULT_API.exists():
        pytest.skip("reference api.md not present next to the repository")
    assert parse(DEFAULT_API.read_text(encoding="utf-8")) == SPEC
