"""Every exception slurm-dsl raises on purpose, in one tree, and where a result becomes one.

Strategy: operations return an ``Outcome`` value; ``error_for`` is the single
boundary that turns a non-ok outcome into its exception.  Everything the package
raises on purpose derives from ``DSLError`` and is exported from ``slurm_dsl``;
anything else escaping it is a bug.  The tree::

    DSLError                  job_id, op, outcome, requeue_bit_may_be_set (None/False off an op)
    ├── Rejected              slurmctld decided and changed nothing         (docs/contract.md §8, from an Outcome)
    │   └── NotFound          ... because it does not know the job id
    ├── Expired               the deadline passed before the call started
    ├── OutcomeUnknown        the call may or may not have taken effect
    ├── RequeueBitSet         a requeue set the Requeue flag and certainly did not clear it
    ├── NotRun                scontrol could not be found or executed
    ├── ConfigError           the configuration or environment is unusable (nothing ran)
    ├── LedgerError           the ledger cannot be opened, read or written; .path
    │   └── NotRecorded       it ran, but its outcome could not be recorded; .outcome
    ├── LookupFailed          could not ask slurmctld about jobs; .reason
    ├── SweepBusy             another sweep holds the lock; .path
    ├── UsageError            asked for something that cannot be done as asked (nothing ran)
    │   └── WholeArray        an array's own JobId that reaches other tasks; .job_ids
    └── InvalidInput          a bad value given to a function; also a ValueError

``Rejected``, ``NotFound``, ``Expired`` and ``OutcomeUnknown`` are the sentinels
a caller branches on; ``RequeueBitSet`` and ``NotRun`` deliberately subclass none
of them: a requeue that left the bit set is neither a refusal nor an unknown, and
a call that never ran was neither refused nor expired.

``InvalidInput`` is both a ``DSLError`` and a ``ValueError``: docs/contract.md §1, §6 and §8
promise ``ValueError`` for a bad job id, op, timeout, deadline, nonce or path
(``validate_job_id``, ``resolve_deadline``, ``render``, ``read_outcome``...), and a
caller catching ``ValueError`` keeps working.  The command line checks its own
arguments while parsing them (usage error, exit 2), so one reaching it is exit 1.

The command line decides its exit status from the type, in one table
(``admin.cli.EXIT_OF_ERROR``): ``UsageError`` 2, ``SweepBusy`` 3, any other ``DSLError`` 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple, Type

from .shown import shown

if TYPE_CHECKING:
    from .jobinfo import JobInfo
    from .model import Outcome


class DSLError(Exception):
    """Root of every slurm-dsl error.

    Errors about an operation carry ``job_id``, ``op``, ``outcome`` and
    ``requeue_bit_may_be_set``; other errors (configuration, ledger) have them
    as None / False.
    """

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
    """The operation ran, but the ledger could not record its outcome: ``outcome`` is what it
    came to, and the caller must still report it.  (The object keeps the intent written before
    the script started, so for a requeue the sweeper still finds a bit that may be set.)"""

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
    """Could not ask slurmctld (down, timeout, unreadable answer); nothing is known.

    ``reason`` holds what squeue or pyslurm said, so it is ``shown`` (escaped, capped) here, once:
    it is printed, logged, kept as the detail of an unverified bulk result and as the ledger's
    lookup error (docs/contract.md §10.1)."""

    def __init__(self, reason: str) -> None:
        self.reason = shown(reason)
        super().__init__(f"job lookup failed: {self.reason}")


class SweepBusy(DSLError):
    """Another sweeper holds the lock at ``path``: this one did nothing (CLI exit status 3)."""

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
    """A bad value given to a function (job id, op, timeout, deadline, nonce, path...).

    Also a ``ValueError``, as docs/contract.md §8 promises for these, so ``except ValueError`` keeps working.
    """


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
