// Type declarations for `window.lovia`, the chat page's public script API (docs/web.md,
// "Customizing the page"). Reference this file from an extension script for completion:
//   // @ts-check
//   /// <reference path=".../site-packages/lovia/web/static/lovia.d.ts" />

export {};

declare global {
  interface Window {
    lovia: Lovia.Api;
  }

  namespace Lovia {
    type Undo = () => void;
    type Cleanup = void | (() => void);

    interface State {
      /** The chat on screen; null for a new chat. */
      readonly sessionId: string | null;
      /** The agent of the chat on screen (a new chat: the one the sidebar's switcher shows). */
      readonly agent: string | null;
      readonly theme: "light" | "dark";
      readonly lang: string;
      /** A run is streaming into the chat. */
      readonly busy: boolean;
      /** The open view ("dashboard/today"), or null. */
      readonly view: string | null;
    }

    interface Usage {
      input_tokens?: number;
      output_tokens?: number;
      total_tokens?: number;
      [key: string]: unknown;
    }

    interface Events {
      session: { sessionId: string | null };
      agent: { agent: string };
      "run-start": { sessionId: string | null };
      "run-end": { sessionId: string | null; status: "done" | "error" | "cancelled" | "detached"; usage: Usage | null };
      theme: { theme: "light" | "dark" };
      view: { view: string | null };
    }

    interface Tool {
      readonly id: string;
      readonly name: string;
      /** The parsed arguments; absent when over 256 KB or not JSON. */
      readonly args?: any;
      readonly status: "running" | "awaiting" | "done" | "error";
      /** The output text, once settled. */
      readonly result?: string;
      readonly isError: boolean;
      readonly images: ReadonlyArray<{ type: "image"; mime_type: string; data: string }>;
    }

    interface ToolView {
      /** One line in place of name(args); null or undefined falls through. */
      summary?(tool: Tool): string | null | undefined;
      /** Draw the card's body; called again whenever the call changes. */
      render?(el: HTMLElement, tool: Tool, ctx: { callId: string }): Cleanup | Promise<Cleanup>;
      snapshot?(tool: Tool, ctx: { callId: string }): string;
    }

    interface Message {
      readonly sessionId: string | null;
      readonly role: "user" | "assistant";
      /** Markdown: what copy takes. */
      readonly text: string;
      /** "<run_id>:<n>" once the server has named the message, else null. */
      readonly ref: string | null;
    }

    interface MessageAction {
      /** Tooltip and accessible name. */
      label: string;
      /** A built-in icon (thumbs-up, thumbs-down, flag, bookmark, copy, quote, star), SVG markup, or text. */
      icon?: string;
      when?(msg: Message): boolean;
      pressed?(msg: Message): boolean;
      run(msg: Message): void | Promise<void>;
    }

    interface View {
      /** The top bar's title while the view is open. */
      title?: string;
      /** `ctx.path` is what follows the id in ?view=<id>/<path>. */
      render(el: HTMLElement, ctx: { readonly path: string }): Cleanup | Promise<Cleanup>;
    }

    interface Renderer {
      render(el: HTMLElement, props: any, ctx: { callId: string }): Cleanup | Promise<Cleanup>;
    }

    interface Api {
      readonly version: string | null;
      /** Settles once the page has started (stays pending for a signed-out user). */
      readonly ready: Promise<void>;
      readonly state: State;
      on<K extends keyof Events>(event: K, fn: (payload: Readonly<Events[K]>) => void): Undo;
      send(text: string): void;
      setDraft(text: string): void;
      newChat(): void;
      openSession(id: string): Promise<void>;
      toast(text: string, options?: { type?: "info" | "error" }): void;
      /** fetch for an app path ("/..."): path prefix and token added. */
      fetch(path: string, init?: RequestInit): Promise<Response>;
      url(path: string): string;
      t(key: string, params?: Record<string, string | number>): string;
      registerRenderer(kind: string, renderer: Renderer): Undo;
      getRenderer(kind: string): Renderer | undefined;
      registerToolView(name: string, view: ToolView): Undo;
      registerMessageAction(id: string, action: MessageAction): Undo;
      refreshMessageActions(): void;
      registerView(id: string, view: View): Undo;
      openView(target: string): void;
      closeView(): void;
    }
  }
}
