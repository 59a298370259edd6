"""``--dry-run`` on the real lab: what it predicts for each op on each kind of job is the result the
real operation then gives (issue 45 item 4), and it runs no update of its own."""

from __future__ import annotations

import json
import time
from typing import Optional

import pytest

from slurm_dsl import Op
from slurm_dsl.run.calls import execute
from tests import lab
from tests.cli_run import cli

pytestmark = pytest.mark.integration

KINDS = ("held_user", "running_rq0", "running_rq1", "completed", "missing")
MISSING = "999999"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", list(Op), ids=str)
def test_the_prediction_is_what_the_run_gives(op: Op, kind: str) -> None:
    job = MISSING if kind == "missing" else lab.make_job(kind)
    try:
        before = lab.job_state(job)
        code, out, err = cli([op.value, job, "--dry-run", "--json", "--timeout", "20", "--scontrol",
                              lab.SCONTROL, "--squeue", lab.SQUEUE])
        assert code == 0, err
        predicted = json.loads(out)
        after_dry: Optional[lab.JobState] = lab.job_state(job)
        assert after_dry == before  # the dry run changed nothing
        result = execute(op, job, time.time() + 20, scontrol=lab.SCONTROL).result
        assert predicted["would"] == result.value, (predicted, result)
    finally:
        if kind != "missing":
            lab.cancel(job)
