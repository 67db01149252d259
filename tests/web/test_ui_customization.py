"""ChatUI over HTTP: the page's escaping, injected tags, the assets folder's confinement, init-ui."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lovia.cli import main as lovia_main
from lovia.exceptions import UserError
from lovia.web import ChatUI, create_app
from lovia.web.scaffold import FILES, init_ui
from lovia.web.ui import ASSETS_PATH, BUILTIN_LANGS

from .helpers import scripted_agent

HOSTILE = "</script><script>alert(1)</script>\"'<img src=x onerror=alert(2)>"


def _client(tmp_path: Path, ui: ChatUI | bool = True, *, title: str = "lovia") -> TestClient:
    app = create_app(
        scripted_agent(), db_path=str(tmp_path / "web.db"), ui=ui, title=title, allowed_hosts=["testserver"]
    )
    return TestClient(app)


def _assets(tmp_path: Path) -> Path:
    ui = tmp_path / "ui"
    (ui / "img").mkdir(parents=True)
    (ui / "theme.css").write_text(":root { --accent: #6d28d9; }", encoding="utf-8")
    (ui / "acme.js").write_text("window.acme = 1;", encoding="utf-8")
    (ui / "img" / "logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>", encoding="utf-8")
    (ui / "notes.html").write_text("private template", encoding="utf-8")
    (ui / ".env").write_text("SECRET=1", encoding="utf-8")
    return ui


def _csp(html: str) -> str:
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert match, "the page carries its Content-Security-Policy"
    return match.group(1).replace("&#39;", "'")


def _config(html: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="lovia-config">(.*?)</script>', html, re.S)
    assert match, "the page carries its config"
    return json.loads(match.group(1))


def test_constants() -> None:
    assert ASSETS_PATH == "/ui"
    assert BUILTIN_LANGS == ("en", "zh")
    i18n = (Path(__file__).resolve().parents[2] / "lovia" / "web" / "static" / "i18n.js").read_text("utf-8")
    for lang in BUILTIN_LANGS:
        assert re.search(rf"^  {lang}: {{$", i18n, re.M), f"i18n.js ships no {lang} table"


def test_default_page_is_the_template_without_customization(tmp_path: Path) -> None:
    page = _client(tmp_path).get("/")
    assert page.status_code == 200
    assert "{%" not in page.text and "{{" not in page.text
    assert 'data-i18n="welcome.title">Start a conversation.' in page.text
    csp = _csp(page.text)
    assert "script-src 'self' 'nonce-" in csp and "object-src 'none'" in csp
    assert _config(page.text)["scripts"] == []


def test_user_text_is_escaped_everywhere(tmp_path: Path) -> None:
    ui = ChatUI(
        empty_title=HOSTILE,
        empty_description=[HOSTILE, "second line"],
        empty_examples=[HOSTILE],
        messages={"en": {"acme.x": HOSTILE}},
    )
    html = _client(tmp_path, ui, title=HOSTILE).get("/").text
    assert "<script>alert(1)</script>" not in html
    assert "<img src=x" not in html
    assert html.count("&lt;/script&gt;&lt;script&gt;alert(1)") >= 5  # title x2, heading, paragraph, example
    assert 'data-example="&lt;/script&gt;' in html  # the attribute cannot be closed early
    # The JSON config cannot end its <script> element either, and still reads back intact.
    assert _config(html)["messages"] == {"en": {"acme.x": HOSTILE}}
    assert _config(html)["title"] == HOSTILE
    assert '<p class="welcome-description">second line</p>' in html


def test_scripts_styles_logo_and_favicon_are_injected(tmp_path: Path) -> None:
    ui = ChatUI(
        assets=_assets(tmp_path),
        styles=["theme.css", "/brand/extra.css", "https://cdn.example.com/font.css"],
        scripts=["acme.js", "https://cdn.example.com/widget.js"],
        logo="img/logo.svg",
        favicon="https://img.example.com/fav.png",
    )
    client = _client(tmp_path, ui, title="Acme")
    page = client.get("/")
    html = page.text
    assert '<link rel="stylesheet" href="/ui/theme.css">' in html
    assert '<link rel="stylesheet" href="/brand/extra.css">' in html
    assert '<link rel="stylesheet" href="https://cdn.example.com/font.css">' in html
    assert '<link rel="icon" href="https://img.example.com/fav.png">' in html
    assert 'src="/ui/img/logo.svg" alt="Acme"' in html
    # Bundled styles load before the user's, so theirs come later in the cascade too.
    assert html.index("static/lovia.css") < html.index("/ui/theme.css")
    assert _config(html)["scripts"] == ["/ui/acme.js", "https://cdn.example.com/widget.js"]
    csp = _csp(page.text)
    assert "https://cdn.example.com" in csp.split("script-src")[1].split(";")[0]
    assert "https://img.example.com" in csp.split("img-src")[1].split(";")[0]
    # Under a path prefix every URL keeps it.
    prefixed = TestClient(client.app, root_path="/lovia").get("/").text
    assert 'href="/lovia/ui/theme.css"' in prefixed and 'href="/lovia/brand/extra.css"' in prefixed
    script = client.get("/ui/acme.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert script.headers["cache-control"] == "no-cache"
    again = client.get("/ui/acme.js", headers={"If-None-Match": script.headers["etag"]})
    assert again.status_code == 304


HOSTILE_PATHS = [
    "../web.db",
    "%2e%2e/web.db",
    "..%2fweb.db",
    "img/../../web.db",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    ".env",
    "img/.hidden",
    "notes.html",
    "NOTES.HTML",
    "img",
    "",
    "%00theme.css",
    "..\\web.db",
    "/etc/passwd",
    "//etc/passwd",
    "theme.css/",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_asset_paths_are_refused(tmp_path: Path, path: str) -> None:
    client = _client(tmp_path, ChatUI(assets=_assets(tmp_path)))
    (tmp_path / "web.db").touch()
    res = client.get(f"/ui/{path}")
    assert res.status_code == 404, (path, res.status_code, res.text[:200])
    assert "SECRET" not in res.text and "private template" not in res.text
    if res.headers["content-type"].startswith("application/json"):
        assert res.json()["detail"]["code"] == "not_found"


def test_a_symlink_out_of_the_assets_folder_is_refused(tmp_path: Path) -> None:
    ui = _assets(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside", encoding="utf-8")
    os.symlink(outside, ui / "link.txt")
    os.symlink(ui / "theme.css", ui / "inside.css")
    client = _client(tmp_path, ChatUI(assets=ui))
    assert client.get("/ui/link.txt").status_code == 404
    assert client.get("/ui/inside.css").text.startswith(":root")
    assert client.get("/ui/img/logo.svg").status_code == 200


def test_no_assets_folder_serves_no_assets(tmp_path: Path) -> None:
    assert _client(tmp_path, ChatUI()).get("/ui/anything.css").status_code == 404


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"scripts": ["javascript:alert(1)"]}, "neither a file"),
        ({"styles": ["data:text/css,x"]}, "neither a file"),
        ({"scripts": ['//evil.example/x.js"><script>']}, "malformed URL"),
        ({"scripts": ["../x.js"]}, "not a plain file"),
        ({"logo": "logo.svg"}, "no assets directory"),
        ({"styles": "acme.css"}, "must be a list"),
        ({"default_lang": "fr"}, "no strings for"),
        ({"default_lang": "<zh>"}, "not a language tag"),
        ({"messages": {"en": {"bad key!": "x"}}}, "bad entry"),
        ({"messages": {"e n": {"a.b": "x"}}}, "bad language tag"),
        ({"messages": {"en": "not a table"}}, "must map keys"),
        ({"messages": [("en", {})]}, "must be a mapping"),
        ({"login_url": "javascript:alert(1)"}, "app path or an http(s) URL"),
        ({"scripts": ['https://cdn.example.com/x.js"><script>']}, "malformed URL"),
    ],
)
def test_bad_options_fail_at_construction(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError, match=re.escape(needle)) as info:
        ChatUI(**kwargs)  # type: ignore[arg-type]
    assert info.value.hint


def test_missing_assets_directory_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a directory") as info:
        ChatUI(assets=tmp_path / "nope")
    assert "init-ui" in (info.value.hint or "")


def test_user_template_extends_the_page_and_fills_blocks(tmp_path: Path) -> None:
    ui_dir = _assets(tmp_path)
    (ui_dir / "index.html").write_text(
        '{% extends "lovia/index.html" %}\n'
        '{% block sidebar_nav %}<a href="/help" data-i18n="acme.help">Help</a>{% endblock %}\n'
        '{% block welcome %}{{ super() }}<p class="acme-notice">{{ title }}</p>{% endblock %}\n'
        '{% block head %}<script type="importmap" nonce="{{ csp_nonce }}">{}</script>'
        "<link rel=\"preload\" href=\"{{ url_for('ui-assets', path='img/logo.svg').path }}\">{% endblock %}\n",
        encoding="utf-8",
    )
    client = _client(tmp_path, ChatUI(assets=ui_dir, empty_title="Ask Acme"), title="<Acme>")
    page = client.get("/")
    html = page.text
    assert '<a href="/help" data-i18n="acme.help">Help</a>' in html
    assert '<p class="acme-notice">&lt;Acme&gt;</p>' in html
    assert "Ask Acme" in html  # super() kept the default welcome content
    nonce = _csp(page.text).split("'nonce-")[1].split("'")[0]
    assert f'nonce="{nonce}"' in html
    assert 'href="/ui/img/logo.svg"' in html
    assert client.get("/ui/index.html").status_code == 404  # the template itself stays private
    # Edits show on the next load, without a restart.
    (ui_dir / "index.html").write_text('{% extends "lovia/index.html" %}{% block body_end %}<i>v2</i>{% endblock %}')
    assert "<i>v2</i>" in client.get("/").text


def test_a_template_cannot_reach_outside_its_folder(tmp_path: Path) -> None:
    ui_dir = _assets(tmp_path)
    (tmp_path / "secret.html").write_text("TOP SECRET", encoding="utf-8")
    (ui_dir / "index.html").write_text('{% include "../secret.html" %}', encoding="utf-8")
    client = TestClient(client_app := _client(tmp_path, ChatUI(assets=ui_dir)).app, raise_server_exceptions=False)
    assert client_app is not None
    res = client.get("/")
    assert res.status_code == 500 and "TOP SECRET" not in res.text


def test_init_ui_writes_a_scaffold_that_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "ui"
    assert lovia_main(["web", "init-ui", str(target)]) == 0
    assert sorted(p.name for p in target.iterdir()) == sorted(FILES)
    assert "wrote" in capsys.readouterr().out
    (target / "theme.css").write_text("/* mine */", encoding="utf-8")
    assert init_ui(target) == []  # nothing overwritten
    assert (target / "theme.css").read_text() == "/* mine */"
    plain = _client(tmp_path).get("/").text
    scaffolded = _client(tmp_path, ChatUI(assets=target, styles=["theme.css"], scripts=["extension.js"])).get("/").text

    def strip(html: str) -> str:
        return re.sub(
            r'<script type="application/json".*?</script>|<link rel="stylesheet" href="/ui/[^"]+">'
            r"|<meta http-equiv[^>]*>| nonce=\"[^\"]*\"",
            "",
            html,
            flags=re.S,
        )

    assert strip(scaffolded).split() == strip(plain).split()  # all of it commented out
    assert all(line.startswith("//") or not line.strip() for line in FILES["extension.js"]().splitlines())


def test_init_ui_refuses_a_file_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "ui"
    blocker.write_text("x", encoding="utf-8")
    assert lovia_main(["web", "init-ui", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert "not a directory" in err and "hint:" in err


def test_a_named_file_missing_from_assets_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="lovia.web"):
        ChatUI(assets=_assets(tmp_path), scripts=["acme.js", "typo.js"])
    assert [r.getMessage() for r in caplog.records if "typo.js" in r.getMessage()]
    assert not [r for r in caplog.records if "acme.js" in r.getMessage()]


def test_the_scaffold_names_every_block_and_token_of_the_page() -> None:
    web = Path(__file__).resolve().parents[2] / "lovia" / "web"
    template = (web / "templates" / "index.html").read_text("utf-8")
    blocks = re.findall(r"{%-?\s*block (\w+)", template)
    assert blocks and sorted(set(re.findall(r"{%-?\s*block (\w+)", FILES["index.html"]()))) == sorted(set(blocks))
    root = re.search(r"^:root\s*\{(.*?)^\}", (web / "static" / "style.css").read_text("utf-8"), re.S | re.M)
    assert root
    tokens = re.findall(r"(--[\w-]+)\s*:", root.group(1))
    scaffold = FILES["theme.css"]()
    assert tokens and all(f"/* {name}:" in scaffold for name in tokens)


def _table(source: str, lang: str) -> set[str]:
    start = source.index(f"\n  {lang}: {{")
    end = source.index("\n  },", start)
    return set(re.findall(r'^\s+"([\w.-]+)":', source[start:end], re.M))


def test_every_string_the_page_asks_for_exists_in_every_builtin_language() -> None:
    web = Path(__file__).resolve().parents[2] / "lovia" / "web"
    i18n = (web / "static" / "i18n.js").read_text("utf-8")
    tables = {lang: _table(i18n, lang) for lang in BUILTIN_LANGS}
    assert tables["en"], "no English table found"
    for lang, keys in tables.items():
        assert keys == tables["en"], f"{lang} differs from en: {sorted(keys ^ tables['en'])}"
    used: set[str] = set()
    sources = [p for p in (web / "static").glob("*.js") if p.name != "i18n.js"] + [web / "templates" / "index.html"]
    for path in sources:
        text = path.read_text("utf-8")
        used |= set(re.findall(r'\bt\("([\w.-]+)"', text))
        used |= set(re.findall(r'data-i18n(?:-\w+)?="([\w.-]+)"', text))
    assert used, "no t() calls found"
    assert not used - tables["en"], f"keys the page uses but i18n.js lacks: {sorted(used - tables['en'])}"


def _entries(source: str, lang: str) -> dict[str, str]:
    start = source.index(f"\n  {lang}: {{")
    end = source.index("\n  },", start)
    return {k: v for k, v in re.findall(r'^\s+"([\w.-]+)": "((?:[^"\\]|\\.)*)",', source[start:end], re.M)}


# Modules whose strings live in i18n.js: each reads them through t(), none spells one out.
TRANSLATED = ("schedules.js", "variants.js", "subagents.js", "settings.js", "pages.js", "diffview.js")


def test_translated_modules_use_t_and_placeholders_agree_across_languages() -> None:
    static = Path(__file__).resolve().parents[2] / "lovia" / "web" / "static"
    i18n = (static / "i18n.js").read_text("utf-8")
    en, zh = _entries(i18n, "en"), _entries(i18n, "zh")
    assert set(en) == set(zh) and len(en) > 250
    for key, text in en.items():
        assert set(re.findall(r"\{(\w+)\}", text)) == set(re.findall(r"\{(\w+)\}", zh[key])), key
    prefixes = {
        "schedules.js": "schedules.",
        "variants.js": "variants.",
        "subagents.js": "subagents.",
        "settings.js": "settings.",
        "pages.js": "pages.",
        "diffview.js": "diff.",
    }
    for name in TRANSLATED:
        source = (static / name).read_text("utf-8")
        assert 'import { t } from "./i18n.js";' in source, name
        keys = re.findall(r'\bt\("([\w.-]+)"', source)
        assert any(k.startswith(prefixes[name]) for k in keys), name
        assert all(k in en for k in keys), name
        # A string the page shows in English only, e.g. a button label or title as a literal.
        literal = re.findall(r'(?:textContent|title|placeholder) = "([A-Z][^"]*)"', source)
        assert not literal, (name, literal)


def test_python_m_lovia_web_init_ui_is_the_same_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lovia.web.command import main as web_main

    assert web_main(["init-ui", str(tmp_path / "ui")]) == 0
    assert (tmp_path / "ui" / "extension.js").is_file()
    assert web_main(["init-ui", str(tmp_path / "ui")]) == 0
    assert capsys.readouterr().out.count("kept") == len(FILES)
    with pytest.raises(SystemExit):
        web_main(["init-ui"])  # DIR is required
    assert "the following arguments are required: directory" in capsys.readouterr().err


def test_the_templates_own_scripts_and_styles_get_the_nonce_and_data_blocks_stay_as_written(tmp_path: Path) -> None:
    ui_dir = _assets(tmp_path)
    (ui_dir / "index.html").write_text(
        '{% extends "lovia/index.html" %}\n'
        '{% block head %}<script type="importmap">{}</script><style>.a{}</style>'
        '<script type="application/ld+json">{"@type": "x"}</script>{% endblock %}\n',
        encoding="utf-8",
    )
    page = _client(tmp_path, ChatUI(assets=ui_dir)).get("/")
    nonce = _csp(page.text).split("'nonce-")[1].split("'")[0]
    assert f'<script type="importmap" nonce="{nonce}">{{}}</script>' in page.text
    assert f'<style nonce="{nonce}">.a{{}}</style>' in page.text
    assert '<script type="application/ld+json">{"@type": "x"}</script>' in page.text
    assert _config(page.text)  # the page's own JSON config block is untouched too
    assert "frame-src 'self' https: http:" in _csp(page.text)
