// The frames the chat stream sends, by name (lovia/web/sse.py FRAME_NAMES lists the same; a test checks).
export const FRAMES = [
  "session",
  "snapshot",
  "turn_started",
  "text_delta",
  "reasoning_delta",
  "output_discarded",
  "message_completed",
  "user_injected",
  "tool_call",
  "tool_result",
  "approval_required",
  "handoff",
  "context_compacted",
  "retrying",
  "error",
  "done",
];
