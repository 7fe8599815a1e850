"""Build a real session file with branches, a compaction and labels; print its tree and the
context that would go to the model.

Run: ``make demo`` (or ``python examples/demo.py [DIR]``). The session is written to DIR
(default: ``./demo-sessions``) as ``DIR/demo.jsonl`` — a repository holding one session
whose id is ``demo`` — and reopened from disk before anything is printed. The output ends
with ``sessiontree`` commands to try on it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import sessiontree as st


def assistant(
    text: str, *, tool: st.ToolCall | None = None, tokens: int = 900
) -> st.AssistantMessage:
    content: list[st.TextContent | st.ToolCall] = [st.TextContent(text)]
    if tool is not None:
        content.append(tool)
    usage = st.Usage(
        input=tokens, output=120, total_tokens=tokens + 120, cost=st.Cost(total=tokens * 3e-6)
    )
    return st.AssistantMessage(
        content,
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=usage,
        stop_reason="tool_use" if tool else "stop",
    )


def build(path: Path) -> str:
    """Writes the demo session; returns the tip of the branch that was compacted."""
    # The id "demo" matches the file name, so DIR is a repository the command can list.
    header = st.SessionHeader.generate(session_id="demo")
    with st.Session(st.JsonlSessionStorage.create(path, header, durability="flush")) as s:
        s.append_session_info("Set up a FastAPI project")
        s.append_model_change("anthropic", "claude-sonnet-4-5")
        s.append_thinking_level_change("medium")
        s.append_active_tools_change(["bash", "write"])
        u1 = s.append_message(st.UserMessage("I need to set up a Python project with FastAPI."))
        call = st.ToolCall("call_1", "bash", {"cmd": "mkdir myapp && touch myapp/main.py"})
        s.append_message(assistant("Creating the project layout.", tool=call))
        s.append_message(st.ToolResultMessage("call_1", "bash", [st.TextContent("(no output)")]))
        a2 = s.append_message(assistant("Project created in myapp/."))
        s.append_label(a2, "scaffold-done")
        u2 = s.append_message(st.UserMessage("Add JWT authentication."))
        s.append_message(assistant("Implementing JWT auth in myapp/auth.py.", tokens=4200))
        s.append_message(st.UserMessage("Now add a /health endpoint."))
        s.append_message(assistant("Added GET /health returning {'ok': true}."))
        # The context grew: summarise everything before the JWT request, keep the rest.
        s.append_compaction(
            "User set up a FastAPI project in myapp/ (scaffolded with bash).",
            first_kept_entry_id=u2,
            tokens_before=5200,
        )
        s.append_message(st.UserMessage("Which files exist now?"))
        jwt_tip = s.append_message(assistant("myapp/main.py and myapp/auth.py."))
        # Go back to the scaffold and try OAuth instead, summarising the branch we leave.
        s.move_to(a2, summary={"summary": "Tried JWT auth and a /health endpoint."})
        u3 = s.append_message(st.UserMessage("Use OAuth2 with GitHub instead of JWT."))
        s.append_label(u3, "oauth-attempt")
        s.append_message(assistant("Wiring OAuth2 via GitHub in myapp/oauth.py."))
        del u1
    return jwt_tip


def describe(entry: st.SessionTreeEntry) -> str:
    if isinstance(entry, st.MessageEntry):
        m = entry.message
        if isinstance(m, st.UserMessage):
            text = m.content if isinstance(m.content, str) else "[blocks]"
        elif isinstance(m, st.AssistantMessage):
            text = " ".join(b.text for b in m.content if isinstance(b, st.TextContent))
        elif isinstance(m, st.ToolResultMessage):
            text = f"{m.tool_name} result"
        else:
            text = ""
        return f"{m.role}: {text[:60]}"
    if isinstance(entry, st.CompactionEntry):
        return f"compaction (kept from {entry.first_kept_entry_id})"
    if isinstance(entry, st.BranchSummaryEntry):
        return f"branch summary: {entry.summary[:50]}"
    if isinstance(entry, st.LabelEntry):
        return f"label {entry.label!r} -> {entry.target_id}"
    if isinstance(entry, st.LeafEntry):
        return f"leaf -> {entry.target_id}"
    if isinstance(entry, st.SessionInfoEntry):
        return f"name: {entry.name}"
    if isinstance(entry, st.ModelChangeEntry):
        return f"model: {entry.provider}/{entry.model_id}"
    if isinstance(entry, st.ThinkingLevelChangeEntry):
        return f"thinking: {entry.thinking_level}"
    if isinstance(entry, st.ActiveToolsChangeEntry):
        return f"tools: {', '.join(entry.active_tool_names)}"
    return entry.type


def print_messages(messages: tuple[st.AgentMessage, ...]) -> None:
    for m in messages:
        if isinstance(m, (st.CompactionSummaryMessage, st.BranchSummaryMessage)):
            print(f"  {m.role}: {m.summary}")
        elif isinstance(m, st.UserMessage):
            print(f"  user: {m.content}")
        elif isinstance(m, st.AssistantMessage):
            text = " ".join(b.text for b in m.content if isinstance(b, st.TextContent))
            print(f"  assistant: {text}")
        else:
            print(f"  {m.role}")


def print_tree(session: st.Session) -> None:
    leaf = session.get_leaf_id()
    # (node, prefix, is_last) — an explicit stack, so deep sessions print too.
    stack = [(node, "", True) for node in reversed(session.get_tree())]
    while stack:
        node, prefix, last = stack.pop()
        label = f"  [{node.label}]" if node.label else ""
        here = "  <- leaf" if node.entry.id == leaf else ""
        branch = "└─ " if last else "├─ "
        print(f"{prefix}{branch}{node.entry.id} {describe(node.entry)}{label}{here}")
        child_prefix = prefix + ("   " if last else "│  ")
        children = node.children
        for i in range(len(children) - 1, -1, -1):
            stack.append((children[i], child_prefix, i == len(children) - 1))


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-sessions")
    root.mkdir(parents=True, exist_ok=True)
    path = root / "demo.jsonl"
    path.unlink(missing_ok=True)
    jwt_tip = build(path)

    with st.Session(st.JsonlSessionStorage.open(path, readonly=True)) as s:
        print(
            f"Session {s.id} — {s.get_session_name()!r}, file {path} "
            f"({path.stat().st_size} bytes, {len(s)} entries)\n"
        )
        print("Tree:")
        print_tree(s)
        ctx = s.build_context()
        model = f"{ctx.model.provider}/{ctx.model.model_id}" if ctx.model else None
        print(
            f"\nContext for the model ({len(ctx.messages)} messages, model {model}, "
            f"thinking {ctx.thinking_level}, tools {ctx.active_tool_names}):"
        )
        print_messages(ctx.messages)
        old = st.build_session_context(s.get_branch(jwt_tip))
        print(f"\nContext of the branch we left ({len(old.messages)} messages, compacted):")
        print_messages(old.messages)
        stats = s.get_session_stats()
        print(
            f"\nStats: {stats.message_count} messages, {stats.total_tokens} tokens, "
            f"${stats.cost_total:.4f}"
        )
    print_next_steps(root, path, jwt_tip)


def command_name() -> str:
    """How to run `sessiontree` from here: the venv's script, relative when it is below."""
    script = Path(sys.executable).parent / "sessiontree"
    if not script.exists():
        return "sessiontree"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def print_next_steps(root: Path, path: Path, jwt_tip: str) -> None:
    """The `sessiontree` commands to try on the files just written (docs/cli.md)."""
    cmd = command_name()
    print(
        f"""
Try the `sessiontree` command on it (docs/cli.md is its manual):
  {cmd} ls {root}              # the repository's sessions, newest first
  {cmd} tree {path}       # the tree; the current branch in heavy lines
  {cmd} show {path}       # the context that goes to the model
  {cmd} show {path} {jwt_tip} --branch   # the branch that was left
  {cmd} stats {path}      # counts, tokens, cost per model
  {cmd} check {path}      # exit status 0: clean
  {cmd} export {path} --html -o {root}/demo.html   # open it in a browser"""
    )


if __name__ == "__main__":
    main()
