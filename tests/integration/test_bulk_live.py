"""The bulk path against the real lab (docs/contract.md §11): a mixed list gets, id for id,
what single operations get on identical jobs; a chunk killed mid-way keeps only what its
printed lines prove; a controller that cannot be reached costs one ping, not seconds per id;
a bulk requeue killed at any point leaves every flag it may have set tracked."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.core.model import Outcome
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.lookups.squeue import SqueueLookup
from slurm_dsl.run.bulk import run_many
from slurm_dsl.run.sweep import sweep
from slurm_dsl.run.tracked import Tracker
from tests import lab
from tests.cli_run import cli_process
from tests.fakes import descendants

pytestmark = pytest.mark.integration

TIMEOUT = 15.0
MISSING = "999999"
KINDS = ("running_rq0", "running_rq1", "held_user", "held_admin", "pending", "completed", "cancelled")


def key(outcome: Outcome) -> Tuple[Result, Optional[RequeueBit], List[Optional[str]], List[Optional[int]]]:
    """What must agree between the single and the bulk result of twin jobs."""
    return outcome.result, outcome.requeue_bit, [c.message for c in outcome.calls], [c.status for c in outcome.calls]


def shim(directory: Path, body: str) -> str:
    """An scontrol that logs each call's argv, then runs ``body`` (``$@`` = the call's argv)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scontrol"
    log = directory / "calls.log"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def calls(scontrol: str) -> List[str]:
    log = Path(scontrol).parent / "calls.log"
    # `show config` (MinJobAge, read once per bulk operation: docs/contract.md §11) is no call on jobs.
    return [c for c in log.read_text().splitlines() if c != "show config"] if log.exists() else []


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.REQUEUE, Op.RESTORE, Op.OPEN], ids=str)
def test_a_mixed_list_gets_what_single_ops_get_on_twin_jobs(tmp_path: Path, op: Op) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    twins: Dict[str, Tuple[str, str]] = {kind: (lab.make_job(kind), lab.make_job(kind)) for kind in KINDS}
    logged = shim(tmp_path / "bin", f'exec {lab.SCONTROL} "$@"')
    with Tracker(path, scontrol=logged) as tracker:
        singles = {kind: tracker.run(op, a, time.time() + TIMEOUT) for kind, (a, _) in twins.items()}
        singles["missing"] = tracker.run(op, MISSING, time.time() + TIMEOUT)
        before = len(calls(logged))
        listed = [b for _, b in twins.values()]
        ids = [*listed, MISSING, listed[0], listed[3]]  # duplicates get one result
        bulk = list(run_many(tracker, op, ids, TIMEOUT))
    assert [o.job_id for o in bulk] == [*listed, MISSING]
    by_kind = dict(zip([*KINDS, "missing"], bulk))
    for kind, single in singles.items():
        assert key(by_kind[kind]) == key(single), (kind, single, by_kind[kind])  # here: the very same
    for kind, (a, b) in twins.items():
        # A requeued running job passes through COMPLETING (its epilog) on its way back to
        # PENDING; the bulk twin was requeued last, so let both leave that passing state first.
        settled = lambda js: js.state != "COMPLETING"  # noqa: E731
        sa, sb = lab.wait_for(a, settled), lab.wait_for(b, settled)
        assert (eligible(sa.state, sa.priority), sa.requeue, sa.restarts, sa.priority == 0) == (
            eligible(sb.state, sb.priority), sb.requeue, sb.restarts, sb.priority == 0), kind
    # One scontrol process per call of the op for the whole list (beside one ping).
    bulk_calls = [c for c in calls(logged)[before:] if c != "ping"]
    assert len(bulk_calls) == (3 if op is Op.REQUEUE else 1), bulk_calls
    assert all(b in bulk_calls[0] for b in listed)
    with open_ledger(path) as ledger:
        for outcome in bulk:
            (entry,) = ledger.history(outcome.job_id)[-1:]
            assert entry.finished and entry.result is outcome.result


def eligible(state: str, priority: int) -> str:
    """A job that is not held and waits or runs: which of the two is the scheduler's (a released
    twin starts where a slot is free, its twin may wait for one), not the operation's."""
    return "PENDING or RUNNING" if priority != 0 and state in ("PENDING", "RUNNING") else state


def no_surer(bulk: Outcome, single: Outcome) -> bool:
    """docs/contract.md §11: the bulk result equals the single one, or is unknown (bit may be set)
    where the single one knew; never the other way."""
    if key(bulk) == key(single):
        return True
    return bulk.result is Result.UNKNOWN and bulk.requeue_bit in (None, RequeueBit.MAY_BE_SET)


def test_another_users_list_gets_what_single_ops_get(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    path = str(tmp_path / "ledger.sqlite3")
    as_alice = shim(tmp_path / "bin", f'exec runuser -u {lab.TEST_USER} -- {lab.SCONTROL} "$@"')
    with Tracker(path, scontrol=as_alice) as tracker:
        for op in (Op.HOLD, Op.REQUEUE):
            kinds = [("running_rq0", None), ("held_user", None), ("held_user", lab.TEST_USER)]
            twins = [(lab.make_job(k, user=u), lab.make_job(k, user=u)) for k, u in kinds]
            singles = [tracker.run(op, a, time.time() + TIMEOUT) for a, _ in twins]
            bulk = list(run_many(tracker, op, [b for _, b in twins], TIMEOUT))
            # Root's jobs: refused the same way, each by its own line.
            assert [key(o) for o in bulk[:2]] == [key(o) for o in singles[:2]], op
            assert {c.message for o in bulk[:2] for c in o.calls} == {"Invalid user id"}
            # Her own job: the same, or less sure.  (From 24.11 on, the job_submit companion's
            # message to her when it clamps her Requeue=1 is a line no id owns: unknown.)
            assert no_surer(bulk[2], singles[2]), (op, bulk[2], singles[2])
            assert lab.job_state(twins[0][1]).reason == "None"  # type: ignore[union-attr]


def test_an_arrays_own_id_in_a_list_refuses_the_list_and_a_split_task_is_a_job(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    array = lab.submit("--array=1-3", "--hold", *lab.SLEEP_JOB)
    lab.wait_for(array, lab.Expect("PENDING"))
    lab.check(["scontrol", "hold", f"{array}_2"])
    out = lab.run_cmd(["squeue", "-h", "-r", "-j", array, "-O", "JobID:|,ArrayTaskID:|"]).stdout.split()
    task = next(line.split("|")[0] for line in out if line.split("|")[1] == "2")
    lab._submitted.append(task)
    plain = lab.make_job("held_user")
    done = cli_process(["release", plain, task, array, "--timeout", "10", "--ledger", path], timeout=120)
    assert done.returncode == 2 and "whose 3 tasks" in done.stderr and done.stdout == ""
    assert lab.job_state(plain).reason == "JobHeldUser"  # type: ignore[union-attr]
    done = cli_process(["release", plain, task, "--timeout", "10", "--ledger", path, "--json"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2


def test_open_on_several_held_jobs_releases_each_and_finishes_the_history(tmp_path: Path) -> None:
    """Issue 16: `slurm-dsl open A B` never ran (exit 1, no rows, unfinished history rows)."""
    path = str(tmp_path / "ledger.sqlite3")
    # Held, with a start an hour off: released, they stay pending and take none of the node's slots.
    first, second, third = (lab.make_job("held_user", "--begin=now+3600") for _ in range(3))

    def cli_open(*ids: str) -> Tuple[int, List[Tuple[str, str, str]]]:
        done = cli_process(["open", *ids, "--timeout", "10", "--ledger", path, "--json"], timeout=120)
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        return done.returncode, [(r["job_id"], r["op"], r["result"]) for r in rows]

    assert cli_open(first, second) == (0, [(first, "open", "ok"), (second, "open", "ok")])
    # A never-existed id among them: its own refusal line, the others still released.
    assert cli_open(MISSING, third) == (11, [(MISSING, "open", "not_found"), (third, "open", "ok")])
    for job in (first, second, third):
        state = lab.job_state(job)
        assert state is not None and state.reason != "JobHeldUser" and state.priority > 0, state
    with open_ledger(path) as ledger:
        for job in (first, second, third, MISSING):
            assert [(h.op, h.finished) for h in ledger.history(job)] == [(Op.OPEN, True)], job


def test_a_chunk_killed_mid_way_keeps_only_what_its_lines_prove(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    finished, running = lab.make_job("completed"), lab.make_job("running_rq0")
    # The real hold on the whole list, then a hang: the deadline stops the call (124).
    hanging = shim(tmp_path / "bin", f'case $1 in hold) {lab.SCONTROL} "$@"; exec sleep 30 ;; esac\n'
                   f'exec {lab.SCONTROL} "$@"')
    with Tracker(path, scontrol=hanging) as tracker:
        finished_out, missing_out, running_out = run_many(tracker, Op.HOLD, [finished, MISSING, running], 2.0)
    assert (finished_out.result, finished_out.calls[0].message) == (Result.REJECTED, "Job has already finished")
    assert missing_out.result is Result.NOT_FOUND
    assert running_out.result is Result.UNKNOWN, "silent in a call that did not complete: it may have happened"
    assert lab.job_state(running).reason == "JobHeldAdmin"  # type: ignore[union-attr]  # and it did


def test_an_unreachable_controller_costs_one_ping_not_seconds_per_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With slurmctld unreachable each id in a list costs ~(MessageTimeout-1) s
    (docs/slurm-bulk.md §4): the chunk is not started at all."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(lab.SLURM_CONF.read_text().replace("SlurmctldPort=", "SlurmctldPort=6899\n#SlurmctldPort=") + "\n")
    logged = shim(tmp_path / "bin", f'exec {lab.SCONTROL} "$@"')
    jobs = [lab.make_job("held_user") for _ in range(3)] + [str(n) for n in range(4000100, 4000117)]
    # Only for the run: the per-test clean-up (tests/integration/conftest.py) must reach slurmctld
    # to cancel the three jobs, and monkeypatch's own undo comes after it.
    with monkeypatch.context() as unreachable:
        unreachable.setenv("SLURM_CONF", str(conf))
        with Tracker(str(tmp_path / "ledger.sqlite3"), scontrol=logged) as tracker:
            outcomes = list(run_many(tracker, Op.RESTORE, jobs, 30.0))  # a restore needs no lookup first
    assert {o.result for o in outcomes} == {Result.NOT_RUN}
    assert {o.reason.value for o in outcomes if o.reason} == {"controller_down"}
    assert calls(logged) == ["ping"], "no update was sent"


CHILD = f"""
import sys, time
from slurm_dsl.run.bulk import run_many
from slurm_dsl.run.tracked import Tracker
with Tracker(sys.argv[1], scontrol="{lab.SCONTROL}", lease_slack=0.5) as t:
    print("go", flush=True)
    for _ in run_many(t, "requeue", sys.argv[2:], 5.0):
        pass
"""


def test_bulk_requeues_killed_at_random_moments_are_all_put_right(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    open_ledger(path).close()
    rng = random.Random(int(os.environ.get("SLURM_DSL_CRASH_SEED", "4321")))
    rounds = [[lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(55)] for _ in range(3)]
    jobs = [j for batch in rounds for j in batch]
    for job in jobs:
        lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
    for batch in rounds:
        child = subprocess.Popen([sys.executable, "-c", CHILD, path, *batch], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"go\n"
        time.sleep(rng.uniform(0.0, 0.4))  # a 55-id requeue chunk takes some 0.2-0.4 s here
        for pid in [child.pid, *descendants(child.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        child.wait()
    flagged = [j for j in jobs if lab.job_state(j).requeue == 1]  # type: ignore[union-attr]
    with open_ledger(path) as ledger:
        marked = [j for j in jobs if (o := ledger.get(j)) is not None and o.bit is not RequeueBit.CLEAR]
    assert set(flagged) <= set(marked), "every job left at Requeue=1 is tracked"
    print(f"\n{len(jobs)} jobs in 3 killed bulk requeues: {len(flagged)} left at Requeue=1, {len(marked)} tracked")
    deadline = time.monotonic() + 30
    with open_ledger(path) as ledger:
        while len(ledger.due_objects(time.time())) < len(marked):
            assert time.monotonic() < deadline, "the killed holders' leases never lapsed"
            time.sleep(0.1)
    with Tracker(path, scontrol=lab.SCONTROL) as tracker:
        report = sweep(tracker, SqueueLookup())
    assert report.handled, report
    assert [j for j in jobs if lab.job_state(j).requeue == 1] == []  # type: ignore[union-attr]


def test_the_real_show_config_gives_min_job_age() -> None:
    """The line core.vouch reads, as this major prints it (the lab sets MinJobAge=300)."""
    from slurm_dsl.core.vouch import min_job_age

    done = subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=30, check=True)
    assert min_job_age(done.stdout) == 300.0


def test_a_bulk_hold_of_known_pending_jobs_makes_one_lookup(tmp_path: Path) -> None:
    """The array check vouches for jobs it saw pending: no corroborating lookup after the call,
    and the jobs really are held; a missing id in the list is refused by its own line (the
    false SUCCESS a never-existed id can get is tests/run/test_bulk.py's, with a fake)."""
    real = subprocess.run(["sh", "-c", "command -v squeue"], capture_output=True, text=True, check=True).stdout.strip()
    counting = tmp_path / "squeue"
    log = tmp_path / "squeue.log"
    log.write_text("")
    counting.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{real}' \"$@\"\n")
    counting.chmod(0o755)
    helper = os.environ.get("SLURM_DSL_JOBINFO")
    if helper:  # the lookups slurm-dsl-jobinfo makes count too (each its own process)
        counted = tmp_path / "jobinfo"
        counted.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\nexec '{helper}' \"$@\"\n")
        counted.chmod(0o755)
        os.environ["SLURM_DSL_JOBINFO"] = str(counted)  # the autouse fixture restores it
    jobs = [lab.make_job("pending") for _ in range(2)]
    with Tracker(str(tmp_path / "ledger.sqlite3"), squeue=str(counting)) as t:
        out = {o.job_id: o.result for o in run_many(t, Op.HOLD, jobs, TIMEOUT)}
    assert out == {j: Result.OK for j in jobs}
    for j in jobs:
        state = lab.job_state(j)
        assert state is not None and state.priority == 0
    assert len([line for line in log.read_text().splitlines() if "--version" not in line]) == 1
    log.write_text("")
    with Tracker(str(tmp_path / "ledger.sqlite3"), squeue=str(counting)) as t:
        out = {o.job_id: o.result for o in run_many(t, Op.RELEASE, [*jobs, MISSING], TIMEOUT)}
    assert out == {**{j: Result.OK for j in jobs}, MISSING: Result.NOT_FOUND}
    assert len([line for line in log.read_text().splitlines() if "--version" not in line]) == 1
