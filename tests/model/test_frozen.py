"""``_frozen.frozen``: frozen slotted dataclasses whose methods are written on first use.

The model classes are built with it, so everything ``dataclass(frozen=True, slots=True)``
gives a user must hold: construction by position and keyword, defaults and factories,
``__post_init__``, equality and hashing by value, immutability, ``dataclasses`` functions,
pickling, ``match``, user subclasses — while importing the package compiles nothing.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from dataclasses import field
from typing import Any, ClassVar

import pytest

import sessiontree as st
from sessiontree._frozen import frozen


@frozen
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)
    note: str = field(default="", compare=False)


@frozen(kw_only=True)
class Stamped:
    when: str
    seq: int = 1


@frozen
class Checked:
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")
        object.__setattr__(self, "n", self.n * 2)


def test_construction_defaults_and_post_init() -> None:
    assert (Point(1).x, Point(1).y, Point(1).tags) == (1, 0, ())
    assert Point(1, 2, ("a",)) == Point(x=1, y=2, tags=("a",))
    assert Point(1).tags is not Point(2).tags or Point(1).tags == ()
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Stamped("now")  # type: ignore[misc]
    assert Stamped(when="now").seq == 1
    assert Checked(3).n == 6
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


def _offer_inline() -> tuple[list[str], dict[str, Any]]:
    # Doubles ``n`` and refuses a negative one, as ``Checked.__post_init__`` does.
    return ["if n < 0:", "    raise _Negative('negative (inline)')", "n = n * 2"], {
        "_Negative": ValueError
    }


@frozen
class Inlined:
    n: int
    factor: int = field(default_factory=lambda: 10)

    def __post_init__(self) -> None:
        raise AssertionError("the inline check replaces this call")

    __post_init__.__st_inline__ = _offer_inline  # type: ignore[attr-defined]


class InlinedChild(Inlined):
    seen: ClassVar[list[int]] = []

    def __post_init__(self) -> None:
        InlinedChild.seen.append(self.n)


def test_a_post_init_that_only_checks_runs_inside_init() -> None:
    # What the model's checks use: ``__init__`` runs the offered lines on its parameters
    # (factories resolved first) instead of calling ``__post_init__``.
    assert (Inlined(3).n, Inlined(3).factor) == (6, 10)
    with pytest.raises(ValueError, match=r"negative \(inline\)"):
        Inlined(-1)
    # A subclass without its own ``__init__`` still gets its own ``__post_init__`` called.
    assert InlinedChild(4).n == 8 and InlinedChild.seen == [8]
    # And the model: a failed check names the field, a converted value is stored converted.
    with pytest.raises(st.SessionError, match=r"UserMessage\.timestamp must be an int"):
        st.UserMessage("x", timestamp="now")  # type: ignore[arg-type]
    assert st.UserMessage([st.TextContent("t")], timestamp=1).content == (st.TextContent("t"),)


def test_value_semantics_and_immutability() -> None:
    a, b = Point(1, 2, note="x"), Point(1, 2, note="y")
    assert a == b and hash(a) == hash(b), "compare=False fields take no part"
    assert a != Point(1, 3) and (a == (1, 2)) is False
    assert len({a, b, Point(5)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot set 'x'"):
        a.x = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot set 'other'"):
        a.other = 5  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete 'x'"):
        del a.x  # type: ignore[misc]
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=(), note='')"


def test_dataclasses_functions_pickle_and_match() -> None:
    p = Point(1, 2, ("t",))
    assert dataclasses.is_dataclass(p)
    assert [f.name for f in dataclasses.fields(p)] == ["x", "y", "tags", "note"]
    assert dataclasses.replace(p, y=9) == Point(1, 9, ("t",))
    assert dataclasses.asdict(p) == {"x": 1, "y": 2, "tags": ("t",), "note": ""}
    assert pickle.loads(pickle.dumps(p)) == p
    assert not hasattr(p, "__dict__")
    match p:
        case Point(x, y):
            assert (x, y) == (1, 2)
        case _:
            pytest.fail("no match")


def test_methods_are_written_on_first_use() -> None:
    @frozen
    class Late:
        a: int

    assert type(Late.__dict__["__eq__"]).__name__ == "_Generated"
    assert Late(1) == Late(1)
    assert type(Late.__dict__["__eq__"]).__name__ == "function"
    assert Late.__eq__.__qualname__.endswith("Late.__eq__")
    assert type(Late.__dict__["__hash__"]).__name__ == "_Generated", "not used yet"


def test_user_subclasses_with_dataclass_work() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged(Point):
        label: str = "t"

    t = Tagged(1, 2, (), "", "z")
    assert t.label == "z" and t.x == 1
    assert dataclasses.fields(Tagged)[-1].name == "label"


def _fresh(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout


def test_importing_the_package_compiles_no_code() -> None:
    # Generated source run through `exec` is what dataclass-made methods cost at import
    # (the import system's own compiles of modules without bytecode are not counted).
    code = (
        "import builtins\n"
        "n = [0]\n"
        "real_exec = builtins.exec\n"
        "def counting_exec(src: object, *a: object, **k: object) -> object:\n"
        "    if isinstance(src, str):\n"
        "        n[0] += 1\n"
        "    return real_exec(src, *a, **k)\n"
        "builtins.exec = counting_exec\n"
        "import sessiontree\n"
        "print(n[0])\n"
    )
    out = _fresh(code)
    assert out.strip() == "0"


@pytest.mark.parametrize(
    "obj",
    [
        st.UserMessage("hi", timestamp=1),
        st.LabelEntry("a", "x", id="b", parent_id="a", timestamp="t"),
        st.Usage(input=1),
    ],
)
def test_model_objects_hash_and_replace(obj: Any) -> None:
    assert hash(obj) == hash(dataclasses.replace(obj))
    assert dataclasses.replace(obj) == obj


def test_importing_the_package_imports_no_dataclasses() -> None:
    # `dataclasses` imports `inspect` (and `ast`, `dis`, `tokenize`): about half of what
    # `import sessiontree` cost. The model's classes make what it would on first look.
    code = (
        "import sys, sessiontree\n"
        "print(sorted(m for m in ('dataclasses', 'inspect', 'ast') if m in sys.modules))\n"
        "sessiontree.UserMessage('hi') == sessiontree.UserMessage('hi')\n"
        "print(sorted(m for m in ('dataclasses', 'inspect', 'ast') if m in sys.modules))\n"
    )
    out = _fresh(code)
    assert out.split("\n")[:2] == ["[]", "[]"]


def _declare(decorate: Any, base_decorate: Any) -> tuple[type, type]:
    """The same two classes (a keyword-only base and a subclass that overrides a base's
    property with a field, has a ClassVar, an init=False field and defaults), made by
    ``decorate``."""

    @base_decorate
    class Base:
        hidden: int | None = field(default=None, init=False, repr=False, compare=False)
        id: str = "x"
        when: int = field(default_factory=lambda: 7)

        @property
        def kind(self) -> str:
            return "base"

    @decorate
    class Sub(Base):
        kind: str = field()  # type: ignore[assignment]
        body: tuple[int, ...]
        LIMIT: ClassVar[int] = 3
        note: str = field(default="", compare=False)

    return Base, Sub


def test_classes_are_what_dataclass_makes() -> None:
    import inspect

    ours = _declare(frozen, frozen(kw_only=True))
    theirs = _declare(
        dataclasses.dataclass(frozen=True, slots=True),
        dataclasses.dataclass(frozen=True, slots=True, kw_only=True),
    )
    for mine, ref in zip(ours, theirs, strict=True):

        def shape(f: Any) -> tuple[Any, ...]:
            return (f.name, f.init, f.repr, f.compare, f.kw_only, f.default)

        assert [shape(f) for f in dataclasses.fields(mine)] == [
            shape(f) for f in dataclasses.fields(ref)
        ]
        assert mine.__match_args__ == ref.__match_args__  # type: ignore[attr-defined]
        assert mine.__slots__ == ref.__slots__  # type: ignore[attr-defined]
        assert str(inspect.signature(mine)) == str(inspect.signature(ref))
        assert mine.__dataclass_params__.frozen  # type: ignore[attr-defined]
    sub_ours, sub_ref = ours[1](kind="k", body=(1,), id="i"), theirs[1]("k", (1,), id="i")
    assert repr(sub_ours).split("(", 1)[1] == repr(sub_ref).split("(", 1)[1]
    assert (sub_ours.when, sub_ours.hidden, sub_ours.LIMIT) == (7, None, 3)
    with pytest.raises(TypeError, match="non-default argument"):

        @frozen
        class Wrong:
            a: int = 0
            b: int

    with pytest.raises(ValueError, match="mutable default"):

        @frozen
        class Mutable:
            a: list[int] = []  # noqa: RUF012


def test_signatures_of_model_classes_before_first_use() -> None:
    import inspect

    code = "import inspect, sessiontree as st; print(inspect.signature(st.LabelEntry))"
    out = _fresh(code)
    assert out.strip() == str(inspect.signature(st.LabelEntry))
    assert out.startswith("(target_id: 'str', label: 'str | None', *, id: 'str'")
