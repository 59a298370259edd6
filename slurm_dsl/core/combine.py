"""Call outcomes combined into a result (docs/contract.md §7), and what a result does to the bit
(``next_bit``, §9.2).  The calls are read and classified already (``reader``); this only decides.
"""

from __future__ import annotations

from typing import Optional, Tuple

from .model import Call, CallOutcome, Op, Outcome, Reason, RequeueBit, Result
from .refusals import ALREADY_FINISHED

_RESULT_OF_CALL = {
    CallOutcome.SUCCESS: Result.OK,
    CallOutcome.REJECTED: Result.REJECTED,
    CallOutcome.NOT_FOUND: Result.NOT_FOUND,
    CallOutcome.EXPIRED: Result.EXPIRED,
    CallOutcome.NOT_RUN: Result.NOT_RUN,
    CallOutcome.UNKNOWN: Result.UNKNOWN,
}

# docs/contract.md §7: "s3 ran" is any status other than 75, 126 and 127.
_NOT_STARTED = (75, 126, 127)


def found_gone(call: Call) -> bool:
    """A refusal saying slurmctld does not know the job: its flag is gone with it."""
    return call.outcome is CallOutcome.NOT_FOUND


def found_finished(call: Call) -> bool:
    """A Requeue=0 call refused because the job has finished: its flag is not known clear."""
    return call.outcome is CallOutcome.REJECTED and call.message == ALREADY_FINISHED


def cleared(call: Call) -> bool:
    """Whether a Requeue=0 call (requeue 3, restore) leaves the bit clear: it succeeded or the job is gone."""
    return call.outcome is CallOutcome.SUCCESS or found_gone(call)


def single(op: Op, job_id: str, call: Call, exit_status: Optional[int]) -> Outcome:
    """The result of a one-call op (hold, release, restore, open)."""
    if op is Op.RESTORE and found_gone(call):
        result = Result.OK
    else:
        result = _RESULT_OF_CALL[call.outcome]
    return Outcome(
        op=op,
        job_id=job_id,
        result=result,
        requeue_bit=None,
        reason=call.reason if result is Result.UNKNOWN else None,
        calls=(call,),
        exit_status=exit_status,
    )


def requeue(job_id: str, calls: Tuple[Call, ...], exit_status: Optional[int], op: Op = Op.REQUEUE) -> Outcome:
    """The result of a requeue or requeuehold whose calls fit it: {1}, {1,3} or {1,2,3}."""
    by_number = {c.number: c for c in calls}
    s1 = by_number[1]
    s2 = by_number.get(2)
    s3 = by_number.get(3)

    def out(result: Result, bit: RequeueBit, reason: Optional[Reason]) -> Outcome:
        return Outcome(op, job_id, result, bit, reason, calls, exit_status)

    s3_ran = s3 is not None and s3.status not in _NOT_STARTED
    s3_cleared = s3 is not None and cleared(s3)

    if s1.outcome is not CallOutcome.SUCCESS:
        # Bullet 1: the result is s1's.  The bit: may_be_set when s1 is unknown
        # (the setting may have landed unseen) or when s3 ran and did not clear.
        result = _RESULT_OF_CALL[s1.outcome]
        if s1.outcome is CallOutcome.UNKNOWN:
            return out(result, RequeueBit.MAY_BE_SET, s1.reason)
        if s3_ran and not s3_cleared:
            return out(result, RequeueBit.MAY_BE_SET, Reason.CLEAR_FAILED)
        return out(result, RequeueBit.CLEAR, None)

    assert s2 is not None and s3 is not None  # the {1,2,3} shape was checked by the reader
    s2_result = _RESULT_OF_CALL[s2.outcome]
    s2_reason = s2.reason if s2_result is Result.UNKNOWN else None
    if s3_cleared:
        # Bullet 2: s3 cleared the bit (or found the job gone): s2's own result.
        return out(s2_result, RequeueBit.CLEAR, s2_reason)
    if found_finished(s3):
        # Bullet 2 too: s2's own result, but a finished job may still show Requeue=1.
        return out(s2_result, RequeueBit.MAY_BE_SET, s2_reason or Reason.JOB_FINISHED)
    # Bullet 3: the bit was set by s1 and s3 did not clear it.
    if s3_ran:
        return out(Result.UNKNOWN, RequeueBit.MAY_BE_SET, Reason.CLEAR_FAILED)
    if s2.outcome is CallOutcome.UNKNOWN:
        return out(Result.UNKNOWN, RequeueBit.SET, s2.reason)
    return out(Result.BIT_SET, RequeueBit.SET, Reason.CLEAR_NOT_RUN)


def next_bit(prior: RequeueBit, outcome: Outcome) -> RequeueBit:
    """The job's RequeueBit in the ledger after ``outcome``, given ``prior`` (docs/contract.md §9.2)."""
    if outcome.op.requeues:
        bit = outcome.requeue_bit or RequeueBit.MAY_BE_SET
        if bit is not RequeueBit.CLEAR:
            return bit
        if any(c.number == 3 and cleared(c) for c in outcome.calls):
            return RequeueBit.CLEAR
        return prior
    if outcome.op is Op.RESTORE and outcome.result is Result.OK:
        return RequeueBit.CLEAR
    return prior
