"""slurm-dsl doctor on the lab: a controller set up as a site running slurm-dsl."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from slurm_dsl.admin.cli import main

pytestmark = pytest.mark.integration


def test_doctor_finds_the_lab_ready(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["doctor", "--ledger", str(tmp_path / "ledger.sqlite3")], out=out) == 0, out.getvalue()
    statuses = {line.split()[1]: line.split()[0] for line in out.getvalue().splitlines()}
    assert statuses["slurmctld"] == statuses["JobRequeue"] == statuses["job_submit"] == statuses["ledger"] == "ok"


def test_doctor_finds_the_helper_answering(tmp_path: Path, jobinfo_helper: str) -> None:
    """The live suite runs with the helper built from this checkout ($SLURM_DSL_JOBINFO): doctor
    asks slurmctld through it for a job id no job has, and it answers."""
    out = io.StringIO()
    assert main(["doctor", "--ledger", str(tmp_path / "ledger.sqlite3")], out=out) == 0, out.getvalue()
    line = next(line for line in out.getvalue().splitlines() if line.split()[1] == "jobinfo")
    assert line.split()[0] == "ok" and f"{jobinfo_helper}: asks slurmctld" in line, line
