// Every string the page shows, per language, and `t(key, vars)` to read one.
//
// Usage in a page module:
//
//   import { t } from "./i18n.js";
//   button.textContent = t("composer.send");                 // "Send" / "发送"
//   line.textContent = t("chat.handedOver", { name: "bob" }); // "{name}" placeholders
//
// Add new strings to BOTH tables below under a dotted key whose first part names the area
// (`nav.`, `composer.`, …). The language is, in order: the user's pick in the language menu,
// ChatUI(default_lang=...), the browser's languages, English. ChatUI(messages=...) (read from
// the page's #lovia-config) overrides strings, adds languages and labels the user's own template
// elements (`data-i18n`, `data-i18n-title`, `data-i18n-aria`, `data-i18n-placeholder`).

export const BUILTIN = {
  en: {
    "sidebar.label": "Chats",
    "nav.newChat": "+ New chat",
    "nav.closeSidebar": "Close chat list",
    "nav.openSidebar": "Open chat list",
    "nav.search": "Search chats",
    "settings.language": "Language",
    "settings.automatic": "Automatic",
    "demo.badge": "Offline demo model — canned replies, not an LLM",
    "notice.noModel": "No model configured",
    "notice.setModel": "Set LOVIA_MODEL (and the vendor's key or base URL) and restart the server, for example:",
    "notice.useDemo": "Try the offline demo model (canned replies, not an LLM)",
    "session.untitled": "Untitled chat",
    "session.damaged": "⚠ damaged chat {id}",
    "session.pin": "Pin to the top",
    "session.unpin": "Unpin",
    "session.rename": "Rename",
    "session.delete": "Delete",
    "session.confirmDelete": "Delete?",
    "session.running": "running",
    "welcome.title": "Start a conversation.",
    "chat.jump": "Jump to latest ↓",
    "chat.reasoning": "Reasoning",
    "chat.usage": "{input} in · {output} out tokens",
    "chat.stopped": "stopped",
    "chat.stoppedTitle": "You stopped this answer; the text above is what had arrived.",
    "chat.handedOver": "handed over to {name}",
    "chat.compacted": "context compacted{reason}: {before} → {after} entries",
    "chat.retryIn": "retrying in {seconds} s ({reason}) · {attempt}",
    "chat.retryNow": "retrying now ({reason}) · {attempt}",
    "chat.attempt": "attempt {n} of {max}",
    "error.type": "Error",
    "error.hint": "Hint: {hint}",
    "tool.arguments": "arguments:",
    "tool.result": "result:",
    "tool.source": "Source",
    "tool.readFile": "Read file {value}",
    "tool.writeFile": "Write file {value}",
    "tool.editFile": "Edit file {value}",
    "tool.viewImage": "View image {value}",
    "tool.listFiles": "List files in {value}",
    "tool.grepFiles": "Search files for “{value}”",
    "tool.shell": "$ {value}",
    "tool.webSearch": "Web search “{value}”",
    "tool.webFetch": "Fetch {value}",
    "approval.needed": "Needs approval:",
    "approval.approve": "Approve",
    "approval.deny": "Deny",
    "actions.copy": "Copy",
    "actions.copied": "Copied",
    "actions.copyFailed": "Copy failed",
    "actions.copyCode": "Copy code",
    "actions.copyAnswer": "Copy answer",
    "actions.edit": "Edit",
    "actions.regenerate": "Regenerate",
    "actions.branch": "Branch in new chat",
    "edit.save": "Save & send",
    "edit.cancel": "Cancel",
    "composer.placeholder": "Message (Enter to send, Shift+Enter for a new line)",
    "composer.label": "Message",
    "composer.attach": "Attach",
    "composer.attachTitle": "Attach files",
    "composer.stop": "Stop",
    "composer.send": "Send",
    "upload.uploading": "uploading…",
    "upload.remove": "Remove {name}",
    "upload.image": "image",
    "upload.file": "file",
    "upload.picture": "picture",
    "upload.unnamed": "unnamed",
    "upload.sent": "{kind}: {name}",
    "question.ownAnswer": "Or type your own answer",
    "question.placeholder": "Your answer",
    "question.label": "Answer",
    "question.submit": "Answer",
    "todo.label": "Todo list",
    "todo.title": "Todo {done}/{total}",
    "table.truncated": "Showing the first {max} of {total} rows.",
    "table.prev": "‹ Prev",
    "table.next": "Next ›",
    "table.page": "Page {page} of {pages} · {rows} rows",
    "render.imageTooLarge": "An image was too large to show.",
    "render.imageAlt": "image returned by the tool",
    "render.failed": "This view could not be drawn: {message}",
    "render.noRenderer": "No renderer for \"{kind}\".",
    "render.dataGone": "The full data of this view is no longer stored.",
    "render.dataFailed": "The full data could not be loaded: {message}",
    "view.unknown": "There is no view named “{id}”.",
    "view.waiting": "The chat is waiting for your answer.",
    "ext.scriptFailed": "Could not load the script {script}",
    "auth.signedOut": "You are signed out. Sign in again, then reload this page.",
    "token.prompt": "This server needs an access token (it was printed when the server started).",
    "token.label": "Access token",
    "token.submit": "Use token",
    // The Files panel, the Memory dialog and the follow-up chips (panels*.js).
    "files.toggle": "Files",
    "files.toggleTitle": "Show the agent's workspace files",
    "files.title": "Files",
    "files.close": "Close the file panel",
    "files.upload": "Upload",
    "files.uploadTitle": "Upload a file into the workspace's {dir}/ folder",
    "files.refresh": "Refresh",
    "files.recent": "Recently changed",
    "files.noRecent": "No files yet.",
    "files.emptyDir": "This folder is empty.",
    "files.more": "Show more ({shown} of {total})",
    "files.up": "Parent folder",
    "files.back": "← Files",
    "files.download": "Download",
    "files.source": "Source",
    "files.rendered": "Rendered",
    "files.loading": "Loading…",
    "files.uploading": "Uploading {name}…",
    "files.uploaded": "Uploaded {path}",
    "files.uploadedRenamed": "Uploaded as {path} (a file with that name already existed)",
    "files.mode.readonly": "read-only",
    "files.mode.coding": "coding",
    "files.mode.trusted": "trusted",
    "procs.title": "Processes",
    "procs.none": "No background processes in this chat.",
    "procs.running": "running",
    "procs.exited": "exited ({code})",
    "procs.killed": "killed",
    "procs.killDone": "Killed {id}.",
    "procs.kill": "Kill",
    "procs.killTitle": "Kill this process and everything it started",
    "procs.hide": "Hide output",
    "procs.loading": "Loading…",
    "procs.noOutput": "(no output yet)",
    "procs.truncated": "[… older output not kept; showing the last 64 KiB]",
    "memory.open": "Memory",
    "memory.openTitle": "Show and edit the agent's memory notes",
    "memory.title": "Memory notes",
    "memory.help": "One note per line starting with \"- \". Other lines are dropped; undated notes get this month's [YYYY-MM] stamp.",
    "memory.meter": "{used} / {budget} characters",
    "memory.dreamedAt": "Last dreamed {when}",
    "memory.neverDreamed": "Never dreamed",
    "memory.save": "Save",
    "memory.saved": "Saved.",
    "memory.dream": "Dream now",
    "memory.dreamTitle": "Let the model merge and tidy the notes now",
    "memory.dreamDirty": "Save or undo your edits first",
    "memory.dreaming": "Dreaming…",
    "memory.dreamed": "Dreamed: {before} → {after} notes, {usedBefore} → {usedAfter} characters.",
    "memory.close": "Close",
    "memory.loading": "Loading…",
    "followups.label": "Suggested follow-ups",
    // Schedules, answer variants, chat lineage, diffs, pages, settings.
    "schedules.open": "Schedules",
    "schedules.openTitle": "Scheduled runs",
    "schedules.title": "Schedules",
    "schedules.new": "New schedule",
    "schedules.kind.cron": "cron",
    "schedules.kind.every": "every … seconds",
    "schedules.kind.at": "once at",
    "schedules.placeholder.cron": "0 9 * * 1-5 (minute hour day month weekday)",
    "schedules.placeholder.every": "3600",
    "schedules.placeholder.at": "2027-01-31T09:00:00 or epoch seconds",
    "schedules.trigger.every": "every {expr} s",
    "schedules.trigger.at": "once at {expr}",
    "schedules.trigger.cron": "cron {expr}",
    "schedules.next": "next {when}",
    "schedules.paused": "paused",
    "schedules.finished": "finished ({reason})",
    "schedules.trigger": "Trigger",
    "schedules.value": "Value",
    "schedules.message": "Message",
    "schedules.messagePlaceholder": "What the agent should do at each fire",
    "schedules.agent": "Agent",
    "schedules.runsIn": "Runs in",
    "schedules.target.new": "a new chat at each fire",
    "schedules.target.this": "this chat",
    "schedules.create": "Create",
    "schedules.empty": "No schedules yet.",
    "schedules.inChat": "in its chat",
    "schedules.newChatEachFire": "new chat each fire",
    "schedules.fired": "fired {count}×",
    "schedules.lastError": "last error: {error}",
    "schedules.pause": "Pause",
    "schedules.resume": "Resume",
    "schedules.runNow": "Run now",
    "schedules.history": "History",
    "schedules.delete": "Delete",
    "schedules.confirmDelete": "Delete?",
    "schedules.historyTitle": "Fire history: {input}",
    "schedules.hide": "Hide",
    "schedules.fireFailed": "failed: {error}",
    "schedules.openChat": "open chat",
    "schedules.notFired": "It has not fired yet.",
    "variants.earlier": "Earlier answer",
    "variants.later": "Later answer",
    "variants.readOnly": "An earlier answer (read-only): the chat continues from the latest",
    "subagents.origin.fork": "Branched from",
    "subagents.origin.spawn": "Started by",
    "subagents.origin.subagent": "Background task of",
    "subagents.origin.other": "From",
    "subagents.aChat": "a chat",
    "subagents.deleted": "{title} (deleted)",
    "subagents.children": "Started from this chat:",
    "subagents.untitled": "Untitled chat",
    "subagents.status.running": "running",
    "subagents.status.completed": "done",
    "subagents.status.failed": "failed",
    "subagents.status.cancelled": "stopped",
    "subagents.status.interrupted": "interrupted",
    "subagents.status.idle": "idle",
    "subagents.kind.subagent": "subagent",
    "subagents.kind.chat": "new chat",
    "diff.unchanged": "⋯ {n} unchanged lines",
    "diff.empty": "(empty)",
    "diff.everyOccurrence": "every occurrence",
    "diff.createOnly": "new file (only if it does not exist yet)",
    "diff.wholeFile": "whole file written: replaces its previous content",
    "pages.untitled": "Page",
    "pages.fullscreen": "Full screen",
    "pages.download": "Download the page as HTML",
    "pages.run": "Run",
    "pages.hint": "This page runs its own code in a sandbox.",
    "pages.navigated": "The page tried to load another document and was stopped.",
    "pages.noHtml": "the page has no html",
    "settings.open": "Settings",
    "settings.title": "Settings",
    "settings.close": "Close settings",
    "settings.models": "Models",
    "settings.addModel": "+ Add model",
    "settings.roles": "Roles",
    "settings.skills": "Skills",
    "settings.skillsHelp": "One directory per line, earlier first (on a duplicate name the earlier wins); ~ works.",
    "settings.skillDirs": "Skill directories",
    "settings.saveDirs": "Save directories",
    "settings.badge.chat": "chat",
    "settings.badge.vision": "vision",
    "settings.badge.aux": "aux",
    "settings.key": "key {hint}",
    "settings.noKey": "no key",
    "settings.testing": "testing…",
    "settings.incomplete": "incomplete",
    "settings.defaultEndpoint": "default endpoint",
    "settings.useForChat": "Use for chat",
    "settings.edit": "Edit",
    "settings.duplicate": "Duplicate",
    "settings.test": "Test",
    "settings.delete": "Delete",
    "settings.window": "context window {n}",
    "settings.windowReported": "context window {n} (reported)",
    "settings.rolesSaved": "Roles saved.",
    "settings.role.chat": "Chat",
    "settings.role.aux": "Follow-ups",
    "settings.role.firstProfile": "the first profile",
    "settings.role.chatModel": "the chat model",
    "settings.images": "Images",
    "settings.saveRoles": "Save roles",
    "settings.noModels": "No model yet: add one below.",
    "settings.where": "Saved in {scope} ({path})",
    "settings.switched": "The next message uses the new model.",
    "settings.duplicated": "Duplicated.",
    "settings.deleted": "Deleted.",
    "settings.extraInvalid": "Extra request fields must be a JSON object, e.g. {\"reasoning_effort\": \"medium\"}",
    "settings.editTitle": "Edit {name}",
    "settings.addTitle": "Add a model",
    "settings.keyUnchanged": "unchanged ({hint})",
    "settings.keyNone": "none",
    "settings.saved": "Saved.",
    "settings.added": "Added.",
    "settings.name": "Name",
    "settings.namePlaceholder": "e.g. Local Qwen",
    "settings.model": "Model ID",
    "settings.modelPlaceholder": "e.g. gpt-4.1-mini",
    "settings.dialect": "API dialect",
    "settings.baseUrl": "Base URL",
    "settings.baseUrlPlaceholder": "default: the vendor's API",
    "settings.apiKey": "API key",
    "settings.clearKey": "remove the stored key",
    "settings.contextWindow": "Context window",
    "settings.contextWindowPlaceholder": "from the endpoint",
    "settings.vision.auto": "auto",
    "settings.vision.on": "on",
    "settings.vision.off": "off",
    "settings.extra": "Extra request fields (JSON)",
    "settings.save": "Save",
    "settings.testConnection": "Test connection",
    "settings.cancel": "Cancel",
    "settings.missingDir": "does not exist (skipped)",
    "settings.shadowed": "(shadowed by an earlier directory)",
    "settings.noSkills": "no skills yet",
    "settings.skillsSaved": "Skill directories saved.",
    "settings.noticeButton": "Add a model in Settings",
    "settings.noticeText": "Or add a model here, no restart needed: ",
    "token.placeholder": "token",
  },
  zh: {
    "sidebar.label": "对话",
    "nav.newChat": "+ 新对话",
    "nav.closeSidebar": "关闭对话列表",
    "nav.openSidebar": "打开对话列表",
    "nav.search": "搜索对话",
    "settings.language": "语言",
    "settings.automatic": "自动",
    "demo.badge": "离线演示模型 — 预设回复，并非大模型",
    "notice.noModel": "尚未配置模型",
    "notice.setModel": "请设置 LOVIA_MODEL（以及服务商的密钥或 base URL）后重启服务，例如：",
    "notice.useDemo": "试用离线演示模型（预设回复，并非大模型）",
    "session.untitled": "未命名对话",
    "session.damaged": "⚠ 已损坏的对话 {id}",
    "session.pin": "置顶",
    "session.unpin": "取消置顶",
    "session.rename": "重命名",
    "session.delete": "删除",
    "session.confirmDelete": "确认删除？",
    "session.running": "运行中",
    "welcome.title": "开始对话。",
    "chat.jump": "跳到最新 ↓",
    "chat.reasoning": "推理过程",
    "chat.usage": "输入 {input} · 输出 {output} 个 token",
    "chat.stopped": "已停止",
    "chat.stoppedTitle": "你停止了这条回答；上面是已收到的内容。",
    "chat.handedOver": "已移交给 {name}",
    "chat.compacted": "上下文已压缩{reason}：{before} → {after} 条",
    "chat.retryIn": "{seconds} 秒后重试（{reason}）· {attempt}",
    "chat.retryNow": "正在重试（{reason}）· {attempt}",
    "chat.attempt": "第 {n} 次，共 {max} 次",
    "error.type": "错误",
    "error.hint": "提示：{hint}",
    "tool.arguments": "参数：",
    "tool.result": "结果：",
    "tool.source": "原始内容",
    "tool.readFile": "读取文件 {value}",
    "tool.writeFile": "写入文件 {value}",
    "tool.editFile": "编辑文件 {value}",
    "tool.viewImage": "查看图片 {value}",
    "tool.listFiles": "列出 {value} 中的文件",
    "tool.grepFiles": "在文件中搜索 “{value}”",
    "tool.shell": "$ {value}",
    "tool.webSearch": "网页搜索 “{value}”",
    "tool.webFetch": "获取 {value}",
    "approval.needed": "需要批准：",
    "approval.approve": "批准",
    "approval.deny": "拒绝",
    "actions.copy": "复制",
    "actions.copied": "已复制",
    "actions.copyFailed": "复制失败",
    "actions.copyCode": "复制代码",
    "actions.copyAnswer": "复制回答",
    "actions.edit": "编辑",
    "actions.regenerate": "重新生成",
    "actions.branch": "在新对话中分支",
    "edit.save": "保存并发送",
    "edit.cancel": "取消",
    "composer.placeholder": "输入消息（Enter 发送，Shift+Enter 换行）",
    "composer.label": "消息",
    "composer.attach": "附件",
    "composer.attachTitle": "添加文件",
    "composer.stop": "停止",
    "composer.send": "发送",
    "upload.uploading": "上传中…",
    "upload.remove": "移除 {name}",
    "upload.image": "图片",
    "upload.file": "文件",
    "upload.picture": "图片",
    "upload.unnamed": "未命名",
    "upload.sent": "{kind}：{name}",
    "question.ownAnswer": "或输入你自己的回答",
    "question.placeholder": "你的回答",
    "question.label": "回答",
    "question.submit": "回答",
    "todo.label": "待办列表",
    "todo.title": "待办 {done}/{total}",
    "table.truncated": "仅显示前 {max} 行，共 {total} 行。",
    "table.prev": "‹ 上一页",
    "table.next": "下一页 ›",
    "table.page": "第 {page} 页，共 {pages} 页 · {rows} 行",
    "render.imageTooLarge": "图片过大，无法显示。",
    "render.imageAlt": "工具返回的图片",
    "render.failed": "无法绘制此视图：{message}",
    "render.noRenderer": "没有 “{kind}” 的渲染器。",
    "render.dataGone": "此视图的完整数据已不再保存。",
    "render.dataFailed": "无法加载完整数据：{message}",
    "view.unknown": "没有名为 “{id}” 的视图。",
    "view.waiting": "对话正在等待你的回答。",
    "ext.scriptFailed": "无法加载脚本 {script}",
    "auth.signedOut": "你已退出登录。请重新登录后刷新此页面。",
    "token.prompt": "此服务需要访问令牌（服务启动时已打印）。",
    "token.label": "访问令牌",
    "token.submit": "使用令牌",
    // The Files panel, the Memory dialog and the follow-up chips (panels*.js).
    "files.toggle": "文件",
    "files.toggleTitle": "显示智能体的工作区文件",
    "files.title": "文件",
    "files.close": "关闭文件面板",
    "files.upload": "上传",
    "files.uploadTitle": "上传文件到工作区的 {dir}/ 文件夹",
    "files.refresh": "刷新",
    "files.recent": "最近更改",
    "files.noRecent": "还没有文件。",
    "files.emptyDir": "此文件夹为空。",
    "files.more": "显示更多（{shown} / {total}）",
    "files.up": "上级文件夹",
    "files.back": "← 文件",
    "files.download": "下载",
    "files.source": "源码",
    "files.rendered": "渲染",
    "files.loading": "加载中…",
    "files.uploading": "正在上传 {name}…",
    "files.uploaded": "已上传 {path}",
    "files.uploadedRenamed": "已上传为 {path}（同名文件已存在）",
    "files.mode.readonly": "只读",
    "files.mode.coding": "编码",
    "files.mode.trusted": "受信任",
    "procs.title": "进程",
    "procs.none": "此对话没有后台进程。",
    "procs.running": "运行中",
    "procs.exited": "已退出（{code}）",
    "procs.killed": "已终止",
    "procs.killDone": "已终止 {id}。",
    "procs.kill": "终止",
    "procs.killTitle": "终止此进程及其启动的所有进程",
    "procs.hide": "隐藏输出",
    "procs.loading": "加载中…",
    "procs.noOutput": "（暂无输出）",
    "procs.truncated": "[… 较早的输出未保留；显示最后 64 KiB]",
    "memory.open": "记忆",
    "memory.openTitle": "查看和编辑智能体的记忆笔记",
    "memory.title": "记忆笔记",
    "memory.help": "每行一条笔记，以 \"- \" 开头。其他行会被丢弃；没有日期的笔记会加上本月的 [YYYY-MM] 标记。",
    "memory.meter": "{used} / {budget} 个字符",
    "memory.dreamedAt": "上次整理于 {when}",
    "memory.neverDreamed": "从未整理",
    "memory.save": "保存",
    "memory.saved": "已保存。",
    "memory.dream": "立即整理",
    "memory.dreamTitle": "让模型立即合并并整理笔记",
    "memory.dreamDirty": "请先保存或撤销你的修改",
    "memory.dreaming": "整理中…",
    "memory.dreamed": "已整理：{before} → {after} 条笔记，{usedBefore} → {usedAfter} 个字符。",
    "memory.close": "关闭",
    "memory.loading": "加载中…",
    "followups.label": "推荐的后续问题",
    // Schedules, answer variants, chat lineage, diffs, pages, settings.
    "schedules.open": "定时任务",
    "schedules.openTitle": "定时运行",
    "schedules.title": "定时任务",
    "schedules.new": "新建定时任务",
    "schedules.kind.cron": "cron 表达式",
    "schedules.kind.every": "每隔 … 秒",
    "schedules.kind.at": "在指定时间运行一次",
    "schedules.placeholder.cron": "0 9 * * 1-5（分 时 日 月 星期）",
    "schedules.placeholder.every": "3600",
    "schedules.placeholder.at": "2027-01-31T09:00:00 或 Unix 时间戳（秒）",
    "schedules.trigger.every": "每 {expr} 秒",
    "schedules.trigger.at": "于 {expr} 运行一次",
    "schedules.trigger.cron": "cron {expr}",
    "schedules.next": "下次 {when}",
    "schedules.paused": "已暂停",
    "schedules.finished": "已结束（{reason}）",
    "schedules.trigger": "触发方式",
    "schedules.value": "值",
    "schedules.message": "消息",
    "schedules.messagePlaceholder": "每次触发时智能体要做的事",
    "schedules.agent": "智能体",
    "schedules.runsIn": "运行于",
    "schedules.target.new": "每次触发时新建对话",
    "schedules.target.this": "当前对话",
    "schedules.create": "创建",
    "schedules.empty": "还没有定时任务。",
    "schedules.inChat": "在其对话中",
    "schedules.newChatEachFire": "每次触发新建对话",
    "schedules.fired": "已触发 {count} 次",
    "schedules.lastError": "上次错误：{error}",
    "schedules.pause": "暂停",
    "schedules.resume": "恢复",
    "schedules.runNow": "立即运行",
    "schedules.history": "历史",
    "schedules.delete": "删除",
    "schedules.confirmDelete": "确认删除？",
    "schedules.historyTitle": "触发历史：{input}",
    "schedules.hide": "隐藏",
    "schedules.fireFailed": "失败：{error}",
    "schedules.openChat": "打开对话",
    "schedules.notFired": "尚未触发过。",
    "variants.earlier": "较早的回答",
    "variants.later": "较新的回答",
    "variants.readOnly": "较早的回答（只读）：对话从最新的回答继续",
    "subagents.origin.fork": "分支自",
    "subagents.origin.spawn": "启动自",
    "subagents.origin.subagent": "后台任务，来自",
    "subagents.origin.other": "来自",
    "subagents.aChat": "一个对话",
    "subagents.deleted": "{title}（已删除）",
    "subagents.children": "由此对话启动：",
    "subagents.untitled": "未命名对话",
    "subagents.status.running": "运行中",
    "subagents.status.completed": "已完成",
    "subagents.status.failed": "失败",
    "subagents.status.cancelled": "已停止",
    "subagents.status.interrupted": "已中断",
    "subagents.status.idle": "空闲",
    "subagents.kind.subagent": "子智能体",
    "subagents.kind.chat": "新对话",
    "diff.unchanged": "⋯ {n} 行未更改",
    "diff.empty": "（空）",
    "diff.everyOccurrence": "替换所有出现之处",
    "diff.createOnly": "新文件（仅在尚不存在时创建）",
    "diff.wholeFile": "写入整个文件：替换原有内容",
    "pages.untitled": "页面",
    "pages.fullscreen": "全屏",
    "pages.download": "将页面下载为 HTML",
    "pages.run": "运行",
    "pages.hint": "此页面在沙箱中运行它自己的代码。",
    "pages.navigated": "此页面试图加载另一个文档，已被阻止。",
    "pages.noHtml": "页面没有 html 内容",
    "settings.open": "设置",
    "settings.title": "设置",
    "settings.close": "关闭设置",
    "settings.models": "模型",
    "settings.addModel": "+ 添加模型",
    "settings.roles": "角色",
    "settings.skills": "技能",
    "settings.skillsHelp": "每行一个目录，靠前的优先（重名时以靠前的为准）；可以使用 ~。",
    "settings.skillDirs": "技能目录",
    "settings.saveDirs": "保存目录",
    "settings.badge.chat": "对话",
    "settings.badge.vision": "图像",
    "settings.badge.aux": "辅助",
    "settings.key": "密钥 {hint}",
    "settings.noKey": "无密钥",
    "settings.testing": "测试中…",
    "settings.incomplete": "不完整",
    "settings.defaultEndpoint": "默认端点",
    "settings.useForChat": "用于对话",
    "settings.edit": "编辑",
    "settings.duplicate": "复制",
    "settings.test": "测试",
    "settings.delete": "删除",
    "settings.window": "上下文窗口 {n}",
    "settings.windowReported": "上下文窗口 {n}（端点报告）",
    "settings.rolesSaved": "角色已保存。",
    "settings.role.chat": "对话",
    "settings.role.aux": "后续问题",
    "settings.role.firstProfile": "第一个配置",
    "settings.role.chatModel": "对话模型",
    "settings.images": "图像",
    "settings.saveRoles": "保存角色",
    "settings.noModels": "还没有模型：请在下方添加。",
    "settings.where": "保存在 {scope}（{path}）",
    "settings.switched": "下一条消息将使用新模型。",
    "settings.duplicated": "已复制。",
    "settings.deleted": "已删除。",
    "settings.extraInvalid": "额外请求字段必须是 JSON 对象，例如 {\"reasoning_effort\": \"medium\"}",
    "settings.editTitle": "编辑 {name}",
    "settings.addTitle": "添加模型",
    "settings.keyUnchanged": "不变（{hint}）",
    "settings.keyNone": "无",
    "settings.saved": "已保存。",
    "settings.added": "已添加。",
    "settings.name": "名称",
    "settings.namePlaceholder": "例如 Local Qwen",
    "settings.model": "模型 ID",
    "settings.modelPlaceholder": "例如 gpt-4.1-mini",
    "settings.dialect": "API 协议",
    "settings.baseUrl": "Base URL",
    "settings.baseUrlPlaceholder": "默认：服务商的 API",
    "settings.apiKey": "API 密钥",
    "settings.clearKey": "删除已保存的密钥",
    "settings.contextWindow": "上下文窗口",
    "settings.contextWindowPlaceholder": "由端点提供",
    "settings.vision.auto": "自动",
    "settings.vision.on": "开",
    "settings.vision.off": "关",
    "settings.extra": "额外请求字段（JSON）",
    "settings.save": "保存",
    "settings.testConnection": "测试连接",
    "settings.cancel": "取消",
    "settings.missingDir": "不存在（已跳过）",
    "settings.shadowed": "（被更早的目录覆盖）",
    "settings.noSkills": "还没有技能",
    "settings.skillsSaved": "技能目录已保存。",
    "settings.noticeButton": "在设置中添加模型",
    "settings.noticeText": "或者直接在这里添加模型，无需重启：",
    "token.placeholder": "令牌",
  },
};

const LANG_KEY = "lovia_lang";
const NAMES = { en: "English", zh: "中文" };

function readConfig() {
  const node = typeof document !== "undefined" ? document.getElementById("lovia-config") : null;
  if (!node) return {};
  try {
    return JSON.parse(node.textContent || "{}") || {};
  } catch (error) {
    console.error("lovia: unreadable #lovia-config", error);
    return {};
  }
}

/** The page's configuration (from ChatUI): version, title, defaultLang, messages, loginUrl, scripts. */
export const CONFIG = readConfig();
const OVERRIDES = CONFIG.messages && typeof CONFIG.messages === "object" ? CONFIG.messages : {};
const OWN_PREFIXES = new Set(Object.keys(BUILTIN.en).map((key) => key.split(".")[0]));

const isOwnKey = (key) => OWN_PREFIXES.has(String(key).split(".")[0]);

// A key under one of the UI's own prefixes that the UI lacks is most likely a typo.
for (const [lang, table] of Object.entries(OVERRIDES)) {
  for (const key of Object.keys(table || {})) {
    if (isOwnKey(key) && !(key in BUILTIN.en)) console.warn(`lovia: messages[${lang}] sets "${key}", which the UI does not use`);
  }
}

/** Every selectable language code: the built-in ones, then those ChatUI(messages=...) adds. */
export function languages() {
  return [...new Set([...Object.keys(BUILTIN), ...Object.keys(OVERRIDES)])];
}

/** A language's name in its own language ("English", "中文", "日本語"). */
export function languageName(code) {
  if (NAMES[code]) return NAMES[code];
  try {
    return new Intl.DisplayNames([code], { type: "language" }).of(code) || code;
  } catch (_e) {
    return code;
  }
}

function match(tag) {
  if (!tag) return null;
  const all = languages();
  const lower = String(tag).toLowerCase();
  return all.find((code) => code.toLowerCase() === lower) || all.find((code) => code.toLowerCase() === lower.split("-")[0]) || null;
}

/** The user's own pick from the language menu, or null for "Automatic". */
export function chosenLang() {
  try {
    return match(localStorage.getItem(LANG_KEY));
  } catch (_e) {
    return null;
  }
}

/** Remember the user's pick (null: back to automatic) and reload the page in it. */
export function setLang(code) {
  if (code) localStorage.setItem(LANG_KEY, code);
  else localStorage.removeItem(LANG_KEY);
  window.location.reload();
}

function resolveLang() {
  const chosen = chosenLang();
  if (chosen) return chosen;
  if (CONFIG.defaultLang) return match(CONFIG.defaultLang) || CONFIG.defaultLang;
  for (const tag of navigator.languages || [navigator.language]) {
    const found = match(tag);
    if (found) return found;
  }
  return "en";
}

/** The language the page is shown in. */
export const LANG = resolveLang();

function lookup(lang, key) {
  const own = OVERRIDES[lang];
  if (own && typeof own[key] === "string") return own[key];
  const builtin = BUILTIN[lang];
  if (builtin && typeof builtin[key] === "string") return builtin[key];
  return undefined;
}

function fill(text, vars) {
  if (!vars) return text;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in vars ? String(vars[name]) : whole));
}

/**
 * The string for `key` in the page's language, with `{name}` placeholders taken from `vars`.
 * Falls back to English, then to the key itself.
 */
export function t(key, vars) {
  const text = lookup(LANG, key) ?? lookup("en", key);
  return fill(text ?? String(key), vars);
}

// The text for a data-i18n* attribute: a key of the UI falls back to English; a key of the
// user's own keeps the element's text when the active language has no string for it.
function attributeText(key) {
  const text = lookup(LANG, key) ?? (isOwnKey(key) ? lookup("en", key) : undefined);
  return text === undefined ? undefined : fill(text);
}

const ATTRS = [
  ["data-i18n-title", (node, text) => { node.title = text; }],
  ["data-i18n-aria", (node, text) => node.setAttribute("aria-label", text)],
  ["data-i18n-placeholder", (node, text) => { node.placeholder = text; }],
  ["data-i18n", (node, text) => { node.textContent = text; }],
];

/** Apply the page's language to every `data-i18n*` element under `root`. */
export function applyI18n(root = document) {
  if (root === document) document.documentElement.lang = LANG;
  for (const [attr, apply] of ATTRS) {
    for (const node of root.querySelectorAll(`[${attr}]`)) {
      const text = attributeText(node.getAttribute(attr));
      if (text !== undefined) apply(node, text);
    }
  }
}
