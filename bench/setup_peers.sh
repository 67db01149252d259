#!/usr/bin/env bash
# Create bench/.peers: a virtual environment holding lovia (editable, from this
# checkout) plus the peer frameworks listed in bench/requirements-peers.txt.
# Safe to re-run: an existing venv is reused and only topped up.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="$here/.peers"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
"$venv/bin/python" -m pip install --quiet -e "$root[web]" -r "$here/requirements-peers.txt"
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("lovia", "openai-agents", "langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "langchain-core", "pydantic-ai", "pydantic-ai-slim"):
    print(f"  {name} {md.version(name)}")
PY
