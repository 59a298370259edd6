"""Values of the core: operations, results, the requeue bit, calls and outcomes.

Contract: everything here is a plain immutable value (str-valued enums and frozen
dataclasses), so it goes straight into SQLite and JSON.  Nothing here does I/O.
docs/contract.md §7 defines the results and the requeue bit, §8 the ``Outcome`` surface.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from .errors import InvalidInput

if TYPE_CHECKING:
    from .settle import Verdict  # settle imports this module: the type only


class Op(str, enum.Enum):
    """The operations of docs/contract.md §1."""

    HOLD = "hold"
    RELEASE = "release"
    REQUEUE = "requeue"
    RESTORE = "restore"
    OPEN = "open"

    @property
    def wrapped(self) -> bool:
        """Whether the op runs as a deadline-wrapped script (all but ``open``)."""
        return self is not Op.OPEN

    @classmethod
    def _missing_(cls, value: object) -> Op:
        # ``Op(x)`` is how every public function reads an op: an unknown one is InvalidInput
        # (a ValueError, as the enum's own would be), so the package raises nothing outside DSLError.
        raise InvalidInput(f"unknown op {value!r}: expected one of {', '.join(o.value for o in cls)}")

    def __str__(self) -> str:
        return self.value


class Result(str, enum.Enum):
    """The results of docs/contract.md §7."""

    OK = "ok"
    REJECTED = "rejected"
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    NOT_RUN = "not_run"
    UNKNOWN = "unknown"
    BIT_SET = "bit_set"

    def __str__(self) -> str:
        return self.value


class RequeueBit(str, enum.Enum):
    """What a requeue may have left behind in the job's Requeue flag (docs/contract.md §7, §9)."""

    CLEAR = "clear"
    MAY_BE_SET = "may_be_set"
    SET = "set"

    def __str__(self) -> str:
        return self.value


class CallOutcome(str, enum.Enum):
    """The outcome of one scontrol call (docs/contract.md §4, §5)."""

    SUCCESS = "success"
    REJECTED = "rejected"
    NOT_FOUND = "not_found"
    EXPIRED = "expired"
    NOT_RUN = "not_run"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


class Reason(str, enum.Enum):
    """Which rule made an outcome unknown (or a requeue's bit not clear).

    The values are stable: they appear in ``--json`` output and in the ledger.
    """

    # docs/contract.md §6: the output as a whole cannot be read.
    STDERR_NOT_BYTES = "stderr_not_bytes"
    NONCE_INVALID = "nonce_invalid"
    NO_STATUS_LINE = "no_status_line"
    MALFORMED_STATUS_LINE = "malformed_status_line"
    FOREIGN_NONCE = "foreign_nonce"
    CALL_ORDER = "call_order"
    UNREADABLE_STATUS = "unreadable_status"
    TEXT_AFTER_LAST_LINE = "text_after_last_line"
    UNREADABLE_EXIT_STATUS = "unreadable_exit_status"
    EXIT_STATUS_MISMATCH = "exit_status_mismatch"
    WRONG_CALLS = "wrong_calls"
    OUTPUT_TOO_LARGE = "output_too_large"
    # A process that escaped the call's session still held stdout/stderr when the
    # runner stopped reading: what it wrote after that was never read.
    OUTPUT_NOT_CLOSED = "output_not_closed"
    # docs/contract.md §4, §5: one call's outcome is unknown.
    TIMED_OUT = "timed_out"
    WRAPPER_FAILED = "wrapper_failed"
    KILLED_BY_SIGNAL = "killed_by_signal"
    UNRECOGNISED_STDERR = "unrecognised_stderr"
    # docs/contract.md §7: a requeue's third call did not clear the bit.
    CLEAR_FAILED = "clear_failed"
    CLEAR_NOT_RUN = "clear_not_run"
    # docs/contract.md §7: the third call found the job finished, which may still show Requeue=1.
    JOB_FINISHED = "job_finished"
    # docs/contract.md §11: nothing ran, because `scontrol ping` said slurmctld was down.
    CONTROLLER_DOWN = "controller_down"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Call:
    """One scontrol call as read from a script's output.

    ``status`` is the status as an int when it is readable (docs/contract.md §4), else None;
    ``status_text`` is what the status line said, verbatim.  ``stderr`` is the
    call's own stderr (the bytes before its status line).  ``message`` is the
    refusal text when the call was refused (docs/contract.md §5), else None.
    """

    number: int
    status: Optional[int]
    status_text: str
    stderr: bytes
    outcome: CallOutcome
    message: Optional[str] = None
    reason: Optional[Reason] = None

    def to_json(self) -> Dict[str, Any]:
        return {
            "number": self.number,
            "status": self.status if self.status is not None else self.status_text,
            "outcome": self.outcome.value,
            "message": self.message,
            "stderr": self.stderr.decode("utf-8", "backslashreplace"),
        }


# How a settled unknown row exits, by its effect's value (docs/contract.md §12); any other effect
# (absent, undecidable) and none exit as unknown.
EXIT_OF_EFFECT = {"present": Result.OK, "gone": Result.NOT_FOUND}


def exit_of_effect(op: Op, effect: str, requeue_bit: Optional[RequeueBit]) -> Result:
    """How a settled unknown row of ``op`` exits by its effect's value (docs/contract.md §12,
    "The effect and the bit are two answers"): ``EXIT_OF_EFFECT``, except that a requeue whose bit
    is not ``clear`` (None: unfinished, its intent left ``may_be_set``) exits ``present`` as
    ``bit_set``: the job was requeued and may still be at Requeue=1 until the sweep restores it."""
    result = EXIT_OF_EFFECT.get(effect, Result.UNKNOWN)
    if result is Result.OK and op is Op.REQUEUE and requeue_bit is not RequeueBit.CLEAR:
        return Result.BIT_SET
    return result


@dataclass(frozen=True)
class Outcome:
    """What one operation on one job came to (docs/contract.md §8).

    ``reason`` names the rule that made the result unknown (or, for a requeue,
    why the bit is not clear); it is None for a plain ok/refusal/expiry.

    ``settled``: the operation ran with ``--settle``, ``--retry`` or ``--key`` (``settle=``,
    ``retry=``, ``key=``: docs/contract.md §12), so ``effect`` says whether an unknown result took
    effect (``core.settle.Verdict``; None when the result is not unknown, or no verdict came in
    time) and the row exits by it (``exits_as``).  ``result`` stays the calls' own reading.

    ``saved``: asked to wait for slurmctld's save (``--durable``, docs/contract.md §13.5), whether
    the change was known saved by the deadline (None: not asked, or nothing to save).
    """

    op: Op
    job_id: str
    result: Result
    requeue_bit: Optional[RequeueBit]
    reason: Optional[Reason] = None
    calls: Tuple[Call, ...] = ()
    exit_status: Optional[int] = None
    detail: str = ""
    effect: Optional[Verdict] = None
    settled: bool = False
    saved: Optional[bool] = None

    @property
    def exits_as(self) -> Result:
        """The result this outcome exits and raises as: its own, or once settled and unknown, by
        its effect (docs/contract.md §12: ``present`` as ok, or as bit_set for a requeue whose bit is
        not clear, ``gone`` as not_found, else unknown; ``core.settle.exits_as`` is the same rule,
        checked).  Asked to wait for slurmctld's save (``saved`` not None, docs/contract.md §13.5), a
        row that would exit ok but whose change is not known saved (``saved`` False) exits as
        unknown: a crash could still undo it."""
        if not self.settled or self.result is not Result.UNKNOWN or self.effect is None:
            result = self.result
        else:
            result = exit_of_effect(self.op, self.effect.value, self.requeue_bit)
        if self.saved is False and result is Result.OK:
            return Result.UNKNOWN
        return result

    @property
    def ok(self) -> bool:
        return self.result is Result.OK

    @property
    def requeue_bit_may_be_set(self) -> bool:
        """True when the job's Requeue flag may be 1 because of this operation."""
        return self.requeue_bit in (RequeueBit.MAY_BE_SET, RequeueBit.SET)

    def raise_for_result(self) -> None:
        """Return None when the result is ok (or, settled, exits as ok), else raise its exception
        (docs/contract.md §8, §12)."""
        if self.exits_as is Result.OK:
            return None
        from .errors import error_for

        raise error_for(self)

    def to_json(self) -> Dict[str, Any]:
        """The ``--json`` object of docs/contract.md §10."""
        return {
            "job_id": self.job_id,
            "op": self.op.value,
            "result": self.result.value,
            "requeue_bit": self.requeue_bit.value if self.requeue_bit else None,
            "reason": self.reason.value if self.reason else None,
            "detail": self.detail or None,
            "exit_status": self.exit_status,
            "calls": [c.to_json() for c in self.calls],
            **({"effect": None if self.effect is None else self.effect.value} if self.settled else {}),
            **({"saved": self.saved} if self.saved is not None else {}),
        }

