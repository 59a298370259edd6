"""Pacing the calls to slurmctld (docs/contract.md §10.5): at most ``rate`` RPCs a second for the process,
over every path, as a virtual schedule on the steady clock (GCRA), at most ``BURST`` seconds ahead.
"""

from __future__ import annotations

import threading
from typing import Optional

from ..core.model import InvalidInput, Op
from ..core.numbers import seconds
from ..host import world
from .deadlines import Clock, steady

BURST = 1.0  # seconds' worth of calls that may start at once
MAX_RATE = 1_000_000.0
# The default: docs/benchmarks.md §12 (another account's squeue during a 5,000-job run).
DEFAULT_RATE = 500.0


def rate_of(text: str) -> Optional[float]:
    """``rate``'s value: calls a second from 1 to ``MAX_RATE``, or 0 for unpaced (None); else ``InvalidInput``."""
    value = seconds(text, 0.0, MAX_RATE)
    if value is None or 0 < value < 1:
        raise InvalidInput(f"a rate is 0 (unpaced) or calls a second from 1 to {MAX_RATE:g}, in ASCII digits:"
                           f" {text[:40]!r}")
    return value or None


class Pace:
    """At most ``rate`` calls a second (None: unpaced), shared by the threads of one process."""

    def __init__(self, rate: Optional[float], clock: Clock = steady) -> None:
        self.rate = rate
        self.clock = clock
        self._next = 0.0  # when the next reserved slot may start, on ``clock``
        self._lock = threading.Lock()

    def take(self, calls: int, deadline: float) -> bool:
        """Wait for the slot of ``calls`` calls; False, at the deadline, if it would start after it."""
        if self.rate is None or calls <= 0:
            return True
        with self._lock:
            now = self.clock()
            due = max(self._next, now)  # when every call reserved so far is sent, at ``rate``
            start = max(now, due - BURST)  # a backlog of at most BURST seconds may be ahead of a slot
            fits = start <= deadline
            if fits:
                self._next = due + calls / self.rate
        wait = (start if fits else deadline) - now
        if wait > 0:
            world.sleep(wait)
        return fits

    def chunk(self, calls_per_id: int) -> Optional[int]:
        """The most ids a bulk chunk may hold: one list call's ``BURST`` seconds' worth (None: no bound)."""
        if self.rate is None:
            return None
        return max(1, int(self.rate * BURST / max(1, calls_per_id)))


def calls_of(op: Op) -> int:
    """The calls (RPCs) one job's script of ``op`` makes: a requeue's three, one for the others."""
    return 3 if Op(op).requeues else 1
