"""The stub of the async classes (``sessiontree/aio/__init__.pyi``) is current and says
what the sync API says, so type checkers see the real async API."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sessiontree as st
from sessiontree.aio import _stubgen

ROOT = Path(__file__).resolve().parents[2]


def test_the_stub_on_disk_is_the_generated_one() -> None:
    on_disk = _stubgen.STUB_PATH.read_text()
    assert on_disk == _stubgen.stub_text(), (
        "sessiontree/aio/__init__.pyi is stale: run `.venv/bin/python -m sessiontree.aio._stubgen`"
    )


def _stub_methods(class_name: str) -> dict[str, ast.AsyncFunctionDef | ast.FunctionDef]:
    tree = ast.parse(_stubgen.STUB_PATH.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {
                n.name: n
                for n in node.body
                if isinstance(n, (ast.AsyncFunctionDef, ast.FunctionDef))
            }
    raise AssertionError(f"no class {class_name} in the stub")


def _params(fn: ast.AsyncFunctionDef | ast.FunctionDef) -> list[tuple[str, str | None, bool]]:
    a = fn.args
    out = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        ann = None if arg.annotation is None else ast.unparse(arg.annotation)
        out.append((arg.arg, ann, default is not None))
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        ann = None if arg.annotation is None else ast.unparse(arg.annotation)
        out.append(("*" + arg.arg, ann, kw_default is not None))
    return out


def _sync_params(fn: object) -> list[tuple[str, str | None, bool]]:
    out = []
    for p in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
        ann = None if p.annotation is p.empty else str(p.annotation)
        name = "*" + p.name if p.kind is p.KEYWORD_ONLY else p.name
        out.append((name, ann, p.default is not p.empty))
    return out


@pytest.mark.parametrize(
    ("class_name", "sync_cls"), [("AsyncSession", st.Session), ("AsyncSessionRepo", st.SessionRepo)]
)
def test_every_sync_method_is_an_async_method_of_the_stub(class_name: str, sync_cls: type) -> None:
    stub = _stub_methods(class_name)
    public = [n for n, v in vars(sync_cls).items() if not n.startswith("_") and callable(v)]
    assert public
    for name in public:
        fn = stub.get(name)
        assert isinstance(fn, ast.AsyncFunctionDef), f"{class_name}.{name} is not async"
        sync = getattr(sync_cls, name)
        assert _params(fn) == _sync_params(sync), name
        returns = ast.unparse(fn.returns) if fn.returns else None
        want = inspect.signature(sync).return_annotation
        assert returns == ("AsyncSession" if want == "Session" else want), name
        assert ast.get_docstring(fn) == inspect.cleandoc(sync.__doc__ or ""), name


USER_CODE = """
import sessiontree as st

async def agent(repo: st.AsyncSessionRepo) -> str:
    session = await repo.create(cwd="/w", name="x")
    async with session:
        entry_id: str = await session.append_message(st.UserMessage("hi"))
        leaf: str | None = await session.get_leaf_id()
        context: st.SessionContext = await session.build_context()
        branch: list[st.SessionTreeEntry] = await session.get_branch(leaf)
        moved: str | None = await session.move_to(entry_id, {"summary": "s"})
        rows: list[st.SessionMetadata] = await repo.list(limit=3)
        fork: st.AsyncSession = await repo.fork(rows[0], position="at", entry_id=entry_id)
        sync: st.Session = fork.session
        await fork.close()
        return f"{context}{branch}{moved}{sync}"

async def wrong(session: st.AsyncSession) -> None:
    await session.append_message("not a message")
    count: int = await session.get_leaf_id()
    await session.append_label(target="x", label=None)
    session.get_tree().children
"""


def test_mypy_strict_sees_the_async_api(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    user = tmp_path / "user_code.py"
    user.write_text(textwrap.dedent(USER_CODE))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(user)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    # Only the four lines of `wrong` fail, each for what it does wrong.
    assert lines == [19, 20, 21, 22], proc.stdout
    text = proc.stdout
    assert 'Argument 1 to "append_message" of "AsyncSession" has incompatible type "str"' in text
    assert 'Incompatible types in assignment (expression has type "str | None"' in text
    assert 'Unexpected keyword argument "target"' in text
    assert '"Coroutine[Any, Any, list[TreeNode]]" has no attribute "children"' in text
