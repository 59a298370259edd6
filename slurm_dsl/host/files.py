"""Reading a file from outside within a deadline (docs/contract.md §13.8, its rules in a table there).

Whatever goes wrong is a ``NotRead`` value, returned: the caller reads it as "cannot tell", never as an answer."""

from __future__ import annotations

import errno
import os
import stat
import threading
from typing import Callable, NamedTuple, Tuple, TypeVar, Union

from . import world

# Seconds a read of one outside file gets at most when its caller has no shorter deadline: a
# local file answers in microseconds, a healthy NFS server in milliseconds.
FILE_TIMEOUT = 2.0
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a symbolic link"))


class NotRead(NamedTuple):
    """A file that could not be read as a regular file within its deadline; ``missing``: it does not exist."""

    path: str
    why: str
    missing: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


class Identity(NamedTuple):
    """What tells one file from the one that replaced it at the same name: inode, last write (ns) and size.

    The write time is compared for equality only, never ordered."""

    inode: int
    mtime_ns: int
    size: int

    def __str__(self) -> str:
        return f"{self.inode}:{self.mtime_ns}:{self.size}"


_T = TypeVar("_T")


def within(timeout: float, work: Callable[[], Union[_T, NotRead]], path: str) -> Union[_T, NotRead]:
    """``work()`` in a daemon thread, waited for at most ``timeout`` seconds; ``NotRead`` if late or on ``OSError``."""
    box: list[object] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(work())
        except BaseException as exc:  # handed to the caller below, whatever it is
            box.append(exc)
        finally:
            done.set()

    threading.Thread(target=world.carry(run), name="slurm-dsl read", daemon=True).start()
    if not done.wait(max(timeout, 0.0)):
        return NotRead(path, f"no answer within {max(timeout, 0.0):g} s (a hung file system?)")
    found = box[0]
    if isinstance(found, OSError):
        missing = found.errno == errno.ENOENT
        why = "a symbolic link: refused (an outside file is never read through one)" if found.errno == errno.ELOOP \
            else (found.strerror or str(found))
        return NotRead(path, why, missing)
    if isinstance(found, BaseException):
        raise found
    return found  # type: ignore[return-value]


def kind(mode: int) -> str:
    """What a file that is not regular is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular(path: str, limit: int, timeout: float = FILE_TIMEOUT, *, head: bool = False) -> Union[bytes, NotRead]:
    """At most ``limit`` bytes of the regular file ``path``, or a ``NotRead``.

    Longer than ``limit`` is a ``NotRead`` unless ``head``: then its first ``limit`` bytes."""
    simulated = world.current().edge("read_regular")
    if simulated is not None:
        return simulated(path, limit, timeout, head=head)  # type: ignore[no-any-return]

    def work() -> Union[bytes, NotRead]:
        fd = os.open(path, _FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return NotRead(path, f"{kind(st.st_mode)}, not a regular file: refused")
            chunks = []
            size = 0
            want = limit if head else limit + 1
            while size < want:
                chunk = os.read(fd, min(1 << 16, want - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:  # never with ``head``
                return NotRead(path, f"longer than {limit} bytes: refused")
            return b"".join(chunks)
        finally:
            os.close(fd)

    return within(timeout, work, path)


def read_identified(path: str, limit: int, timeout: float = FILE_TIMEOUT) -> Union[Tuple[bytes, Identity], NotRead]:
    """``read_regular``'s bytes with the ``Identity`` of the file they were read from (one open)."""
    simulated = world.current().edge("read_identified")
    if simulated is not None:
        return simulated(path, limit, timeout)  # type: ignore[no-any-return]

    def work() -> Union[Tuple[bytes, Identity], NotRead]:
        fd = os.open(path, _FLAGS)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return NotRead(path, f"{kind(st.st_mode)}, not a regular file: refused")
            data = os.read(fd, limit + 1)
            if len(data) > limit:
                return NotRead(path, f"longer than {limit} bytes: refused")
            return data, Identity(st.st_ino, st.st_mtime_ns, st.st_size)
        finally:
            os.close(fd)

    return within(timeout, work, path)


def identity(path: str, timeout: float = FILE_TIMEOUT) -> Union[Identity, NotRead]:
    """The ``Identity`` of the regular file at ``path`` now, from ``lstat`` alone; ``NotRead`` as ``read_regular``."""
    simulated = world.current().edge("identity")
    if simulated is not None:
        return simulated(path, timeout)  # type: ignore[no-any-return]

    def work() -> Union[Identity, NotRead]:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return NotRead(path, f"{kind(st.st_mode)}, not a regular file: refused")
        return Identity(st.st_ino, st.st_mtime_ns, st.st_size)

    return within(timeout, work, path)
