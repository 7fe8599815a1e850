"""Entries the engine reads (built without re-validation, rust/py/build.rs) equal the entries
the validating path builds, for every entry type and message role; where the engine is
laxer than the constructors, both paths raise the same error."""

from __future__ import annotations

import pytest

import sessiontree as st
from conftest import assert_same
from sessiontree.model.entries import entry_from_json, entry_to_json

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-11-30T00:00:00.000Z","cwd":"/"}\n'
)
BASE = '"parent_id":null,"timestamp":"2026-11-30T16:48:30.123Z"'
EXTRA = '"x_future":{"k":[1,2.5,null]}'  # a field this version does not know


def fill(template: str, *parts: object) -> str:
    """``template`` with each ``@`` replaced by the next part (JSON braces stay as they are)."""
    pieces = template.split("@")
    assert len(pieces) == len(parts) + 1
    return "".join(p + str(v) for p, v in zip(pieces, (*parts, ""), strict=True))


USAGE = (
    '{"input":10,"output":5,"cache_read":1,"cache_write":2,"total_tokens":18,'
    '"cost":{"input":1,"output":0.5,"cache_read":0,"cache_write":0.25,"total":2,@}@}'
)
MESSAGES = [
    '{"role":"user","content":"hi","timestamp":1}',
    fill('{"role":"user","content":"hi","timestamp":1,@}', EXTRA),
    fill(
        '{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b",'
        '"signature":"s",@},{"type":"image","data":"iVBO","mime_type":"image/png"},'
        '{"type":"image","data":"x","mime_type":"m",@}],"timestamp":-5}',
        EXTRA,
        EXTRA,
    ),
    '{"role":"assistant","content":[],"provider":"p","model":"m","timestamp":1}',
    fill(
        '{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"thinking",'
        '"thinking":"","signature":"sig","redacted":true,@},{"type":"text","text":"x"},'
        '{"type":"tool_call","id":"c1","name":"read","arguments":{"path":"a"}},'
        '{"type":"tool_call","id":"c2","name":"w","arguments":{},@}],"api":"messages",'
        '"provider":"p","model":"m","usage":@,"stop_reason":"tool_use","error_message":null,'
        '"timestamp":99,@}',
        EXTRA,
        EXTRA,
        fill(USAGE, EXTRA, "," + EXTRA),
        EXTRA,
    ),
    '{"role":"assistant","content":[],"provider":"p","model":"m","usage":null,'
    '"stop_reason":"error","error_message":"boom","timestamp":1}',
    '{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"cost":null},'
    '"timestamp":1}',
    '{"role":"assistant","content":[],"provider":"p","model":"m","usage":{"cost":{}},'
    '"timestamp":1}',
    '{"role":"tool_result","tool_call_id":"c1","tool_name":"read",'
    '"content":[{"type":"text","text":"out"}],"timestamp":2}',
    fill(
        '{"role":"tool_result","tool_call_id":"c1","tool_name":"read","content":[{"type":"image",'
        '"data":"d","mime_type":"m"}],"is_error":true,"details":{"a":[1]},"timestamp":2,@}',
        EXTRA,
    ),
    '{"role":"custom","custom_type":"note","content":"c","timestamp":3}',
    fill(
        '{"role":"custom","custom_type":"note","content":"c","display":false,"details":[1],'
        '"timestamp":3,@}',
        EXTRA,
    ),
    fill('{"role":"compaction_summary","summary":"s","tokens_before":100,"timestamp":4,@}', EXTRA),
    fill('{"role":"branch_summary","summary":"s","from_id":"e1","timestamp":5,@}', EXTRA),
    '{"role":"bash_execution","command":"ls","anything":[1,{"x":null}]}',
]
OTHERS = [
    '"type":"thinking_level_change","thinking_level":"xhigh"',
    '"type":"model_change","provider":"p","model_id":"m"',
    '"type":"active_tools_change","active_tool_names":["a","b"]',
    '"type":"compaction","summary":"s","first_kept_entry_id":"m1","tokens_before":5',
    fill(
        '"type":"compaction","summary":"s","first_kept_entry_id":null,"tokens_before":5,'
        '"retained_tail":[@,@],"details":{"d":1},"usage":@,"from_hook":true',
        MESSAGES[1],
        MESSAGES[4],
        fill(USAGE, '"z":1', ""),
    ),
    '"type":"branch_summary","from_id":"m1","summary":"s"',
    '"type":"branch_summary","from_id":"m1","summary":"s","usage":{"input":1},"from_hook":false',
    '"type":"custom","custom_type":"c","data":{"deep":[{"x":1}]}',
    '"type":"custom_message","custom_type":"c","content":"hi","details":[1],"display":false',
    '"type":"label","target_id":"m1","label":"x"',
    '"type":"label","target_id":"m1","label":null',
    '"type":"session_info","name":"n"',
    '"type":"leaf","target_id":null',
    '"type":"future_kind","payload":[1,2,{"a":"b"}]',
]


def _lines() -> list[str]:
    out = []
    for i, m in enumerate(MESSAGES):
        out.append(fill('{"type":"message","id":"m@",@,"message":@}', i, BASE, m))
        out.append(fill('{"type":"message","id":"n@",@,"message":@,@}', i, BASE, m, EXTRA))
    for i, o in enumerate(OTHERS):
        out.append(fill('{"id":"o@",@,@}', i, BASE, o))
        out.append(fill('{"id":"p@",@,@,@}', i, BASE, o, EXTRA))
    return out


def test_engine_entries_equal_validated_entries() -> None:
    lines = _lines()
    storage = st.InMemorySessionStorage.from_jsonl(
        HEADER + "\n".join(lines).encode() + b"\n", strict=True
    )
    built = storage.get_entries()  # from engine dicts, without re-validation
    assert len(built) == len(lines)
    kinds = set()
    for line, entry in zip(lines, built, strict=True):
        expected = entry_from_json(line)
        assert_same(entry, expected)
        assert entry == expected
        assert repr(entry) == repr(expected)
        assert entry_to_json(entry) == entry_to_json(expected)
        kinds.add(entry.message.role if isinstance(entry, st.MessageEntry) else entry.type)
    roles = {"user", "assistant", "tool_result", "custom", "compaction_summary", "branch_summary"}
    assert kinds >= (set(st.ENTRY_TYPES) - {"message"}) | roles


@pytest.mark.parametrize(
    "line",
    [
        fill(
            '{"type":"message","id":"a1",@,"message":{"role":"user","content":"x",'
            '"timestamp":100000000000000000000000}}',
            BASE,
        ),
        fill(
            '{"type":"message","id":"a1",@,"message":{"role":"assistant","content":[],'
            '"provider":"p","model":"m","usage":{"input":100000000000000000000000},"timestamp":1}}',
            BASE,
        ),
        fill(
            '{"type":"custom","id":"a1",@,"custom_type":"x",'
            '"data":[-9223372036854775809,18446744073709551616,1e19,2.5]}',
            BASE,
        ),
    ],
)
def test_integers_beyond_64_bits_stay_exact(line: str) -> None:
    storage = st.InMemorySessionStorage.from_jsonl(HEADER + line.encode() + b"\n")
    assert len(storage) == 1
    (built,) = storage.get_entries()
    assert built == entry_from_json(line)
    assert entry_to_json(built) == entry_to_json(entry_from_json(line))


@pytest.mark.parametrize(
    "line",
    [
        # A null where the format wants a boolean.
        fill(
            '{"type":"branch_summary","id":"a1",@,"from_id":"x","summary":"s","from_hook":null}',
            BASE,
        ),
        fill(
            '{"type":"custom_message","id":"a1",@,"custom_type":"x","content":"s","display":null}',
            BASE,
        ),
        # Keys every writer writes (null included), missing.
        '{"type":"custom","id":"a1","timestamp":"T","custom_type":"x"}',
        fill('{"type":"label","id":"a1",@,"target_id":"a1"}', BASE),
        fill('{"type":"leaf","id":"a1",@}', BASE),
        fill('{"type":"compaction","id":"a1",@,"summary":"s","tokens_before":1}', BASE),
        fill('{"type":"session_info","id":"a1",@}', BASE),
    ],
)
def test_lines_python_would_refuse_are_skipped_by_the_engine(line: str) -> None:
    storage = st.InMemorySessionStorage.from_jsonl(HEADER + line.encode() + b"\n")
    assert len(storage) == 0
    assert [i.kind for i in storage.load_report.issues] == ["malformed"]
    with pytest.raises(st.SessionError) as exc:
        entry_from_json(line)
    assert exc.value.code == "corrupt"


def test_id_limit_can_only_be_tightened() -> None:
    with pytest.raises(st.SessionError) as exc:
        st.Limits(max_id_bytes=1000)
    assert exc.value.code == "invalid_argument"
    line = fill('{"type":"custom","id":"@",@,"custom_type":"x"}', "x" * 300, BASE)
    storage = st.InMemorySessionStorage.from_jsonl(HEADER + line.encode() + b"\n")
    assert len(storage) == 0
