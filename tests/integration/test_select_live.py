"""Selectors on the real lab (issue 45 item 1; docs/contract.md §10.3): the jobs an operation given
``--node``, ``--state``, ``--name``, ``--pending-reason``... acts on are the ones squeue lists for
them; a key's rerun acts on its first run's set; bad selectors change nothing."""

from __future__ import annotations

import json
import os
import subprocess
from typing import List, Set

import pytest

from tests import lab
from tests.cli_run import cli

pytestmark = pytest.mark.integration

BINARIES = ("--scontrol", lab.SCONTROL, "--squeue", lab.SQUEUE, "--timeout", "30")


def _name(tag: str) -> str:
    return f"sel-{tag}-{os.getpid()}"


def _node() -> str:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True).stdout
    return out.split()[0]


def _listed(*args: str) -> Set[str]:
    out = subprocess.run(["squeue", "-h", "-a", "-r", *args, "-o", "%A"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _rows(out: str) -> List[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in out.splitlines()]


def test_the_jobs_acted_on_are_those_squeue_lists_for_the_selectors() -> None:
    name, node = _name("list"), _node()
    running = [lab.make_job("running_rq0", f"--job-name={name}") for _ in range(2)]
    held = lab.make_job("held_user", f"--job-name={name}")
    other = lab.make_job("running_rq0", f"--job-name={name}-other")
    try:
        expected = _listed("-w", node, "-t", "RUNNING", "-n", name)
        assert expected == set(running)
        code, out, err = cli(["hold", "--node", node, "--state", "r", "--name", name, "--json", *BINARIES])
        assert code == 0, err
        assert "may not see every job" not in err  # root sees them all
        rows = _rows(out)
        assert {r["job_id"] for r in rows} == expected and {r["result"] for r in rows} == {"ok"}
        for job in running:
            state = lab.job_state(job)
            assert state is not None and state.priority == 0  # held
        other_state, held_state = lab.job_state(other), lab.job_state(held)
        assert other_state is not None and other_state.priority != 0  # another name: untouched
        assert held_state is not None and held_state.reason == "JobHeldUser"  # pending: not selected
    finally:
        lab.cancel(*running, held, other)


def test_the_pending_reason_selects_by_squeues_reason() -> None:
    name = _name("reason")
    by_admin = lab.make_job("held_admin", f"--job-name={name}")
    by_user = lab.make_job("held_user", f"--job-name={name}")
    try:
        code, out, err = cli(["release", "--pending-reason", "jobheldadmin", "--name", name, "--json", *BINARIES])
        assert code == 0, err
        assert [r["job_id"] for r in _rows(out)] == [by_admin]
        user_state = lab.job_state(by_user)
        assert user_state is not None and user_state.reason == "JobHeldUser"
    finally:
        lab.cancel(by_admin, by_user)


def test_a_keys_rerun_acts_on_its_first_runs_set_not_on_newcomers(tmp_path: object) -> None:
    name, node = _name("key"), _node()
    first = lab.make_job("running_rq0", f"--job-name={name}")
    ledger = f"{tmp_path}/ledger.sqlite3"
    argv = ["requeue", "--node", node, "--state", "RUNNING", "--name", name, "--key", f"drain-{name}", "--json",
            "--ledger", ledger, *BINARIES]
    late = ""
    try:
        code, out, err = cli(argv)
        assert code == 0, err
        assert [(r["job_id"], r["result"]) for r in _rows(out)] == [(first, "ok")]
        late = lab.make_job("running_rq0", f"--job-name={name}")  # arrives on the node after the first run
        assert late in _listed("-w", node, "-t", "RUNNING", "-n", name)
        code, out, err = cli(argv)
        assert code == 0, err
        assert [r["job_id"] for r in _rows(out)] == [first]  # the key's set: the newcomer is not requeued
        late_state = lab.job_state(late)
        assert late_state is not None and late_state.restarts == 0 and late_state.state == "RUNNING"
        code, _, err = cli([*argv[:3], "--partition", "debug", *argv[3:]])  # other selectors, same key
        assert code == 2 and "at its first run" in err
    finally:
        lab.cancel(*[j for j in (first, late) if j])


def test_a_selection_that_matches_nothing_exits_0_and_says_so() -> None:
    code, out, err = cli(["hold", "--name", _name("none"), *BINARIES])
    assert (code, out) == (0, "")
    assert "no job matches --name" in err


@pytest.mark.parametrize("bad, said", [
    (("--partition", "no-such-partition"), "no partition 'no-such-partition'"),
    (("--node", "no-such-node"), "Invalid node name no-such-node"),
    (("--user", "no-such-user-x"), "Invalid user"),
    (("--state", "SLEEPING"), "unknown job state 'SLEEPING'"),
    (("--reservation", "no-such-resv"), "no reservation 'no-such-resv'"),
])
def test_a_bad_selector_is_a_usage_error_and_changes_nothing(bad: tuple, said: str) -> None:  # type: ignore[type-arg]
    name = _name("bad")
    job = lab.make_job("running_rq0", f"--job-name={name}")
    try:
        before = lab.job_state(job)
        code, out, err = cli(["hold", "--name", name, *bad, *BINARIES])
        assert (code, out) == (2, "") and said in err, err
        assert lab.job_state(job) == before
    finally:
        lab.cancel(job)


def test_an_arrays_own_jobid_is_never_selected() -> None:
    name = _name("array")
    array = lab.submit("--hold", f"--job-name={name}", "--array=0-2", *lab.SLEEP_JOB)
    try:
        code, out, err = cli(["release", "--name", name, "--json", *BINARIES])
        assert (code, out) == (0, "")
        assert f"array {array}: not selected" in err and "no job matches" in err
        lab.check(["scontrol", "release", f"{array}_1"])  # splits task 1 off: a JobId of its own
        task = next(iter(_listed("-n", name, "-t", "RUNNING,PENDING,CONFIGURING,COMPLETING") - {array}), None)
        assert task is not None
        code, out, err = cli(["hold", "--name", name, "--json", *BINARIES])
        assert code == 0, err
        assert [r["job_id"] for r in _rows(out)] == [task] and f"array {array}: not selected" in err
    finally:
        lab.cancel(array)
