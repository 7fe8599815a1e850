"""Type stubs for the Rust engine binding (``sessiontree._core``)."""

from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Final, TypeAlias, final

__all__ = [
    "DURABILITY_MODES",
    "ENTRY_TYPES",
    "ERROR_CODES",
    "FORMAT_VERSION",
    "LINUX_FAST",
    "MAX_DEPTH",
    "MAX_ID_BYTES",
    "MAX_LINE_BYTES",
    "MAX_REPORTED_ISSUES",
    "MESSAGE_ROLES",
    "MODEL",
    "PI_LEAF_MARKER",
    "STOP_REASONS",
    "THINKING_LEVELS",
    "Engine",
    "__version__",
    "_register_error_classes",
    "_register_model",
    "_register_writer",
    "convert_lines",
    "copy_json",
    "copy_json_items",
    "custom_data_of_lines",
    "json_loads",
    "openai_item_lines",
    "openai_items_of_lines",
    "openai_read_known",
    "openai_view_extend",
    "pi_name",
    "reparent_line",
    "search_branch_members",
    "search_documents",
    "search_entry_texts",
    "search_extract",
    "search_line_tokens",
    "search_terms",
    "search_tokens",
    "to_dict",
    "to_json",
]

__version__: str

# The constants the package shares with the engine, declared once in Rust (see the
# `sessiontree` modules that re-export them).
FORMAT_VERSION: Final[int]
"""The newest file format version the engine reads and writes."""
MAX_ID_BYTES: Final[int]
"""The longest entry id readers accept, in UTF-8 bytes (and the cap on ``max_id_bytes``)."""
MAX_LINE_BYTES: Final[int]
"""The default ``max_line_bytes``: the longest entry line accepted."""
MAX_DEPTH: Final[int]
"""The default ``max_depth``: the deepest JSON nesting accepted."""
MAX_REPORTED_ISSUES: Final[int]
"""How many load issues a report keeps in full; past them it only counts them by kind."""
ENTRY_TYPES: Final[tuple[str, ...]]
"""The entry ``type`` values the engine knows, in FORMAT.md's order."""
MESSAGE_ROLES: Final[tuple[str, ...]]
"""The message roles the engine knows, in FORMAT.md's order."""
THINKING_LEVELS: Final[tuple[str, ...]]
"""The allowed thinking levels, lowest first."""
STOP_REASONS: Final[tuple[str, ...]]
"""The allowed assistant ``stop_reason`` values."""
ERROR_CODES: Final[tuple[str, ...]]
"""Every ``SessionError.code``, in the engine's order."""
DURABILITY_MODES: Final[tuple[str, ...]]
"""The durability modes, weakest first."""

_ModelField: TypeAlias = tuple[
    str,
    str,
    str,
    bool,
    bool,
    bool,
    tuple[str, ...] | str | None,
    str | None,
    str | None,
    str | None,
]
"""One field of the model: ``(key, attr, kind, required, nullable, omit_if_default, arg,
default, rule, ctor_default)``; ``arg`` is the allowed values (``one_of``, ``blocks``,
``str_or_blocks``) or the nested class name, ``default`` the JSON text a missing optional
field reads as, ``rule`` what a constructor refuses beyond the kind (``not_empty``,
``non_negative``, ``image_mime``, ``id``) or ``None``, ``ctor_default`` what a constructor
gives a field readers require (``now``, ``format_version``) or ``None``."""
_ModelType: TypeAlias = tuple[
    str, str | None, str | None, tuple[_ModelField, ...], tuple[str, ...] | None
]
"""One type of the model: ``(class, tag_key, tag_value, fields, params)``; ``params`` is
the constructor's positional order where it is not the rule (needed fields, then defaulted
ones, each in table order), else ``None``."""
MODEL: Final[tuple[_ModelType, ...]]
"""The engine's model table (rust/engine/model.rs): every block, usage value, message,
entry type (and their shared base) and the header, fields in FORMAT.md order."""

@final
class Engine:
    """One session's engine: the entry arena over a file or a memory buffer."""

    @staticmethod
    def memory(
        header: bytes,
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
    ) -> Engine: ...
    @staticmethod
    def from_bytes(
        data: bytes,
        strict: bool = False,
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
    ) -> Engine: ...
    @staticmethod
    def create(
        path: str | PathLike[str],
        header: bytes,
        durability: str = "group",
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
        index: bool = True,
        index_min_bytes: int | None = None,
        dialect: str = "sessiontree",
    ) -> Engine: ...
    @staticmethod
    def open(
        path: str | PathLike[str],
        readonly: bool = False,
        strict: bool = False,
        durability: str = "group",
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
        index: bool = True,
        index_min_bytes: int | None = None,
    ) -> Engine: ...
    def header(self) -> bytes: ...
    def raw_header(self) -> bytes: ...
    @property
    def dialect(self) -> tuple[str, int]: ...
    def raw_line(self, idx: int) -> bytes: ...
    @property
    def session_id(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def byte_len(self) -> int: ...
    @property
    def index_status(self) -> str: ...
    @property
    def torn_path(self) -> Path | None: ...
    def __len__(self) -> int: ...
    def to_bytes(self) -> bytes | None: ...
    def report(
        self,
    ) -> tuple[list[tuple[int, int, str, str]], int, list[tuple[str, int]]]: ...
    def leaf(self) -> int | None: ...
    def lookup(self, id: str) -> int | None: ...
    def id_of(self, idx: int) -> str: ...
    def info(self, idx: int) -> tuple[str, str | None, int | None, int | None, int]: ...
    def get_line(self, id: str) -> bytes | None: ...
    def lines(self, idxs: Sequence[int]) -> list[bytes]: ...
    def entries(self, idxs: Sequence[int]) -> tuple[list[Any], list[int]]: ...
    def path_entries(self, id: str | None, to_compaction: bool) -> tuple[list[Any], list[int]]: ...
    def path_to_root(self, id: str | None) -> list[bytes]: ...
    def path_to_root_or_compaction(self, id: str | None) -> list[bytes]: ...
    def path_indices(self, id: str | None, to_compaction: bool) -> list[int]: ...
    def state_lines(self, id: str | None) -> list[bytes | None]: ...
    def children(self, id: str | None) -> list[int]: ...
    def tree(self, entries: list[Any]) -> list[Any]: ...
    def parents(self) -> list[int]: ...
    def find(self, type_name: str) -> list[int]: ...
    def select(
        self,
        type_name: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[int]: ...
    def label(self, id: str) -> str | None: ...
    def labels(self) -> dict[str, str]: ...
    def name(self) -> str | None: ...
    def newest_timestamp(self) -> str | None: ...
    def stats(
        self,
    ) -> tuple[int, int, int, int, int, int, int, int, int, int, float]: ...
    def create_entry_id(self) -> str: ...
    def append(self, line: bytes) -> int: ...
    def append_lines(self, lines: list[bytes]) -> list[int]:
        """Append entry lines as one unit: every line checked (its references against the
        index and the batch's earlier lines) before one write of them all; nothing is
        written when one is refused (the error names ``line N of the batch``)."""
    def append_entry(self, entry: object) -> int:
        """Append an entry object: its line is encoded from the model in Rust (or by the
        registered Python writer), checked and written; returns its index."""
    def append_message(self, message: object) -> Any:
        """Append ``message`` in a new ``MessageEntry`` under the leaf (a fresh id, the time
        now) and return that entry; ``None``, appending nothing, when ``message`` is not
        exactly one of the model's message classes."""
    def fork_to(
        self,
        path: str | PathLike[str],
        header: bytes,
        kept: Sequence[int],
        parents: Sequence[int],
        extras: Sequence[bytes],
        durability: str = "group",
        max_line_bytes: int | None = None,
        max_depth: int | None = None,
        max_id_bytes: int | None = None,
        index: bool = True,
        index_min_bytes: int | None = None,
    ) -> Engine:
        """Write a new session file: ``header``, entries ``kept`` of this engine (entry
        ``kept[i]`` under entry ``parents[i]``, an earlier kept one, or -1), their bytes
        copied by the kernel, then the ``extras`` lines; synced and linked into place.
        Return the new file's engine, open for writing, its arena built from this one's."""
    def flush(self) -> None: ...
    def refresh(self) -> int: ...
    def inject_fault(self, kind: str | None = None, errno: int = 5) -> None:
        """Test hook: make the next write or sync fail with ``errno``.

        Present only in builds with the ``test-hooks`` cargo feature (``make install`` and
        ``make build-dev``); a wheel from a plain ``maturin build`` has no such method.
        """
    def change_watch(self, keep: bool = True) -> bool:
        """Test hook: whether the writer has its change watch; ``keep=False`` drops it, so
        every later append looks the file's path up.

        Present only in builds with the ``test-hooks`` cargo feature, as ``inject_fault``.
        """
    def close(self) -> None: ...

def _register_error_classes(base: type[Exception], by_code: Mapping[str, type[Exception]]) -> None:
    """Hand the binding the exception class of each error code (``sessiontree.errors``
    calls this once at import; the binding never imports the package)."""

def _register_writer(classes: Mapping[str, type], unknown: Iterable[type]) -> None:
    """Hand the writer the model classes, by class name (those missing are not written),
    and the classes whose instances are written as their ``data`` (``UnknownEntry``,
    ``UnknownMessage``); ``sessiontree.model._table.register`` calls this."""

def to_json(value: object, what: str) -> bytes:
    """The JSON line (no newline) of a model value: an entry, message, content block,
    usage or header; a subclass as the class it derives from, an unknown entry or message
    as its ``data``. ``invalid_argument`` (naming ``what`` and the field) for a value JSON
    cannot hold or that is not a model value, ``limit_exceeded`` past 128 levels."""

def reparent_line(line: bytes, parent_id: str | None) -> bytes:
    """``line`` (an entry line) with its ``parent_id`` replaced, every other byte kept (how a
    fork re-parents the entries it copies); ``corrupt`` if it is not an entry line."""

def to_dict(value: object) -> Any:
    """The JSON object of a model value as a dict, free-form values (``details``, ``data``,
    tool arguments, unknown fields) by reference; an unknown entry or message gives its
    ``data`` itself. ``invalid_argument`` if it is not a model value."""

def _register_model(classes: Mapping[str, type], empties: Mapping[str, object]) -> None:
    """Hand the binding the model classes it builds entries of, by class name, and the shared
    instances a missing nested object reads as (``sessiontree.storage.engine`` calls this
    once at import)."""

PI_LEAF_MARKER: Final[str]
LINUX_FAST: Final[bool]
"""The ``customType`` of the entry that stands for a leaf move in a pi file."""

def pi_name(name: str) -> str:
    """pi's spelling of a sessiontree name: ``"tool_result"`` → ``"toolResult"``."""

def json_loads(text: bytes) -> Any:
    """``json.loads`` of one UTF-8 JSON text, without importing ``json``; ``ValueError``
    if it is not one."""

def copy_json(value: Any) -> Any:
    """A fresh copy of a JSON-shaped value: every ``dict`` and ``list`` (exactly those
    types) new, every other object shared; the cyclic collector paused meanwhile.
    ``RecursionError`` past 10,000 levels."""

def copy_json_items(items: list[Any]) -> list[Any]:
    """A new list of :func:`copy_json` copies of ``items``, the collector paused once."""

def openai_item_lines(
    items: list[Any],
    ids: list[str],
    stamp: str,
    ms: int,
    provider: str,
    model: str,
    names: dict[str, str],
    residual_key: str,
) -> list[bytes | None]:
    """The OpenAI adapter's batch writer (``rust/py/items.rs``): each response item's
    entry line (``ids[k]`` its id, the one before it its parent, the first a root), or
    ``None`` for an item left to the adapter's Python path; ``names`` learns the tool
    names of the function calls, in order."""

def openai_items_of_lines(
    lines: list[bytes], custom_type: str, residual_key: str, names: dict[str, str]
) -> list[tuple[int, list[Any]] | None]:
    """The OpenAI adapter's reader (``rust/py/items_read.rs``): for each entry line,
    ``(1, [item])`` for an item entry, ``(2, [])`` for a compaction, ``(0, [])`` for
    any other entry, or ``None`` where the adapter's Python path must read it; ``names``
    learns the tool name of each function call read."""

def openai_read_known(
    engine: Engine,
    idxs: list[int],
    custom_type: str,
    residual_key: str,
    names: dict[str, str],
    known: dict[str, tuple[int, list[Any]]],
    view: tuple[list[str], list[int], list[Any], list[int]] | None = None,
) -> tuple[int, list[int], int | None]:
    """The OpenAI adapter's first read (``rust/py/items_read.rs``): each entry of ``idxs``
    read by ``engine`` and converted as :func:`openai_items_of_lines` converts its line
    (no ``bytes`` per line) into ``known[its id]``, the view's lists (ids, codes, items,
    ends) extended on the way when given; returns the bytes read, the positions of the
    lines left to the adapter's Python path, and the position of the last compaction."""

def openai_view_extend(
    ids: list[str],
    known: dict[str, tuple[int, list[Any]]],
    codes: list[int],
    items: list[Any],
    ends: list[int],
) -> int | None:
    """The OpenAI adapter's view extended by the entries ``ids`` (``rust/py/items_read.rs``):
    each one's code to ``codes``, its items to ``items``, the count of ``items`` after it
    to ``ends``; the position in ``ids`` of the last compaction, if any."""

def custom_data_of_lines(engine: Engine, idxs: list[int], custom_type: str) -> list[Any] | None:
    """The Claude store's load (``rust/py/items_read.rs``): the ``data`` of each entry of
    ``idxs`` that is a custom entry of ``custom_type``, in order, built straight from the
    lines ``engine`` reads (as ``json.loads`` builds it); ``None`` when a line must be
    read by the Python path (malformed, a key given twice, a wide integer, deep nesting, a
    custom entry of that type without its data)."""

def convert_lines(data: bytes, to: str) -> bytes:
    """A whole session document translated into dialect ``to`` (``"pi"`` or
    ``"sessiontree"``); ``corrupt`` naming the line that cannot be."""

# Search (rust/py/search.rs; sessiontree.search checks the arguments).

def search_tokens(text: str) -> list[str]:
    """The tokens of ``text``, lowercased, in order."""

def search_terms(query: str) -> list[tuple[list[str], bool, bool]]:
    """The terms of a query: ``(tokens, prefix, negated)`` each; ``invalid_argument``
    for a bad query."""

def search_documents(
    query: str,
    sources: list[tuple[str, str | bytes]],
    *,
    roles: list[str] | None = None,
    types: list[str] | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    newest: bool = False,
    limit: int | None = None,
    threads: int = 0,
    whole: bool = False,
    max_line_bytes: int | None = None,
    max_id_bytes: int | None = None,
) -> list[
    tuple[int, str, str, str, str | None, str, float, str, list[tuple[int, int]], bool | None]
]:
    """The best ``limit`` hits of ``query`` in session documents ``(session id, path or
    bytes)`` (header first; every line when ``whole``): ``(document, session id, entry
    id, type, role, timestamp, score, snippet, marks, on_branch)``, best first;
    ``on_branch`` is ``None`` unless ``whole`` and the lines tell it."""

def search_branch_members(
    files: list[tuple[str, list[str]]],
    *,
    max_line_bytes: int | None = None,
    max_id_bytes: int | None = None,
    threads: int = 0,
) -> list[list[bool] | None]:
    """For each ``(session file, entry ids)``: whether each entry is on the file's current
    branch, told from its lines (``None`` where they do not tell: ask the reader)."""

def search_entry_texts(
    line: str,
) -> tuple[str, str, str, str | None, list[str]] | None:
    """``(type, id, timestamp, role, texts)`` of an entry line (sessiontree's dialect)."""

def search_extract(path: str, start: int) -> tuple[int, bytes, bool, list[tuple[int, int, str]]]:
    """What the search index stores of a file from byte ``start``: ``(end, header line,
    legacy, [(offset, length, tokens)])``."""

def search_line_tokens(lines: list[bytes], pi: bool) -> list[str]:
    """Each entry line's search tokens joined by spaces."""
