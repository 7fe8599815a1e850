"""The HTML viewer (``sessiontree export --html``) in a real browser: Debian's headless
Chromium driven through its chromedriver (selenium). The DOM is checked — entries
present, branch switch, search (hit counts, ``<mark>``, Enter / Shift+Enter), permalinks,
the tree's connectors and short ids, the title, Markdown, images, tool calls paired with
their results, pi's shell runs, hostile content inert — and screenshots are kept in
``tmp/artifacts/``.

Skipped, with the reason, only where no Chromium or chromedriver is installed
(``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).
"""

from __future__ import annotations

import base64
import json
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
    assert "no hits" in js("return document.getElementById('results').textContent")
    assert js("return document.getElementById('hits').textContent") == "no hits"


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


FIXTURES = ROOT / "tests" / "fixtures" / "pi"


def search(browser: Any, js: Js, query: str) -> str:
    box = browser.find_element("id", "q")
    box.clear()
    box.send_keys(query)
    wait(js, "return document.getElementById('results').dataset.done === '1'")
    return str(js("return document.getElementById('hits').textContent"))


def marks(js: Js) -> list[str]:
    return list(js("return [...document.querySelectorAll('#conv mark')].map(m => m.textContent)"))


def test_search_counts_marks_and_steps_through_hits(
    browser: Any, cli: Runner, tmp_path: Path
) -> None:
    path = tmp_path / "hits.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path)) as s:
        question = s.append_message(st.UserMessage("Where is the parser?"))
        side = s.append_message(
            st.AssistantMessage(
                [st.TextContent("An older parser answer.")], provider="p", model="m"
            )
        )
        s.move_to(question)
        s.append_message(
            st.AssistantMessage(
                [st.TextContent("The PARSER lives in `parser.py`. <b>not bold</b>")],
                provider="p",
                model="m",
            )
        )
    js = open_page(browser, export(cli, path, tmp_path / "hits.html"))
    # Every occurrence counts, case-insensitively; the side branch's hit too.
    assert search(browser, js, "parser") == "4 hits"
    assert "4 hits in 3 entries" in js("return document.getElementById('results').textContent")
    # The three on the branch shown are marked, as text (the HTML in the message stays text).
    assert [m.lower() for m in marks(js)] == ["parser"] * 3
    assert "<b>not bold</b>" in conv_text(js)
    assert js("return document.querySelectorAll('#conv b').length") == 0
    shot(browser, "viewer-search-hits")
    # Enter steps through the hits in file order, across branches; Shift+Enter goes back.
    box = browser.find_element("id", "q")
    box.send_keys("\n")
    wait(js, "return document.getElementById('hits').textContent === 'hit 1 of 4'")
    assert js("return document.querySelector('mark.cur').textContent") == "parser"
    box.send_keys("\n")
    wait(js, "return document.getElementById('hits').textContent === 'hit 2 of 4'")
    wait(js, "return document.getElementById('conv').textContent.includes('An older parser')")
    assert js("return document.querySelector('mark.cur').closest('article').id") == f"e-{side}"
    assert "The PARSER lives" not in conv_text(js)  # the other branch
    box.send_keys("\n")
    wait(js, "return document.getElementById('hits').textContent === 'hit 3 of 4'")
    wait(
        js,
        "return document.querySelector('mark.cur') && "
        "document.querySelector('mark.cur').textContent === 'PARSER'",
    )
    box.send_keys("\n", "\n")  # the fourth, then round to the first
    wait(js, "return document.getElementById('hits').textContent === 'hit 1 of 4'")
    from selenium.webdriver.common.keys import Keys

    box.send_keys(Keys.SHIFT, Keys.ENTER)
    wait(js, "return document.getElementById('hits').textContent === 'hit 4 of 4'")
    assert js("return document.querySelectorAll('mark.cur').length") == 1
    assert js("return document.querySelector('mark.cur').textContent") == "parser"
    # Words: an entry must hold all of them; each occurrence of each is a hit.
    assert search(browser, js, "lives PARSER") == "3 hits"
    assert sorted(m.lower() for m in marks(js)) == ["lives", "parser", "parser"]
    assert search(browser, js, "lives") == "1 hit"
    assert marks(js) == ["lives"]
    assert search(browser, js, "zebra") == "no hits"
    assert marks(js) == []
    assert errors(browser) == []


def test_tree_connectors_and_short_ids(browser: Any, cli: Runner, tmp_path: Path) -> None:
    # pi's branched session: three branch points, a side branch at each.
    js = open_page(browser, export(cli, FIXTURES / "d-branching.jsonl", tmp_path / "d.html"))
    shot(browser, "viewer-tree-connectors")
    rows = js(
        "return [...document.querySelectorAll('#tree .row')].map(r => ({id: r.dataset.id,"
        " short: r.querySelector('.id').textContent, tees: r.querySelectorAll('.g.t').length,"
        " lines: r.querySelectorAll('.g').length, title: r.title}))"
    )
    assert len(rows) == 25
    assert all(r["short"] == r["id"] for r in rows)  # pi's ids are 8 characters already
    starts = [r["id"] for r in rows if r["tees"]]
    assert starts == ["fd3b4e50", "86ef5a4c", "3c93baf0"]  # ├─ where each side branch starts
    by_id = {r["id"]: r for r in rows}
    assert by_id["df0396db"]["lines"] == 1 and by_id["df0396db"]["tees"] == 0  # │ in it
    assert by_id["15d0eabb"]["lines"] == 0  # the column carries on past the side branch
    branch_points = js("return [...document.querySelectorAll('#tree .tog[data-toggle]')].length")
    assert branch_points == 3
    # The selected branch runs down the column's line past the side branches.
    on = js(
        "return [...document.querySelectorAll('#tree .g.on')]"
        ".map(g => g.closest('.row').dataset.id)"
    )
    assert "fd3b4e50" in on and "2c72f4e4" in on
    # Longer ids are cut to 8 characters, or more where two share the first 8.
    path = tmp_path / "uuids.jsonl"
    long_ids = [
        "0198a3c2-1111-7000-8000-000000000001",
        "0198a3c2-2222-7000-8000-000000000002",
        "f00dfeed-3333-4000-8000-000000000003",
    ]
    with st.Session(st.JsonlSessionStorage.create(path)) as s:
        for i, eid in enumerate(long_ids):
            s.storage.append_entry(
                st.MessageEntry(
                    id=eid,
                    parent_id=s.get_leaf_id(),
                    timestamp="2026-01-01T00:00:00.000Z",
                    message=st.UserMessage(f"message {i}"),
                )
            )
    js = open_page(browser, export(cli, path, tmp_path / "uuids.html"))
    shorts = js(
        "return [...document.querySelectorAll('#tree .row')]"
        ".map(r => [r.querySelector('.id').textContent, r.title])"
    )
    assert [short for short, _ in shorts] == ["0198a3c2-1", "0198a3c2-2", "f00dfeed"]
    assert all(title.startswith(eid) for (_, title), eid in zip(shorts, long_ids, strict=True))
    # The full id stays in the permalink.
    link = js("return document.querySelector('.entry.sel a.perma')")
    assert link is not None
    assert js("return document.querySelector('.entry.sel a.perma').getAttribute('href')") == (
        f"#e-{long_ids[-1]}"
    )


@pytest.mark.parametrize("name", [None, "Refactor the parser"])
def test_title_names_the_session_once(
    browser: Any, cli: Runner, tmp_path: Path, name: str | None
) -> None:
    path = tmp_path / "titled.jsonl"
    sid = "0198a3c2-aaaa-7000-8000-00000000beef"
    with st.Session(
        st.JsonlSessionStorage.create(path, st.SessionHeader.generate(session_id=sid))
    ) as s:
        s.append_message(st.UserMessage("hello"))
        if name:
            s.append_session_info(name)
    page = export(cli, path, tmp_path / "titled.html")
    js = open_page(browser, page)
    heading = js("return document.getElementById('title').textContent")
    header = js("return document.getElementById('top').textContent")
    title = js("return document.title")
    if name:
        assert heading == name
        assert title == f"{name} · sessiontree"
    else:
        assert heading == f"session {sid}"
        assert title == f"session {sid} · sessiontree"
    assert header.count(sid) == 1  # the id once, not twice
    assert title in page.read_text()  # the <title> written, the same before the script runs


def _pi_session(path: Path, messages: list[dict[str, Any]]) -> None:
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "0198a3c2-bbbb-7000-8000-000000000001",
            "timestamp": "2026-11-30T17:03:53.946Z",
            "cwd": "/home/user/project",
        }
    ]
    parent = None
    for i, m in enumerate(messages):
        eid = f"{i + 1:08x}"
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-11-30T17:03:54.000Z",
                "message": m,
            }
        )
        parent = eid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_shell_runs(browser: Any, cli: Runner, tmp_path: Path) -> None:
    # pi's fixture: `ls src` (exit 0), a run kept out of the context, `cargo build` (exit
    # 101, output truncated).
    js = open_page(browser, export(cli, FIXTURES / "e-custom.jsonl", tmp_path / "e.html"))
    shot(browser, "viewer-shell-runs")

    def run(eid: str) -> dict[str, Any]:
        return dict(
            js(
                "const a = document.getElementById(arguments[0]);"
                "return {cmd: a.querySelector('.cmd').textContent,"
                " out: [...a.querySelectorAll('.body pre')].map(p => p.textContent),"
                " flags: [...a.querySelectorAll('.flag')].map(f => f.textContent),"
                " text: a.textContent}",
                f"e-{eid}",
            )
        )

    ls = run("9a3e7cd1")
    assert ls["cmd"] == "$ ls src"
    assert ls["out"] == ["core\nlib.rs\nstore"]
    assert ls["flags"] == ["exit 0"]
    assert '"role"' not in ls["text"] and 'bash_execution"' not in ls["text"]  # no JSON dump
    assert run("daef58a3")["flags"] == ["exit 0", "not sent to the model"]
    build = run("fb093377")
    assert build["cmd"] == "$ cargo build"
    assert build["flags"] == [
        "exit 101",
        "output truncated — full output in /tmp/pi-bash-7f3a9c.log",
    ]
    assert js("return document.querySelector('#e-fb093377 .flag.err').textContent") == "exit 101"
    tree = js("return document.querySelector('#tree .row[data-id=\"fb093377\"]').textContent")
    assert "$ cargo build · exit 101" in tree
    # A long output is folded; a cancelled run says so; the command is searchable.
    path = tmp_path / "runs.jsonl"
    long_output = "\n".join(f"line {i}" for i in range(200))
    _pi_session(
        path,
        [
            {"role": "user", "content": "run the tests", "timestamp": 1},
            {
                "role": "bashExecution",
                "command": "pytest -q",
                "output": long_output,
                "exitCode": 1,
                "cancelled": False,
                "truncated": False,
                "timestamp": 2,
            },
            {
                "role": "bashExecution",
                "command": "sleep 100 <script>window.__pwned = 1</script>",
                "output": "",
                "cancelled": True,
                "truncated": False,
                "timestamp": 3,
            },
        ],
    )
    js = open_page(browser, export(cli, path, tmp_path / "runs.html"))
    fold = "document.querySelector('#e-00000002 details.output')"
    assert js(f"return {fold} !== null && !{fold}.open")
    assert "200 lines" in js(f"return {fold}.querySelector('summary').textContent")
    assert js(f"return {fold}.querySelector('pre').textContent") == long_output
    assert js("return document.querySelector('#e-00000002 .flag.err').textContent") == "exit 1"
    cancelled = run("00000003")
    assert cancelled["cmd"] == "$ sleep 100 <script>window.__pwned = 1</script>"
    assert cancelled["flags"] == ["cancelled"]
    assert "(no output)" in cancelled["text"]
    assert search(browser, js, "pytest") == "1 hit"
    assert marks(js) == ["pytest"]
    assert js("return window.__pwned") is None
    assert errors(browser) == []


def test_search_uses_the_query_language(browser: Any, cli: Runner, tmp_path: Path) -> None:
    """The page's search follows `sessiontree search`'s rules (docs/search.md)."""
    path = tmp_path / "rules.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path)) as s:
        s.append_message(st.UserMessage("Where does the parser live? Ask about OAuth2."))
        s.append_message(
            st.AssistantMessage(
                [st.TextContent("The parser lives in parse_line, near 東京タワー.")], "p", "m"
            )
        )
    js = open_page(browser, export(cli, path, tmp_path / "rules.html"))
    assert search(browser, js, "pars") == "no hits"  # whole words only
    assert search(browser, js, "auth") == "no hits"
    assert search(browser, js, "pars*") == "3 hits"  # parser, parser, parse_line
    assert search(browser, js, '"parser lives"') == "1 hit"
    assert marks(js) == ["parser lives"]
    assert search(browser, js, "parser -oauth2") == "1 hit"
    assert search(browser, js, "line") == "1 hit"  # a part of parse_line
    assert search(browser, js, "東京") == "1 hit"
    assert marks(js) == ["東京"]
    assert search(browser, js, '"unbalanced') == ""
    assert errors(browser) == []
