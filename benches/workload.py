"""Deterministic workload generator: realistic sessiontree sessions of N entries.

A session is written straight to JSONL in the sessiontree format (FORMAT.md, version 3),
without going through ``Session``: building a 3 GB file entry by entry through the API would
take longer than every benchmark together. ``benches/test_workload.py`` checks that what this
module writes opens with zero load issues and the counts recorded in the manifest.

What a session holds (all positions derived from the seed):

- conversation turns: a user message, zero to six tool rounds (an assistant message with
  thinking, text and one or two tool calls, then one tool result of 1-8 KB per call) and a
  final assistant message; usage on every assistant message; now and then a user image;
- a session name (``session_info``) at the start and a rename half way;
- ``model_change`` / ``thinking_level_change`` / ``active_tools_change`` entries;
- ``label`` entries (some clearing an earlier label), ``custom`` and ``custom_message`` entries;
- a branch every few thousand entries: a ``leaf`` entry moving back 10-80 entries, half of
  them followed by a ``branch_summary`` hanging under the target (as ``Session.move_to``
  writes it);
- three compactions, at 25 %, 50 % and 75 % of the entries (the middle one with a retained
  tail), so the context of the final leaf holds about a quarter of the entries: ~25k
  messages at 100k entries.

Generated files are cached under ``$SESSIONTREE_BENCH_CACHE`` (default: the system temp dir
``/sessiontree-bench``), keyed by (N, seed, generator version); a file whose size no longer
matches its manifest is regenerated. Run ``python benches/workload.py N`` to build one by hand.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import orjson

    _dumps: Callable[[Any], bytes] = orjson.dumps
except ImportError:  # the generator still works without orjson, only slower

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# Bump whenever the bytes written for a given (n, seed) change, so stale caches are ignored.
GENERATOR_VERSION = 1

DEFAULT_SEED = 20261130
# 2026-01-05T09:00:00.000Z: every generated session starts after it.
_BASE_MS = 1_767_603_600_000

_MODELS = (
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-opus-4-1"),
    ("openai", "gpt-5"),
    ("google", "gemini-2.5-pro"),
)
_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh")
_TOOLS = ("read", "bash", "edit", "write", "grep", "find")
_PRICES = {  # $ per token: input, output, cache read, cache write
    "anthropic": (3e-6, 15e-6, 0.3e-6, 3.75e-6),
    "openai": (1.25e-6, 10e-6, 0.125e-6, 0.0),
    "google": (1.25e-6, 10e-6, 0.31e-6, 0.0),
}
_PROSE_WORDS = (  # noqa: SIM905 - a word list reads best as one string
    "the of to and a in is it that for on with as was this be are by not or from at have "
    "function file test error value return module import class change fix build run check "
    "session entry branch leaf parent index context message tool result call assistant user "
    "because however therefore first then next finally should would could might must will "
    "line byte offset path directory config option flag parser reader writer buffer cache "
    "lock sync flush append open close read write scan split join merge sort filter map "
    "café naïve façade déjà 日本語 中文 Ωmega ✓ → «quoted» ünïcödé"
).split()
_CODE_NAMES = (  # noqa: SIM905
    "parse_line load_index build_context append_entry walk_up flush_buffer open_file "
    "resolve_leaf read_header scan_lines check_utf8 make_id entry_kind to_json from_json "
    "get_children path_to_root compact fork_session list_sessions"
).split()


def _prose_corpus(rng: random.Random, size: int) -> str:
    words = _PROSE_WORDS
    out: list[str] = []
    length = 0
    while length < size:
        sentence_words = [rng.choice(words) for _ in range(rng.randint(6, 22))]
        sentence = " ".join(sentence_words).capitalize() + rng.choice((". ", ". ", "? ", "! "))
        if rng.random() < 0.08:
            sentence += "\n\n"
        out.append(sentence)
        length += len(sentence)
    return "".join(out)


def _code_corpus(rng: random.Random, size: int) -> str:
    # Quotes, backslashes, tabs and newlines: tool output is escape-heavy JSON.
    names = _CODE_NAMES
    templates = (
        "def {a}(self, {b}: str) -> bytes:\n",
        '    """Return the {b} for {a} (see \\"{c}\\")."""\n',
        "    if not {b}:\n        raise ValueError('{a}: empty {b}')\n",
        '    return {c}({b}).encode("utf-8") + b"\\n"\n',
        "\t{a} = {c}[{n}:{m}]  # keeps the {b} \u2013 naïve case ✓\n",
        "{n:5d}\t{a}.{b}({c}, path='/home/user/project/src/{a}.py')\n",
        'error[E{n:04d}]: mismatched types in `{a}` -> "{c}"\n',
        "  --> src/{a}.rs:{n}:{m}\n   |\n{n:3d} |     let {b} = {c}(&{a});\n",
        "$ grep -rn '{a}' src/ | head -{m}\n",
        '{{"{a}": {n}, "{b}": ["{c}", null, true]}}\n',
        "\n",
    )
    out: list[str] = []
    length = 0
    while length < size:
        line = rng.choice(templates).format(
            a=rng.choice(names),
            b=rng.choice(names),
            c=rng.choice(names),
            n=rng.randint(0, 9999),
            m=rng.randint(1, 400),
        )
        out.append(line)
        length += len(line)
    return "".join(out)


@dataclass
class Manifest:
    """Ground truth recorded while generating one session (compared against by the benches).

    Attributes:
        n: entries written (the header not counted).
        seed: the generator seed.
        version: the generator version.
        session_id: the header's id.
        size_bytes: the file size.
        leaf_id: the leaf after replaying the whole file.
        name: the session name (last ``session_info``).
        counts: entries per ``type`` and messages per ``role`` (``role:user`` ...).
        tokens: summed usage: input, output, cache_read, cache_write, total_tokens, cost.
        labels: current labels (after clears), as ``{target: label}`` count.
        branches: ``leaf`` entries written; ``branch_summaries`` of them got a summary.
        compactions: compaction entries written.
        fork_target: a user-message entry id near 60 % of the file, for the fork bench.
        first_user_text: the text of the first user message (the repo list's ``first_message``).
        newest_timestamp: the last entry's timestamp.
    """

    n: int
    seed: int
    version: int
    session_id: str
    size_bytes: int
    leaf_id: str | None
    name: str | None
    counts: dict[str, int]
    tokens: dict[str, float]
    labels: int
    branches: int
    branch_summaries: int
    compactions: int
    fork_target: str | None
    first_user_text: str | None
    newest_timestamp: str | None

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        return cls(**json.loads(text))


def _iso(ms: int, _cache: dict[int, str] = {}) -> str:  # noqa: B006 - deliberate memo
    sec, milli = divmod(ms, 1000)
    prefix = _cache.get(sec)
    if prefix is None:
        if len(_cache) > 4096:
            _cache.clear()
        prefix = _cache[sec] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{prefix}.{milli:03d}Z"


def _uuid7_text(rng: random.Random, ms: int) -> str:
    rand_a = rng.getrandbits(12)
    rand_b = rng.getrandbits(62)
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class _Writer:
    """Emits entries, keeping the leaf, the current branch and the manifest counts."""

    def __init__(self, out: Any, rng: random.Random, n: int, seed: int, start_ms: int) -> None:
        self.out = out
        self.rng = rng
        self.n = n
        self.count = 0
        self.now = start_ms
        self.ids: set[str] = set()
        self.leaf: str | None = None
        self.path: list[str] = []  # the current branch, root first
        # First index of self.path that branches and compactions may reach back to: the
        # entry after the latest compaction, so no move crosses one.
        self.floor = 0
        self.buffer: list[bytes] = []
        self.size = 0
        self.counts: dict[str, int] = {}
        self.tokens = dict.fromkeys(
            ("input", "output", "cache_read", "cache_write", "total_tokens", "cost"), 0.0
        )
        self.labels: dict[str, str] = {}
        self.name: str | None = None
        self.branches = 0
        self.branch_summaries = 0
        self.compactions = 0
        self.first_user_text: str | None = None
        self.last_timestamp: str | None = None
        self.tool_call_seq = 0

    def new_id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.ids:
                self.ids.add(candidate)
                return candidate

    def tick(self, low: int = 40, high: int = 9000) -> int:
        self.now += self.rng.randint(low, high)
        return self.now

    def emit(self, type_: str, fields: dict[str, Any]) -> str:
        entry_id = self.new_id()
        ts = _iso(self.tick())
        entry: dict[str, Any] = {
            "type": type_,
            "id": entry_id,
            "parent_id": self.leaf,
            "timestamp": ts,
        }
        entry.update(fields)
        line = _dumps(entry) + b"\n"
        self.buffer.append(line)
        self.size += len(line)
        if len(self.buffer) >= 512:
            self.drain()
        self.count += 1
        self.counts[type_] = self.counts.get(type_, 0) + 1
        self.last_timestamp = ts
        if type_ == "leaf":
            target = fields["target_id"]
            self.leaf = target
            if target is None:
                self.path.clear()
            else:
                del self.path[len(self.path) - self.path[::-1].index(target) :]
        else:
            self.leaf = entry_id
            self.path.append(entry_id)
        return entry_id

    def drain(self) -> None:
        self.out.write(b"".join(self.buffer))
        self.buffer.clear()

    def add_usage(self, usage: dict[str, Any]) -> None:
        for key in ("input", "output", "cache_read", "cache_write", "total_tokens"):
            self.tokens[key] += usage[key]
        self.tokens["cost"] += usage["cost"]["total"]


class _Generator:
    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.seed = seed
        self.rng = random.Random(seed)
        # The corpora are slices of fixed text: fast to produce, still realistic bytes.
        corpus_rng = random.Random(seed ^ 0x5EED)
        self.prose = _prose_corpus(corpus_rng, 96 * 1024)
        self.code = _code_corpus(corpus_rng, 160 * 1024)
        self.model = _MODELS[0]
        self.fork_target: str | None = None
        scale = max(n, 1)
        self.branch_every = min(3000, max(40, scale // 20))
        self.label_every = min(500, max(20, scale // 100))
        self.state_every = min(2000, max(50, scale // 20))
        self.custom_every = min(1000, max(30, scale // 40))
        self.compaction_at = [scale * k // 4 for k in (1, 2, 3)] if n >= 40 else []

    # -- text -----------------------------------------------------------------------

    def _slice(self, corpus: str, length: int) -> str:
        length = min(length, len(corpus) - 1)
        start = self.rng.randrange(0, len(corpus) - length)
        return corpus[start : start + length]

    def prose_text(self, low: int, high: int) -> str:
        return self._slice(self.prose, self.rng.randint(low, high))

    def tool_output(self) -> str:
        return self._slice(self.code, self.rng.randint(1024, 8192))

    # -- messages -------------------------------------------------------------------

    def usage(self, w: _Writer) -> dict[str, Any]:
        rng = self.rng
        inp = rng.randint(200, 4000)
        out = rng.randint(20, 2500)
        cache_read = rng.randint(0, 150_000)
        cache_write = rng.randint(0, 6000)
        prices = _PRICES[self.model[0]]
        costs = [
            round(inp * prices[0], 6),
            round(out * prices[1], 6),
            round(cache_read * prices[2], 6),
            round(cache_write * prices[3], 6),
        ]
        usage = {
            "input": inp,
            "output": out,
            "cache_read": cache_read,
            "cache_write": cache_write,
            "total_tokens": inp + out + cache_read + cache_write,
            "cost": {
                "input": costs[0],
                "output": costs[1],
                "cache_read": costs[2],
                "cache_write": costs[3],
                "total": round(sum(costs), 6),
            },
        }
        w.add_usage(usage)
        return usage

    def user(self, w: _Writer) -> None:
        text = self.prose_text(20, 900)
        content: Any = text
        if self.rng.random() < 0.01:
            data = self._slice(self.prose, self.rng.randint(3000, 12000)).encode()
            content = [
                {"type": "text", "text": text},
                {
                    "type": "image",
                    "data": base64.b64encode(data).decode(),
                    "mime_type": "image/png",
                },
            ]
        if w.first_user_text is None:
            w.first_user_text = text
        entry_id = w.emit(
            "message", {"message": {"role": "user", "content": content, "timestamp": w.now}}
        )
        w.counts["role:user"] = w.counts.get("role:user", 0) + 1
        if self.fork_target is None and w.count >= self.n * 3 // 5:
            self.fork_target = entry_id

    def assistant(self, w: _Writer, calls: int) -> list[tuple[str, str]]:
        rng = self.rng
        content: list[dict[str, Any]] = [
            {
                "type": "thinking",
                "thinking": self.prose_text(200, 2400),
                "signature": f"{rng.getrandbits(256):064x}" * 3,
            }
        ]
        if calls == 0 or rng.random() < 0.5:
            content.append({"type": "text", "text": self.prose_text(40, 1200)})
        made: list[tuple[str, str]] = []
        for _ in range(calls):
            w.tool_call_seq += 1
            call_id = f"toolu_{w.tool_call_seq:08d}{rng.getrandbits(48):012x}"
            name = rng.choice(_TOOLS)
            if name == "bash":
                args: dict[str, Any] = {
                    "command": f"cd src && grep -rn '{rng.choice(_CODE_NAMES)}' ."
                }
            elif name in ("edit", "write"):
                args = {
                    "path": f"src/{rng.choice(_CODE_NAMES)}.py",
                    "old_text": self._slice(self.code, rng.randint(40, 400)),
                    "new_text": self._slice(self.code, rng.randint(40, 400)),
                }
            else:
                args = {"path": f"src/{rng.choice(_CODE_NAMES)}.py", "limit": rng.randint(50, 400)}
            content.append({"type": "tool_call", "id": call_id, "name": name, "arguments": args})
            made.append((call_id, name))
        self.tick_model_time(w)
        w.emit(
            "message",
            {
                "message": {
                    "role": "assistant",
                    "content": content,
                    "api": "anthropic-messages" if self.model[0] == "anthropic" else None,
                    "provider": self.model[0],
                    "model": self.model[1],
                    "usage": self.usage(w),
                    "stop_reason": "tool_use" if calls else "stop",
                    "error_message": None,
                    "timestamp": w.now,
                }
            },
        )
        w.counts["role:assistant"] = w.counts.get("role:assistant", 0) + 1
        return made

    def tick_model_time(self, w: _Writer) -> None:
        w.tick(500, 20_000)

    def tool_result(self, w: _Writer, call_id: str, name: str) -> None:
        is_error = self.rng.random() < 0.03
        w.emit(
            "message",
            {
                "message": {
                    "role": "tool_result",
                    "tool_call_id": call_id,
                    "tool_name": name,
                    "content": [{"type": "text", "text": self.tool_output()}],
                    "details": {"exit_code": 1 if is_error else 0} if name == "bash" else None,
                    "is_error": is_error,
                    "timestamp": w.now,
                }
            },
        )
        w.counts["role:tool_result"] = w.counts.get("role:tool_result", 0) + 1

    def turn(self, w: _Writer) -> None:
        self.user(w)
        rounds = self.rng.choices(range(7), weights=(3, 4, 4, 3, 2, 1, 1))[0]
        for _ in range(rounds):
            calls = self.assistant(w, 2 if self.rng.random() < 0.2 else 1)
            for call_id, name in calls:
                self.tool_result(w, call_id, name)
        self.assistant(w, 0)

    # -- tree events ----------------------------------------------------------------

    def branch(self, w: _Writer) -> None:
        rng = self.rng
        low = max(w.floor, len(w.path) - 80)
        high = len(w.path) - 10
        if high <= low:
            return
        target = w.path[rng.randint(low, high)]
        w.emit("leaf", {"target_id": target})
        w.branches += 1
        if rng.random() < 0.5:
            w.emit(
                "branch_summary",
                {
                    "from_id": target,
                    "summary": self.prose_text(300, 1500),
                    "details": {"abandoned_entries": rng.randint(10, 80)},
                    "usage": self.usage(w),
                    "from_hook": False,
                },
            )
            w.branch_summaries += 1

    def compaction(self, w: _Writer, index: int) -> None:
        rng = self.rng
        back = rng.randint(10, 40)
        kept_at = max(w.floor, len(w.path) - back)
        # Nothing since the previous compaction: this one starts the path by itself.
        first_kept = w.path[kept_at] if kept_at < len(w.path) else None
        retained: list[dict[str, Any]] | None = None
        if index == 1:
            retained = [
                {"role": "user", "content": self.prose_text(40, 400), "timestamp": w.now},
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": self.prose_text(40, 600)}],
                    "api": None,
                    "provider": self.model[0],
                    "model": self.model[1],
                    "usage": {
                        "input": 0,
                        "output": 0,
                        "cache_read": 0,
                        "cache_write": 0,
                        "total_tokens": 0,
                        "cost": {
                            "input": 0.0,
                            "output": 0.0,
                            "cache_read": 0.0,
                            "cache_write": 0.0,
                            "total": 0.0,
                        },
                    },
                    "stop_reason": "stop",
                    "error_message": None,
                    "timestamp": w.now,
                },
            ]
        w.emit(
            "compaction",
            {
                "summary": self.prose_text(1500, 6000),
                "first_kept_entry_id": None if retained is not None else first_kept,
                "tokens_before": rng.randint(150_000, 200_000),
                "retained_tail": retained,
                "details": {
                    "read_files": [f"src/{n}.py" for n in rng.sample(_CODE_NAMES, 4)],
                    "modified_files": [f"src/{n}.py" for n in rng.sample(_CODE_NAMES, 2)],
                },
                "usage": self.usage(w),
                "from_hook": False,
            },
        )
        w.compactions += 1
        w.floor = len(w.path)

    def label(self, w: _Writer) -> None:
        rng = self.rng
        if w.labels and rng.random() < 0.2:
            target = rng.choice(sorted(w.labels))
            w.emit("label", {"target_id": target, "label": None})
            del w.labels[target]
            return
        target = w.path[rng.randint(max(0, len(w.path) - 100), len(w.path) - 1)]
        text = f"checkpoint-{w.count}"
        w.emit("label", {"target_id": target, "label": text})
        w.labels[target] = text

    def state_change(self, w: _Writer, flip: bool) -> None:
        if flip:
            self.model = self.rng.choice(_MODELS)
            w.emit("model_change", {"provider": self.model[0], "model_id": self.model[1]})
        else:
            w.emit("thinking_level_change", {"thinking_level": self.rng.choice(_LEVELS)})

    def custom(self, w: _Writer, flip: bool) -> None:
        if flip:
            w.emit(
                "custom_message",
                {
                    "custom_type": "bench.note",
                    "content": self.prose_text(40, 400),
                    "details": {"source": "hook"},
                    "display": True,
                },
            )
        else:
            w.emit(
                "custom",
                {"custom_type": "bench.state", "data": {"turn": w.count, "flags": ["a", "b"]}},
            )

    # -- driver ---------------------------------------------------------------------

    def run(self, out: Any, session_id: str, start_ms: int) -> Manifest:
        rng = self.rng
        w = _Writer(out, rng, self.n, self.seed, start_ms)
        header = {
            "type": "session",
            "version": 3,
            "id": session_id,
            "timestamp": _iso(start_ms),
            "cwd": f"/home/user/project-{self.seed % 7}",
            "parent_session": None,
            "metadata": {"generator": "sessiontree-benches", "version": GENERATOR_VERSION},
        }
        header_line = _dumps(header) + b"\n"
        out.write(header_line)
        w.size += len(header_line)

        def jitter(every: int) -> int:
            return w.count + rng.randint(every // 2, every * 3 // 2)

        setup = [
            lambda: w.emit("session_info", {"name": f"bench session {self.seed}"}),
            lambda: w.emit("model_change", {"provider": self.model[0], "model_id": self.model[1]}),
            lambda: w.emit("thinking_level_change", {"thinking_level": "medium"}),
            lambda: w.emit("active_tools_change", {"active_tool_names": list(_TOOLS)}),
        ]
        for step in setup[: max(0, self.n)]:
            step()
        w.name = f"bench session {self.seed}"
        next_branch = jitter(self.branch_every)
        next_label = jitter(self.label_every)
        next_state = jitter(self.state_every)
        next_custom = jitter(self.custom_every)
        compactions = list(self.compaction_at)
        renamed = False
        flip_state = flip_custom = False
        # A turn writes up to 20 entries: near the end, pad with user messages instead so
        # the file holds exactly n entries.
        while w.count < self.n:
            room = self.n - w.count
            if room <= 24:
                self.user(w)
                continue
            if compactions and w.count >= compactions[0]:
                self.compaction(w, self.compaction_at.index(compactions.pop(0)))
            elif w.count >= next_branch:
                self.branch(w)
                next_branch = jitter(self.branch_every)
            elif w.count >= next_label:
                self.label(w)
                next_label = jitter(self.label_every)
            elif w.count >= next_state:
                self.state_change(w, flip_state)
                flip_state = not flip_state
                next_state = jitter(self.state_every)
            elif w.count >= next_custom:
                self.custom(w, flip_custom)
                flip_custom = not flip_custom
                next_custom = jitter(self.custom_every)
            elif not renamed and w.count >= self.n // 2:
                w.name = f"bench session {self.seed} (renamed)"
                w.emit("session_info", {"name": w.name})
                renamed = True
            else:
                self.turn(w)
        w.drain()
        return Manifest(
            n=w.count,
            seed=self.seed,
            version=GENERATOR_VERSION,
            session_id=session_id,
            size_bytes=w.size,
            leaf_id=w.leaf,
            name=w.name if self.n >= 1 else None,
            counts=dict(sorted(w.counts.items())),
            tokens=w.tokens,
            labels=len(w.labels),
            branches=w.branches,
            branch_summaries=w.branch_summaries,
            compactions=w.compactions,
            fork_target=self.fork_target,
            first_user_text=w.first_user_text,
            newest_timestamp=w.last_timestamp,
        )


def session_id_for(n: int, seed: int) -> str:
    """The header id :func:`generate` writes for ``(n, seed)`` (a UUIDv7 text)."""
    rng = random.Random(seed * 1_000_003 + n)
    return _uuid7_text(rng, _start_ms(seed))


def _start_ms(seed: int) -> int:
    # Distinct start minutes per seed, so the sessions of a repo rarely tie on times.
    return _BASE_MS + (seed % 100_000) * 60_000


def generate(path: str | os.PathLike[str], n: int, seed: int = DEFAULT_SEED) -> Manifest:
    """Writes a session of exactly ``n`` entries to ``path`` and returns its manifest.

    The bytes depend only on ``(n, seed, GENERATOR_VERSION)``.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    gen = _Generator(n, seed)
    with open(path, "wb", buffering=1 << 20) as out:
        manifest = gen.run(out, session_id_for(n, seed), _start_ms(seed))
    assert manifest.n == n, (manifest.n, n)
    return manifest


# -- cache ------------------------------------------------------------------------------


def cache_root() -> Path:
    """Where generated workloads are kept between runs."""
    root = os.environ.get("SESSIONTREE_BENCH_CACHE")
    path = Path(root) if root else Path(tempfile.gettempdir()) / "sessiontree-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    # Two pytest runs sharing the cache must not generate the same file at once.
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Workload:
    """A generated session in its own directory (so side files are easy to clear).

    Attributes:
        path: the session file, ``<dir>/<session id>.jsonl``.
        manifest: what the generator recorded.
    """

    path: Path
    manifest: Manifest

    @property
    def directory(self) -> Path:
        """The directory holding only this session (plus whatever sessiontree adds)."""
        return self.path.parent

    def clear_side_files(self, keep: Callable[[str], bool] | None = None) -> None:
        """Removes every file beside the session (a persisted index, locks, forks ...).

        Args:
            keep: names for which it returns True are left in place.
        """
        for entry in os.scandir(self.directory):
            if entry.name == self.path.name or (keep is not None and keep(entry.name)):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def cached_session(n: int, seed: int = DEFAULT_SEED) -> Workload:
    """A session of ``n`` entries from the cache, generated on first use."""
    root = cache_root()
    key = f"n{n}-s{seed}-g{GENERATOR_VERSION}"
    directory = root / key
    manifest_path = root / f"{key}.manifest.json"
    with _locked(root / f"{key}.lock"):
        if manifest_path.exists():
            manifest = Manifest.from_json(manifest_path.read_text())
            path = directory / f"{manifest.session_id}.jsonl"
            if path.exists() and path.stat().st_size == manifest.size_bytes:
                return Workload(path, manifest)
            manifest_path.unlink()
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(mode=0o700)
        path = directory / f"{session_id_for(n, seed)}.jsonl"
        tmp = directory / ".generating"
        manifest = generate(tmp, n, seed)
        os.replace(tmp, path)
        manifest_path.write_text(manifest.to_json())
        # Written back now, not while the first benchmark that uses it is timed.
        os.sync()
        return Workload(path, manifest)


@dataclass(frozen=True)
class RepoWorkload:
    """A directory of ``count`` small sessions (the repository listing benches).

    Attributes:
        directory: the repository root (``<session id>.jsonl`` files only).
        manifests: one per session, by session id.
    """

    directory: Path
    manifests: dict[str, Manifest]


def _repo_sizes(count: int, seed: int) -> list[int]:
    rng = random.Random(seed ^ 0xC0FFEE)
    # Most sessions are short; a few run long. Mean ~45 entries (~130 KB).
    return [min(600, 4 + int(rng.expovariate(1 / 40))) for _ in range(count)]


def cached_repo(count: int, seed: int = DEFAULT_SEED) -> RepoWorkload:
    """A repository directory of ``count`` generated sessions from the cache."""
    root = cache_root()
    key = f"repo-k{count}-s{seed}-g{GENERATOR_VERSION}"
    directory = root / key
    manifest_path = root / f"{key}.manifest.json"
    with _locked(root / f"{key}.lock"):
        if manifest_path.exists():
            raw = json.loads(manifest_path.read_text())
            manifests = {k: Manifest(**v) for k, v in raw.items()}
            if all(
                (directory / f"{k}.jsonl").exists()
                and (directory / f"{k}.jsonl").stat().st_size == m.size_bytes
                for k, m in manifests.items()
            ):
                return RepoWorkload(directory, manifests)
            manifest_path.unlink()
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(mode=0o700)
        manifests = {}
        for i, n in enumerate(_repo_sizes(count, seed)):
            sub_seed = seed * 100_003 + i
            m = generate(directory / ".generating", n, sub_seed)
            os.replace(directory / ".generating", directory / f"{m.session_id}.jsonl")
            manifests[m.session_id] = m
        manifest_path.write_text(json.dumps({k: m.__dict__ for k, m in manifests.items()}))
        return RepoWorkload(directory, manifests)


def main(argv: list[str]) -> int:
    """``python benches/workload.py N [SEED]``: generate (or find) a cached session."""
    if not argv or not argv[0].isdigit():
        print(__doc__)
        print("usage: python benches/workload.py N [SEED]")
        return 2
    n = int(argv[0])
    seed = int(argv[1]) if len(argv) > 1 else DEFAULT_SEED
    start = time.perf_counter()
    wl = cached_session(n, seed)
    took = time.perf_counter() - start
    print(f"{wl.path}  {wl.manifest.size_bytes / 1e6:.1f} MB  ({took:.1f} s)")
    print(wl.manifest.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
