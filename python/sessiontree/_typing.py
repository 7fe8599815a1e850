"""What the package needs of ``typing`` at run time, without importing it.

``import typing`` (with the ``re``, ``enum`` and ``warnings`` it brings) was about a sixth
of ``import sessiontree``. The package's modules import ``typing`` names for type checkers
only (``if TYPE_CHECKING:``, with ``TYPE_CHECKING = False`` defined in the module, which
type checkers read as true); the few that run are here: :func:`cast` and :func:`overload`
as type checkers see them and as plain functions at run time, and :func:`literal_aliases`,
which makes a module's public ``Literal`` aliases on first use.

The abstract collections a module needs at run time (a base class, an ``isinstance``
check) come from here too: ``collections.abc`` re-exports ``_collections_abc``, which every
interpreter has loaded at start (``os`` uses it), but importing it runs
``collections/__init__`` first, a tenth of ``import sessiontree``.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable as Callable
    from collections.abc import Iterable as Iterable
    from collections.abc import Mapping as Mapping
    from collections.abc import Sequence as Sequence
    from typing import cast as cast
    from typing import overload as overload
else:
    from _collections_abc import Callable, Iterable, Mapping, Sequence

    def cast(_type: object, value: object) -> object:
        """``typing.cast``: returns ``value``."""
        return value

    def overload(func: Callable[..., object]) -> Callable[..., object]:
        """``typing.overload``: the overloads are for type checkers; the last definition
        is the function."""
        return func


__all__ = ["Callable", "Iterable", "Mapping", "Sequence", "cast", "literal_aliases", "overload"]


def literal_aliases(namespace: dict[str, object], **values_of: str) -> Callable[[str], object]:
    """A module ``__getattr__`` (PEP 562) that makes ``typing.Literal`` aliases on first use.

    Each keyword names an alias and the module constant holding its values, e.g.
    ``ThinkingLevel="THINKING_LEVELS"``: ``module.ThinkingLevel`` is then
    ``Literal[*THINKING_LEVELS]``, made (and ``typing`` imported) the first time it is read.
    Type checkers read the module's own ``if TYPE_CHECKING:`` spelling of the alias.
    """
    module = namespace["__name__"]

    def __getattr__(name: str) -> object:
        constant = values_of.get(name)
        if constant is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        import typing

        alias = typing.Literal[namespace[constant]]  # type: ignore[valid-type]
        namespace[name] = alias
        return alias

    return __getattr__
