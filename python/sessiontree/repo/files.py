"""File helpers: private directories, atomic publishing, quiet unlinks, and the package's
few OS-specific calls (each with a portable path: the flags and the lock are Unix's, and
elsewhere the open goes without them)."""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Final

from ..errors import SessionError

__all__ = []


_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
# A FIFO planted at a name must not hang an open.
_O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)


def _try_writer_lock(fd: int) -> bool:
    """Takes the writer's lock (the engine's ``flock``) on ``fd`` if no writer holds it;
    False when one does. Without ``fcntl`` (Windows) it takes nothing and says True: there
    the OS itself refuses to remove a file a writer has open."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _os_error(what: str, exc: OSError) -> SessionError:
    code = "not_found" if isinstance(exc, FileNotFoundError) else "io"
    err = SessionError(code, f"{what}: {exc.strerror or exc}")
    err.__cause__ = exc
    return err


# --------------------------------------------------------------------------- file helpers


def _is_regular(mode: int) -> bool:
    return (mode & 0o170000) == 0o100000


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _make_private_dir(root: str) -> None:
    """Creates ``root`` with mode 0700 (whatever the umask) unless it exists."""
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        if not os.path.isdir(root):
            raise SessionError("io", f"{root} exists and is not a directory") from None
        return
    except FileNotFoundError:
        try:
            os.makedirs(os.path.dirname(root), exist_ok=True)
            os.mkdir(root, 0o700)
        except FileExistsError:
            return
        except OSError as exc:
            raise _os_error(f"creating {root}", exc) from exc
    except OSError as exc:
        raise _os_error(f"creating {root}", exc) from exc
    try:
        os.chmod(root, 0o700)
    except OSError as exc:
        raise _os_error(f"creating {root}", exc) from exc


def _sync_dir(folder: str) -> None:
    """Syncs a directory so a new name in it survives a crash; best effort.

    The file is already in place: failing now would only make a caller retry and leave a
    second copy, and some file systems refuse to sync directories at all.
    """
    try:
        dfd = os.open(folder, os.O_RDONLY | _O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _publish(tmp: str, final: str, replace: bool) -> None:
    """Puts ``tmp`` in place under ``final``; without ``replace`` never overwrites."""
    if replace:
        os.replace(tmp, final)
        return
    try:
        # link() fails if ``final`` exists, which rename() would silently overwrite.
        os.link(tmp, final)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links: check, then rename (a small race remains).
        if os.path.lexists(final):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), final) from None
        os.rename(tmp, final)


def _write_atomically(path: str, data: bytes, *, sync: bool, replace: bool) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same directory.

    The temporary file is created exclusively with mode 0600 and a name no listing picks
    up. With ``sync`` the data and the directory are synced so the new name never points
    at a partial file after a crash. Cache writes (``replace=True``) fail silently.
    """
    folder, base = os.path.split(path)
    tmp = os.path.join(folder, f".{base}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600)
    except OSError as exc:
        if replace:
            return
        raise _os_error(f"creating a file in {folder}", exc) from exc
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        _publish(tmp, path, replace)
        if sync:
            _sync_dir(folder)
    except OSError as exc:
        if replace:
            return
        if isinstance(exc, FileExistsError):
            raise SessionError("exists", f"{path} already exists") from None
        raise _os_error(f"writing {path}", exc) from exc
    finally:
        _unlink_quietly(tmp)
