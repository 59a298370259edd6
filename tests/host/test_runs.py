"""Which run a process is, and whether a run is known alive (slurm_dsl/host/runs.py, docs/contract.md
§13.7): real processes of this host, nothing mocked."""

from __future__ import annotations

import os
import subprocess
import sys

from slurm_dsl.host import process
from slurm_dsl.host.runs import RUN_ENV, Run, alive, boot_clock, ended, owner_alive, since, started, this_run


def test_this_run_is_this_process_and_is_alive() -> None:
    run = this_run()
    assert (run.host, run.pid) == (os.uname().nodename, os.getpid())
    assert run.start == started(os.getpid()) and run.start > 0
    assert Run.parse(str(run)) == run
    assert alive(str(run)) is True
    assert owner_alive(f"op:x:1:2:abcd@{run}") is True


def test_a_run_whose_process_is_gone_is_known_gone() -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    pid = int(child.stdout)
    gone = Run(this_run().host, this_run().boot, pid, 12345)  # the pid may be reused: not with that start
    assert alive(str(gone)) is False


def test_what_a_run_started_keeps_it_alive_after_the_run_is_gone() -> None:
    """A script a run started carries the run's mark (host.process.fixed_env): while it is there,
    the run is not over, even if the run's own process is gone."""
    assert process.fixed_env()[RUN_ENV] == str(this_run())
    gone = Run(this_run().host, this_run().boot, 999_999_999, this_run().start)  # gone, and as old as this one
    env = dict(os.environ, **{RUN_ENV: str(gone)})
    with subprocess.Popen(["sleep", "30"], env=env) as child:
        try:
            assert alive(str(gone)) is True
        finally:
            child.kill()
    assert alive(str(gone)) is False


def test_another_host_cannot_be_told_and_another_boot_is_gone() -> None:
    here = this_run()
    assert alive(str(Run("another-host", here.boot, here.pid, here.start))) is None
    assert alive(str(Run(here.host, "an-earlier-boot", here.pid, here.start))) is False
    assert alive("not a run") is None and owner_alive("op:written-before:1:2:abcd") is None


def test_since_counts_on_the_boot_clock_of_this_host_and_boot_only() -> None:
    """core.settle Rule 15: the seconds from an operation's end are read on one clock that never
    steps, or not at all."""
    here = this_run()
    mark = ended()
    at = boot_clock()
    seconds = since(mark, at + 5.0)
    assert seconds is not None and 5.0 <= seconds < 6.0
    clock = mark.rpartition("/")[2]
    assert since(f"another-host/{here.boot}/{clock}") is None
    assert since(f"{here.host}/an-earlier-boot/{clock}") is None
    assert since(None) is None and since("") is None and since(f"{here.host}/{here.boot}/soon") is None
