"""A branded chat page: logo, theme, template blocks, wording, an extra language, a script.

Run it: ``python examples/web_branding.py`` builds the app and prints what the page carries
(the injected tags, the assets route, a refused ``..`` path); with ``--serve`` it serves the
page on http://127.0.0.1:8000 with an offline scripted model (say "order 7").

The files live in ``examples/web_branding_ui/``: ``index.html`` extends the bundled page and
fills two blocks, ``theme.css`` sets the accent token, ``acme.js`` registers a tool view, a
message action and an "Orders" view through ``window.lovia``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from lovia import Agent, tool
from lovia.testing import ScriptedProvider, call, text
from lovia.transcript import InputEntry, ToolResultEntry, TranscriptEntry
from lovia.web import ChatUI, create_app

UI = Path(__file__).resolve().parent / "web_branding_ui"
ORDERS = [{"id": 7, "item": "Espresso machine", "status": "shipped"}, {"id": 8, "item": "Grinder", "status": "packing"}]


@tool
def order_status(order_id: int) -> dict[str, Any]:
    """Look up one order."""
    return next((o for o in ORDERS if o["id"] == order_id), {"id": order_id, "item": "?", "status": "unknown"})


def script(entries: list[TranscriptEntry], _tools: list[Any]) -> Any:
    said = next((e.content for e in reversed(entries) if isinstance(e, InputEntry) and e.role == "user"), "")
    if isinstance(entries[-1], ToolResultEntry):
        return text("Order 7 shipped yesterday; it should arrive on Friday.")
    words = str(said).split()
    if len(words) == 2 and words[0] == "order" and words[1].isdigit():
        return call("order_status", {"order_id": int(words[1])})
    return text("Ask me about an order: say “order 7”.")


def build_app(db_path: str) -> Any:
    """The Acme app: the scripted agent, the branded page and one route of Acme's own."""
    agent = Agent(name="acme", model=ScriptedProvider(script), tools=[order_status])
    ui = ChatUI(
        assets=UI,
        styles=["theme.css"],
        scripts=["acme.js"],
        logo="logo.svg",
        empty_title="Ask Acme",
        empty_description=["Orders, deliveries and returns."],
        empty_examples=["order 7"],
        messages={
            "en": {"composer.placeholder": "Ask Acme anything…", "acme.orders": "Orders"},
            "zh": {"composer.placeholder": "问问 Acme…", "acme.orders": "订单", "acme.footer": "Acme 客服"},
            "ja": {"nav.newChat": "新しいチャット", "acme.orders": "注文"},
        },
    )
    app = create_app(agent, db_path=db_path, title="Acme", ui=ui, allowed_hosts=["testserver"])

    @app.get("/acme/orders")
    async def orders() -> list[dict[str, Any]]:
        return ORDERS

    return app


def main() -> None:
    from fastapi.testclient import TestClient

    with tempfile.TemporaryDirectory() as tmp:
        client = TestClient(build_app(str(Path(tmp) / "acme.db")))
        page = client.get("/").text
        print("logo:", 'src="/ui/logo.svg"' in page)
        print("theme:", '<link rel="stylesheet" href="/ui/theme.css">' in page)
        print("own nav link:", 'data-i18n="acme.orders">Orders</a>' in page)
        print("script listed:", '"/ui/acme.js"' in page)
        print("GET /ui/acme.js:", client.get("/ui/acme.js").status_code)
        print("GET /ui/index.html:", client.get("/ui/index.html").status_code, "(templates stay private)")
        print("GET /ui/../web_branding.py:", client.get("/ui/%2e%2e/web_branding.py").status_code)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        import uvicorn

        uvicorn.run(build_app("./.lovia/acme.db"), host="127.0.0.1", port=8000)
    else:
        main()
