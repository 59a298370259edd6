"""Deadlines: an instant on this process's steady clock from a timeout or a given deadline, within bounds.

Every operation has one (docs/contract.md §2, §10.0), kept on ``steady`` so that a wall-clock step
moves it not; checked once at the door, a ``Deadline`` is handed on as it is.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Optional, Tuple

from ..core.model import InvalidInput
from ..core.numbers import seconds
from ..core.plain import plain_float
from ..host import world

Clock = Callable[[], float]
_ANCHOR = time.time() - time.monotonic()


def steady() -> float:
    """Epoch seconds on the monotonic clock: the wall clock at import, moved on by ``time.monotonic``."""
    simulated = world.current().edge("monotonic")
    return simulated() if simulated is not None else _ANCHOR + time.monotonic()


def wall() -> float:
    """This host's wall clock: only to turn a given epoch deadline into seconds from now, once."""
    simulated = world.current().edge("wall")
    return simulated() if simulated is not None else time.time()

# The longest timeout, and the furthest deadline from now, an operation takes: one day.  The
# runner waits with poll()/epoll, whose timeout is milliseconds in a C int: 2**31 ms is about
# 24.8 days, and a longer wait overflows (a traceback after the intent was recorded).  One day
# stays far below that with every margin added (guard, kill grace, lease slack), and is far
# beyond what one scontrol call, or waiting for another operation's lease on the job, needs.
MAX_TIMEOUT = 86400.0
# The shortest timeout: a millisecond, the unit a script's deadline is written in
# (``core.script.deadline_ms`` rounds down): a shorter one could give a deadline before now.
MIN_TIMEOUT = 0.001
# The deadline of a command given no --timeout and no config file's ``timeout`` (and of a library
# call given neither timeout nor deadline): a requeue's three calls, each given Slurm's default
# MessageTimeout (10 s) to be answered, and room for --settle (13 s at the default settle delay)
# or --durable (one save window, 5-6 s).  The reasons are docs/choices.md's, item 10.
DEFAULT_TIMEOUT = 30.0
# How much further than MAX_TIMEOUT ``check_deadline`` lets a deadline be, so that one from
# ``resolve_deadline`` is not refused a moment later if the wall clock stepped back meanwhile.
_CLOCK_STEP = 60.0

# The meaning of ``--timeout`` (and of ``run_ops``/``run_op``'s ``timeout``), written once: the
# CLI's --help, docs/contract.md §10.0 and README.md carry it word for word (tests/test_docs.py).
# OVERRUN is the most a command may take past its deadline, worked out in docs/contract.md §10.0
# from the constants ``overrun_seconds`` adds up; a test holds the two together.
OVERRUN = 16
TIMEOUT_HELP = (
    "--timeout SECONDS is the whole command's deadline, counted from when it starts: no scontrol call"
    " starts after it; a job whose call has not started by then is expired (nothing was done to it),"
    " and a call still running then is stopped and reads unknown. The command ends at most"
    f" SECONDS + {OVERRUN} s after it starts, unless the ledger itself stops answering."
)


class Deadline(float):
    """A deadline checked once, made only here; arithmetic on it gives a plain ``float``."""

    __slots__ = ()

    def __new__(cls, *args: object, **kwargs: object) -> Deadline:
        raise TypeError("a Deadline is made by resolve_deadline or check_deadline, which check it")

    def __reduce__(self) -> Tuple[type, Tuple[float]]:  # a copy or a pickle is a plain float, checked again
        return float, (float(self),)


class Timeout(float):
    """A timeout checked once (``timeout_of``): ``resolve_deadline`` takes it as it is."""

    __slots__ = ()

    def __new__(cls, *args: object, **kwargs: object) -> Timeout:
        raise TypeError("a Timeout is made by timeout_of, which checks it")

    def __reduce__(self) -> Tuple[type, Tuple[float]]:
        return float, (float(self),)


def earlier(deadline: float, seconds: float, clock: Clock = steady) -> Deadline:
    """The deadline ``seconds`` before ``deadline``; one already past is fine."""
    return float.__new__(Deadline, float(check_deadline(deadline, clock)) - seconds)


def timeout_in_bounds(seconds: float) -> bool:
    """Whether ``seconds`` is from ``MIN_TIMEOUT`` to ``MAX_TIMEOUT`` (NaN is not)."""
    return MIN_TIMEOUT <= seconds <= MAX_TIMEOUT


def timeout_of(text: str) -> Optional[Timeout]:
    """A timeout typed as text, by ``core.numbers``' rule and within ``timeout_in_bounds``; else None."""
    value = seconds(text, 0.0, MAX_TIMEOUT)
    return float.__new__(Timeout, value) if value is not None and timeout_in_bounds(value) else None


def resolve_deadline(timeout: Optional[float], deadline: Optional[float], clock: Clock = steady) -> Deadline:
    """A deadline on ``clock`` from exactly one of ``timeout`` and ``deadline`` (epoch seconds on the wall
    clock, read once).  ``ValueError`` for a timeout outside (0, ``MAX_TIMEOUT``] or a deadline refused."""
    if (timeout is None) == (deadline is None):
        raise InvalidInput("give exactly one of timeout (seconds) and deadline (epoch seconds)")
    if type(timeout) is Timeout:
        return float.__new__(Deadline, clock() + timeout)  # checked already, at the door
    if timeout is not None:
        given = plain_float(timeout, "timeout")
        if not timeout_in_bounds(given):
            raise InvalidInput(
                f"timeout must be a number of seconds, at least {MIN_TIMEOUT:g} and at most {MAX_TIMEOUT:g} (one day),"
                f" got {given!r}"
            )
        return float.__new__(Deadline, clock() + given)
    assert deadline is not None
    left = _checked(deadline, wall) - wall()  # within bounds on the wall clock: so from now on ``clock``
    return float.__new__(Deadline, clock() + left)


def check_deadline(deadline: float, clock: Clock = steady) -> Deadline:
    """``deadline`` (epoch seconds on ``clock``) as a ``Deadline``: positive, finite, at most ``MAX_TIMEOUT``
    seconds from now (one already past is fine); else ``ValueError``."""
    if type(deadline) is Deadline:
        return deadline
    return _checked(deadline, clock)


def _checked(deadline: object, clock: Clock) -> Deadline:
    when = plain_float(deadline, "deadline")
    if not math.isfinite(when) or when <= 0:
        raise InvalidInput(f"deadline must be a positive epoch time, got {when!r}")
    if when - clock() > MAX_TIMEOUT + _CLOCK_STEP:
        raise InvalidInput(
            f"deadline must be at most {MAX_TIMEOUT:g} seconds (one day) from now, got {when!r}"
        )
    return float.__new__(Deadline, when)
