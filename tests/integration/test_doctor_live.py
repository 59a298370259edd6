"""slurm-dsl doctor on the lab: a controller set up as a site running slurm-dsl."""

from __future__ import annotations

import io
import os
import pwd
from pathlib import Path

import pytest

from slurm_dsl.admin.cli import main

pytestmark = pytest.mark.integration


def doctor(tmp_path: Path) -> str:
    """``doctor`` in this process on a ledger in ``tmp_path``, its lines.  That directory is this
    process's; on a lab whose SlurmUser is not root (trixie's) the config file names this account
    the units' (``service_account``), as a site whose units run as root does: the process cannot
    become the SlurmUser to use a directory of its, and doctor would rightly fail one the units
    cannot write."""
    config = tmp_path / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nservice_account = {pwd.getpwuid(os.geteuid()).pw_name}\n")
    out = io.StringIO()
    ledger = tmp_path / "ledger.sqlite3"
    assert main(["doctor", "--ledger", str(ledger), "--config", str(config)], out=out) == 0, out.getvalue()
    assert not ledger.exists(), "doctor only looks"
    return out.getvalue()


def test_doctor_finds_the_lab_ready(tmp_path: Path) -> None:
    statuses = {line.split()[1]: line.split()[0] for line in doctor(tmp_path).splitlines()}
    assert statuses["slurmctld"] == statuses["JobRequeue"] == statuses["job_submit"] == statuses["ledger"] == "ok"


def test_doctor_finds_the_helper_answering(tmp_path: Path, jobinfo_helper: str) -> None:
    """The live suite runs with the helper built from this checkout ($SLURM_DSL_JOBINFO): doctor
    asks slurmctld through it for a job id no job has, and it answers."""
    out = io.StringIO(doctor(tmp_path))
    line = next(line for line in out.getvalue().splitlines() if line.split()[1] == "jobinfo")
    assert line.split()[0] == "ok" and f"{jobinfo_helper}: asks slurmctld" in line, line
