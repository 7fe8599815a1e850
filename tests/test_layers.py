"""Dependencies run one way (issue 26): no import circles between the package's modules,
nor between the engine's Rust modules.

Python: every import a module runs (at the top or inside a function; not the ones under
``if TYPE_CHECKING:``, which only type checkers follow) is an edge to the module it names;
a package's ``__init__`` importing its own modules is the package, not a circle.
Rust: every ``use crate::engine::x`` / ``super::x`` / ``crate::py::x`` in a file is an edge
to that module (the crate's ``mod.rs`` files and tests excepted). The graphs must have no
cycle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "sessiontree"
RUST = ROOT / "rust"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run, skipping ``if TYPE_CHECKING:`` blocks."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _python_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" for a in node.names] + [target]
            for t in targets:
                # The deepest module of the package that the name reaches.
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if not t or t == name:
                    continue
                # A package's __init__ importing its own modules is the package itself.
                if is_pkg and t.startswith(name + "."):
                    continue
                # A module reaching its own package's __init__ for a name: not an edge
                # unless that name is the package's own (then it is, see _cycles).
                if name.startswith(t + ".") and t != "sessiontree":
                    continue
                graph[name].add(t)
    return graph


def _rust_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    files = [p for p in RUST.rglob("*.rs") if p.name not in ("mod.rs", "lib.rs", "tests.rs")]
    names = {f"{p.parent.name}::{p.stem}": p for p in files}
    use = re.compile(r"(?:crate::(engine|py)|super)::(?:\{)?([a-z_]+)")
    for name, path in names.items():
        part = name.split("::")[0]
        text = path.read_text(encoding="utf-8")
        # Tests inside a file may reach anywhere.
        text = text.split("#[cfg(test)]")[0]
        deps = set()
        for m in use.finditer(text):
            target = f"{m.group(1) or part}::{m.group(2)}"
            if target in names and target != name:
                deps.add(target)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_python_modules_import_one_way() -> None:
    assert _cycles(_python_graph()) == []


# The line parser's modules still reach each other (the hand-written scanner and serde's
# captures share types both ways); replacing them with one reader on serde's raw values is
# the open part of issue 26 (item 3). No other circle may appear, nor this one grow.
def test_rust_modules_use_one_way() -> None:
    assert _cycles(_rust_graph()) == []


def test_the_checks_see_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
