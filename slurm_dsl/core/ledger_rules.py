"""What an operation does to a job's object in the ledger: the rules, no storage (docs/contract.md §9.2).
"Rule N" is ``core.life.RULES["LN"]``, each with its contract section.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

from .combine import cleared, next_bit
from .model import InvalidInput, Op, Outcome, RequeueBit, Result


@dataclass(frozen=True)
class BitChange:
    """The object's bit after a step, and the why to store with it (None: leave the object)."""

    bit: RequeueBit
    why: Optional[str]


def first_seen_why(op: Op, nonce: str) -> str:
    """The why of a new object (bit clear), created by the first operation on its job."""
    return f"first seen by {Op(op).value} {nonce}"


@dataclass(frozen=True)
class Intent:
    """The bit a starting operation commits before its script may start, and why."""

    bit: RequeueBit
    why: str


def intent(op: Op, nonce: str) -> Optional[Intent]:
    """What a starting operation commits before its script may start: may_be_set for a requeue."""
    if Op(op).requeues:
        return Intent(RequeueBit.MAY_BE_SET, f"{Op(op).value} {nonce} started")
    return None


def after(
    op: Op, nonce: str, prior_at_begin: RequeueBit, current: RequeueBit, outcome: Outcome, *, later_began: bool = False
) -> BitChange:
    """Rules 2, 7, 8: the object's bit once ``outcome`` is known, and why (None: leave the object).
    ``prior_at_begin``: a requeue's bit when it began; ``later_began``: another operation began since."""
    op = Op(op)
    bit = next_bit(prior_at_begin if op.requeues else current, outcome)
    if not op.requeues and op is not Op.RESTORE:
        return BitChange(bit, None)
    if later_began and UNCLEARNESS[bit] < UNCLEARNESS[RequeueBit(current)]:
        return BitChange(RequeueBit(current), None)
    watched = bit is RequeueBit.CLEAR and cleared_by_a_call(outcome)
    if watched:
        bit = RequeueBit.MAY_BE_SET  # Rule 8
    why = f"{op.value} {nonce}: {outcome.result.value}"
    if outcome.reason is not None:
        why += f" ({outcome.reason.value})"
    if watched:
        why += f"; {UNSAVED}"
    return BitChange(bit, why)


# Rule 8's why: the object is kept, watched, until a save proves the clear (docs/contract.md §13).
UNSAVED = "cleared, not yet known saved by slurmctld: watched until it is"


def cleared_by_a_call(outcome: Outcome) -> bool:
    """Whether a call cleared the job's flag or found the job gone: a requeue's call 3, an ok restore."""
    if outcome.op is Op.RESTORE:
        return outcome.result is Result.OK
    return outcome.op.requeues and any(c.number == 3 and cleared(c) for c in outcome.calls)


def backoff(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after the ``failures``-th failed lookup in a row: ``min(cap, base * 2**(failures-1))``."""
    # Cap the exponent too: 2.0 ** 1100 overflows a float.
    return min(cap, base * 2.0 ** min(max(failures, 1) - 1, 64))


# -- prune and status: the admin's view --------------------------------------------------------

DAY = 86400.0


def prune_before(now: float, days: int) -> float:
    """The cutoff of ``prune --older-than DAYS``; under one day is ``InvalidInput``."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise InvalidInput(f"--older-than must be a whole number of days, at least 1, not {days!r}")
    return now - days * DAY


@dataclass(frozen=True)
class PruneRow:
    """One history row as prune sees it, with what it must know of the row's object."""

    finished_at: Optional[float]  # None: unfinished (running, or the trace of a crash)
    newest: bool  # the object's newest history row
    bit: RequeueBit  # the object's bit now
    leased: bool  # an operation or a sweep holds a lease not lapsed on the job


def may_prune(row: PruneRow, before: float) -> bool:
    """Rule 4: whether prune may remove ``row`` (finished before ``before``)."""
    return (
        row.finished_at is not None
        and row.finished_at < before
        and not row.newest
        and RequeueBit(row.bit) is RequeueBit.CLEAR
        and not row.leased
    )


# ``ledger status``: objects not clear by how long ago their bit last changed.
AGE_BUCKETS: Tuple[Tuple[str, float], ...] = (("<1h", 3600.0), ("<1d", DAY), ("<1w", 7 * DAY), ("older", math.inf))


def age_bucket(age: float) -> str:
    """The ``AGE_BUCKETS`` name for an age in seconds (a negative age, a clock gone back, is ``<1h``)."""
    return next(name for name, limit in AGE_BUCKETS if age < limit)


def ages(since: Iterable[float], now: float) -> Dict[str, int]:
    """How many of the times ``since`` fall in each ``AGE_BUCKETS`` bucket before ``now`` (every bucket named)."""
    counts = {name: 0 for name, _ in AGE_BUCKETS}
    for t in since:
        counts[age_bucket(now - t)] += 1
    return counts


# -- migrate: merging one ledger into another --------------------------------------------------

# How far a bit is from clear: a merge never lowers it (set > may_be_set > clear).
UNCLEARNESS: Dict[RequeueBit, int] = {RequeueBit.CLEAR: 0, RequeueBit.MAY_BE_SET: 1, RequeueBit.SET: 2}


def less_clear(incoming: RequeueBit, kept: RequeueBit) -> bool:
    """Rule 5: whether a merge replaces the object it has by the incoming one: only if strictly less clear."""
    return UNCLEARNESS[RequeueBit(incoming)] > UNCLEARNESS[RequeueBit(kept)]


# The tag of a sweep's lease owners (``run.tracked.lease_owner("sweep")``: ``sweep:<host>:<pid>:...``).
SWEEP_TAG = "sweep"
# The same as a LIKE pattern, for the queries that pass over other sweeps' leases.
SWEEP_OWNERS = SWEEP_TAG + ":%"


def sweep_owned(owner: str) -> bool:
    """Rule 6: whether the lease owner ``owner`` is a sweep, whose lease the lock's holder may take over."""
    return owner.startswith(SWEEP_TAG + ":")
