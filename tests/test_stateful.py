"""A hypothesis state machine: random session operations against every storage and a model.

Every rule is applied to a ``Session`` over ``InMemorySessionStorage``, one over
``JsonlSessionStorage`` and, when ``SESSIONTREE_PG_DSN`` names a server (CI sets it), one
over ``PostgresSessionStorage`` (the file and the rows closed and reopened at random
points), and to a small pure-Python model of FORMAT.md and API.md. After each step the
leaf, branch, context, labels, name, stats and length of every session must match the model.

Both storages draw entry ids from identical counters (``create_entry_id`` is overridden, as
a user may), so the two sessions and the model share ids. Timestamps are not controlled:
messages derived from an entry's write time are compared without their timestamp.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as hs
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import sessiontree as st

TS = 1_767_225_600_000


class _Counting:
    """Mixin: entry ids from a counter shared through the machine (not hex, so never equal
    to an engine-made leaf id)."""

    ids: Any

    def create_entry_id(self) -> str:
        self._check()  # type: ignore[attr-defined]
        return f"n{next(self.ids):07d}"


class CountingMemory(_Counting, st.InMemorySessionStorage):
    pass


class CountingJsonl(_Counting, st.JsonlSessionStorage):
    pass


class CountingPostgres(_Counting, st.PostgresSessionStorage):
    pass


PG_DSN = os.environ.get("SESSIONTREE_PG_DSN")
PG_SCHEMA = "sessiontree_stateful"


DERIVED = {"compaction_summary", "branch_summary", "custom"}


def norm(message: Any) -> dict[str, Any]:
    d = st.message_to_dict(message)
    if message.role in DERIVED:
        d.pop("timestamp", None)
    return d


@dataclass
class Node:
    kind: str
    parent: str | None
    data: dict[str, Any] = field(default_factory=dict)


class Model:
    """FORMAT.md and API.md, written out plainly."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.leaf: str | None = None
        self.labels: dict[str, str] = {}
        self.name: str | None = None
        self.count = 0
        self.messages = [0, 0, 0, 0]  # all, user, assistant, tool_result
        self.tokens = [0, 0, 0, 0, 0]
        self.cost = 0.0

    def add(self, entry_id: str, kind: str, **data: Any) -> None:
        assert entry_id not in self.nodes
        self.nodes[entry_id] = Node(kind, self.leaf, data)
        self.leaf = entry_id
        self.count += 1
        usage = data.get("usage")
        if kind == "message":
            self.messages[0] += 1
            role = data["message"].role
            if role in ("user", "assistant", "tool_result"):
                self.messages[("user", "assistant", "tool_result").index(role) + 1] += 1
            if role == "assistant":
                usage = data["message"].usage
        if usage is not None:
            for i, v in enumerate(
                (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens)
            ):
                self.tokens[i] += v
            self.cost += usage.cost.total

    def move(self, target: str | None) -> None:
        self.count += 1  # the leaf entry
        self.leaf = target

    def path_to_root(self, x: str | None) -> list[str]:
        out = []
        while x is not None:
            out.append(x)
            x = self.nodes[x].parent
        return out[::-1]

    def branch(self) -> list[str]:
        path = self.path_to_root(self.leaf)
        for i in range(len(path) - 1, -1, -1):
            node = self.nodes[path[i]]
            if node.kind == "compaction":
                keep = node.data["first_kept"]
                if node.data["retained_tail"] is None and keep in path[:i]:
                    return path[path.index(keep) :]
                return path[i:]
        return path

    def context_messages(self) -> list[dict[str, Any]]:
        branch = self.branch()
        last = max(
            (i for i, x in enumerate(branch) if self.nodes[x].kind == "compaction"), default=-1
        )
        if last < 0:
            chosen = branch
        else:
            c = self.nodes[branch[last]]
            chosen = [branch[last]]
            keep = c.data["first_kept"]
            if c.data["retained_tail"] is None and keep is not None and keep in branch[:last]:
                chosen += [
                    x
                    for x in branch[branch.index(keep) : last]
                    if self.nodes[x].kind != "compaction"
                ]
            chosen += branch[last + 1 :]
        out: list[dict[str, Any]] = []
        for x in chosen:
            node = self.nodes[x]
            d = node.data
            if node.kind == "message":
                out.append(norm(d["message"]))
            elif node.kind == "custom_message":
                out.append(
                    norm(
                        st.CustomMessage(
                            d["custom_type"], d["content"], d["display"], d["details"], timestamp=0
                        )
                    )
                )
            elif node.kind == "compaction":
                out.append(
                    norm(st.CompactionSummaryMessage(d["summary"], d["tokens_before"], timestamp=0))
                )
                out.extend(norm(m) for m in d["retained_tail"] or ())
            elif node.kind == "branch_summary":
                out.append(norm(st.BranchSummaryMessage(d["summary"], d["from_id"], timestamp=0)))
        return out

    def state(self) -> tuple[str, st.ModelRef | None, tuple[str, ...] | None]:
        level, model, tools = "off", None, None
        for x in self.path_to_root(self.leaf):
            node = self.nodes[x]
            if node.kind == "thinking":
                level = node.data["level"]
            elif node.kind == "model":
                model = st.ModelRef(node.data["provider"], node.data["model_id"])
            elif node.kind == "message" and node.data["message"].role == "assistant":
                m = node.data["message"]
                model = st.ModelRef(m.provider, m.model)
            elif node.kind == "tools":
                tools = tuple(node.data["names"])
        return level, model, tools

    def stats(self) -> st.SessionStats:
        return st.SessionStats(self.count, *self.messages, *self.tokens, self.cost)


texts = hs.text(alphabet=hs.characters(codec="utf-8"), max_size=6)
usages = hs.none() | hs.builds(
    lambda n, c: st.Usage(
        input=n,
        output=n + 1,
        cache_read=n + 2,
        cache_write=n + 3,
        total_tokens=4 * n + 6,
        cost=st.Cost(total=c),
    ),
    hs.integers(0, 1000),
    hs.sampled_from([0.0, 0.25, 1.5]),
)
user_messages = hs.builds(lambda t: st.UserMessage(t, timestamp=TS), texts)
messages = hs.one_of(
    user_messages,
    hs.builds(
        lambda t, p, u: st.AssistantMessage(
            [st.TextContent(t)], p, "m-" + p, usage=u or st.Usage(), timestamp=TS
        ),
        texts,
        hs.sampled_from(["openai", "anthropic"]),
        usages,
    ),
    hs.builds(
        lambda t, e: st.ToolResultMessage(
            "c1", "bash", [st.TextContent(t)], is_error=e, timestamp=TS
        ),
        texts,
        hs.booleans(),
    ),
)
picks = hs.integers(0, 10**6)


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="sessiontree-stateful-")
        self.path = os.path.join(self.dir, "s.jsonl")
        self.model = Model()
        self.mem_ids = itertools.count(1)
        self.file_ids = itertools.count(1)
        self.pg_ids = itertools.count(1)
        self.sessions: list[st.Session] = []

    @initialize(durability=hs.sampled_from(["none", "flush", "group"]))
    def start(self, durability: str) -> None:
        header = st.SessionHeader.generate(cwd="/machine")
        mem = CountingMemory(header)
        mem.ids = self.mem_ids
        jsonl = CountingJsonl.create(self.path, header, durability=durability)  # type: ignore[arg-type]
        jsonl.ids = self.file_ids
        self.sessions = [st.Session(mem), st.Session(jsonl)]
        self.sid = header.id
        if PG_DSN:
            pg = CountingPostgres.create(
                PG_DSN,
                header,
                schema=PG_SCHEMA,
                durability=durability,  # type: ignore[arg-type]
            )
            pg.ids = self.pg_ids
            self.sessions.append(st.Session(pg))

    def teardown(self) -> None:
        for s in self.sessions:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if PG_DSN and len(self.sessions) == 3:
            with st.PostgresSessionRepo(PG_DSN, schema=PG_SCHEMA) as repo:
                repo.delete(self.sid)  # every session was closed above

    def each(self, fn: Any) -> str | None:
        """Applies ``fn`` to every session; they must return the same id."""
        results = [fn(s) for s in self.sessions]
        assert all(r == results[0] for r in results)
        return results[0]

    def pick(self, i: int) -> str:
        ids = list(self.model.nodes)
        return ids[i % len(ids)]

    # -- appends -------------------------------------------------------------------

    @rule(message=messages)
    def append_message(self, message: Any) -> None:
        new = self.each(lambda s: s.append_message(message))
        self.model.add(new, "message", message=message)

    @rule(level=hs.sampled_from(st.THINKING_LEVELS))
    def thinking(self, level: str) -> None:
        self.model.add(
            self.each(lambda s: s.append_thinking_level_change(level)), "thinking", level=level
        )

    # A model id is a non-empty str (the empty one is refused when the entry is made).
    @rule(
        provider=hs.sampled_from(["p1", "p2"]),
        model_id=hs.text(alphabet=hs.characters(codec="utf-8"), min_size=1, max_size=6),
    )
    def model_change(self, provider: str, model_id: str) -> None:
        new = self.each(lambda s: s.append_model_change(provider, model_id))
        self.model.add(new, "model", provider=provider, model_id=model_id)

    @rule(names=hs.lists(hs.sampled_from(["bash", "read", "write"]), max_size=3))
    def tools(self, names: list[str]) -> None:
        self.model.add(
            self.each(lambda s: s.append_active_tools_change(names)), "tools", names=names
        )

    @rule(
        custom_type=hs.sampled_from(["a", "b"]),
        content=texts,
        display=hs.booleans(),
        details=hs.none() | hs.integers(),
    )
    def custom_message(self, custom_type: str, content: str, display: bool, details: Any) -> None:
        new = self.each(
            lambda s: s.append_custom_message_entry(custom_type, content, display, details)
        )
        self.model.add(
            new,
            "custom_message",
            custom_type=custom_type,
            content=content,
            display=display,
            details=details,
        )

    @rule(data=hs.none() | hs.dictionaries(texts, hs.integers(), max_size=2))
    def custom(self, data: Any) -> None:
        self.model.add(self.each(lambda s: s.append_custom_entry("state", data)), "custom")

    @precondition(lambda self: self.model.nodes)
    # An empty label is refused (tests/test_package_surface.py); None clears.
    @rule(i=picks, label=hs.none() | texts.filter(bool))
    def label(self, i: int, label: str | None) -> None:
        target = self.pick(i)
        self.model.add(self.each(lambda s: s.append_label(target, label)), "label")
        if label is None:
            self.model.labels.pop(target, None)
        else:
            self.model.labels[target] = label

    @rule(name=hs.none() | texts)
    def session_info(self, name: str | None) -> None:
        self.model.add(self.each(lambda s: s.append_session_info(name)), "info")
        self.model.name = name

    @rule(
        first_kept=hs.none() | picks,
        tail=hs.none() | hs.lists(user_messages, max_size=2),
        summary=texts,
        tokens=hs.integers(0, 10**6),
        usage=usages,
    )
    def compaction(
        self,
        first_kept: int | None,
        tail: list[Any] | None,
        summary: str,
        tokens: int,
        usage: Any,
    ) -> None:
        keep = None if first_kept is None or not self.model.nodes else self.pick(first_kept)
        new = self.each(
            lambda s: s.append_compaction(summary, keep, tokens, usage=usage, retained_tail=tail)
        )
        self.model.add(
            new,
            "compaction",
            summary=summary,
            first_kept=keep,
            tokens_before=tokens,
            retained_tail=tail,
            usage=usage,
        )

    @precondition(lambda self: self.model.nodes)
    @rule(i=picks, summary=hs.none() | texts, usage=usages)
    def move_to(self, i: int, summary: str | None, usage: Any) -> None:
        target = self.pick(i)
        opts = None if summary is None else {"summary": summary, "usage": usage}
        new = self.each(lambda s: s.move_to(target, opts))
        self.model.move(target)
        if summary is not None:
            assert new is not None
            self.model.add(new, "branch_summary", summary=summary, from_id=target, usage=usage)
        else:
            assert new is None

    @rule()
    def move_to_none(self) -> None:
        assert self.each(lambda s: s.move_to(None)) is None
        self.model.move(None)

    @rule(summary=texts)
    def refused_operations(self, summary: str) -> None:
        for call, code in (
            (lambda s: s.move_to(None, {"summary": summary}), "invalid_argument"),
            (lambda s: s.move_to("missing"), "not_found"),
            (lambda s: s.append_label("missing", summary), "not_found"),
        ):
            for s in self.sessions:
                with pytest.raises(st.SessionError) as exc:
                    call(s)
                assert exc.value.code == code

    # -- reopening -----------------------------------------------------------------

    @rule(durability=hs.sampled_from(["none", "flush", "group"]), check_readonly=hs.booleans())
    def reopen(self, durability: str, check_readonly: bool) -> None:
        mem, jsonl, *pg = (s.storage for s in self.sessions)
        assert isinstance(mem, CountingMemory) and isinstance(jsonl, CountingJsonl)
        data = mem.to_jsonl()
        mem.close()
        jsonl.close()
        pg_doc = b""
        for p in pg:
            assert isinstance(p, CountingPostgres)
            pg_doc = p.to_jsonl()
            p.close()
        on_disk = pathlib.Path(self.path).read_bytes()
        new_mem = CountingMemory.from_jsonl(data)
        new_mem.ids = self.mem_ids
        if check_readonly:
            with st.JsonlSessionStorage.open(self.path, readonly=True, strict=True) as ro:
                self.check(st.Session(ro))
        new_file = CountingJsonl.open(self.path, durability=durability)  # type: ignore[arg-type]
        new_file.ids = self.file_ids
        assert new_file.load_report.ok and new_mem.load_report.ok
        self.sessions = [st.Session(new_mem), st.Session(new_file)]
        assert pathlib.Path(self.path).read_bytes() == on_disk
        if pg:
            assert PG_DSN is not None
            if check_readonly:
                with st.PostgresSessionStorage.open(
                    PG_DSN, self.sid, schema=PG_SCHEMA, readonly=True, strict=True
                ) as ro:
                    self.check(st.Session(ro))
            new_pg = CountingPostgres.open(
                PG_DSN,
                self.sid,
                schema=PG_SCHEMA,
                durability=durability,  # type: ignore[arg-type]
            )
            new_pg.ids = self.pg_ids
            self.sessions.append(st.Session(new_pg))
            assert new_pg.load_report.ok
            # The rows give back the document the writer had, byte for byte.
            assert new_pg.to_jsonl() == pg_doc

    # -- the check -----------------------------------------------------------------

    def check(self, s: st.Session) -> None:
        m = self.model
        assert s.get_leaf_id() == m.leaf
        assert [e.id for e in s.get_branch()] == m.branch()
        ctx = s.build_context()
        assert [norm(x) for x in ctx.messages] == m.context_messages()
        assert (ctx.thinking_level, ctx.model, ctx.active_tool_names) == m.state()
        assert s.storage.get_labels() == m.labels
        assert s.get_session_name() == m.name
        stats = s.get_session_stats()
        expected = m.stats()
        assert stats.cost_total == pytest.approx(expected.cost_total)
        assert stats == dataclasses.replace(expected, cost_total=stats.cost_total)
        assert len(s) == m.count

    @invariant()
    def sessions_match_the_model(self) -> None:
        for s in self.sessions:
            self.check(s)


TestSessionMachine = SessionMachine.TestCase
