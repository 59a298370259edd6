"""``--admin-comment`` on the real lab (docs/contract.md §10.4, issue 45 item 3): the reason reaches
the job's AdminComment, which its owner reads in ``scontrol show job``; a refused operation writes
none; a command killed during its comment call keeps its operation's result and records the
comment's as not known.  Every major's live part runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests import lab
from tests.cli_run import cli, killed_when

pytestmark = pytest.mark.integration

REASON = "drain of n1: disk sdb failed; see ticket 'INC-42' $HOME"


def admin_comment(job: str) -> Optional[str]:
    """The job's AdminComment as ``scontrol show job`` shows it, a line of its own (None: unset)."""
    shown = subprocess.run([lab.SCONTROL, "show", "job", job], capture_output=True, text=True, check=True).stdout
    for line in shown.splitlines():
        if line.strip().startswith("AdminComment="):
            return line.strip()[len("AdminComment="):].strip() or None
    return None


def rows(out: str) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def args(ledger: Path, scontrol: str = lab.SCONTROL) -> List[str]:
    return ["--reason", REASON, "--admin-comment", "--json", "--timeout", "20", "--ledger", str(ledger),
            "--scontrol", scontrol, "--squeue", lab.SQUEUE]


def test_the_reason_reaches_the_jobs_admin_comment_and_a_refused_op_writes_none(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    job, pending = lab.make_job("running_rq0"), lab.make_job("pending")
    try:
        done = cli(["hold", job, *args(ledger)])
        (row,) = rows(done.out)
        assert done.code == 0 and row["result"] == "ok" and row["admin_comment"]["result"] == "ok", done
        assert admin_comment(job) == f"slurm-dsl hold: {REASON}"
        done = cli(["requeue", pending, *args(ledger)])  # refused: pending
        (row,) = rows(done.out)
        assert row["result"] == "rejected" and "admin_comment" not in row, row
        assert admin_comment(pending) is None
    finally:
        lab.cancel(job, pending)


@pytest.mark.parametrize("applied", [False, True], ids=["before-its-call", "after-its-call"])
def test_a_command_killed_during_its_comment_keeps_its_op_and_records_the_comment_as_not_known(
    tmp_path: Path, applied: bool
) -> None:
    ledger, started = tmp_path / "ledger.sqlite3", tmp_path / "comment-started"
    # The comment's call stops before (or once) it reached slurmctld; the test kills the command then.
    stop = f": > '{started}'; exec sleep 60"
    body = (f'"{lab.SCONTROL}" "$@"; {stop}' if applied else stop)
    wrapper = tmp_path / "scontrol"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *AdminComment=*) {body} ;; esac\nexec "{lab.SCONTROL}" "$@"\n')
    wrapper.chmod(0o755)
    job = lab.make_job("running_rq0")
    try:
        killed_when(["hold", job, *args(ledger, str(wrapper))], started)
        with open_ledger(str(ledger)) as opened:
            (entry,) = opened.history(job)
            (written,) = opened.comments([entry.id])[entry.id]
        assert entry.result is not None and entry.result.value == "ok", entry  # the hold's own, recorded first
        assert written.result is None, written  # not known: the command ended before it
        state = lab.job_state(job)
        assert state is not None and state.priority == 0  # held, whatever became of the comment
        assert admin_comment(job) == (f"slurm-dsl hold: {REASON}" if applied else None)
        shown = cli(["history", job, "--ledger", str(ledger)])
        assert "admin comment: not_recorded" in shown.out, shown
    finally:
        lab.cancel(job)
