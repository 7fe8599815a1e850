"""An agent loop that stays under its context window for as long as it runs.

Before every model call the loop measures the context, and when it no longer leaves room
for the reply it compacts: the older part of the branch is summarised (here by a fake
summariser; in a real agent, one more LLM call) and the recent messages are kept. At the
end the user goes back to an earlier request and the branch being left is summarised.

The "LLM" is fake and deterministic: it reads files and runs commands through tool calls
and reports a ``usage`` the way a provider would. Run it with::

    python examples/agent_loop.py
"""

from __future__ import annotations

import pathlib
import random
import tempfile

import sessiontree as st
from sessiontree.compaction import (
    CompactionSettings,
    SummaryRequest,
    compact,
    estimate_context_tokens,
    estimate_tokens,
    move_to_with_summary,
    should_compact,
)

CONTEXT_WINDOW = 16_000
SETTINGS = CompactionSettings(reserve_tokens=2_000, keep_recent_tokens=4_000)
TURNS = 80
WORDS = [
    "parser",
    "index",
    "entry",
    "branch",
    "leaf",
    "header",
    "cache",
    "token",
    "model",
    "session",
    "tree",
    "file",
]


class FakeLLM:
    """Replies with a few tool calls, then an answer; usage is what the request cost."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.calls = 0

    def prose(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))

    def reply(self, context: tuple[st.AgentMessage, ...]) -> st.AssistantMessage:
        steps_done = sum(isinstance(m, st.ToolResultMessage) for m in context[-6:])
        content: list[st.TextContent | st.ThinkingContent | st.ToolCall] = [
            st.ThinkingContent(self.prose(10, 60))
        ]
        if steps_done < 4 and self.rng.random() < 0.7:
            content.append(st.TextContent("Let me look at the code."))
            for _ in range(self.rng.randint(1, 3)):
                self.calls += 1
                name, args = self.rng.choice(
                    [
                        ("read", {"path": f"src/{self.rng.choice(WORDS)}.rs"}),
                        ("bash", {"command": f"cargo test {self.rng.choice(WORDS)}"}),
                    ]
                )
                content.append(st.ToolCall(f"call_{self.calls}", name, args))
        else:
            content.append(st.TextContent(self.prose(40, 250)))
        reply = st.AssistantMessage(
            content,
            "fake",
            "fake-model",
            stop_reason="tool_use" if isinstance(content[-1], st.ToolCall) else "stop",
        )
        # A provider counts the whole request; here the estimate stands in for it.
        request_tokens = estimate_context_tokens(context)
        output_tokens = estimate_tokens(reply)
        return st.AssistantMessage(
            reply.content,
            reply.provider,
            reply.model,
            usage=st.Usage(
                input=request_tokens,
                output=output_tokens,
                total_tokens=request_tokens + output_tokens,
            ),
            stop_reason=reply.stop_reason,
        )

    def run_tool(self, call: st.ToolCall) -> st.ToolResultMessage:
        output = "\n".join(self.prose(5, 15) for _ in range(self.rng.randint(5, 120)))
        return st.ToolResultMessage(call.id, call.name, [st.TextContent(output)])


def fake_summarize(request: SummaryRequest) -> str:
    """Stands in for an LLM call with ``request.system_prompt`` and ``request.prompt``."""
    asked = [
        m.content
        for m in (*request.messages, *request.turn_prefix_messages)
        if isinstance(m, st.UserMessage) and isinstance(m.content, str)
    ]
    earlier = request.previous_summary.count("\n- ") if request.previous_summary else 0
    lines = [f"## Objective\n- ({earlier} earlier requests summarised before)"]
    lines += [f"- {text[:60]}" for text in asked]
    if request.turn_prefix is not None:
        lines.append("## Current turn so far\n- tools were run; work goes on below")
    return "\n".join(lines)


def main() -> None:
    llm = FakeLLM(seed=2024)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "session.jsonl"
        session = st.Session(st.JsonlSessionStorage.create(path, durability="none"))
        largest = compactions = 0
        requests: list[str] = []
        for turn in range(1, TURNS + 1):
            requests.append(
                session.append_message(st.UserMessage(f"Task {turn}: {llm.prose(5, 40)}"))
            )
            while True:
                context = session.build_context().messages
                tokens = estimate_context_tokens(context)
                if should_compact(tokens, CONTEXT_WINDOW, SETTINGS):
                    entry = compact(session, fake_summarize, SETTINGS)
                    if entry is None:
                        raise SystemExit("over the window with nothing to compact")
                    compactions += 1
                    context = session.build_context().messages
                    after = estimate_context_tokens(context)
                    kept = len(context) - 1
                    print(
                        f"turn {turn:3}: context {tokens:,} tokens > "
                        f"{CONTEXT_WINDOW - SETTINGS.reserve_tokens:,} -> compaction "
                        f"#{compactions}: kept {kept} messages from entry "
                        f"{entry.first_kept_entry_id}; context now {after:,} tokens"
                    )
                    tokens = after
                largest = max(largest, tokens)
                reply = llm.reply(context)
                session.append_message(reply)
                calls = [b for b in reply.content if isinstance(b, st.ToolCall)]
                if not calls:
                    break
                for call in calls:
                    session.append_message(llm.run_tool(call))

        print(
            f"\n{TURNS} turns, {len(session)} entries, {compactions} compactions; the largest "
            f"context sent was {largest:,} tokens (window {CONTEXT_WINDOW:,}, reply reserve "
            f"{SETTINGS.reserve_tokens:,})"
        )
        if largest > CONTEXT_WINDOW - SETTINGS.reserve_tokens:
            raise SystemExit("the context outgrew the window")

        # The user goes back to an earlier request; the abandoned work is summarised.
        target = requests[-3]
        summary_id = move_to_with_summary(session, target, fake_summarize)
        summary = session.get_entry(summary_id) if summary_id else None
        assert isinstance(summary, st.BranchSummaryEntry)
        print(
            f"moved back to entry {target} (task {TURNS - 2}) with a branch summary of "
            f"{summary.summary.count(chr(10)) + 1} lines"
        )
        session.close()

        reopened = st.Session(st.JsonlSessionStorage.open(path, readonly=True))
        context = reopened.build_context().messages
        print(
            f"reopened {path.name} ({path.stat().st_size:,} bytes): context of "
            f"{len(context)} messages, {estimate_context_tokens(context):,} tokens, "
            f"starting with a {context[0].role} message"
        )
        reopened.close()


if __name__ == "__main__":
    main()
