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
