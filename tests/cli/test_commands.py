"""Every command, run as the installed ``sessiontree`` on real files: what it prints, its
``--json`` output checked against the documented schema, and its exit status."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import sessiontree as st

from .clihelp import SCRIPT, Demo, Runner, parse_json


def test_console_script_is_installed(cli: Runner) -> None:
    assert SCRIPT.exists(), f"{SCRIPT} missing: `make install` installs the console script"
    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"sessiontree {st.__version__}"


def test_python_dash_m(demo: Demo) -> None:
    import subprocess
    import sys

    from .clihelp import clean_env

    proc = subprocess.run(
        [sys.executable, "-m", "sessiontree", "check", str(demo.path)],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_help_lists_commands_and_examples(cli: Runner) -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    for name in ("ls", "tree", "show", "stats", "check", "repair", "fork", "export", "import"):
        assert name in proc.stdout
    assert "examples:" in proc.stdout and "exit status" in proc.stdout
    for name in ("ls", "tree", "show", "check", "repair", "export"):
        sub = cli(name, "--help")
        assert sub.returncode == 0 and "examples:" in sub.stdout, name


def test_no_command_prints_help_and_exits_2(cli: Runner) -> None:
    proc = cli()
    assert proc.returncode == 2
    assert "COMMAND" in proc.stdout


def test_usage_error_is_one_line(cli: Runner) -> None:
    proc = cli("tree", "--depth", "x")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("sessiontree: usage: ")


def test_ls(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    proc = cli("ls", demo.dir)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:5] == ["modified", "id", "msgs", "size", "cwd"]
    assert "demo" in lines[1] and "Set up a FastAPI project" in lines[1]
    doc = parse_json(cli("ls", demo.dir, "--json"))
    schema("ls", doc)
    [row] = doc["sessions"]
    assert row["id"] == "demo" and row["message_count"] == 12 and row["error"] is None
    assert row["name"] == "Set up a FastAPI project"


def test_ls_newest_first_limit_cwd_and_repo_env(cli: Runner, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    repo = st.JsonlSessionRepo(tmp_path / "r")
    for i, cwd in enumerate(["/a", "/b", "/a"]):
        with repo.create(cwd=cwd, name=f"s{i}") as s:
            s.append_message(st.UserMessage(f"message {i}"))
    (tmp_path / "r" / "broken.jsonl").write_text("not json\n")
    doc = parse_json(cli("ls", "--json", env={"SESSIONTREE_REPO": str(tmp_path / "r")}))
    schema("ls", doc)
    names = [r["name"] for r in doc["sessions"]]
    assert names[:3] == ["s2", "s1", "s0"] or set(names) >= {"s0", "s1", "s2"}
    broken = [r for r in doc["sessions"] if r["id"] == "broken"]
    assert broken and broken[0]["error"]
    limited = parse_json(cli("ls", tmp_path / "r", "--limit", "1", "--json"))
    assert len(limited["sessions"]) == 1
    only_a = parse_json(cli("ls", tmp_path / "r", "--cwd", "/a", "--json"))
    assert {r["name"] for r in only_a["sessions"] if not r["error"]} == {"s0", "s2"}
    text = cli("ls", tmp_path / "r").stdout
    assert "error:" in text


def test_ls_without_repo_is_a_usage_error(cli: Runner) -> None:
    proc = cli("ls")
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_ls_missing_dir(cli: Runner, tmp_path: Path) -> None:
    proc = cli("ls", tmp_path / "nope")
    assert proc.returncode == 2
    assert proc.stderr.startswith("sessiontree: not_found: ")
    assert not (tmp_path / "nope").exists()  # listing never creates the directory


def test_tree(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    proc = cli("tree", demo.path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "◀ leaf" in out and "[scaffold-done]" in out and "[oauth-attempt]" in out
    assert "compaction" in out and "summary" in out
    assert "┠─" in out  # the side branch, with the heavy line of the way to the leaf
    doc = parse_json(cli("tree", demo.path, "--json"))
    schema("tree", doc)
    assert len(doc["nodes"]) == len(demo.ids)
    assert {n["id"] for n in doc["nodes"]} == set(demo.ids)
    [leaf] = [n for n in doc["nodes"] if n["is_leaf"]]
    assert leaf["id"] == demo.leaf == doc["leaf_id"]
    assert {n["label"] for n in doc["nodes"]} >= {"scaffold-done", "oauth-attempt"}


def test_tree_collapses_long_runs(cli: Runner, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "long.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path, durability="none")) as s:
        first = s.append_message(st.UserMessage("first"))
        for i in range(1500):
            s.append_message(st.UserMessage(f"message {i}"))
        s.append_label(first, "start")
        s.move_to(first)
        s.append_message(st.UserMessage("other branch"))
    out = cli("tree", path).stdout
    assert "… 1,496 entries …" in out
    assert len(out.splitlines()) < 20
    full = cli("tree", path, "--all").stdout
    assert len(full.splitlines()) > 1500
    depth0 = cli("tree", path, "--depth", "0").stdout
    assert "entries in 1 branch" in depth0 and "other branch" in depth0
    doc = parse_json(cli("tree", path, "--json", "--depth", "0"))
    schema("tree", doc)
    assert all(n["depth"] == 0 for n in doc["nodes"])


def test_tree_around(cli: Runner, demo: Demo) -> None:
    out = cli("tree", demo.path, "--around", demo.jwt_tip, "-C", "1").stdout
    assert "◀ here" in out
    assert "myapp/main.py and myapp/auth.py." in out
    assert "Wiring OAuth2" not in out  # the other branch is summarised
    assert "entries in 1 branch" in out
    missing = cli("tree", demo.path, "--around", "nope")
    assert missing.returncode == 2 and "not_found" in missing.stderr


def test_show_context(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    proc = cli("show", demo.path)
    assert proc.returncode == 0, proc.stderr
    assert "Wiring OAuth2 via GitHub" in proc.stdout
    assert "Add JWT authentication." not in proc.stdout  # on the other branch
    doc = parse_json(cli("show", demo.path, "--json"))
    schema("show", doc)
    with st.Session(st.JsonlSessionStorage.open(demo.path, readonly=True)) as s:
        ctx = s.build_context()
        assert [m["message"] for m in doc["messages"]] == [
            st.message_to_dict(m) for m in ctx.messages
        ]
    assert doc["model"] == {"provider": "anthropic", "model_id": "claude-sonnet-4-5"}
    assert doc["thinking_level"] == "medium" and doc["active_tool_names"] == ["bash", "write"]


def test_show_other_leaf_and_folding(cli: Runner, demo: Demo) -> None:
    out = cli("show", demo.path, "--leaf", demo.jwt_tip).stdout
    assert "compaction_summary" in out and "myapp/main.py and myapp/auth.py." in out
    assert "Wiring OAuth2" not in out


def test_show_folds_thinking_and_tool_output(cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with st.Session(st.JsonlSessionStorage.create(path)) as s:
        s.append_message(st.UserMessage("go"))
        s.append_message(
            st.AssistantMessage(
                [st.ThinkingContent("secret plan " * 50), st.ToolCall("c1", "bash", {"cmd": "ls"})],
                provider="p",
                model="m",
                stop_reason="tool_use",
            )
        )
        lines = "\n".join(f"line {i}" for i in range(40))
        s.append_message(st.ToolResultMessage("c1", "bash", [st.TextContent(lines)]))
    folded = cli("show", path).stdout
    assert "secret plan" not in folded and "thinking (600 characters" in folded
    assert "line 2" in folded and "line 39" not in folded and "37 more lines" in folded
    full = cli("show", path, "--full").stdout
    assert "secret plan" in full and "line 39" in full


def test_show_entry_raw_and_branch(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    one = cli("show", demo.path, demo.jwt_tip)
    assert one.returncode == 0 and "myapp/main.py and myapp/auth.py." in one.stdout
    raw = cli("show", demo.path, demo.jwt_tip, "--raw").stdout
    with st.JsonlSessionStorage.open(demo.path, readonly=True) as s:
        entry = s.get_entry(demo.jwt_tip)
        assert entry is not None
        assert st.entry_from_json(raw) == entry
        assert json.loads(raw)["id"] == demo.jwt_tip
        path_ids = [e.id for e in s.get_path_to_root(demo.jwt_tip)]
    doc = parse_json(cli("show", demo.path, demo.jwt_tip, "--json"))
    schema("show", doc)
    assert doc["entry"]["id"] == demo.jwt_tip
    branch = parse_json(cli("show", demo.path, demo.jwt_tip, "--branch", "--json"))
    schema("show", branch)
    assert [e["entry"]["id"] for e in branch["entries"]] == path_ids
    text = cli("show", demo.path, demo.jwt_tip, "--branch").stdout
    assert f"{len(path_ids)} entries from the root" in text
    assert cli("show", demo.path, "nope").returncode == 2
    assert cli("show", demo.path, "--raw").returncode == 2


def test_stats(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    doc = parse_json(cli("stats", demo.path, "--json"))
    schema("stats", doc)
    with st.JsonlSessionStorage.open(demo.path, readonly=True) as s:
        stats = s.get_session_stats()
    assert doc["message_count"] == stats.message_count == 12
    assert doc["total_tokens"] == stats.total_tokens
    assert doc["cost_total"] == pytest.approx(stats.cost_total)
    [model] = doc["models"]
    assert model["model"] == "claude-sonnet-4-5" and model["messages"] == 6
    assert doc["entry_types"]["compaction"] == 1
    text = cli("stats", demo.path).stdout
    assert "anthropic/claude-sonnet-4-5" in text and "tokens" in text


def test_session_by_id_prefix_and_newest(cli: Runner, tmp_path: Path) -> None:
    repo = st.JsonlSessionRepo(tmp_path)
    with repo.create(session_id="alpha-1", name="first") as s:
        s.append_message(st.UserMessage("one"))
    with repo.create(session_id="beta-2", name="second") as s:
        s.append_message(st.UserMessage("two"))
    env = {"SESSIONTREE_REPO": str(tmp_path)}
    assert "second" in cli("stats", "beta", env=env).stdout  # a unique prefix
    assert "first" in cli("--repo", str(tmp_path), "stats", "alpha-1").stdout  # an id
    newest = parse_json(cli("stats", "--json", env=env))
    assert newest["session"]["id"] == "beta-2"  # no SESSION: the newest
    with repo.create(session_id="beta-3") as s:
        pass
    ambiguous = cli("stats", "beta", env=env)
    assert ambiguous.returncode == 2 and "matches 2 sessions" in ambiguous.stderr
    missing = cli("stats", "gamma", env=env)
    assert missing.returncode == 2 and missing.stderr.startswith("sessiontree: not_found:")
    no_repo = cli("stats")
    assert no_repo.returncode == 2 and "usage" in no_repo.stderr


def test_fork(cli: Runner, demo: Demo, schema) -> None:  # type: ignore[no-untyped-def]
    doc = parse_json(cli("fork", demo.path, "--at", demo.jwt_tip, "--json"))
    schema("fork", doc)
    new = Path(doc["session"]["path"])
    assert new.parent == demo.dir and new.exists()
    with st.JsonlSessionStorage.open(new, readonly=True) as s:
        assert s.get_metadata().parent_session == "demo"
        assert s.get_entry(demo.jwt_tip) is not None
    full = cli("fork", demo.path)
    assert full.returncode == 0 and "forked demo into" in full.stdout
    bad = cli("fork", demo.path, "--before", demo.jwt_tip)  # an assistant message
    assert bad.returncode == 2 and "invalid_fork_target" in bad.stderr


def test_fork_needs_a_repository_file(cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "x y.jsonl"
    st.JsonlSessionStorage.create(path).close()
    proc = cli("fork", path)
    assert proc.returncode == 2 and "invalid_id" in proc.stderr


def test_export_markdown(cli: Runner, demo: Demo, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    md = cli("export", demo.path, "--markdown")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# Set up a FastAPI project")
    assert "Wiring OAuth2 via GitHub" in md.stdout
    assert "tool call: bash" in md.stdout and "(no output)" in md.stdout
    out = tmp_path / "jwt.md"
    doc = parse_json(cli("export", demo.path, "--md", "--leaf", demo.jwt_tip, "-o", out, "--json"))
    schema("export", doc)
    text = out.read_text()
    assert "myapp/main.py and myapp/auth.py." in text and "## compaction" in text


def test_export_jsonl_branch(cli: Runner, demo: Demo, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "branch.jsonl"
    doc = parse_json(
        cli("export", demo.path, "--jsonl", "--leaf", demo.jwt_tip, "-o", out, "--json")
    )
    schema("export", doc)
    with (
        st.Session(st.JsonlSessionStorage.open(out, readonly=True, strict=True)) as b,
        st.Session(st.JsonlSessionStorage.open(demo.path, readonly=True)) as src,
    ):
        assert b.get_leaf_id() == demo.jwt_tip
        expected = st.build_session_context(src.get_branch(demo.jwt_tip)).messages
        assert tuple(b.build_context().messages) == tuple(expected)
        assert b.get_session_name() == src.get_session_name()
        assert b.storage.get_metadata().parent_session == "demo"
    again = cli("export", demo.path, "--jsonl", "-o", out)
    assert again.returncode == 2 and "exists" in again.stderr
    assert cli("export", demo.path, "--jsonl").returncode == 2  # needs -o


def test_import(cli: Runner, demo: Demo, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    branch = tmp_path / "branch.jsonl"
    assert cli("export", demo.path, "--jsonl", "--leaf", demo.jwt_tip, "-o", branch).returncode == 0
    repo = tmp_path / "repo"
    repo.mkdir()
    doc = parse_json(cli("--repo", str(repo), "import", branch, demo.path, "--json"))
    schema("import", doc)
    first, second = doc["imported"]
    assert second["session"]["id"] == "demo"  # the header's id is kept when free
    rows = {m.id: m for m in st.JsonlSessionRepo(repo).list()}
    assert set(rows) == {first["session"]["id"], "demo"}
    assert all(m.error is None for m in rows.values())
    with (
        st.Session(st.JsonlSessionStorage.open(repo / "demo.jsonl", readonly=True)) as a,
        st.Session(st.JsonlSessionStorage.open(demo.path, readonly=True)) as b,
    ):
        assert a.get_tree() == b.get_tree()
        assert a.get_leaf_id() == b.get_leaf_id()
    # Taken: a new id.
    third = parse_json(cli("--repo", str(repo), "import", demo.path, "--json"))
    assert third["imported"][0]["session"]["id"] != "demo"
    clash = cli("--repo", str(repo), "import", demo.path, "--id", "demo")
    assert clash.returncode == 2 and "exists" in clash.stderr
    assert cli("import", demo.path).returncode == 2  # no repository


def test_completion_scripts(cli: Runner) -> None:
    bash = cli("completion", "bash")
    assert (
        bash.returncode == 0 and "complete -o filenames -F _sessiontree sessiontree" in bash.stdout
    )
    assert "--around" in bash.stdout and "repair" in bash.stdout
    assert "#compdef sessiontree" in cli("completion", "zsh").stdout
    assert "complete -c sessiontree" in cli("completion", "fish").stdout


def test_schema_command(cli: Runner) -> None:
    for name in ("ls", "tree", "show", "stats", "check", "repair", "fork", "export", "import"):
        doc = parse_json(cli("schema", name))
        assert doc["$schema"].startswith("https://json-schema.org/")
        assert doc["title"].startswith("sessiontree")


def test_errors_carry_the_session_error_code(cli: Runner, tmp_path: Path) -> None:
    missing = cli("tree", tmp_path / "none.jsonl")
    assert missing.returncode == 2
    assert missing.stderr.startswith("sessiontree: not_found: ") and missing.stderr.count("\n") == 1
    folder = cli("tree", tmp_path)
    assert folder.returncode == 2 and "is a directory" in folder.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"session","version":99,"id":"x","timestamp":"t","cwd":"/"}\n')
    refused = cli("show", bad)
    assert refused.returncode == 2 and refused.stderr.startswith("sessiontree: corrupt: ")


def test_reading_commands_change_nothing(cli: Runner, demo: Demo, tmp_path: Path) -> None:
    from .clihelp import snapshot_of

    before = snapshot_of(demo.dir)
    for args in (
        ("tree", demo.path),
        ("tree", demo.path, "--json"),
        ("show", demo.path),
        ("show", demo.path, demo.jwt_tip, "--branch"),
        ("stats", demo.path),
        ("check", demo.path),
        ("export", demo.path, "--markdown"),
        ("export", demo.path, "--html", "-o", tmp_path / "x.html"),
    ):
        assert cli(*args).returncode == 0, args
    assert snapshot_of(demo.dir) == before
    assert os.stat(demo.path).st_mode & 0o777 == 0o600


def test_convert_both_ways(cli: Runner, tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    from .clihelp import PI_FIXTURES

    source = tmp_path / "a.jsonl"
    source.write_bytes((PI_FIXTURES / "g-v2.jsonl").read_bytes())
    before = source.read_bytes()
    doc = parse_json(cli("convert", source, "--to", "pi", "--json"))
    schema("convert", doc)
    assert doc["source"] == {"path": str(source), "dialect": "pi", "version": 2}
    v3 = Path(doc["output"]["path"])
    assert v3.name == "a.pi.jsonl" and doc["output"]["version"] == 3
    assert source.read_bytes() == before
    ours = tmp_path / "ours.jsonl"
    proc = cli("convert", v3, "--to", "sessiontree", "-o", ours)
    assert proc.returncode == 0 and "the original is unchanged" in proc.stdout
    with (
        st.JsonlSessionStorage.open(source, readonly=True) as a,
        st.JsonlSessionStorage.open(ours, readonly=True) as b,
    ):
        assert b.dialect == "sessiontree" and a.get_entries() == b.get_entries()
    again = cli("convert", v3, "--to", "sessiontree", "-o", ours)
    assert again.returncode == 2 and "exists" in again.stderr
