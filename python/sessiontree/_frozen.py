"""``frozen``: frozen, slotted dataclasses whose methods are generated when first used.

``dataclasses.dataclass(frozen=True, slots=True)`` writes the source of ``__init__``,
``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` and ``__delattr__`` for every class
and compiles it at import: for the package's thirty-odd value classes that was most of
``import sessiontree``. ``frozen`` makes the same classes — ``dataclasses.fields``,
``replace``, ``asdict``, ``__match_args__``, keyword and positional construction,
``__post_init__``, value equality and hashing, immutability, pickling — but lets
``dataclasses`` do only what costs nothing (the fields and the slotted class) and writes
each generated method the first time the class uses it. A program that never compares two
``LabelEntry`` objects never compiles ``LabelEntry.__eq__``.

The generated code is what ``dataclasses`` generates, with one difference that only makes
it faster: fields are set through their slot descriptors (as ``object.__setattr__`` would
find them) rather than by name.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
elif TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # 3.10 at run time: the marker is for type checkers only

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda fn: fn


__all__ = ["at_defaults", "frozen"]

_T = TypeVar("_T", bound=type)
_V = TypeVar("_V")


# Assignment to any attribute raises ``FrozenInstanceError`` naming it. (The
# ``__setattr__`` that ``dataclass(frozen=True, slots=True)`` generates raises a confusing
# ``TypeError`` for names that are not fields, because it refers to the class from before
# ``slots`` rebuilt it: a CPython bug, still present in 3.13.) Construction and unpickling
# set slots through their descriptors and are unaffected.


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(
        f"{type(self).__name__} is immutable: cannot set {name!r}"
    )


def _refuse_delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(
        f"{type(self).__name__} is immutable: cannot delete {name!r}"
    )


def _slot(cls: type, name: str) -> Any:
    return next(base.__dict__[name] for base in cls.__mro__ if name in base.__dict__)


def _compile(cls: type, name: str, params: str, body: list[str], env: dict[str, Any]) -> Any:
    src = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body)
    namespace: dict[str, Any] = {}
    exec(src, env, namespace)
    fn = namespace[name]
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__
    return fn


def _make_init(cls: type) -> Any:
    fields = [f for f in dataclasses.fields(cls)]
    env: dict[str, Any] = {"_FACTORY": _HAS_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        setter = f"_set_{f.name}"
        env[setter] = _slot(cls, f.name).__set__
        has_default = f.default is not dataclasses.MISSING
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            env[f"_factory_{f.name}"] = f.default_factory
        if not f.init:
            if has_default:
                env[f"_default_{f.name}"] = f.default
                body.append(f"{setter}(self, _default_{f.name})")
            elif has_factory:
                body.append(f"{setter}(self, _factory_{f.name}())")
            continue
        if has_default:
            env[f"_default_{f.name}"] = f.default
            param = f"{f.name}=_default_{f.name}"
        elif has_factory:
            param = f"{f.name}=_FACTORY"
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        if has_factory:
            value = f"_factory_{f.name}() if {f.name} is _FACTORY else {f.name}"
        else:
            value = f.name
        body.append(f"{setter}(self, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    return _compile(cls, "__init__", params, body or ["pass"], env)


def _compared(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.compare]


def _make_eq(cls: type) -> Any:
    names = _compared(cls)
    mine = "".join(f"self.{n}," for n in names)
    theirs = "".join(f"other.{n}," for n in names)
    body = [
        "if other.__class__ is self.__class__:",
        f"    return ({mine}) == ({theirs})",
        "return NotImplemented",
    ]
    return _compile(cls, "__eq__", "self, other", body, {})


def _make_hash(cls: type) -> Any:
    names = [f.name for f in dataclasses.fields(cls) if (f.compare if f.hash is None else f.hash)]
    return _compile(
        cls, "__hash__", "self", [f"return hash(({''.join(f'self.{n},' for n in names)}))"], {}
    )


def _make_repr(cls: type) -> Any:
    parts = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in dataclasses.fields(cls) if f.repr)
    body = [f'return f"{{self.__class__.__qualname__}}({parts})"']
    return _compile(cls, "__repr__", "self", body, {})


class _HasFactory:
    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _HasFactory()


class _Generated:
    """A method of ``owner`` written on first use, then stored on ``owner`` itself.

    Looked up on an instance (as Python looks up ``__init__``, ``__eq__``, ``__hash__``
    and ``__repr__`` to call them) it writes the method and returns it bound; looked up on
    the class it stays itself (``dataclass`` reads ``__hash__`` of default values' classes)
    and writes the method when called.
    """

    __slots__ = ("make", "name", "owner")

    def __init__(self, owner: type, name: str, make: Callable[[type], Any]) -> None:
        self.owner = owner
        self.name = name
        self.make = make

    def _write(self) -> Any:
        fn = self.make(self.owner)
        type.__setattr__(self.owner, self.name, fn)
        return fn

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return self._write().__get__(obj, objtype)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._write()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.owner.__qualname__}.{self.name}, written on first use>"


def at_defaults(cls: type[_V]) -> _V:
    """An instance of ``cls`` with every field at its default, made without ``__init__``
    (so without ``__post_init__``: only for classes whose defaults it would accept).

    For module-level constants, which would otherwise write ``__init__`` at import.
    """
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default")
        _slot(cls, f.name).__set__(obj, value)
    return obj


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    cls = type(self)
    for f, value in zip(dataclasses.fields(self), state, strict=True):
        _slot(cls, f.name).__set__(self, value)


_METHODS = (("__init__", _make_init), ("__eq__", _make_eq), ("__hash__", _make_hash))


_METHODS = (("__init__", _make_init), ("__eq__", _make_eq), ("__hash__", _make_hash))


@overload
def frozen(cls: _T, /) -> _T: ...
@overload
def frozen(*, kw_only: bool = ..., repr: bool = ...) -> Callable[[_T], _T]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(
    cls: _T | None = None, /, *, kw_only: bool = False, repr: bool = True
) -> _T | Callable[[_T], _T]:
    """``@dataclass(frozen=True, slots=True, kw_only=..., repr=...)``, methods made late.

    ``repr=False`` leaves ``__repr__`` to the class (or its base), as ``dataclass`` does.
    """

    def wrap(cls: _T) -> _T:
        # Methods the class writes itself are kept, as `dataclass` keeps them.
        own = set(cls.__dict__)
        # `dataclass` makes only the fields and the slotted class here (frozen=False: it
        # would compile __setattr__ and __delattr__); the classes say frozen=True after,
        # so a user's `@dataclass(frozen=True)` subclass is accepted. While it processes
        # this class, the frozen bases say False (imports run one at a time).
        bases = [
            b.__dict__["__dataclass_params__"]
            for b in cls.__mro__[1:]
            if getattr(b.__dict__.get("__dataclass_params__"), "frozen", False)
        ]
        for p in bases:
            p.frozen = False
        try:
            made: Any = dataclasses.dataclass(
                cls, init=False, repr=False, eq=False, slots=True, kw_only=kw_only
            )
        finally:
            for p in bases:
                p.frozen = True
        params = made.__dataclass_params__
        params.eq = params.init = params.frozen = True
        params.repr = repr
        methods = [*_METHODS, *([("__repr__", _make_repr)] if repr else [])]
        for name, make in methods:
            if name not in own:
                type.__setattr__(made, name, _Generated(made, name, make))
        for name, fn in (
            ("__getstate__", _getstate),
            ("__setstate__", _setstate),
            ("__setattr__", _refuse_setattr),
            ("__delattr__", _refuse_delattr),
        ):
            if name not in own:
                type.__setattr__(made, name, fn)
        return cast(_T, made)

    return wrap if cls is None else wrap(cls)
