"""Operations recorded in the ledger: lease, intent first, run, record (SPEC §9).

Contract: ``Tracker.run`` takes the job's lease (waiting for it until the
deadline; a job still leased then is ``expired``: nothing ran), commits the
operation's start (for a requeue: the object becomes ``may_be_set``) *before*
the script starts, runs it with ``ops.execute``, and records the outcome, which
sets the object's bit to what SPEC §7 says (``combine.next_bit``).  A crash
anywhere in between leaves ``may_be_set`` and a lease that lapses, so the
sweeper finds the job.  The lease outlasts the script's outer guard.

A ``Ledger`` is one SQLite connection for one thread, so a ``Tracker`` opens one
per thread (``--parallel`` runs jobs on several).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from typing import List, Optional, Union

from .errors import describe
from .jobid import validate_job_id
from .ledger import DEFAULT_PATH, Ledger, LedgerError
from .model import Op, Outcome, RequeueBit, Result
from .ops import GUARD_MARGIN, Clock, execute, new_nonce
from .script import KILL_GRACE

log = logging.getLogger("slurm_dsl")

LEASE_SLACK = 30.0  # seconds a lease outlasts the script's outer guard: the ledger writes around it
LEASE_POLL = 0.05


def ledger_path(explicit: Optional[str] = None) -> str:
    """The ledger to use: explicit, else $SLURM_DSL_LEDGER, else the default under /var/lib."""
    return explicit or os.environ.get("SLURM_DSL_LEDGER") or DEFAULT_PATH


def lease_owner(tag: str = "op") -> str:
    """A lease owner unique to this thread of this process on this host."""
    return f"{tag}:{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{new_nonce()[:8]}"


class Tracker:
    """Runs operations against one ledger file, one SQLite connection per thread."""

    def __init__(
        self,
        path: Optional[str] = None,
        *,
        scontrol: Optional[str] = None,
        clock: Clock = time.time,
        lease_slack: float = LEASE_SLACK,
    ) -> None:
        self.path = ledger_path(path)
        self.scontrol = scontrol
        self.clock = clock
        self.lease_slack = lease_slack
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: List[Ledger] = []
        self.ledger()  # open (and create, migrate) now: a bad ledger fails before anything runs

    def ledger(self) -> Ledger:
        """This thread's connection to the ledger (opened on first use)."""
        ledger: Optional[Ledger] = getattr(self._local, "ledger", None)
        if ledger is None:
            ledger = Ledger.open(self.path)
            self._local.ledger = ledger
            with self._lock:
                self._opened.append(ledger)
        return ledger

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            opened, self._opened = self._opened, []
        for ledger in opened:
            ledger.close()
        self._local = threading.local()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(
        self, op: Union[Op, str], job_id: Union[str, int], deadline: float, *, owner: Optional[str] = None
    ) -> Outcome:
        """One op on one job, recorded; the lease is ``owner``'s if given (a sweeper's)."""
        op = Op(op)
        job = validate_job_id(job_id)
        ledger = self.ledger()
        owner = owner or lease_owner()
        ttl = max(deadline - self.clock(), 0.0) + KILL_GRACE + GUARD_MARGIN + self.lease_slack
        while not ledger.acquire_lease(job, owner, self.clock(), ttl):
            if self.clock() >= deadline:
                bit = RequeueBit.CLEAR if op is Op.REQUEUE else None
                return Outcome(op, job, Result.EXPIRED, bit, None, (), None,
                               "another operation or sweeper held the job until the deadline")
            time.sleep(LEASE_POLL)
        try:
            nonce = new_nonce()
            op_id = ledger.begin_operation(job, op, nonce, self.clock())
            outcome = execute(op, job, deadline, scontrol=self.scontrol, nonce=nonce, clock=self.clock)
            try:
                ledger.finish_operation(op_id, outcome, b"".join(c.stderr for c in outcome.calls), self.clock())
            except LedgerError:
                # The object keeps its intent (may_be_set for a requeue): nothing is lost for the
                # sweeper.  The outcome itself would be, so it goes to the log before the error.
                log.error("could not record %s (nonce %s) in %s", describe(outcome), nonce, self.path)
                raise
            return outcome
        finally:
            ledger.release_lease(job, owner)
