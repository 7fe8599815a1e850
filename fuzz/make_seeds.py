"""Writes the fuzz seed corpus: real session files made through ``sessiontree.Session``.

Run with the project venv (``.venv/bin/python fuzz/make_seeds.py``). It writes

- ``fuzz/seeds/load/*``: whole documents, each prefixed with the target's selector byte
  (0 = default limits; see ``limits_for`` in ``src/lib.rs``), committed;
- ``fuzz/seeds/line/*``: single entry lines of every type, committed;
- ``fuzz/corpus/{load,line}/``: working corpora for ``cargo fuzz`` (not committed), seeded
  from the above plus the pi fixtures in ``tests/fixtures/pi`` (read, never changed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import sessiontree as st

FUZZ = Path(__file__).resolve().parent
PI_FIXTURES = FUZZ.parent / "tests" / "fixtures" / "pi"


def build_session(path: Path) -> None:
    """A session with every entry type, a branch, a label and a compaction."""
    storage = st.JsonlSessionStorage.create(path, durability="none")
    with st.Session(storage) as s:
        first = s.append_message(st.UserMessage("Read README.md and summarise it"))
        s.append_model_change("anthropic", "claude")
        s.append_thinking_level_change("high")
        s.append_active_tools_change(["read", "bash"])
        s.append_message(
            st.AssistantMessage(
                [
                    st.ThinkingContent("look first", signature="sig"),
                    st.TextContent('Reading \u00e9\u6f22 \\ "quoted"'),
                    st.ToolCall("call_1", "read", {"path": "README.md", "n": [1, 2.5, None]}),
                ],
                provider="anthropic",
                model="claude",
                usage=st.Usage(input=120, output=40, total_tokens=160, cost=st.Cost(total=0.01)),
                stop_reason="tool_use",
            )
        )
        s.append_message(
            st.ToolResultMessage(
                "call_1", "read", [st.TextContent("# Title\nbody")], details={"bytes": 12}
            )
        )
        s.append_custom_entry("ext", {"k": {"nested": [True, False]}})
        s.append_custom_message_entry("note", "a custom message", display=False, details=[1])
        s.append_label(first, "start")
        s.append_session_info("seed session")
        s.append_compaction("summary so far", first, 5000, details={"files": ["a"]})
        s.move_to(first, summary={"summary": "abandoned branch", "details": None})
        s.append_message(
            st.UserMessage([st.TextContent("again"), st.ImageContent("aGk=", "image/png")])
        )
        s.move_to(None)
        s.append_message(st.UserMessage("a second root"))


def write_unique(directory: Path, data: bytes, stem: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    (directory / f"{stem}-{digest}").write_bytes(data)


def main() -> int:
    seeds_load, seeds_line = FUZZ / "seeds" / "load", FUZZ / "seeds" / "line"
    for d in (seeds_load, seeds_line):
        shutil.rmtree(d, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.jsonl"
        build_session(path)
        doc = path.read_bytes()
    lines = doc.splitlines(keepends=True)
    write_unique(seeds_load, b"\x00" + doc, "session")
    # The same file with the small limits, torn, with garbage in the middle, and CRLF.
    write_unique(seeds_load, b"\x0e" + doc, "session-small-limits")
    write_unique(seeds_load, b"\x00" + doc[: len(doc) - 17], "torn")
    write_unique(
        seeds_load, b"\x00" + b"".join([*lines[:3], b"\x00\x00garbage{\n", *lines[3:]]), "garbage"
    )
    write_unique(seeds_load, b"\x00" + doc.replace(b"\n", b"\r\n"), "crlf")
    write_unique(seeds_load, b"\x00" + b"".join([*lines, lines[2]]), "duplicate")
    for line in lines[1:]:
        write_unique(seeds_line, line.rstrip(b"\n"), "line")

    # Working corpora (not committed): the seeds plus the pi fixtures.
    for target in ("load", "line"):
        corpus = FUZZ / "corpus" / target
        corpus.mkdir(parents=True, exist_ok=True)
        for f in (FUZZ / "seeds" / target).iterdir():
            shutil.copyfile(f, corpus / f.name)
    if PI_FIXTURES.is_dir():
        for f in sorted(PI_FIXTURES.glob("*.jsonl")):
            data = f.read_bytes()
            write_unique(FUZZ / "corpus" / "load", b"\x00" + data, f"pi-{f.stem}")
            for line in data.splitlines()[1:4]:
                write_unique(FUZZ / "corpus" / "line", line, f"pi-{f.stem}")
    n_load = len(os.listdir(FUZZ / "corpus" / "load"))
    n_line = len(os.listdir(FUZZ / "corpus" / "line"))
    print(f"seeds written; corpus: {n_load} load inputs, {n_line} line inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
