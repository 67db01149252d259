"""One web_fetch attack, run inside a network namespace that has only loopback.

Started by test_fetch_rebinding.py as ``ip netns exec NS python fetch_in_netns.py SCENARIO``. The
namespace's resolv.conf names 127.0.0.1, where this process runs the attacker's DNS server: it
answers each A query for a name from a plan (one step per query, the last step repeating), so a
name can answer a public address to the first lookup and 127.0.0.1 to the next. An "internal"
HTTP service listens on 127.0.0.1 and counts requests for ``/secret``. The fetch's outcome, the
service's hits and the DNS queries are printed as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lovia.exceptions import ToolError
from lovia.tools import HttpReader

PUBLIC = "1.1.1.1"  # never reached: the namespace has no route anywhere but loopback
PORT = 8080
Plan = list[list[str] | str]  # per query: addresses, or "NXDOMAIN"

PLANS: dict[str, dict[str, Plan]] = {
    "rebind": {"rebind.test": [[PUBLIC], ["127.0.0.1"]]},
    "both": {"both.test": [[PUBLIC, "127.0.0.1"]]},
    "lookup-fails": {"gone.test": ["NXDOMAIN", ["127.0.0.1"]]},
    "redirect": {"start.test": [["127.0.0.1"]], "rebind.test": [[PUBLIC], ["127.0.0.1"]]},
}
URLS = {
    "rebind": f"http://rebind.test:{PORT}/secret",
    "both": f"http://both.test:{PORT}/secret",
    "lookup-fails": f"http://gone.test:{PORT}/secret",
    "redirect": f"http://start.test:{PORT}/hop",  # start.test is allowed; its redirect is not
}


class Resolver(threading.Thread):
    """A tiny authoritative DNS server on 127.0.0.1:53 following the plan."""

    def __init__(self, plan: dict[str, Plan]) -> None:
        super().__init__(daemon=True)
        self.plan = plan
        self.queries: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 53))

    def answer(self, query: bytes) -> bytes:
        labels, at = [], 12
        while query[at]:
            labels.append(query[at + 1 : at + 1 + query[at]].decode())
            at += 1 + query[at]
        qtype = struct.unpack("!H", query[at + 1 : at + 3])[0]
        question = query[12 : at + 5]
        name = ".".join(labels).lower()
        rcode, records = 3, []  # unknown names: NXDOMAIN
        steps = self.plan.get(name)
        if steps is not None and qtype == 1:
            seen = sum(1 for q in self.queries if q == f"A {name}")
            self.queries.append(f"A {name}")
            step = steps[min(seen, len(steps) - 1)]
            rcode, records = (3, []) if step == "NXDOMAIN" else (0, list(step))
        elif steps is not None:
            self.queries.append(f"type{qtype} {name}")
            rcode = 0  # no AAAA (or other) records, the name exists
        header = struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0], 0x8180 | rcode, 1, len(records), 0, 0)
        body = b"".join(struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(address) for address in records)
        return header + question + body

    def run(self) -> None:
        while True:
            query, peer = self.sock.recvfrom(512)
            self.sock.sendto(self.answer(query), peer)


class Internal(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        Internal.hits.append(f"{self.headers.get('Host')}{self.path}")
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", f"http://rebind.test:{PORT}/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"internal secret"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def fetch(url: str) -> dict[str, str]:
    reader = HttpReader(cache_ttl=0, timeout=10, allowed_hosts=("start.test",))
    try:
        page = await reader.read(url)
    except ToolError as exc:
        return {"outcome": "refused", "message": exc.message, "hint": exc.hint or ""}
    return {"outcome": "fetched", "message": page.text, "hint": ""}


def main() -> None:
    scenario = sys.argv[1]
    resolver = Resolver(PLANS[scenario])
    resolver.start()
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Internal)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    result = asyncio.run(fetch(URLS[scenario]))
    server.shutdown()
    print(json.dumps({**result, "hits": Internal.hits, "queries": resolver.queries}))


if __name__ == "__main__":
    main()
