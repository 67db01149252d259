"""Run the reference documentation's Python examples against this package (a compatibility probe).

Not part of CI: it reads the reference docs from outside the repository at run time and prints a
tally. Each ``python`` block runs in its own subprocess, in a fresh temporary directory, against a
local fake OpenAI-compatible server (``OPENAI_BASE_URL``) that answers every chat request with a
short text; model placeholders such as ``"<model>"`` become a plain model name. A block that uses
names it does not define is tried once more after the page's earlier blocks that ran (it may
continue one of them); if it still misses names it is counted as a fragment::

    python scripts/compat_doc_examples.py [path/to/reference/docs] [-v]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = ROOT.parent / "shared" / "spec" / "lovia-0.9.119" / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
MODEL = re.compile(r'"(?:[\w-]+:)?<[^>"]*>"')

RUNNER = textwrap.dedent(
    """
    import ast, asyncio, json, re, sys
    sys.path.insert(0, {root!r})
    from tests.providers.servers import FakeServer, Reply, openai_text_stream
    import os

    def example(schema, defs):
        # A minimal value matching a JSON Schema (enough for the docs' output types).
        if "$ref" in schema:
            return example(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        for key in ("anyOf", "oneOf", "allOf"):
            if key in schema:
                return example(schema[key][0], defs)
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type", "string")
        if kind == "object":
            props = schema.get("properties", {{}})
            return {{k: example(v, defs) for k, v in props.items()}}
        if kind == "array":
            return [example(schema.get("items", {{}}), defs)] if schema.get("minItems") else []
        return {{"string": "x", "integer": 1, "number": 1.0, "boolean": True, "null": None}}.get(kind, "x")

    def answer(request):
        body = json.loads(request.body or b"{{}}")
        schema = ((body.get("response_format") or {{}}).get("json_schema") or {{}}).get("schema")
        if schema is None:
            system = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
            found = re.search(r"JSON Schema[^\\n]*\\n(\\{{.*\\}})\\s*$", system, re.S)
            schema = json.loads(found.group(1)) if found else None
        text = json.dumps(example(schema, schema.get("$defs", {{}}))) if schema else "ok"
        return Reply.sse(openai_text_stream(text))

    with FakeServer() as server:
        server.responder = answer
        os.environ["OPENAI_BASE_URL"] = server.base_url
        source = open(sys.argv[1], encoding="utf-8").read()
        code = compile(source, "<doc block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, {{"__name__": "__main__"}})
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    """
)


# Most fragments continue "an agent defined above"; give them one (and the usual imports).
PRELUDE = "from lovia import *\nfrom lovia import Agent, Runner\nagent = Agent(name='assistant', model='test-model')\n"


def classify(stderr: str, code: int) -> str:
    """A short label for one block's outcome."""
    if code == 0:
        return "ok"
    last = next((line for line in reversed(stderr.strip().splitlines()) if line.strip()), "")
    if "NameError" in last:
        return "fragment (uses names defined elsewhere)"
    if "ModuleNotFoundError" in last or "ImportError" in last:
        return "missing: " + last.split(":", 1)[-1].strip()
    if code == -9 or "TimeoutExpired" in last:
        return "timeout"
    return "error: " + last[:160]


def run_block(source: str, workdir: Path) -> str:
    block = workdir / "block.py"
    block.write_text(MODEL.sub('"test-model"', source), encoding="utf-8")
    runner = workdir / "runner.py"
    runner.write_text(RUNNER.format(root=str(ROOT)), encoding="utf-8")
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "LOVIA_MODEL": "test-model", "ANTHROPIC_API_KEY": "test-key"}
    try:
        done = subprocess.run(
            [sys.executable, str(runner), str(block)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return classify(done.stderr, done.returncode)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("-")]
    docs = Path(args[0]) if args else DEFAULT_DOCS
    tally: Counter[str] = Counter()
    rows = []
    for page in sorted(docs.glob("*.md")):
        ran: list[str] = []
        for index, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            source = match.group(1)
            with tempfile.TemporaryDirectory() as tmp:
                outcome = run_block(source, Path(tmp))
            if outcome.startswith("fragment") and ran:
                with tempfile.TemporaryDirectory() as tmp:
                    outcome = run_block("\n".join([*ran, source]), Path(tmp))
                outcome = outcome if outcome.startswith("fragment") else f"{outcome} (after earlier blocks)"
            if outcome.startswith("fragment"):
                with tempfile.TemporaryDirectory() as tmp:
                    outcome = run_block(PRELUDE + source, Path(tmp))
                outcome = outcome if outcome.startswith("fragment") else f"{outcome} (with an agent defined)"
            if outcome.startswith("ok"):
                ran.append(source)
            rows.append({"page": page.name, "block": index, "outcome": outcome})
            tally[outcome.split(":", 1)[0].split(" (")[0]] += 1
    if "-v" in argv:
        for row in rows:
            print(json.dumps(row))
    print(json.dumps(dict(tally), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
