"""Writer processes for the reliability tests, and the session builder they share.

Run as a script it is one of:

``serve``
    A fork server for the crash test. It imports sessiontree once, then for every
    ``write <path> <durability> <seed> <count>`` line on stdin forks a writer child that
    opens ``path`` for writing (with a persisted index) and appends ``count`` entries, printing
    ``begin <pid> <n> <bytes>`` before each append and ``ack <pid> <id> <seconds>`` after it
    returns. The server prints ``child <pid>`` when it forks and
    ``exit <pid> <status>`` once the child is gone (the test SIGKILLs it at a random
    moment). Forking from a warm interpreter keeps a run at a few milliseconds, so
    hundreds of kills fit in CI. Every line is one ``write(2)`` below ``PIPE_BUF``, so the
    server's and the child's lines never interleave mid-line.

``race <path>``
    Waits for ``go`` on stdin, then opens ``path`` for writing. Prints ``won <pid>`` and
    holds the lock until stdin closes, or ``locked <pid> <message>`` and exits.

Imported, it offers :func:`build_full_session`.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time

import sessiontree as st


def _say(text: str) -> None:
    # One write(2) per line: lines from the server and its child stay whole in the pipe.
    os.write(1, (text + "\n").encode())


def build_full_session(path: str | os.PathLike[str], rounds: int = 3) -> list[str]:
    """Creates a session file holding every entry type ``rounds`` times; returns the ids.

    The ids are in file order. The last lines of the file cover every entry type, so a
    sweep over them cuts through each kind of line.
    """
    ids: list[str] = []
    storage = st.JsonlSessionStorage.create(path, durability="none")
    with st.Session(storage) as s:
        for r in range(rounds):
            first = s.append_message(st.UserMessage(f"round {r}: read the file \u00e9\u6f22"))
            ids.append(first)
            ids.append(s.append_model_change("anthropic", f"model-{r}"))
            ids.append(s.append_thinking_level_change("high" if r % 2 else "low"))
            ids.append(s.append_active_tools_change(["read", "bash"]))
            ids.append(
                s.append_message(
                    st.AssistantMessage(
                        [
                            st.ThinkingContent("plan", signature="sig"),
                            st.TextContent('quote " and \\ backslash'),
                            st.ToolCall(f"call_{r}", "read", {"path": "a.txt", "n": [1, None]}),
                        ],
                        provider="anthropic",
                        model=f"model-{r}",
                        usage=st.Usage(input=10, output=5, total_tokens=15),
                        stop_reason="tool_use",
                    )
                )
            )
            ids.append(
                s.append_message(
                    st.ToolResultMessage(f"call_{r}", "read", [st.TextContent("contents")])
                )
            )
            ids.append(s.append_custom_entry("ext", {"round": r, "nested": {"a": [1, 2]}}))
            ids.append(s.append_custom_message_entry("note", f"note {r}", details={"r": r}))
            ids.append(s.append_label(first, f"label {r}"))
            ids.append(s.append_session_info(f"session name {r}"))
            ids.append(s.append_compaction(f"summary {r}", first, 1000 + r))
            # move_to appends a leaf entry, then a branch summary under the target.
            summary_id = s.move_to(first, summary={"summary": f"branch {r}"})
            assert summary_id is not None
            leaf_entry = storage.get_entries(reverse=True, limit=2)[1]
            ids.extend([leaf_entry.id, summary_id])
            image = st.UserMessage([st.TextContent("image"), st.ImageContent("aGk=", "image/png")])
            ids.append(s.append_message(image))
    return ids


def _writer_child(path: str, durability: str, seed: int, count: int) -> None:
    rng = random.Random(seed)
    pid = os.getpid()
    # index=0 keeps a persisted index whatever the size, so kills also land while it is
    # loaded, rebuilt or written.
    storage = st.JsonlSessionStorage.open(path, durability=durability, index=0)  # type: ignore[arg-type]
    session = st.Session(storage)
    for i in range(count):
        roll = rng.random()
        if roll < 0.1:
            # Big lines take several page copies to write, so a kill can land mid-write.
            text = "x" * rng.randrange(64 << 10, 1 << 20)
        else:
            text = f"entry {i} " + "y" * rng.randrange(0, 400)
        _say(f"begin {pid} {i} {len(text)}")
        started = time.perf_counter()
        if roll > 0.95:
            entry_id = session.append_custom_entry("crash", {"i": i, "pad": text})
        else:
            entry_id = session.append_message(st.UserMessage(text))
        elapsed = time.perf_counter() - started
        _say(f"ack {pid} {entry_id} {elapsed:.6f}")
    session.close()
    _say(f"done {pid}")


def serve() -> None:
    """The fork server (see the module docstring)."""
    _say(f"ready {os.getpid()}")
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "quit":
            return
        if parts[0] != "write":
            _say(f"error unknown command {parts[0]!r}")
            continue
        path, durability, seed, count = parts[1], parts[2], int(parts[3]), int(parts[4])
        # The child waits until the server has announced it, so ``child <pid>`` always
        # comes before the child's own lines.
        go_read, go_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go_write)
            os.read(go_read, 1)
            os.close(go_read)
            code = 0
            try:
                _writer_child(path, durability, seed, count)
            except BaseException as e:  # a failure must reach the test, not vanish
                _say(f"fail {os.getpid()} {type(e).__name__}: {e}".replace("\n", " "))
                code = 1
            os._exit(code)
        os.close(go_read)
        _say(f"child {pid}")
        # The test may kill the child as soon as it is announced: then nobody reads "go".
        with contextlib.suppress(BrokenPipeError):
            os.write(go_write, b"g")
        os.close(go_write)
        _, status = os.waitpid(pid, 0)
        _say(f"exit {pid} {status}")


def race(path: str) -> None:
    """One contender of the lock race (see the module docstring)."""
    pid = os.getpid()
    _say(f"waiting {pid}")
    if sys.stdin.readline().strip() != "go":
        return
    try:
        storage = st.JsonlSessionStorage.open(path, durability="flush")
    except st.SessionError as e:
        _say(f"{e.code} {pid} {e.message}")
        return
    _say(f"won {pid}")
    sys.stdin.read()  # hold the lock until the test closes our stdin
    storage.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        serve()
    elif argv[:1] == ["race"] and len(argv) == 2:
        race(argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
