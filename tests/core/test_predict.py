"""``--dry-run``'s predictions (slurm_dsl/core/predict.py) against docs/slurm-behaviour.md §2's cells
read as contract §7's results, written out here apart from the module."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Result
from slurm_dsl.core.predict import predict

RECORDS: Dict[str, Optional[JobInfo]] = {
    "pending": JobInfo("7", "PENDING", False, 0, 1, "BeginTime"),
    "held": JobInfo("7", "PENDING", False, 0, 0, "JobHeldAdmin"),
    "running0": JobInfo("7", "RUNNING", False, 0, 1, "None"),
    "running1": JobInfo("7", "RUNNING", True, 2, 1, "None"),
    "held_running": JobInfo("7", "RUNNING", False, 0, 0, "JobHeldAdmin"),
    "completed": JobInfo("7", "COMPLETED", True, 0, 1, "None"),
    "cancelled": JobInfo("7", "CANCELLED", False, 0, 1, "None"),
    "gone": None,
}
# (op, record) -> result; every pair not listed is ok.
NOT_OK: Dict[Tuple[Op, str], Result] = {
    **{(op, "gone"): Result.NOT_FOUND for op in (Op.HOLD, Op.RELEASE, Op.OPEN, Op.REQUEUE, Op.REQUEUE_HOLD)},
    **{(op, k): Result.REJECTED for op in Op for k in ("completed", "cancelled")},
    # requeuehold's refusals are requeue's (docs/slurm-behaviour.md §1)
    **{(op, k): Result.REJECTED for op in (Op.REQUEUE, Op.REQUEUE_HOLD) for k in ("pending", "held")},
}
CALLS = {
    Op.HOLD: [("hold", "7")], Op.RELEASE: [("release", "7")], Op.OPEN: [("release", "7")],
    Op.RESTORE: [("update", "JobId=7", "Requeue=0")],
    Op.REQUEUE: [("update", "JobId=7", "Requeue=1"), ("requeue", "7"), ("update", "JobId=7", "Requeue=0")],
    Op.REQUEUE_HOLD: [("update", "JobId=7", "Requeue=1"), ("requeuehold", "7"), ("update", "JobId=7", "Requeue=0")],
}


@pytest.mark.parametrize("kind", sorted(RECORDS))
@pytest.mark.parametrize("op", list(Op), ids=str)
def test_each_cell(op: Op, kind: str) -> None:
    said = predict(op, "7", RECORDS[kind])
    assert said.result is NOT_OK.get((op, kind), Result.OK)
    assert [tuple(c) for c in said.calls] == CALLS[op]
    assert said.why


def test_what_changes_nothing_says_so() -> None:
    assert "nothing changes" in predict(Op.HOLD, "7", RECORDS["held"]).why
    assert "nothing changes" in predict(Op.RELEASE, "7", RECORDS["running0"]).why
    assert "nothing changes" in predict(Op.RESTORE, "7", RECORDS["running0"]).why
    assert "RestartCnt 2 to 3" in predict(Op.REQUEUE, "7", RECORDS["running1"]).why
