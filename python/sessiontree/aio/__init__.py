"""The async API: :class:`AsyncSession` and :class:`AsyncSessionRepo`.

Every method of :class:`~sessiontree.Session` and :class:`~sessiontree.SessionRepo` is a
coroutine here, with the same name, arguments, errors and docstring; they are generated
from the sync classes and one table of where each call runs (``_policy``), and so is this
package's stub (``__init__.pyi``, checked by ``tests/aio/test_stub.py``). asyncio, trio
and anyio (on either) are supported; nothing here needs a third-party package.
"""

from __future__ import annotations

from ._repo import AsyncSessionRepo
from ._session import AsyncSession

__all__ = ["AsyncSession", "AsyncSessionRepo"]
