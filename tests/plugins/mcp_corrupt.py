"""A stdio man-in-the-middle in front of the real SDK server (mcp_server.py) that damages answers.

The SDK server guards its stdout, so to test a server that "sends bad JSON" this proxy rewrites
the answer lines of two tools: ``garbage`` (replaced by a line that is not JSON) and ``malformed``
(replaced by a JSON-RPC result whose content is not a list). Everything else passes through.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

child = subprocess.Popen(
    [sys.executable, str(Path(__file__).with_name("mcp_server.py")), "stdio"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
)
assert child.stdin is not None and child.stdout is not None


def pump_in() -> None:
    assert child.stdin is not None
    for line in sys.stdin.buffer:
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()


threading.Thread(target=pump_in, daemon=True).start()
out = sys.stdout.buffer
for line in child.stdout:
    if b"CORRUPT_ME" in line:
        line = b"this is { not json\n"
    elif b"MALFORM_ME" in line:
        msg = json.loads(line)
        msg["result"] = {"content": "not-a-list", "isError": "maybe"}
        line = (json.dumps(msg) + "\n").encode()
    out.write(line)
    out.flush()
sys.exit(child.wait())
