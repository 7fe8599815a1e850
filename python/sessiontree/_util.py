"""Small time and id helpers shared by the Python layer.

Timestamps come in two shapes in a session file: entries and headers carry ISO-8601 UTC
strings with milliseconds and a ``Z`` (``2026-11-30T16:48:30.123Z``), messages carry Unix
milliseconds.  These helpers convert between the two without going through local time.
"""

from __future__ import annotations

import _thread
import os
import time
from typing import TYPE_CHECKING

from .errors import SessionError

if TYPE_CHECKING:
    import re
    from collections.abc import Callable
    from datetime import datetime, timedelta, timezone
    from typing import Final, TypeVar

    _T = TypeVar("_T")

__all__ = [
    "iso_to_datetime",
    "iso_to_ms",
    "ms_to_iso",
    "now_iso",
    "now_ms",
    "once",
    "uuid7",
]


def bad_text(name: str, exc: UnicodeEncodeError) -> SessionError:
    """The ``invalid_argument`` error for a ``str`` argument UTF-8 cannot encode (one
    holding a lone surrogate), naming ``name``; raise it ``from exc``.

    For code that hands text on and catches the ``UnicodeEncodeError`` the encoder (the
    Rust binding, a database driver) raises for it.
    """
    return SessionError("invalid_argument", f"{name} is not valid Unicode text: {exc}")


def check_text(name: str, value: str) -> None:
    """``invalid_argument`` naming ``name`` (the ``UnicodeEncodeError`` as its cause) when
    ``value`` cannot be written as UTF-8: a ``str`` holding a lone surrogate
    (``"\\ud800"``), which no session file, database or the engine can hold.

    Every text argument is checked before it reaches the engine, whose binding would
    otherwise raise a bare ``UnicodeEncodeError`` when it takes the ``str``. ASCII text,
    the common case, costs one ``isascii()``.
    """
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise bad_text(name, exc) from exc


def fspath_arg(name: str, value: object) -> str:
    """``os.fspath(value)`` for a path argument, or ``invalid_argument`` naming ``name``.

    API.md: paths may be ``str`` or ``os.PathLike`` (of str); anything else, bytes
    included, is refused here rather than as a bare ``TypeError`` from deep inside, and
    so is a path the file system's encoding cannot encode (a lone surrogate outside the
    ``surrogateescape`` range that stands for an undecodable byte) rather than as a bare
    ``UnicodeEncodeError``.
    """
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str):
            if not text.isascii():
                try:
                    os.fsencode(text)
                except UnicodeEncodeError as exc:
                    raise SessionError(
                        "invalid_argument",
                        f"{name} cannot be encoded as a file name: {exc}",
                    ) from exc
            return text
        raise SessionError("invalid_argument", f"{name} must be a str path, not bytes")
    raise SessionError(
        "invalid_argument", f"{name} must be a str or os.PathLike, not {type(value).__name__}"
    )


def once(make: Callable[[], _T]) -> Callable[[], _T]:
    """``functools.cache`` of a function without arguments, without importing ``functools``
    (nor ``collections`` under it). Two threads may both make the value the first time;
    both get one made by ``make``."""
    made: list[_T] = []

    def get() -> _T:
        if not made:
            made.append(make())
        return made[0]

    get.__doc__ = make.__doc__
    return get


# ``datetime`` and the timestamp regex are loaded on first use: stamping an append only
# needs ``now_iso``, which formats the time itself, and loading both costs a few percent
# of ``import sessiontree``.
@once
def _datetime() -> tuple[type[datetime], type[timedelta], type[timezone]]:
    import datetime as dt

    return dt.datetime, dt.timedelta, dt.timezone


@once
def _epoch() -> tuple[datetime, timedelta]:
    """The Unix epoch (UTC) and one millisecond."""
    datetime, timedelta, timezone = _datetime()
    return datetime(1970, 1, 1, tzinfo=timezone.utc), timedelta(milliseconds=1)


@once
def _iso_pattern() -> re.Pattern[str]:
    import re

    # ASCII-only digits: ``\d`` would also accept other scripts' digits, which int() then
    # parses.
    return re.compile(
        r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
        r"(?:[.,]([0-9]{1,9}))?"
        r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?"
    )


def now_ms() -> int:
    """Return the current time as Unix milliseconds.

    Returns:
        Milliseconds since 1970-01-01T00:00:00Z.

    >>> now_ms() > 1_700_000_000_000
    True
    """
    return time.time_ns() // 1_000_000


def now_iso() -> str:
    """Return the current UTC time as ISO-8601 with milliseconds and ``Z``.

    Returns:
        A string such as ``"2026-11-30T16:48:30.123Z"``.

    >>> now_iso().endswith("Z")
    True
    """
    global _iso_second
    ms = time.time_ns() // 1_000_000
    second, milli = divmod(ms, 1000)
    # Every entry is stamped, and the date arithmetic costs more than the append itself:
    # format the text up to the second once per second. One tuple, read and replaced as
    # a whole, so a thread never pairs a second with another second's text.
    cached_second, prefix = _iso_second
    if second != cached_second:
        t = time.gmtime(second)
        prefix = (
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}."
        )
        _iso_second = (second, prefix)
    return f"{prefix}{milli:03d}Z"


_iso_second: tuple[int, str] = (-1, "")


def ms_to_iso(ms: int) -> str:
    """Format Unix milliseconds as ISO-8601 UTC with milliseconds and ``Z``.

    Args:
        ms: milliseconds since the Unix epoch (may be negative).

    Returns:
        The timestamp text, always 24 characters for years 0001-9999.

    Raises:
        SessionError: ``invalid_argument`` if ``ms`` is not an int or is out of range.

    >>> ms_to_iso(0)
    '1970-01-01T00:00:00.000Z'
    """
    if isinstance(ms, bool) or not isinstance(ms, int):
        raise SessionError("invalid_argument", f"ms must be an int, got {type(ms).__name__}")
    epoch, one_ms = _epoch()
    try:
        dt = epoch + one_ms * ms
    except OverflowError:
        raise SessionError("invalid_argument", f"timestamp {ms} ms is out of range") from None
    # Hand-formatted: strftime's %Y does not zero-pad years below 1000 on every platform.
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T"
        f"{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


def iso_to_datetime(s: str) -> datetime:
    """Parse an ISO-8601 timestamp into a timezone-aware UTC ``datetime``.

    Accepts a ``Z`` or ``±HH:MM`` offset (converted to UTC), or no offset (read as UTC),
    with or without a fraction of a second (digits past microseconds are dropped).

    Args:
        s: the timestamp text, e.g. ``"2026-11-30T16:48:30.123Z"``.

    Returns:
        A ``datetime`` whose ``tzinfo`` is ``timezone.utc``.

    Raises:
        SessionError: ``invalid_argument`` if ``s`` is not a str or not a valid timestamp.

    >>> iso_to_datetime("2026-11-30T16:48:30.123+01:00").isoformat()
    '2026-11-30T15:48:30.123000+00:00'
    """
    datetime, timedelta, timezone = _datetime()
    if not isinstance(s, str):
        raise SessionError("invalid_argument", f"timestamp must be a str, got {type(s).__name__}")
    m = _iso_pattern().fullmatch(s)
    if m is None:
        raise SessionError("invalid_argument", f"not an ISO-8601 timestamp: {s!r}")
    year, month, day, hour, minute, second, frac, offset = m.groups()
    micro = int(frac[:6].ljust(6, "0")) if frac else 0
    tz = timezone.utc
    if offset is not None and offset not in ("Z", "z"):
        digits = offset[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            raise SessionError("invalid_argument", f"invalid UTC offset in {s!r}")
        delta = timedelta(hours=hours, minutes=minutes)
        tz = timezone(-delta if offset[0] == "-" else delta)
    try:
        dt = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tz
        )
        return dt.astimezone(timezone.utc) if tz is not timezone.utc else dt
    except (ValueError, OverflowError):
        raise SessionError("invalid_argument", f"invalid timestamp: {s!r}") from None


def iso_to_ms(s: str) -> int:
    """Convert an ISO-8601 timestamp to Unix milliseconds (sub-millisecond digits floored).

    Args:
        s: the timestamp text; see :func:`iso_to_datetime` for the accepted forms.

    Returns:
        Milliseconds since the Unix epoch.

    Raises:
        SessionError: ``invalid_argument`` if ``s`` is not a valid timestamp.

    >>> iso_to_ms("1970-01-01T00:00:01.5Z")
    1500
    """
    epoch, one_ms = _epoch()
    return (iso_to_datetime(s) - epoch) // one_ms


_uuid_lock: Final = _thread.allocate_lock()  # threading.Lock, without importing threading
_uuid_last_ms = 0
_uuid_last_rand = 0
_RAND_BITS: Final = 74  # 12 bits of rand_a + 62 bits of rand_b
_RAND_MAX: Final = (1 << _RAND_BITS) - 1


def uuid7() -> str:
    """Return a new UUIDv7 (RFC 9562) as lowercase hyphenated text.

    The first 48 bits are the Unix time in milliseconds, so ids sort by creation time.
    Within one process ids are strictly increasing: inside the same millisecond (or if the
    clock steps back) the 74 random bits are advanced by a random step instead of being
    drawn afresh (RFC 9562 §6.2, method 2).

    Returns:
        A string such as ``"0192f3c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"``.

    >>> u = uuid7()
    >>> len(u), u[14]
    (36, '7')
    """
    global _uuid_last_ms, _uuid_last_rand
    ms = time.time_ns() // 1_000_000
    with _uuid_lock:
        if ms > _uuid_last_ms:
            # The top random bit starts clear, leaving room to count up inside one millisecond.
            rand = int.from_bytes(os.urandom(10), "big") >> (80 - _RAND_BITS + 1)
        else:
            ms = _uuid_last_ms
            rand = _uuid_last_rand + 1 + int.from_bytes(os.urandom(4), "big")
            if rand > _RAND_MAX:
                ms += 1
                rand = int.from_bytes(os.urandom(10), "big") >> (80 - _RAND_BITS + 1)
        _uuid_last_ms = ms
        _uuid_last_rand = rand
    value = (
        ((ms & 0xFFFF_FFFF_FFFF) << 80)
        | (0x7 << 76)
        | ((rand >> 62) << 64)
        | (0b10 << 62)
        | (rand & 0x3FFF_FFFF_FFFF_FFFF)
    )
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
