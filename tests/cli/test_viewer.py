"""The HTML viewer (``sessiontree export --html``) in a real browser: Debian's headless
Chromium driven through its chromedriver (selenium). The DOM is checked — entries
present, branch switch, search, permalinks, Markdown, images, tool calls paired with
their results, hostile content inert — and screenshots are kept in ``tmp/artifacts/``.

Skipped, with the reason, only where no Chromium or chromedriver is installed
(``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sessiontree as st

from .clihelp import ROOT, Demo, Runner

ARTIFACTS = Path(os.environ.get("SESSIONTREE_ARTIFACTS", ROOT / "tmp" / "artifacts"))


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = _find("chromium", "chromium-browser", "google-chrome")
    driver_path = _find("chromedriver")
    if chromium is None or driver_path is None:
        pytest.skip("no Chromium/chromedriver here (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        "--allow-file-access-from-files",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


Js = Callable[..., Any]


def open_page(driver: Any, page: Path, fragment: str = "") -> Js:
    driver.get(page.resolve().as_uri() + fragment)

    def js(script: str, *args: Any) -> Any:
        return driver.execute_script(script, *args)

    wait(js, "return document.body && document.body.dataset.ready === '1'")
    return js


def wait(js: Js, condition: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = js(condition)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {condition}")
        time.sleep(0.05)


def shot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def export(cli: Runner, session: Path, out: Path, *extra: str) -> Path:
    proc = cli("export", session, "--html", "-o", out, *extra)
    assert proc.returncode == 0, proc.stderr
    return out


def conv_text(js: Js) -> str:
    return str(js("return document.getElementById('conv').textContent"))


def errors(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.mark.parametrize("compress", ["never", "always"])
def test_demo_page(browser: Any, cli: Runner, demo: Demo, tmp_path: Path, compress: str) -> None:
    page = export(cli, demo.path, tmp_path / "demo.html", "--compress", compress)
    js = open_page(browser, page)
    shot(browser, f"viewer-demo-{compress}")
    # Every entry has a row in the tree; the leaf is marked and selected.
    rows = js("return [...document.querySelectorAll('#tree .row')].map(r => r.dataset.id)")
    assert sorted(rows) == sorted(demo.ids)
    assert js("return document.querySelector('#tree .row.sel').dataset.id") == demo.leaf
    assert "◀ leaf" in js("return document.querySelector('#tree .row.sel').textContent")
    text = conv_text(js)
    assert "Wiring OAuth2 via GitHub in myapp/oauth.py." in text
    assert "Tried JWT auth and a /health endpoint." in text  # the branch summary
    assert "oauth-attempt" in text and "Add JWT authentication." not in text
    tree = js("return document.getElementById('tree').textContent")
    assert "scaffold-done" in tree and "compaction" in tree and "branch_summary" in tree
    # The tool call is folded, with its result inside it; the result is not shown twice.
    tool = js("return document.querySelector('details.tool')")
    assert tool is not None and not js("return document.querySelector('details.tool').open")
    assert "(no output)" in js("return document.querySelector('details.tool').textContent")
    assert js("return document.querySelectorAll('.entry.ek-tool_result').length") == 0
    # Nothing but the page itself: no network, no errors.
    assert errors(browser) == []


def test_branch_switch_and_permalink(browser: Any, cli: Runner, demo: Demo, tmp_path: Path) -> None:
    page = export(cli, demo.path, tmp_path / "demo.html")
    js = open_page(browser, page)
    row = browser.find_element("css selector", f'#tree .row[data-id="{demo.jwt_tip}"]')
    row.click()
    wait(js, f"return location.hash === '#e-{demo.jwt_tip}'")
    wait(
        js,
        "return document.getElementById('conv').textContent"
        ".includes('myapp/main.py and myapp/auth.py.')",
    )
    text = conv_text(js)
    assert "Wiring OAuth2" not in text
    assert "5,200 tokens summarised" in text  # the compaction on that branch
    assert js("return document.querySelector('.entry.sel').id") == f"e-{demo.jwt_tip}"
    shot(browser, "viewer-demo-branch-switch")
    # Back to the session's leaf.
    browser.find_element("id", "toleaf").click()
    wait(js, "return document.getElementById('conv').textContent.includes('Wiring OAuth2')")
    # A permalink opens the page at its entry, on its branch.
    js = open_page(browser, page, f"#e-{demo.jwt_tip}")
    assert js("return document.querySelector('.entry.sel').id") == f"e-{demo.jwt_tip}"
    assert "Wiring OAuth2" not in conv_text(js)
    link = js("return document.querySelector('.entry.sel a.perma').getAttribute('href')")
    assert link == f"#e-{demo.jwt_tip}"


def test_search(browser: Any, cli: Runner, demo: Demo, tmp_path: Path) -> None:
    page = export(cli, demo.path, tmp_path / "demo.html", "--compress", "always")
    js = open_page(browser, page)
    box = browser.find_element("id", "q")
    box.send_keys("health endpoint")
    wait(js, "return document.getElementById('results').dataset.done === '1'")
    hits = js("return [...document.querySelectorAll('#results li.hit')].map(l => l.textContent)")
    assert any("Now add a /health endpoint." in h for h in hits)
    shot(browser, "viewer-demo-search")
    browser.find_element("css selector", "#results li.hit").click()
    wait(
        js,
        "return document.getElementById('conv').textContent"
        ".includes('Now add a /health endpoint.')",
    )
    assert "Wiring OAuth2" not in conv_text(js)  # the hit is on the other branch
    box.clear()
    box.send_keys("no such text anywhere")
    wait(js, "return document.getElementById('results').dataset.done === '1'")
    assert "no match" in js("return document.getElementById('results').textContent")


def _png() -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 4 for _ in range(4))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def test_markdown_code_and_images(browser: Any, cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "md.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path)) as s:
        s.append_message(
            st.UserMessage([st.TextContent("Look at this:"), st.ImageContent(_png(), "image/png")])
        )
        s.append_message(
            st.AssistantMessage(
                [
                    st.TextContent(
                        "# Plan\n\n**Bold** and *italic* and `code`.\n\n"
                        "```python\nprint('hi')\n```\n"
                        "- one\n- two\n\n[docs](https://example.org) [bad](javascript:alert(1))"
                    )
                ],
                provider="p",
                model="m",
            )
        )
    js = open_page(browser, export(cli, path, tmp_path / "md.html"))
    shot(browser, "viewer-markdown")
    assert (
        js("return document.querySelector('.body pre code.lang-python').textContent")
        == "print('hi')"
    )
    assert js("return document.querySelector('.body strong').textContent") == "Bold"
    assert js("return document.querySelector('.body em').textContent") == "italic"
    assert js("return document.querySelectorAll('.body li').length") == 2
    src = js("return document.querySelector('.body img').getAttribute('src')")
    assert src.startswith("data:image/png;base64,")
    assert js("return document.querySelector('.body img').naturalWidth") == 4
    hrefs = js("return [...document.querySelectorAll('.body a')].map(a => a.getAttribute('href'))")
    assert hrefs == ["https://example.org"]  # javascript: links stay text


HOSTILE = [
    "<script>window.__pwned = 1</script>",
    "</script><script>window.__pwned = 2</script>",
    '<img src=x onerror="window.__pwned = 3">',
    "<!-- <script>window.__pwned = 4</script>",
    "]]></script><svg onload=window.__pwned=5>",
    "\u2028\u2029 line separators </SCRIPT >",
]


def _hostile_session(path: Path) -> None:
    evil = " ".join(HOSTILE)
    header = st.SessionHeader.generate(session_id="evil")
    with st.Session(st.JsonlSessionStorage.create(path, header)) as s:
        s.append_session_info(f"name {evil}")
        first = s.append_message(st.UserMessage(f"user {evil}"))
        s.append_label(first, f"label {HOSTILE[1]}")
        s.append_message(
            st.AssistantMessage(
                [
                    st.ThinkingContent(f"thinking {evil}"),
                    st.TextContent(
                        f"text {evil}\n\n```html\n{evil}\n```\n[x](javascript:window.__pwned=6)"
                    ),
                    st.ToolCall("c1", f"tool{HOSTILE[0]}", {"arg": evil}),
                ],
                provider=f"prov{HOSTILE[1]}",
                model="m",
                stop_reason="tool_use",
            )
        )
        s.append_message(st.ToolResultMessage("c1", "tool", [st.TextContent(f"result {evil}")]))
        s.append_custom_message_entry(f"type{HOSTILE[0]}", f"custom {evil}")
        s.append_compaction(f"summary {evil}", first, 10)
        s.storage.append_entry(
            st.MessageEntry(
                id="</script><script>window.__pwned=7</script>",
                parent_id=s.get_leaf_id(),
                timestamp="2026-01-01T00:00:00.000Z",
                message=st.UserMessage("an id that closes a script element"),
            )
        )


@pytest.mark.parametrize("compress", ["never", "always"])
def test_hostile_content_is_inert(browser: Any, cli: Runner, tmp_path: Path, compress: str) -> None:
    path = tmp_path / "evil.jsonl"
    _hostile_session(path)
    page = export(cli, path, tmp_path / "evil.html", "--compress", compress)
    html = page.read_text()
    assert "<script>window" not in html and "</script><script>" not in html.replace(
        '</script>\n<script type="', ""
    )
    js = open_page(browser, page)
    # Open every fold, search, and switch entries: nothing from the session may run.
    js("document.querySelectorAll('details').forEach(d => d.open = true)")
    browser.find_element("id", "q").send_keys("pwned")
    wait(js, "return document.getElementById('results').dataset.done === '1'")
    for i in range(js("return document.querySelectorAll('#tree .row').length")):
        js("document.querySelectorAll('#tree .row')[arguments[0]].click()", i)
    shot(browser, f"viewer-hostile-{compress}")
    assert js("return window.__pwned") is None
    # Our four kinds of script elements only: the index, the chunk(s) and the viewer.
    scripts = js("return [...document.scripts].map(s => s.type || 'js')")
    assert scripts.count("js") == 1
    assert js("return document.querySelectorAll('#conv img, #conv svg, #conv b').length") == 0
    page_text = js("return document.body.textContent")
    for piece in HOSTILE[:3]:
        assert piece in page_text  # shown as text, exactly
    assert js("return document.title").startswith("name <script>")
    assert errors(browser) == []


def test_large_session_renders_lazily(browser: Any, cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        first = s.append_message(st.UserMessage("the very first message"))
        for i in range(3000):
            s.append_message(st.UserMessage(f"message number {i} " + "x" * 200))
        s.move_to(first)
        s.append_message(st.UserMessage("a short side branch"))
    page = export(cli, path, tmp_path / "big.html", "--compress", "always")
    t = time.monotonic()
    js = open_page(browser, page)
    assert time.monotonic() - t < 30
    # Only a window of the 3,002-entry branch is in the page, and a window of the tree.
    assert js("return document.querySelectorAll('#conv .entry').length") < 200
    assert js("return document.querySelectorAll('#tree .row').length") < 200
    assert "a short side branch" in conv_text(js)
    # Scrolling the tree and the branch brings in more.
    js("document.getElementById('tree').scrollTop = 0")
    wait(js, f"return document.querySelector('#tree .row[data-id=\"{first}\"]')")
    browser.find_element("css selector", f'#tree .row[data-id="{first}"]').click()
    wait(
        js, "return document.getElementById('conv').textContent.includes('the very first message')"
    )
    # The row after it starts the long branch: selecting it switches to that branch.
    browser.find_elements("css selector", "#tree .row")[1].click()
    wait(js, "return document.getElementById('conv').textContent.includes('message number 0 ')")
    assert "a short side branch" not in conv_text(js)
    js("document.getElementById('conv').scrollTop = 1e9")
    wait(js, "return document.getElementById('conv').textContent.includes('message number 80 ')")
