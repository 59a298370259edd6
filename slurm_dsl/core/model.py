"""The core's values (ops, results, the requeue bit, calls, outcomes, verdicts) and the one exception
tree under ``DSLError`` that carries them (docs/contract.md §7, §8, §12).

Plain immutable values (str enums, frozen dataclasses): they go straight into SQLite and JSON.  One
module because they name each other.  ``error_for`` is the one place a result becomes an exception;
anything escaping the package that is not a ``DSLError`` is a bug.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple, Type

from .jobinfo import JobInfo
from .shown import shown


class Op(str, enum.Enum):
    """The operations of docs/contract.md §1."""

    HOLD = "hold"
    RELEASE = "release"
    REQUEUE = "requeue"
    RESTORE = "restore"
    OPEN = "open"
    REQUEUE_HOLD = "requeuehold"  # requeue --hold: call 2 is scontrol requeuehold (§1)

    @property
    def wrapped(self) -> bool:
        """Whether the op runs as a deadline-wrapped script (all but ``open``)."""
        return self is not Op.OPEN

    @property
    def requeues(self) -> bool:
        """Whether the op is a requeue, into hold or not: three calls and a ``requeue_bit``."""
        return self is Op.REQUEUE or self is Op.REQUEUE_HOLD

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
    """Which rule made an outcome unknown (or a requeue's bit not clear); stable: ``--json``, the ledger."""

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
    """One scontrol call as read: ``status`` None when unreadable (``status_text`` is verbatim), ``stderr``
    the call's own, ``message`` the refusal text if refused (docs/contract.md §4, §5)."""

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
    """How a settled unknown row of ``op`` exits by its effect (docs/contract.md §12, "The effect and the
    bit are two answers"); ``requeue_bit`` None: unfinished."""
    result = EXIT_OF_EFFECT.get(effect, Result.UNKNOWN)
    if result is Result.OK and op.requeues and requeue_bit is not RequeueBit.CLEAR:
        return Result.BIT_SET
    return result


class Verdict(str, enum.Enum):
    """Whether an unknown operation took effect, as the job's record says (docs/contract.md §12)."""

    PRESENT = "present"  # the record shows the effect
    ABSENT = "absent"  # it does not, looked at least the settle delay after the end
    GONE = "gone"  # slurmctld no longer knows the job
    UNDECIDABLE = "undecidable"  # the record can never say (a requeue without a baseline)

    def __str__(self) -> str:
        return self.value



@dataclass(frozen=True)
class AdminComment:
    """The ``--admin-comment`` copy after an operation (docs/contract.md §10.4): its result, detail, text."""

    result: Result
    detail: str
    text: str

    def to_json(self) -> Dict[str, str]:
        return {"result": self.result.value, "detail": self.detail, "text": self.text}


@dataclass(frozen=True)
class Outcome:
    """What one operation on one job came to (docs/contract.md §8).  ``effect``: a settled run's verdict
    (§12; None: not unknown, or none in time); ``saved``: known saved by the deadline (§13.5; None: not
    asked).  ``result`` stays the calls' own reading."""

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
    comment: Optional[AdminComment] = None  # beside the result, never part of it

    @property
    def exits_as(self) -> Result:
        """The result it exits and raises as: a settled unknown one by its effect (docs/contract.md §12),
        an ok not known saved (``saved`` False, §13.5) as unknown; else its own."""
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
        """None when it exits as ok, else raise its exception (``error_for``)."""
        if self.exits_as is Result.OK:
            return None
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
            **({"admin_comment": self.comment.to_json()} if self.comment is not None else {}),
        }


# The exception tree (docs/contract.md §8).


class DSLError(Exception):
    """Root of every slurm-dsl error; ``job_id``, ``op`` and ``outcome`` are None off an operation."""

    def __init__(
        self,
        message: str,
        *,
        job_id: Optional[str] = None,
        op: Optional[str] = None,
        outcome: Optional[Outcome] = None,
    ) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.op = op
        self.outcome = outcome

    @property
    def requeue_bit_may_be_set(self) -> bool:
        return self.outcome is not None and self.outcome.requeue_bit_may_be_set


class Rejected(DSLError):
    """slurmctld decided and changed nothing."""


class NotFound(Rejected):
    """slurmctld does not know the job id."""


class Expired(DSLError):
    """The deadline passed before the call could start: it certainly did not run."""


class OutcomeUnknown(DSLError):
    """The call may or may not have taken effect."""


class RequeueBitSet(DSLError):
    """A requeue set the job's Requeue flag and certainly did not clear it."""


class NotRun(DSLError):
    """scontrol could not be found or executed: nothing ran."""


class ConfigError(DSLError):
    """The configuration or the environment is unusable (nothing ran)."""


class LedgerError(DSLError):
    """The ledger cannot be opened, read or written (CLI exit status 1); ``path`` says which."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class NotRecorded(LedgerError):
    """The operation ran, but its outcome could not be recorded: ``outcome`` is what it came to, and
    the caller must still report it."""

    outcome: Outcome
    outcomes: Tuple[Outcome, ...]

    def __init__(self, outcome: Outcome, cause: LedgerError, *, more: Sequence[Outcome] = ()) -> None:
        """``more``: the other outcomes of a bulk chunk whose results could not be recorded together."""
        what = describe(outcome) + (f" and {len(more)} more job(s)" if more else "")
        super().__init__(f"{what}, but it could not be recorded: {cause}", path=cause.path)
        self.outcome = outcome
        self.outcomes = (outcome, *more)
        self.job_id = outcome.job_id
        self.op = outcome.op.value


class LookupFailed(DSLError):
    """Could not ask slurmctld; nothing is known.  ``reason``, what squeue or pyslurm said, is made
    ``shown`` here, once (docs/contract.md §10.1)."""

    def __init__(self, reason: str) -> None:
        self.reason = shown(reason)
        super().__init__(f"job lookup failed: {self.reason}")


class SweepBusy(DSLError):
    """Another sweep holds the lock at ``path``: this one did nothing (CLI exit status 3)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"another sweep is running (lock {path} is held); nothing done")
        self.path = path


class UsageError(DSLError):
    """Asked for something that cannot be done as asked; nothing ran (CLI exit status 2)."""


class WholeArray(UsageError):
    """Job ids that are an array's own JobId reaching other tasks: refused before anything ran."""

    def __init__(self, arrays: Sequence[JobInfo]) -> None:
        self.job_ids = [info.job_id for info in arrays]
        each = "; ".join(
            f"job {info.job_id} is the own JobId of array {info.job_id}, whose {info.array_tasks} tasks"
            " scontrol would all act on"
            for info in arrays
        )
        super().__init__(
            f"{each}. Nothing ran. Act on a task by its own JobId"
            f" (squeue -r -j {','.join(self.job_ids)} -O JobID,ArrayTaskID,State lists them; pending tasks"
            " never split off still share the array's JobId), or on the whole array with scontrol itself"
        )


class InvalidInput(DSLError, ValueError):
    """A bad value given to a function (job id, op, timeout, path...); a ``ValueError`` too (docs/contract.md §8)."""


_ERROR_OF_RESULT: Dict[str, Type[DSLError]] = {
    "rejected": Rejected,
    "not_found": NotFound,
    "expired": Expired,
    "unknown": OutcomeUnknown,
    "bit_set": RequeueBitSet,
    "not_run": NotRun,
}


def error_for(outcome: Outcome) -> DSLError:
    """The exception for a non-ok outcome (``InvalidInput`` for an ok one)."""
    cls = _ERROR_OF_RESULT.get(outcome.exits_as.value)
    if cls is None:
        raise InvalidInput("an ok outcome has no error")
    return cls(describe(outcome), job_id=outcome.job_id, op=outcome.op.value, outcome=outcome)


def describe(outcome: Outcome) -> str:
    """One line for an admin: what happened to which job, and why."""
    text = f"{outcome.op.value} {outcome.job_id}: {outcome.result.value}"
    messages = [c.message for c in outcome.calls if c.message]
    if messages:
        text += f" ({messages[-1]})"
    if outcome.reason is not None:
        text += f" [{outcome.reason.value}]"
    if outcome.requeue_bit is not None and outcome.requeue_bit.value != "clear":
        text += f"; requeue bit {outcome.requeue_bit.value}"
    return text
