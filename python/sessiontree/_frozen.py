"""``frozen``: frozen, slotted dataclasses made without importing ``dataclasses``.

``dataclasses.dataclass(frozen=True, slots=True)`` writes the source of ``__init__``,
``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` and ``__delattr__`` for every class
and compiles it at import, and importing ``dataclasses`` itself imports ``inspect`` (with
``ast``, ``dis`` and ``tokenize``): for the package's thirty-odd value classes that was
most of ``import sessiontree``. ``frozen`` makes the same classes — ``dataclasses.fields``,
``replace``, ``asdict``, ``is_dataclass``, user ``@dataclass`` subclasses,
``__match_args__``, keyword and positional construction, ``__post_init__``, value equality
and hashing, immutability, pickling — but collects the fields and makes the slotted class
itself (as ``dataclasses`` does: fields in MRO order, a class's own annotations after its
bases'), and writes each method the first time the class uses it. A program that never
compares two ``LabelEntry`` objects never compiles ``LabelEntry.__eq__``.

What ``dataclasses`` keeps on a class (``__dataclass_fields__``, ``__dataclass_params__``)
is made on first look, by running ``dataclasses.dataclass`` on a plain copy of the class's
fields: only a program that calls ``dataclasses`` functions on the model imports it.

The generated code is what ``dataclasses`` generates, with one difference that only makes
it faster: fields are set through their slot descriptors (as ``object.__setattr__`` would
find them) rather than by name.
"""

from __future__ import annotations

import sys

from ._typing import cast, overload

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    if sys.version_info >= (3, 11):
        from typing import dataclass_transform
    else:
        from typing_extensions import dataclass_transform

    _T = TypeVar("_T", bound=type)
    _V = TypeVar("_V")
else:
    # A marker for type checkers only.
    def dataclass_transform(**_: object) -> object:
        return lambda fn: fn


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""No default (``dataclasses.MISSING``'s role for :func:`field`)."""


class Field:
    """One field of a :func:`frozen` class, as ``dataclasses.Field`` describes it."""

    __slots__ = (
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kw_only",
        "name",
        "repr",
        "type",
    )

    def __init__(
        self,
        default: Any = MISSING,
        default_factory: Any = MISSING,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        kw_only: bool | None = None,
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.kw_only = kw_only

    def _named(self, name: str, type: Any, kw_only: bool) -> Field:
        """A copy of these options for field ``name`` of a class (``kw_only``: the class's
        default, where the field does not say)."""
        f = object.__new__(Field)
        for slot in Field.__slots__:
            object.__setattr__(f, slot, getattr(self, slot))
        f.name, f.type = name, type
        if f.kw_only is None:
            f.kw_only = kw_only
        return f

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, kw_only={self.kw_only})"


def field(
    *,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    kw_only: bool | None = None,
) -> Any:
    """A field's options, as ``dataclasses.field`` takes them (for :func:`frozen` classes)."""
    return Field(default, default_factory, init, repr, hash, compare, kw_only)


def _spec_of(value: Any) -> Field:
    """A class attribute given as a field's default: a :class:`Field`, a
    ``dataclasses.Field`` (as a user subclass may write), or a plain default."""
    if isinstance(value, Field):
        return value
    dc = sys.modules.get("dataclasses")
    if dc is not None and isinstance(value, dc.Field):

        def own(v: Any) -> Any:
            return MISSING if v is dc.MISSING else v

        kw = None if value.kw_only is dc.MISSING else value.kw_only
        return Field(
            own(value.default),
            own(value.default_factory),
            value.init,
            value.repr,
            value.hash,
            value.compare,
            kw,
        )
    if isinstance(value, (list, dict, set)):
        raise ValueError(f"mutable default {type(value)} is not allowed: use default_factory")
    return Field(default=value)


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return getattr(annotation, "__origin__", None) is getattr(
        sys.modules.get("typing"), "ClassVar", ()
    )


def fields(class_or_instance: Any) -> tuple[Field, ...]:
    """The fields of a :func:`frozen` class (or instance), bases' first."""
    cls = class_or_instance if isinstance(class_or_instance, type) else type(class_or_instance)
    try:
        return cast("tuple[Field, ...]", getattr(cls, "__st_fields__"))  # noqa: B009
    except AttributeError:
        raise TypeError(f"{cls.__name__} is not a frozen class") from None


# Assignment to any attribute raises ``FrozenInstanceError`` naming it. Construction and
# unpickling set slots through their descriptors and are unaffected. ``dataclasses`` is
# imported for the error class only when one is raised.


def _frozen_error(message: str) -> Exception:
    import dataclasses

    return dataclasses.FrozenInstanceError(message)


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise _frozen_error(f"{type(self).__name__} is immutable: cannot set {name!r}")


def _refuse_delattr(self: object, name: str) -> None:
    raise _frozen_error(f"{type(self).__name__} is immutable: cannot delete {name!r}")


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


def _inline_check(cls: type) -> tuple[list[str], dict[str, Any]] | None:
    """The statements ``cls``'s own ``__post_init__`` offers to run inside ``__init__``.

    A ``__post_init__`` with an ``__st_inline__`` attribute says that it only checks (and
    may convert) the fields: ``__st_inline__()`` returns source lines that do the same to
    ``__init__``'s parameters — local names spelled as the fields, which the lines may
    rebind — before they are set, with the names those lines use; or None. Run there, the
    check needs no call and no attribute reads.
    """
    offer = getattr(cls.__dict__.get("__post_init__"), "__st_inline__", None)
    return None if offer is None else cast("tuple[list[str], dict[str, Any]] | None", offer())


def _make_init(cls: type) -> Any:
    env: dict[str, Any] = {"_FACTORY": _HAS_FACTORY, "_cls": cls}
    positional: list[str] = []
    keyword: list[str] = []
    resolve: list[str] = []
    body: list[str] = []
    for f in fields(cls):
        setter = f"_set_{f.name}"
        env[setter] = _slot(cls, f.name).__set__
        has_default = f.default is not MISSING
        has_factory = f.default_factory is not MISSING
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
            resolve += [f"if {f.name} is _FACTORY:", f"    {f.name} = _factory_{f.name}()"]
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"{setter}(self, {f.name})")
    inline = _inline_check(cls) if hasattr(cls, "__post_init__") else None
    if inline is not None:
        check, names = inline
        env.update(names)
        body = [*resolve, *check, *body]
        # A subclass that did not make its own ``__init__`` may have its own hook.
        body += ["if self.__class__ is not _cls:", "    self.__post_init__()"]
    else:
        body = [*resolve, *body]
        if hasattr(cls, "__post_init__"):
            body.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    fn = _compile(cls, "__init__", params, body or ["pass"], env)
    # The field annotations, as `dataclasses` gives its `__init__` (for `inspect.signature`).
    fn.__annotations__ = {f.name: f.type for f in fields(cls) if f.init} | {"return": None}
    return fn


def _compared(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if f.compare]


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
    names = [f.name for f in fields(cls) if (f.compare if f.hash is None else f.hash)]
    return _compile(
        cls, "__hash__", "self", [f"return hash(({''.join(f'self.{n},' for n in names)}))"], {}
    )


def _make_repr(cls: type) -> Any:
    parts = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields(cls) if f.repr)
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

    @property
    def __signature__(self) -> Any:
        # What `inspect.signature` (and so `help()` and IDEs) reads of a callable that is
        # not a function: the signature of the method, written now.
        import inspect

        return inspect.signature(self._write())

    def __repr__(self) -> str:
        return f"<{self.owner.__qualname__}.{self.name}, written on first use>"


class _DataclassInfo:
    """``__dataclass_fields__`` or ``__dataclass_params__`` of ``owner``, made on first look.

    ``dataclasses.dataclass`` is run on a plain class holding ``owner``'s fields (bases'
    included, no bases of its own), so what ``dataclasses`` functions see is exactly what
    it makes; both attributes then replace their descriptors on ``owner``.
    """

    __slots__ = ("name", "owner")

    def __init__(self, owner: type, name: str) -> None:
        self.owner = owner
        self.name = name

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        import dataclasses

        owner = self.owner
        ns: dict[str, Any] = {
            "__module__": owner.__module__,
            "__qualname__": owner.__qualname__,
            "__annotations__": {f.name: f.type for f in fields(owner)},
        }
        for f in fields(owner):
            given = {
                k: v
                for k, v in (("default", f.default), ("default_factory", f.default_factory))
                if v is not MISSING
            }
            ns[f.name] = dataclasses.field(
                init=f.init,
                repr=f.repr,
                hash=f.hash,
                compare=f.compare,
                kw_only=bool(f.kw_only),
                **given,
            )
        plain = type(owner.__name__, (), ns)
        made: Any = dataclasses.dataclass(plain, frozen=True, repr=getattr(owner, "__st_repr__"))  # noqa: B009
        type.__setattr__(owner, "__dataclass_fields__", made.__dataclass_fields__)
        type.__setattr__(owner, "__dataclass_params__", made.__dataclass_params__)
        return getattr(owner, self.name)


def at_defaults(cls: type[_V]) -> _V:
    """An instance of ``cls`` with every field at its default, made without ``__init__``
    (so without ``__post_init__``: only for classes whose defaults it would accept).

    For module-level constants, which would otherwise write ``__init__`` at import.
    """
    obj = object.__new__(cls)
    for f in fields(cls):
        if f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default")
        _slot(cls, f.name).__set__(obj, value)
    return obj


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    cls = type(self)
    for f, value in zip(fields(self), state, strict=True):
        _slot(cls, f.name).__set__(self, value)


_METHODS = (("__init__", _make_init), ("__eq__", _make_eq), ("__hash__", _make_hash))


def _slots_of(cls: type) -> set[str]:
    slots = cls.__dict__.get("__slots__", ())
    return {slots} if isinstance(slots, str) else set(slots)


def _collect(cls: type, kw_only: bool) -> tuple[Field, ...]:
    """The fields of ``cls`` in ``dataclasses``' order: the bases' (deepest first), then
    the class's own annotations; a field declared again keeps its first place."""
    collected: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        for f in base.__dict__.get("__st_fields__", ()):
            collected[f.name] = f
    # The class's own annotations, read without `inspect` (the point of this module).
    own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    for name, annotation in own.items():
        if _is_classvar(annotation):
            continue
        spec = _spec_of(cls.__dict__.get(name, MISSING))
        collected[name] = spec._named(name, annotation, kw_only)
    out = tuple(collected.values())
    seen_default = False
    for f in out:
        if not f.init or f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return out


def _slotted(cls: type, all_fields: tuple[Field, ...]) -> type:
    """``cls`` made again with a slot per field its bases do not already have (what
    ``dataclass(slots=True)`` does), without the field defaults as class attributes."""
    ns = dict(cls.__dict__)
    inherited = set().union(*(_slots_of(b) for b in cls.__mro__[1:-1]))
    names = [f.name for f in all_fields]
    ns["__slots__"] = tuple(n for n in names if n not in inherited)
    for name in names:
        ns.pop(name, None)
    ns.pop("__dict__", None)
    ns.pop("__weakref__", None)
    made = type(cls)(cls.__name__, cls.__bases__, ns)
    made.__qualname__ = cls.__qualname__
    return made


@overload
def frozen(cls: _T, /) -> _T: ...
@overload
def frozen(*, kw_only: bool = ..., repr: bool = ...) -> Callable[[_T], _T]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def frozen(
    cls: _T | None = None, /, *, kw_only: bool = False, repr: bool = True
) -> _T | Callable[[_T], _T]:
    """``@dataclass(frozen=True, slots=True, kw_only=..., repr=...)``, methods made late.

    ``repr=False`` leaves ``__repr__`` to the class (or its base), as ``dataclass`` does.
    """

    def wrap(cls: _T) -> _T:
        # Methods the class writes itself are kept, as `dataclass` keeps them.
        own = set(cls.__dict__)
        all_fields = _collect(cls, kw_only)
        made: Any = _slotted(cls, all_fields)
        type.__setattr__(made, "__st_fields__", all_fields)
        type.__setattr__(made, "__st_repr__", repr)
        for name in ("__dataclass_fields__", "__dataclass_params__"):
            type.__setattr__(made, name, _DataclassInfo(made, name))
        if "__match_args__" not in own:
            match = tuple(f.name for f in all_fields if f.init and not f.kw_only)
            type.__setattr__(made, "__match_args__", match)
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
        return cast("_T", made)

    return wrap if cls is None else wrap(cls)
