// @ts-check
// Extension script for examples/web_branding.py: a tool view, a message action and a view.
const { lovia } = window;

lovia.registerToolView("order_status", {
  summary: (tool) => (tool.status === "done" ? `Looked up order ${tool.args?.order_id}` : `Looking up order ${tool.args?.order_id}…`),
  render(el, tool) {
    if (tool.status !== "done" || !tool.result) return;
    const order = JSON.parse(tool.result);
    const p = document.createElement("p");
    p.textContent = `${order.item}: ${order.status}`; // textContent: tool output is untrusted
    el.replaceChildren(p);
  },
});

lovia.registerMessageAction("quote", {
  label: "Quote",
  icon: "quote",
  when: (msg) => msg.role === "assistant",
  run: (msg) => lovia.setDraft(`> ${msg.text.split("\n")[0]}\n\n`),
});

lovia.registerView("orders", {
  title: lovia.t("acme.orders"),
  async render(el) {
    const res = await lovia.fetch("/acme/orders");
    const list = document.createElement("ul");
    for (const order of await res.json()) {
      const item = document.createElement("li");
      item.textContent = `#${order.id} ${order.item} — ${order.status}`;
      list.append(item);
    }
    el.replaceChildren(list);
  },
});
