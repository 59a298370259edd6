"""The exceptions of SPEC §8, and the one place where a result becomes one.

Strategy: operations return an ``Outcome`` value; ``error_for`` is the single
boundary that turns a non-ok outcome into its exception.  ``Rejected``,
``NotFound`` (a ``Rejected``), ``Expired`` and ``OutcomeUnknown`` are the
sentinels a caller branches on; ``RequeueBitSet`` and ``NotRun`` deliberately
subclass none of them: a requeue that left the bit set is neither a refusal
nor an unknown, and a call that never ran was neither refused nor expired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:
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


_ERROR_OF_RESULT: Dict[str, Type[DSLError]] = {
    "rejected": Rejected,
    "not_found": NotFound,
    "expired": Expired,
    "unknown": OutcomeUnknown,
    "bit_set": RequeueBitSet,
    "not_run": NotRun,
}


def error_for(outcome: Outcome) -> DSLError:
    """The exception for a non-ok outcome (``ValueError`` for an ok one)."""
    cls = _ERROR_OF_RESULT.get(outcome.result.value)
    if cls is None:
        raise ValueError("an ok outcome has no error")
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
