"""The chat page and its customization: :class:`ChatUI` and :func:`build_ui_router`.

The page is a Jinja template (``lovia/index.html``) with named blocks. A ``ChatUI(assets=DIR)``
directory is served at :data:`ASSETS_PATH`; an ``index.html`` in it may extend the bundled
template and fill its blocks. Everything a ``ChatUI`` passes into the page (titles, examples,
wording, URLs) is escaped, and the asset route only answers for regular files inside the
directory: no ``..``, no dotfiles, no templates, no symlinks leading out.
"""

import json
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from ..exceptions import UserError
from .auth import set_token_cookie
from .media import PREVIEW_IMAGE_EXT

logger = logging.getLogger("lovia.web")

__all__ = ["ASSETS_PATH", "BUILTIN_LANGS", "SURFACE_NOTE", "ChatUI", "build_ui_router"]

SURFACE_NOTE = (
    "Replies render as GitHub-flavored Markdown in the chat UI, including ```mermaid fenced blocks "
    "(drawn as diagrams), syntax-highlighted code, tables and inline images: use them when they make "
    "an answer clearer."
)
"""A line to add to an agent's instructions so the model knows what the page can draw."""

ASSETS_PATH = "/ui"
"""Where the ``ChatUI(assets=...)`` directory is served, under the app's path prefix."""

BUILTIN_LANGS = ("en", "zh")
"""The languages the page ships strings for (``lovia/web/static/i18n.js``)."""

TEMPLATES_DIR = Path(__file__).parent / "templates"
_LANG = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,120}$")
_PRIVATE_SUFFIXES = (".html", ".htm", ".jinja", ".j2")

RefKind = Literal["asset", "app", "url"]


def _asset_parts(name: str) -> list[str] | None:
    """The path segments of a safe relative asset name, else ``None``.

    Refused: empty names, absolute paths, backslashes and control characters, ``.`` / ``..``
    segments and dotfiles (``.env``, ``.git/``).
    """
    if not name or name.startswith("/") or "\\" in name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None
    parts = name.split("/")
    if any(not p or p.startswith(".") for p in parts):
        return None
    return parts


def _ref(name: str, *, option: str, has_assets: bool) -> tuple[RefKind, str]:
    """Classify one ``scripts`` / ``styles`` / ``logo`` / ``favicon`` entry (raises ``UserError``)."""
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"ChatUI({option}=...) got an empty or non-string entry", hint="give a file name, /path or URL")
    lowered = name.lower()
    if lowered.startswith(("https://", "http://", "//")):  # "//host/x.js": the page's own scheme
        parts = urlsplit(name)
        if not parts.netloc or any(c in name for c in "\"'<> \n\r\t"):
            raise UserError(
                f"ChatUI({option}=...) has a malformed URL {name!r}", hint="e.g. https://cdn.example.com/x.css"
            )
        return "url", name
    if name.startswith("//") or ":" in name.split("/", 1)[0]:
        raise UserError(
            f"ChatUI({option}=...) entry {name!r} is neither a file, an app path nor an http(s) URL",
            hint="write https://… in full; other schemes (javascript:, data:) are refused",
        )
    if name.startswith("/"):
        if _asset_parts(name[1:]) is None:
            raise UserError(f"ChatUI({option}=...) has an unsafe app path {name!r}", hint="e.g. /brand/theme.css")
        return "app", name
    if _asset_parts(name) is None:
        raise UserError(
            f"ChatUI({option}=...) names {name!r}, which is not a plain file inside assets",
            hint="use a relative name such as theme.css (no '..', no dotfiles)",
        )
    if not has_assets:
        raise UserError(
            f"ChatUI({option}=...) names the file {name!r} but no assets directory is set",
            hint="pass ChatUI(assets='ui', ...) or give an app path (/x.css) or a URL",
        )
    return "asset", name


@dataclass(frozen=True)
class ChatUI:
    """How the bundled chat page looks and reads; pass it as ``create_app(ui=ChatUI(...))``.

    Args:
        empty_title: the blank chat's heading (default: lovia's, in the user's language).
        empty_description: text under it; a sequence draws one paragraph per line.
        empty_examples: starter prompts shown as buttons; a click puts one in the composer.
        login_url: where a 401 from your ``auth=`` dependency sends the browser; ``{next}`` is
            replaced by the URL-encoded path and query of the page.
        assets: a directory served at ``<app>/ui/``: an optional ``index.html`` extending
            ``lovia/index.html``, stylesheets, images, scripts. Templates and dotfiles stay private.
        scripts: ES modules the page imports before it starts (a name in ``assets``, an app
            path such as ``/x.js``, or an http(s) URL).
        styles: stylesheets loaded after the bundled ones (same kinds of names).
        logo: an image shown in place of the sidebar's title.
        favicon: the tab icon.
        default_lang: the language for users who have not picked one (``None``: the browser's).
        messages: ``{lang: {key: text}}``: overrides of the page's strings, extra languages, and
            keys for your own template's ``data-i18n`` elements.
    """

    empty_title: str | None = None
    empty_description: str | Sequence[str] | None = None
    empty_examples: Sequence[str] = ()
    login_url: str | None = None
    assets: str | Path | None = None
    scripts: Sequence[str] = ()
    styles: Sequence[str] = ()
    logo: str | None = None
    favicon: str | None = None
    default_lang: str | None = None
    messages: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.assets is not None and not Path(self.assets).is_dir():
            raise UserError(
                f"ChatUI(assets={str(self.assets)!r}) is not a directory",
                hint="create it first, e.g. `lovia web init-ui ui`",
            )
        if isinstance(self.scripts, str):  # one script named alone
            object.__setattr__(self, "scripts", (self.scripts,))
        for option in ("styles", "empty_examples"):
            value = getattr(self, option)
            if isinstance(value, str):
                raise UserError(f"ChatUI({option}=...) must be a list, not one string", hint=f"{option}=[{value!r}]")
        self._check_refs()
        self._check_text()

    def _check_refs(self) -> None:
        has_assets = self.assets is not None
        named = [(o, n) for o in ("scripts", "styles") for n in getattr(self, o)]
        named += [(o, getattr(self, o)) for o in ("logo", "favicon") if getattr(self, o) is not None]
        for option, name in named:
            kind, _ = _ref(name, option=option, has_assets=has_assets)
            if kind == "asset" and self.assets is not None and not Path(self.assets, name).is_file():
                # Not an error: the file may be built later. The page shows a failed script as a toast.
                logger.warning("ChatUI(%s=...) names %r, which is not (yet) a file in %s", option, name, self.assets)

    def _check_text(self) -> None:
        if self.default_lang is not None and not _LANG.match(self.default_lang):
            raise UserError(f"ChatUI(default_lang={self.default_lang!r}) is not a language tag", hint="e.g. 'en', 'zh'")
        if self.default_lang is not None and self.default_lang not in (*BUILTIN_LANGS, *self.messages):
            raise UserError(
                f"ChatUI(default_lang={self.default_lang!r}) names a language the page has no strings for",
                hint=f"pick one of {', '.join(BUILTIN_LANGS)}, or give its strings in messages=",
            )
        if self.login_url is not None and not (
            self.login_url.startswith("/")
            and not self.login_url.startswith("//")
            or self.login_url.lower().startswith(("https://", "http://"))
        ):
            raise UserError(
                f"ChatUI(login_url={self.login_url!r}) must be an app path or an http(s) URL",
                hint="e.g. '/login?next={next}'",
            )
        if not isinstance(self.messages, Mapping):
            raise UserError("ChatUI(messages=...) must be a mapping", hint="{'en': {'composer.placeholder': '...'}}")
        for lang, table in self.messages.items():
            if not isinstance(lang, str) or not _LANG.match(lang):
                raise UserError(f"ChatUI(messages=...) has a bad language tag {lang!r}", hint="e.g. 'en', 'zh', 'ja'")
            if not isinstance(table, Mapping):
                raise UserError(
                    f"ChatUI(messages[{lang!r}]) must map keys to strings", hint="{'composer.placeholder': '...'}"
                )
            for key, text in table.items():
                if not isinstance(key, str) or not _KEY.match(key) or not isinstance(text, str):
                    raise UserError(
                        f"ChatUI(messages[{lang!r}]) has a bad entry {key!r}",
                        hint="keys are dotted names such as 'nav.newChat'; values are strings",
                    )

    # ------------------------------------------------------------ helpers for the router

    def assets_dir(self) -> Path | None:
        """The resolved assets directory, if any."""
        return Path(self.assets).resolve() if self.assets is not None else None

    def description_lines(self) -> list[str]:
        """``empty_description`` as paragraphs."""
        if self.empty_description is None:
            return []
        if isinstance(self.empty_description, str):
            return [self.empty_description]
        return [str(line) for line in self.empty_description]


def _url(name: str, root: str, *, has_assets: bool, option: str) -> str:
    kind, value = _ref(name, option=option, has_assets=has_assets)
    if kind == "url":
        return value
    if kind == "app":
        return root + quote(value)
    return f"{root}{ASSETS_PATH}/{quote(value)}"


_JSON_ESCAPES = {"&": "\\u0026", "<": "\\u003c", ">": "\\u003e", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    if url.startswith("//") and parts.netloc:
        return parts.netloc  # a host source: the CSP lets it in over the page's own scheme
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else None


# A <script> or <style> start tag of the page template's own markup, its attributes in group 2.
_START_TAG = re.compile(r"<(script|style)(\s[^>]*)?>", re.IGNORECASE)
# Attributes that leave a tag alone: a nonce already written, or a data block (it never runs).
_LEAVE_ALONE = re.compile(r"\bnonce\s*=|\btype\s*=\s*[\"']?application/(ld\+)?json", re.IGNORECASE)


def _sign_tags(html: str, nonce: str) -> str:
    """Give every ``<script>``/``<style>`` tag of the rendered template the request's nonce.

    The template (ours, or the one in ``ChatUI(assets=...)``) is server-side markup written by the
    app's author, so its inline scripts and styles (an import map in the ``head`` block, say) run
    as written. Anything that reaches the page later (a message, a tool result, a script added by
    the DOM) carries no nonce, so the policy still refuses it.
    """

    def sign(m: re.Match[str]) -> str:
        attributes = m.group(2) or ""
        if _LEAVE_ALONE.search(attributes):
            return m.group(0)
        body = attributes.rstrip()
        close = "/>" if body.endswith("/") else ">"  # a (needless) self-closing slash stays last
        return f'<{m.group(1)}{body.removesuffix("/")} nonce="{nonce}"{close}'

    return _START_TAG.sub(sign, html)


def _origins(urls: Sequence[str | None]) -> list[str]:
    """The distinct ``scheme://host`` of the absolute URLs among ``urls`` (for the CSP)."""
    return sorted({o for o in (_origin(u) for u in urls if u) if o})


def _script_json(value: Any) -> str:
    """JSON safe to put inside ``<script type="application/json">`` (no ``</script>``, no ``<!--``)."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


def safe_asset(root: Path, path: str) -> Path | None:
    """The file ``path`` names inside ``root``, or ``None`` when it is not a public asset.

    Public: a regular file under ``root`` (after resolving symlinks), reached without ``..`` or
    dotfile segments, that is not a template (``*.html``).
    """
    parts = _asset_parts(path)
    if parts is None or parts[-1].lower().endswith(_PRIVATE_SUFFIXES):
        return None
    try:
        target = root.joinpath(*parts).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target


def build_ui_router(ui: ChatUI, *, title: str) -> Any:
    """The page at ``/`` and the assets directory at :data:`ASSETS_PATH`, as a FastAPI router.

    Args:
        ui: the customization.
        title: the page's title (escaped wherever it shows).

    Returns:
        An ``APIRouter``; ``create_app`` includes it, or include it in an app of your own
        (which must also serve ``lovia/web/static`` at ``/static``).
    """
    from fastapi import APIRouter, Request
    from fastapi.responses import FileResponse, HTMLResponse, Response
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader, PrefixLoader, select_autoescape

    from .. import __version__
    from .errors import WebError

    root_dir = ui.assets_dir()
    has_assets = root_dir is not None
    loaders: list[Any] = []
    if root_dir is not None:
        loaders.append(FileSystemLoader(root_dir))
    loaders.append(PrefixLoader({"lovia": FileSystemLoader(TEMPLATES_DIR)}))
    env = Environment(
        loader=ChoiceLoader(loaders),
        autoescape=select_autoescape(default=True, default_for_string=True),
        auto_reload=True,  # an edited index.html shows on the next load
    )
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def index(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", "")).rstrip("/")

        def url_of(name: str, option: str) -> str:
            return _url(name, root, has_assets=has_assets, option=option)

        scripts = [url_of(s, "scripts") for s in ui.scripts]
        styles = [url_of(s, "styles") for s in ui.styles]
        logo = url_of(ui.logo, "logo") if ui.logo else None
        favicon = url_of(ui.favicon, "favicon") if ui.favicon else None
        nonce = secrets.token_urlsafe(16)
        config = {
            "version": __version__,
            "title": title,
            "defaultLang": ui.default_lang,
            "builtinLangs": list(BUILTIN_LANGS),
            "messages": {lang: dict(table) for lang, table in ui.messages.items()},
            "loginUrl": ui.login_url,
            "previewImageExt": sorted(PREVIEW_IMAGE_EXT),
            "scripts": scripts,
        }
        script_src = " ".join(["'self'", f"'nonce-{nonce}'", *_origins(scripts)])
        style_src = " ".join(["'self'", f"'nonce-{nonce}'", *_origins(styles)])
        img_src = " ".join(["'self'", "data:", *_origins([logo, favicon])])
        # Frames may come from other sites (a block or an extension embedding a video or a map);
        # what lovia itself renders in frames is sandboxed apart (``srcdoc`` with its own policy).
        csp = (
            f"default-src 'self'; script-src {script_src}; style-src {style_src}; img-src {img_src}; "
            "frame-src 'self' https: http:; connect-src 'self'; object-src 'none'; base-uri 'none'"
        )
        name = "index.html" if root_dir is not None and (root_dir / "index.html").is_file() else "lovia/index.html"
        template = env.get_template(name)
        html = template.render(
            request=request,
            url_for=lambda route, **params: request.url_for(route, **params),
            title=title,
            logo=logo,
            favicon=favicon,
            styles=styles,
            empty_title=ui.empty_title,
            empty_description=ui.description_lines(),
            empty_examples=list(ui.empty_examples),
            config_json=_script_json(config),
            csp_nonce=nonce,
            csp=csp,
        )
        html = _sign_tags(html, nonce)
        # The policy rides in a <meta> tag, first in <head>, as the page always sent it.
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        response = HTMLResponse(html, headers=headers)
        set_token_cookie(request, response, getattr(request.app.state, "server_token", None))
        return response

    @router.get(ASSETS_PATH + "/{path:path}", name="ui-assets", include_in_schema=False)
    async def asset(path: str, request: Request) -> Response:
        target = safe_asset(root_dir, path) if root_dir is not None else None
        if target is None:
            hint = "files live in the ChatUI(assets=...) folder; templates and dotfiles are private"
            raise WebError(404, "not_found", f"no UI asset {path!r}", hint=hint)
        response = FileResponse(
            target,
            stat_result=target.stat(),
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )
        if target.suffix in (".js", ".mjs"):
            response.media_type = "text/javascript"
            response.headers["content-type"] = "text/javascript; charset=utf-8"
        etag = response.headers.get("etag")
        if etag and etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})
        return response

    return router
