"""The reason copied to a job's AdminComment after its operation (``--admin-comment``, docs/contract.md
§10.4): a wrapped call of its own, recorded, under the job's lease; it never changes the operation's result."""

from __future__ import annotations

import signal
from typing import Optional

from ..core.model import AdminComment as Comment
from ..core.model import LedgerError, Op, Outcome, Reason, Result
from ..core.reader import read_outcome, unknown
from ..core.script import render_comment
from ..host import world
from ..host.binaries import find_scontrol
from .calls import new_nonce, run_wrapped
from .tracked import LEASE_POLL, Tracker, lease_owner, lease_ttl

TOOK_EFFECT = frozenset({Result.OK, Result.BIT_SET})
SINCE = 86_400.0  # seconds back (the ledger's clock) an operation of this process is looked for


def text_of(op: Op, reason: str) -> str:
    """What the job's owner reads in AdminComment."""
    return f"slurm-dsl {'requeue --hold' if op is Op.REQUEUE_HOLD else op.value}: {reason}"


def write(tracker: Tracker, outcome: Outcome, reason: str, deadline: float) -> Optional[Comment]:
    """The AdminComment copy after ``outcome`` (None: its op did not take effect, nothing asked)."""
    if outcome.result not in TOOK_EFFECT or not outcome.calls:
        return None
    text, job = text_of(outcome.op, reason), outcome.job_id
    ledger, owner = tracker.ledger(), lease_owner("comment")
    try:
        now = ledger.now()
        mine = ledger.operations_by([job], outcome.op, tracker.actor, now - SINCE).get(job, [])
        if not mine:
            return Comment(Result.EXPIRED, "not run: its operation is not in the ledger", text)
        while not ledger.acquire_leases([job], owner, ledger.now(), lease_ttl(deadline - tracker.clock())):
            if tracker.clock() >= deadline:
                return Comment(Result.EXPIRED, "not run: another run held the job until the deadline", text)
            world.sleep(LEASE_POLL)
    except LedgerError as exc:
        return Comment(Result.EXPIRED, f"not run: the ledger failed: {exc}", text)
    try:
        asked = ledger.ask_comment(mine[-1].id, job, text, ledger.now())
        if not tracker.pace.take(1, deadline):
            done = Comment(Result.EXPIRED, "not run: its turn came after the deadline", text)
        else:
            done = _call(tracker, job, text, deadline)
        ledger.comment_done(asked, done.result.value, done.detail, ledger.now())
        return done
    except LedgerError as exc:
        return Comment(Result.UNKNOWN, f"the ledger failed: {exc}", text)
    finally:
        Tracker._give_back(ledger, job, owner)


def _call(tracker: Tracker, job: str, text: str, deadline: float) -> Comment:
    """The call, read as any one-call update of the job (``Op.RESTORE``'s reading: the same RPC)."""
    nonce, path = new_nonce(), find_scontrol(tracker.scontrol)
    done = run_wrapped(lambda expired: render_comment(job, text, deadline, nonce, path, expired=expired),
                       deadline - tracker.clock())
    read: Outcome
    if done.truncated or done.pipes_held or (done.timed_out and done.killed_by == signal.SIGKILL):
        read = unknown(Op.RESTORE, job, Reason.TIMED_OUT, exit_status=done.returncode)
    else:
        read = read_outcome(Op.RESTORE, job, done.stderr, done.returncode, nonce)
    said = [c.message for c in read.calls if c.message]
    return Comment(read.result, said[-1] if said else read.detail or "", text)
