"""What an operation would come to on a job, from its record alone: ``--dry-run`` (docs/contract.md §10).
The cells of docs/slurm-behaviour.md §2 read as results: a prediction, not a promise."""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

from .jobinfo import JobInfo
from .model import Op, Result
from .script import call_argv


class Prediction(NamedTuple):
    """The result a run would likely give, why, and the scontrol calls it would make."""

    result: Result
    why: str
    calls: Tuple[Tuple[str, ...], ...]


def predict(op: Op, job_id: str, info: Optional[JobInfo]) -> Prediction:
    """``op`` on ``job_id`` whose record is ``info`` (None: slurmctld does not know it)."""
    op = Op(op)
    calls = (("release", job_id),) if op is Op.OPEN else tuple(args for _, args in call_argv(op, job_id))
    result, why = _cell(op, info)
    return Prediction(result, why, calls)


def _cell(op: Op, info: Optional[JobInfo]) -> Tuple[Result, str]:
    if info is None:
        if op is Op.RESTORE:
            return Result.OK, "slurmctld does not know the job: no flag is left to clear"
        return Result.NOT_FOUND, "slurmctld does not know the job"
    if info.finished:
        return Result.REJECTED, f"{info.state}: Job has already finished"
    if op is Op.HOLD:
        return Result.OK, "already held: nothing changes" if info.priority == 0 else "would be held"
    if op in (Op.RELEASE, Op.OPEN):
        return Result.OK, "not held: nothing changes" if info.priority else "would be released"
    if op is Op.RESTORE:
        return Result.OK, "would clear Requeue=1" if info.requeue else "already at Requeue=0: nothing changes"
    if info.state == "PENDING":
        return Result.REJECTED, "PENDING: Job is pending execution (its flag set, then cleared again)"
    into = " into hold" if op is Op.REQUEUE_HOLD else ""
    return Result.OK, f"{info.state}: would be requeued{into} (RestartCnt {info.restarts} to {info.restarts + 1})"
