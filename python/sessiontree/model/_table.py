"""The model table on the Python side: constructor checks, JSON writing and reading.

Every field of every content block, usage value, message, entry and the header is declared
once, in the engine's model table (``rust/engine/model.rs``, exported as ``_core.MODEL``):
its JSON key and Python attribute, its kind, whether readers require it, whether ``null``
is allowed, how writers write it, what a missing one reads as, and the rule a constructor
holds a user to (:class:`Field`). This module makes, per type, from its row:

- the constructor check (:func:`check`, run by every model class's ``__post_init__``):
  the kind of each value, with the conversions the model promises (lists stored as
  tuples, costs as floats), then the field's rule;
- the writer's registration: the engine's one writer (``rust/py/encode.rs``, behind
  :func:`to_json`) walks the same table over the registered classes: the tag, the fields
  in table order (for an entry the base fields first), defaults left out where the table
  says, unknown fields after;
- the reader (``Spec.read``, reached through :func:`read_tagged`): required keys,
  optional ones at their default, ``null`` where the table allows it, nested objects,
  unknown keys kept aside.

The classes themselves (their annotations, read by type checkers and ``dataclasses``) are
written in ``messages.py`` and ``entries.py``, which register them here;
``tests/model/test_model_table.py`` holds them to the table. A user subclass of a model
class is checked, written and read as the class it derives from.
"""

from __future__ import annotations

import dataclasses
import sys
from contextvars import ContextVar
from typing import TYPE_CHECKING

from .. import _core
from ..errors import SessionError

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Final

__all__ = ["Field", "Spec", "check", "read_tagged", "reading", "register", "spec_of", "to_json"]

_READING: Final[ContextVar[bool]] = ContextVar("sessiontree_reading", default=False)
_MAX_FLOAT: Final = sys.float_info.max
_MAX_ID_BYTES: Final = _core.MAX_ID_BYTES
_CONTAINERS: Final = (dict, list, tuple)


class reading:
    """Construct values read from a file: only kinds are checked, not the rules a user
    is held to (a file written by an earlier version may break them, and it loads).

    A class rather than ``contextlib.contextmanager``: ``import sessiontree`` does not
    load ``contextlib`` (nor ``functools`` under it)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _READING.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _READING.reset(self._token)


def _name(obj: object) -> str:
    return type(obj).__name__


def invalid(obj: object, name: str, expected: str, value: object) -> SessionError:
    """``invalid_argument``: ``<Class>.<name> must be <expected>, got <type>``."""
    return SessionError(
        "invalid_argument", f"{_name(obj)}.{name} must be {expected}, got {_name(value)}"
    )


def corrupt(message: str) -> SessionError:
    """``corrupt`` with ``message``."""
    return SessionError("corrupt", message)


REPR_LIMIT: Final = 60
"""About how many characters of a value reprs and error messages show."""


def short_repr(value: object, limit: int = REPR_LIMIT) -> str:
    """``repr`` of ``value`` cut to about ``limit`` characters (a str is cut before its
    repr, so its quotes stay balanced)."""
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[: limit - 1] + "…")
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- the registry

# The table's entry base: its fields come first in every entry type.
_ENTRY_BASE: Final = "SessionTreeEntry"
_CLASSES: dict[str, type] = {}
_UNKNOWN: dict[str, type] = {}
_BY_TAG: dict[tuple[str, object], type] = {}
_UNKNOWN_CLASSES: tuple[type, ...] = ()
_SPECS: dict[type, Spec | None] = {}
_ROWS: Final = {row[0]: row for row in _core.MODEL}


def register(*classes: type, unknown: dict[str, type] | None = None) -> None:
    """Make ``classes`` (named as in the table) the model's; ``unknown`` maps a tag key
    (``"role"``, ``"type"``) to the class that holds values of a tag the table lacks."""
    for cls in classes:
        if cls.__name__ not in _ROWS:
            raise TypeError(f"{cls.__name__} is not in the model table")
        _CLASSES[cls.__name__] = cls
        row = _ROWS[cls.__name__]
        if row[1] is not None:
            _BY_TAG[row[1], row[2]] = cls
        if "__post_init__" not in cls.__dict__:
            cls.__post_init__ = _first_check(cls)  # type: ignore[attr-defined]
        # The frozen ``__setattr__``/``__delattr__`` that ``dataclass(slots=True)`` writes
        # fail with a TypeError about ``super()`` for a name that is not a field (they
        # name the class as it was before ``slots=True`` made it again); the model's
        # classes refuse every name with ``FrozenInstanceError``.
    for cls in (*classes, *(unknown or {}).values()):
        type.__setattr__(cls, "__setattr__", _refuse_setattr)
        type.__setattr__(cls, "__delattr__", _refuse_delattr)
    _UNKNOWN.update(unknown or {})
    global _UNKNOWN_CLASSES
    _UNKNOWN_CLASSES = tuple(_UNKNOWN.values())
    _SPECS.clear()
    _core._register_writer(_CLASSES, _UNKNOWN_CLASSES)


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _first_check(cls: type) -> Callable[[Any], None]:
    """A ``__post_init__`` for ``cls`` that makes its check on first use and puts it in
    its own place (no lookup per construction after that)."""

    def __post_init__(self: Any) -> None:
        spec = spec_of(cls)
        assert spec is not None
        fn = spec.check
        type.__setattr__(cls, "__post_init__", fn)
        fn(self)

    return __post_init__


def tagged(tag_key: str) -> tuple[type, ...]:
    """Every registered class tagged by ``tag_key``, its class for unknown tags last."""
    known = [c for c in _CLASSES.values() if _ROWS[c.__name__][1] == tag_key]
    return (*known, *(_UNKNOWN[tag_key],) * (tag_key in _UNKNOWN))


def by_tag(tag_key: str, tag: object) -> type | None:
    """The registered class with ``tag_key`` ``tag`` (``("role", "user")``), or None."""
    return _BY_TAG.get((tag_key, tag))


def _joined(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


class Field:
    """One field of a type, as the table declares it, with what this module made of it."""

    __slots__ = (
        "accepts_none",
        "arg",
        "attr",
        "check",
        "classes",
        "default",
        "expected",
        "key",
        "kind",
        "nullable",
        "omit",
        "read",
        "required",
        "rule",
    )

    def __init__(self, row: tuple[Any, ...]) -> None:
        # The last column, a constructor default of a required field, is the generated
        # class body's (``_gen``): the dataclass default holds it.
        key, attr, kind, required, nullable, omit, arg, default, rule, _ctor_default = row
        self.key: str = key
        self.attr: str = attr
        self.kind: str = kind
        self.required: bool = required
        self.nullable: bool = nullable
        self.omit: bool = omit
        self.arg: Any = arg
        self.rule: str | None = rule
        # A constructor takes None where readers read null as None.
        self.accepts_none: bool = nullable and (required or default == "null")
        self.default: Any = None if default in (None, "{}") else _core.json_loads(default.encode())
        # The classes a value (or item) may be, and how an error names them.
        self.classes: tuple[type, ...] = ()
        if kind in ("blocks", "str_or_blocks"):
            self.classes = tuple(_class_of_tag("type", t) for t in arg)
        elif kind == "nested":
            self.classes = (_CLASSES[arg],)
        elif kind in ("message", "messages"):
            self.classes = tagged("role")
        self.expected = _joined([c.__name__ for c in self.classes]) if self.classes else ""
        if kind in ("message", "messages"):
            self.expected = "messages"
        self.check: Callable[[Any, Field, Any], Any] = _CHECKS[kind]
        self.read: Callable[[Field, Any], Any] | None = _READS.get(kind)

    def __repr__(self) -> str:
        return f"<Field {self.attr} ({self.kind})>"


def _class_of_tag(tag_key: str, tag: str) -> type:
    cls = by_tag(tag_key, tag)
    if cls is None:
        raise TypeError(f"no registered class for {tag_key} {tag!r}")
    return cls


class Spec:
    """One type of the table: its tag, its fields (an entry's base fields first) and
    every JSON key it knows."""

    __slots__ = ("_check", "_read", "cls", "fields", "keys", "tag", "tag_key")

    def __init__(self, cls: type, row: tuple[Any, ...]) -> None:
        _name, tag_key, tag, rows, _params = row
        entry = _CLASSES.get(_ENTRY_BASE)
        is_entry = entry is not None and cls is not entry and issubclass(cls, entry)
        base = _ROWS[_ENTRY_BASE][3] if is_entry else ()
        self.cls = cls
        self.tag_key: str | None = tag_key
        self.tag: str | None = tag
        self.fields: tuple[Field, ...] = tuple(Field(r) for r in (*base, *rows))
        keys = {f.key for f in self.fields}
        if tag_key is not None:
            keys.add(tag_key)
        self.keys: frozenset[str] = frozenset(keys)
        self._check: Callable[[Any], None] | None = None
        self._read: Callable[[dict[str, Any]], Any] | None = None

    @property
    def check(self) -> Callable[[Any], None]:
        """The check of an instance (see :func:`check`), made on first use."""
        if self._check is None:
            self._check = _make_check(self)
        return self._check

    @property
    def read(self) -> Callable[[dict[str, Any]], Any]:
        """The reader of a JSON object, made on first use: an instance of the class (call it under
        :func:`reading`). A missing required key raises ``KeyError`` naming it, for the
        caller's message; a value of the wrong kind is the constructor's to refuse."""
        if self._read is None:
            self._read = _make_read(self)
        return self._read


def spec_of(cls: type) -> Spec | None:
    """The spec of ``cls`` or of the nearest model class it derives from (``UnknownEntry``:
    the entry base); None for a class outside the table."""
    try:
        return _SPECS[cls]
    except KeyError:
        pass
    spec = None
    for base in cls.__mro__:
        if _CLASSES.get(base.__name__) is base:
            spec = Spec(base, _ROWS[base.__name__])
            break
    _SPECS[cls] = spec
    return spec


# --------------------------------------------------------------------------- checks


def check(obj: Any) -> None:
    """Check every field of ``obj`` by its kind and rule (``__post_init__``); a value the
    model stores converted (a list as a tuple, an int cost as a float) is replaced."""
    spec = spec_of(type(obj))
    if spec is None:
        raise TypeError(f"{_name(obj)} is not a class of the model table")
    spec.check(obj)


# --------------------------------------------------------------------------- the check
#
# Each type's check and reader are made from its row on first use: a closure over
# the plan of its fields (what to read, how to check, convert or write each), run by one
# loop per call.


def _make_check(spec: Spec) -> Callable[[Any], None]:
    """The check of every field of ``spec``'s instances: its kind (with the conversions the
    model promises, stored back) then its rule; None passes where the field accepts it."""
    plan = tuple(
        (f.attr, f, f.check, _RULES[f.rule] if f.rule is not None else None, f.accepts_none)
        for f in spec.fields
    )
    store = object.__setattr__

    def check(self: Any) -> None:
        for attr, f, check_kind, rule, accepts_none in plan:
            v = getattr(self, attr)
            if v is None and accepts_none:
                continue
            c = check_kind(self, f, v)
            if c is not v:
                store(self, attr, c)
            if rule is not None:
                rule(self, f, c)

    check.__qualname__ = f"{spec.cls.__qualname__}.check"
    return check


def _opt(f: Field, expected: str) -> str:
    return f"{expected} or None" if f.accepts_none else expected


def _check_str(obj: Any, f: Field, v: Any) -> Any:
    if not isinstance(v, str):
        raise invalid(obj, f.attr, _opt(f, "a str"), v)
    return v


def _check_int(obj: Any, f: Field, v: Any) -> Any:
    if v.__class__ is not int and (isinstance(v, bool) or not isinstance(v, int)):
        raise invalid(obj, f.attr, _opt(f, "an int"), v)
    return v


def _check_number(obj: Any, f: Field, v: Any) -> Any:
    if v.__class__ is float:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(obj, f.attr, _opt(f, "a float"), v)
    try:
        return float(v)
    except OverflowError:
        raise invalid(obj, f.attr, "a float in range", v) from None


def _check_bool(obj: Any, f: Field, v: Any) -> Any:
    if not isinstance(v, bool):
        raise invalid(obj, f.attr, _opt(f, "a bool"), v)
    return v


def _check_any(obj: Any, f: Field, v: Any) -> Any:
    json_keys(obj, f.attr, v)
    return v


def _check_object(obj: Any, f: Field, v: Any) -> Any:
    if not isinstance(v, dict):
        raise invalid(obj, f.attr, _opt(f, "a dict"), v)
    json_keys(obj, f.attr, v)
    return v


def _check_str_list(obj: Any, f: Field, v: Any) -> Any:
    items = tuple(v) if isinstance(v, list) else v
    if not isinstance(items, tuple):
        raise invalid(obj, f.attr, _opt(f, "a list of str"), v)
    for item in items:
        if not isinstance(item, str):
            raise invalid(obj, f"{f.attr} items", "str", item)
    return items


def _check_one_of(obj: Any, f: Field, v: Any) -> Any:
    if v not in f.arg:
        raise SessionError(
            "invalid_argument",
            f"{_name(obj)}.{f.attr} must be one of {', '.join(f.arg)}, got {short_repr(v)}",
        )
    return v


def _items(obj: Any, f: Field, v: Any, expected: str) -> tuple[Any, ...]:
    """``v`` (a list or tuple of ``f.classes``) as a tuple."""
    if isinstance(v, tuple):
        items = v
    elif isinstance(v, list):
        items = tuple(v)
    else:
        raise invalid(obj, f.attr, expected, v)
    classes = f.classes
    for item in items:
        if not isinstance(item, classes):
            raise SessionError(
                "invalid_argument",
                f"{_name(obj)}.{f.attr} items must be {f.expected}, got {_name(item)}",
            )
    return items


def _check_blocks(obj: Any, f: Field, v: Any) -> Any:
    return _items(obj, f, v, f"a list of {f.expected}")


def _check_str_or_blocks(obj: Any, f: Field, v: Any) -> Any:
    if isinstance(v, str):
        return v
    if not isinstance(v, (list, tuple)):
        raise invalid(obj, f.attr, f"a str or a list of {f.expected}", v)
    return _items(obj, f, v, "")


def _check_nested(obj: Any, f: Field, v: Any) -> Any:
    if not isinstance(v, f.classes):
        raise invalid(obj, f.attr, _opt(f, f"a {f.expected}"), v)
    return v


def _check_message(obj: Any, f: Field, v: Any) -> Any:
    if not isinstance(v, f.classes):
        raise invalid(obj, f.attr, "a message", v)
    return v


def _check_messages(obj: Any, f: Field, v: Any) -> Any:
    return _items(obj, f, v, _opt(f, "a list of messages"))


_CHECKS: Final[dict[str, Callable[[Any, Field, Any], Any]]] = {
    "str": _check_str,
    "int": _check_int,
    "timestamp_ms": _check_int,
    "number": _check_number,
    "bool": _check_bool,
    "any": _check_any,
    "object": _check_object,
    "str_list": _check_str_list,
    "one_of": _check_one_of,
    "blocks": _check_blocks,
    "str_or_blocks": _check_str_or_blocks,
    "nested": _check_nested,
    "message": _check_message,
    "messages": _check_messages,
}


def _rule_not_empty(obj: Any, f: Field, v: Any) -> None:
    if not v and not _READING.get():
        raise SessionError("invalid_argument", f"{_name(obj)}.{f.attr} must not be empty")


def _rule_non_negative(obj: Any, f: Field, v: Any) -> None:
    if v.__class__ is float:
        # Also refuses NaN and infinities, which JSON cannot carry.
        if not 0.0 <= v <= _MAX_FLOAT and not _READING.get():
            raise SessionError(
                "invalid_argument",
                f"{_name(obj)}.{f.attr} must be a finite number >= 0, got {v!r}",
            )
    elif v < 0 and not _READING.get():
        raise SessionError(
            "invalid_argument", f"{_name(obj)}.{f.attr} must not be negative, got {v}"
        )


def _rule_image_mime(obj: Any, f: Field, v: Any) -> None:
    if v[:6].lower() != "image/" and not _READING.get():
        raise SessionError(
            "invalid_argument",
            f"{_name(obj)}.{f.attr} must be an image type (image/...), got {short_repr(v)}",
        )


def _rule_id(obj: Any, f: Field, v: Any) -> None:
    # Readers hold files to this rule as well (the engine's line reader does).
    if not v:
        raise invalid(obj, f.attr, "a non-empty str", v)
    # Four UTF-8 bytes per character at most, so short ids skip the encode.
    if len(v) > _MAX_ID_BYTES // 4 and len(v.encode("utf-8", "surrogatepass")) > _MAX_ID_BYTES:
        raise SessionError(
            "limit_exceeded", f"{_name(obj)}.{f.attr} is longer than {_MAX_ID_BYTES} UTF-8 bytes"
        )


_RULES: Final[dict[str, Callable[[Any, Field, Any], None]]] = {
    "not_empty": _rule_not_empty,
    "non_negative": _rule_non_negative,
    "image_mime": _rule_image_mime,
    "id": _rule_id,
}


def json_keys(obj: object, name: str, value: object) -> None:
    """Refuse a dict key that is not a str, at any depth.

    ``json`` writes ``{1: "x"}`` as ``{"1": "x"}`` (and ``True`` as ``"true"``), so the value
    would silently read back different; a tuple key fails only at the append. Only the
    containers are walked (iteratively, each once, so shared or circular data ends), and
    only for values a user constructs: keys read from JSON are always strings.
    """
    if value.__class__ is dict:
        # The common case, a flat dict of str keys, without the walk's allocations.
        for k, item in value.items():
            if k.__class__ is not str or isinstance(item, _CONTAINERS):
                break
        else:
            return
    elif not isinstance(value, _CONTAINERS):
        return
    if _READING.get():
        return
    stack: list[Any] = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise SessionError(
                        "invalid_argument",
                        f"{_name(obj)}.{name} has a dict key {short_repr(k)} of type "
                        f"{_name(k)}; JSON object keys must be str",
                    )
                if isinstance(item, _CONTAINERS):
                    stack.append(item)
        else:
            stack.extend([item for item in v if isinstance(item, _CONTAINERS)])


# --------------------------------------------------------------------------- writing


def is_default(value: object, default: object) -> bool:
    """Whether ``value`` is ``default``: the same type as well as equal, so ``1`` does not
    pass for a default of ``True``."""
    return value is default or (type(value) is type(default) and value == default)


def to_json(obj: Any) -> dict[str, Any]:
    """The FORMAT.md JSON object of ``obj``, a model value (an unknown message or entry
    gives its ``data``), built by the engine's writer. ``details``, ``data`` and tool
    arguments are included by reference; anything else raises ``invalid_argument``."""
    d: dict[str, Any] = _core.to_dict(obj)
    return d


# --------------------------------------------------------------------------- reading


_MISSING: Final = object()


def _make_read(spec: Spec) -> Callable[[dict[str, Any]], Any]:
    """The reader of a JSON object into ``spec``'s class: required keys (``KeyError``
    names a missing one), optional ones at the constructor's default (``null`` too where
    the table allows it), nested values read by their kind, unknown keys kept aside."""
    defaults = {f.name: f.default for f in dataclasses.fields(spec.cls)}
    plan = tuple(
        (f.key, f.attr, f.required, f.nullable, f.read, f, defaults.get(f.attr, _MISSING))
        for f in spec.fields
    )
    cls, keys, store = spec.cls, spec.keys, object.__setattr__

    def read(d: dict[str, Any]) -> Any:
        args: dict[str, Any] = {}
        for key, attr, required, nullable, read_kind, f, default in plan:
            if required:
                v = d[key]
            else:
                v = d.get(key, _MISSING)
                if v is _MISSING or (nullable and v is None):
                    if default is not _MISSING and default is not dataclasses.MISSING:
                        args[attr] = default
                    continue
            if read_kind is not None and v is not None:
                v = read_kind(f, v)
            args[attr] = v
        obj = cls(**args)
        if not d.keys() <= keys:
            store(obj, "_extra", {k: x for k, x in d.items() if k not in keys})
        return obj

    read.__qualname__ = f"{spec.cls.__qualname__}.read"
    return read


def read_tagged(tag_key: str, d: Any, what: str) -> Any:
    """The value of the JSON object ``d`` by its ``tag_key`` (under :func:`reading`):
    ``corrupt`` if it is not an object or its tag names no class of ``tag_key``'s (unless
    an unknown class holds such values, which the caller builds: None is returned)."""
    if not isinstance(d, dict):
        raise corrupt(f"{what} must be an object, got {_name(d)}")
    tag = d.get(tag_key)
    cls = _BY_TAG.get((tag_key, tag)) if tag.__class__ is str else None
    if cls is None:
        return None
    spec = _SPECS.get(cls) or spec_of(cls)
    assert spec is not None
    try:
        return spec.read(d)
    except KeyError as exc:
        raise corrupt(f"{tag} {what} is missing field {exc.args[0]!r}") from None


def _read_block(d: Any) -> Any:
    block = read_tagged("type", d, "content block")
    if block is None:
        raise corrupt(f"unknown content block type {short_repr(d.get('type'))}")
    return block


def _read_blocks(f: Field, v: Any) -> Any:
    # Anything but a list is returned for the constructor to refuse.
    return tuple([_read_block(b) for b in v]) if isinstance(v, list) else v


def _read_str_or_blocks(f: Field, v: Any) -> Any:
    return v if isinstance(v, str) else _read_blocks(f, v)


def _read_nested(f: Field, v: Any) -> Any:
    if not isinstance(v, dict):
        raise corrupt(f"{f.key} must be an object, got {_name(v)}")
    spec = spec_of(f.classes[0])
    assert spec is not None
    try:
        return spec.read(v)
    except KeyError as exc:
        raise corrupt(f"{f.key} is missing field {exc.args[0]!r}") from None


_message_reader: Callable[[Any], Any] | None = None


def set_message_reader(read: Callable[[Any], Any]) -> None:
    """How a ``message`` value is read (``messages.message_from_dict``)."""
    global _message_reader
    _message_reader = read


def _read_message(f: Field, v: Any) -> Any:
    assert _message_reader is not None
    return _message_reader(v)


def _read_messages(f: Field, v: Any) -> Any:
    assert _message_reader is not None
    return tuple([_message_reader(m) for m in v]) if isinstance(v, list) else v


_READS: Final[dict[str, Callable[[Field, Any], Any]]] = {
    "blocks": _read_blocks,
    "str_or_blocks": _read_str_or_blocks,
    "nested": _read_nested,
    "message": _read_message,
    "messages": _read_messages,
}
