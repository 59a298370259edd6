"""Settling, idempotency keys and retries on the real slurmctld (docs/contract.md §12, issue 18
item 6), on each ledger backend (SQLite, and MariaDB when the lab has it).

Each scenario runs an operation that ends ``unknown`` for some or all of its jobs, then the same
command with the same ``--key`` and ``--retry 1``, and asserts on the jobs' REAL records
afterwards (RestartCnt, PriorityLong) and on the ledger's history (key, retry_of, verdicts):

- a bulk requeue whose list call reached slurmctld for only half of its ids and then hung past the
  deadline: ``settle`` says ``present`` for exactly that half, the keyed retry requeues exactly
  the other half, and every job is requeued once in all;
- the CLI SIGKILLed in the middle of a bulk requeue, with its scripts (a crashed host): the keyed
  retry waits out the dead operation and acts exactly on the jobs whose effect is absent;
- a hold and a release whose calls died (as a crashed scontrol: unknown), settled ``present``
  because the record already shows the state asked for (docs/contract.md §12: the effect is read
  from the state, not from a change); the same for a call that hung until its end (the deadline
  less what settling keeps);
- slurmctld stopped in the middle of a bulk hold and started again: the first run's own settling
  decides nothing while slurmctld is down, and the keyed retry holds exactly the jobs not yet held.
  This one restarts the SHARED lab's slurmctld, so it is the last test of the file.

The faults real Slurm cannot show on demand (a list call cut off after part of it took effect, a
call that hangs) come from an scontrol wrapper on PATH (the pattern of tests/fakes.py): every call
goes to the real scontrol except the one verb named, and writes a marker file once the part that
happens has happened, so that the test acts (kills, stops slurmctld) on a condition, not a sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from slurm_dsl.core.model import Op, Result, Verdict
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from tests import lab
from tests.cli_run import COMMAND, cli_process

pytestmark = pytest.mark.integration

KEY = "live-18"
DELAY = "2"  # --settle-delay: the floor, to keep the tests short
CUT_OFF = 6.0  # the first run's deadline: its hung call is stopped then
SETTLED_WITHIN = 60.0  # seconds the settle command is polled for a verdict on every row
MARKED_WITHIN = 60.0  # seconds to wait for the wrapper's marker (a busy lab's lookups included)
# The keyed retry after a SIGKILL waits for the dead operation's ends_by + the settle delay, and
# its new operation for the dead lease (lease_ttl: left + KILL_GRACE + GUARD_MARGIN + 30 s slack).
AFTER_KILL_TIMEOUT = 120.0

WRAPPER = f"""#!/bin/sh
# The real scontrol for every call but "{{verb}}": for that one, with part half and a list of ids,
# the real call on the first half of them; then a marker (this pid), and then {{end}}.
printf '%s\\n' "$*" >> {{log}}
if [ "$1" = {{verb}} ]; then
    if [ {{part}} = half ]; then
        case $2 in *,*) ;; *) exec {lab.SCONTROL} "$@" ;; esac
        ids=$(printf '%s' "$2" | tr ',' ' ')
        set -- $ids
        half=$(( $# / 2 )); first=
        i=0; for id; do i=$((i + 1)); [ $i -le $half ] && first="$first${{{{first:+,}}}}$id"; done
        {lab.SCONTROL} {{verb}} "$first"
    fi
    printf '%s\\n' $$ > {{marker}}.tmp && mv {{marker}}.tmp {{marker}}
    {{then}}
fi
exec {lab.SCONTROL} "$@"
"""
ENDS = {
    # hangs until the deadline stops it
    "hang": "exec sleep 3600",
    # dies at once, as a crashed scontrol: unknown, with the command's deadline still ahead
    "die": "kill -KILL $$",
    # dies once the test says so (creates the file go)
    "go-die": "while [ ! -e {go} ]; do sleep 0.05; done; kill -KILL $$",
}


def on_one_major_for_mariadb(location: str) -> None:
    """The MariaDB variant of a long scenario runs on the host's major only: the ledger's backend
    does not change with Slurm's major, and the SQLite variant runs on every one (the suite's time
    budget, docs/testing.md).  ``SLURM_DSL_TEST_MAJOR`` is set by ``contrib/test --majors``."""
    if location.startswith("mariadb://") and os.environ.get("SLURM_DSL_TEST_MAJOR", "host") != "host":
        pytest.skip("the MariaDB variant of this long scenario runs on the host's major")


def wrapper(directory: Path, verb: str, part: str, end: str) -> str:
    """An scontrol that cuts ``verb`` off (part ``half``: after the first half of a list took
    effect; ``none``: before anything), writes ``directory/marker`` then, and ends as ``end``
    says (``ENDS``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "scontrol"
    then = ENDS[end].format(go=f"'{directory / 'go'}'")
    path.write_text(WRAPPER.format(
        verb=verb, part=part, then=then, end=end, log=f"'{directory / 'calls.log'}'",
        marker=f"'{directory / 'marker'}'"))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def wait_for_marker(directory: Path, proc: subprocess.Popen[str]) -> int:
    """The pid the wrapper wrote once its cut-off call was cut off (polled)."""
    marker = directory / "marker"
    deadline = time.monotonic() + MARKED_WITHIN
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the command ended before the cut-off call: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no marker within {MARKED_WITHIN:g} s: {(directory / 'calls.log').read_text()}")
        time.sleep(0.05)
    return int(marker.read_text().split()[0])


def json_rows(out: str) -> Dict[str, Dict[str, Any]]:
    return {r["job_id"]: r for r in (json.loads(line) for line in out.splitlines() if line.strip())}


def ops_of(location: str, job: str, op: Op) -> List[HistoryEntry]:
    with open_ledger(location) as ledger:
        return [e for e in ledger.history(job) if e.op is op]


def settle_all(jobs: List[str], common: List[str]) -> Dict[str, Dict[str, Any]]:
    """``slurm-dsl settle`` polled until every row has a verdict (a first one may come before the
    settle delay has passed since the operations ended)."""
    deadline = time.monotonic() + SETTLED_WITHIN
    while True:
        settled = cli_process(["settle", *jobs, "--settle-delay", DELAY, "--json", "--lookup", "squeue", *common])
        rows = json_rows(settled.stdout)
        if all(r["effect"] is not None for r in rows.values()) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def restarts(jobs: List[str]) -> Dict[str, int]:
    states = {job: lab.job_state(job) for job in jobs}
    assert all(s is not None for s in states.values()), states
    return {job: s.restarts for job, s in states.items() if s is not None}


def test_keyed_retry_requeues_exactly_the_half_a_cut_off_list_missed(tmp_path: Path, ledger_location: str) -> None:
    on_one_major_for_mariadb(ledger_location)
    jobs = [lab.make_job("running_rq0") for _ in range(4)]
    try:
        baseline = restarts(jobs)
        common = ["--ledger", ledger_location]
        cut = wrapper(tmp_path / "bin", "requeue", "half", "hang")
        first = cli_process(["requeue", *jobs, "--key", KEY, "--timeout", str(CUT_OFF), "--json",
                             "--scontrol", cut, *common])
        assert {j: r["result"] for j, r in json_rows(first.stdout).items()} == dict.fromkeys(jobs, "unknown"), (
            first.stdout + first.stderr)
        assert first.returncode == 15
        assert f"requeue {','.join(jobs)}" in (tmp_path / "bin" / "calls.log").read_text()  # one list call

        effects = {j: r["effect"] for j, r in settle_all(jobs, [*common, "--scontrol", cut]).items()}
        assert effects == {jobs[0]: "present", jobs[1]: "present", jobs[2]: "absent", jobs[3]: "absent"}

        again = cli_process(["requeue", *jobs, "--key", KEY, "--retry", "1", "--settle-delay", DELAY,
                             "--timeout", "30", "--json", *common])
        rows = json_rows(again.stdout)
        # The first run's half is present, but its call 3 never ran: their flags are still set
        # until a sweep restores them, so the rows exit bit_set (docs/contract.md §12).
        assert again.returncode == 14, again.stdout + again.stderr
        for job in jobs[:2]:  # done by the first run: its row, nothing ran
            assert rows[job]["result"] == "unknown" and rows[job]["effect"] == "present", rows[job]
            assert rows[job]["requeue_bit"] == "set", rows[job]
            assert len(ops_of(ledger_location, job, Op.REQUEUE)) == 1
        for job in jobs[2:]:
            assert rows[job]["result"] == "ok", rows[job]
            earlier, now = ops_of(ledger_location, job, Op.REQUEUE)
            assert earlier.key == now.key == KEY and now.result is Result.OK
            assert earlier.settlement is not None and earlier.settlement.verdict is Verdict.ABSENT
        assert restarts(jobs) == {job: baseline[job] + 1 for job in jobs}  # each requeued once in all
    finally:
        lab.cancel(*jobs)


def test_keyed_retry_after_a_sigkill_acts_on_exactly_the_absent(tmp_path: Path, ledger_location: str) -> None:
    on_one_major_for_mariadb(ledger_location)
    jobs = [lab.make_job("running_rq0") for _ in range(4)]
    try:
        baseline = restarts(jobs)
        common = ["--ledger", ledger_location]
        directory = tmp_path / "bin"
        cut = wrapper(directory, "requeue", "half", "hang")
        # Its own process group: the test kills the CLI and everything it started, as a crash would.
        proc = subprocess.Popen(
            [*COMMAND, "requeue", *jobs, "--key", KEY, "--timeout", "8", "--json", "--scontrol", cut, *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            script_pid = wait_for_marker(directory, proc)
            script_group = os.getpgid(script_pid)  # each script runs in its own session
            os.killpg(proc.pid, signal.SIGKILL)
            # The script's lifeline may have killed its group already, the CLI gone (contract §2):
            # then there is nothing left to kill (sid, once, 2026-12-07).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(script_group, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL and out == "", (out, err)
        for job in jobs:
            (dead,) = ops_of(ledger_location, job, Op.REQUEUE)
            assert dead.result is None and dead.key == KEY  # the intent, and nothing after it

        started = time.monotonic()
        again = cli_process(["requeue", *jobs, "--key", KEY, "--retry", "1", "--settle-delay", DELAY,
                             "--timeout", str(AFTER_KILL_TIMEOUT), "--json", *common])
        took = time.monotonic() - started
        rows = json_rows(again.stdout)
        # The dead run's half is present but its flags may still be set (its intent: may_be_set,
        # until a sweep restores them): those rows exit bit_set (docs/contract.md §12).
        assert again.returncode == 14, again.stdout + again.stderr
        for job in jobs[:2]:  # its list call had reached slurmctld for these
            assert rows[job]["effect"] == "present", rows[job]
            (dead,) = ops_of(ledger_location, job, Op.REQUEUE)
            assert dead.settlement is not None and dead.settlement.verdict is Verdict.PRESENT
        for job in jobs[2:]:
            assert rows[job]["result"] == "ok", rows[job]
            dead, now = ops_of(ledger_location, job, Op.REQUEUE)
            assert dead.settlement is not None and dead.settlement.verdict is Verdict.ABSENT
            assert now.key == KEY and now.result is Result.OK
            # Never while the dead one may still act: absent only a settle delay after its ends_by.
            assert dead.ends_by is not None and dead.settlement.looked_at >= dead.ends_by + float(DELAY)
            assert now.started_at >= dead.settlement.looked_at
            print(f"job {job}: dead op ends_by +{dead.ends_by - dead.started_at:.1f} s, settled absent at"
                  f" +{dead.settlement.looked_at - dead.started_at:.1f} s, requeued again at"
                  f" +{now.started_at - dead.started_at:.1f} s")
        assert restarts(jobs) == {job: baseline[job] + 1 for job in jobs}  # each requeued once in all
        assert took < AFTER_KILL_TIMEOUT, took
    finally:
        lab.cancel(*jobs)


@pytest.mark.parametrize(("op", "kind"), [("hold", "held_user"), ("release", "begin")])
def test_a_hung_call_on_a_job_already_in_that_state_settles_present(
    tmp_path: Path, ledger_location: str, op: str, kind: str
) -> None:
    # present reads the state asked for, not a change: the job was in it before (docs/contract.md §12).
    if kind == "begin":  # pending, not held, on no CPU: PriorityLong > 0 already
        job = lab.submit("--begin=now+3600", *lab.SLEEP_JOB)
        before = lab.wait_for(job, lab.Expect("PENDING", "BeginTime"))
        assert before.priority > 0
    else:
        job = lab.make_job(kind)
        before = lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser"))
        assert before.priority == 0
    try:
        die = wrapper(tmp_path / "bin", op, "none", "die")
        done = cli_process([op, job, "--settle", "--settle-delay", DELAY, "--timeout", "10", "--json",
                            "--scontrol", die, "--ledger", ledger_location])
        row = json_rows(done.stdout)[job]
        assert (row["result"], row["effect"]) == ("unknown", "present"), done.stdout + done.stderr
        assert done.returncode == 0  # present exits as ok
        assert (tmp_path / "bin" / "marker").exists()  # the call really was cut off
        (entry,) = ops_of(ledger_location, job, Op(op))
        assert entry.result is Result.UNKNOWN and entry.settlement is not None
        assert entry.settlement.verdict is Verdict.PRESENT and entry.settlement.by.startswith("command, ")
        assert lab.job_state(job) == before  # nothing changed the job
    finally:
        lab.cancel(job)


def test_a_call_hung_until_the_deadline_is_still_settled_by_its_command(
    tmp_path: Path, ledger_location: str
) -> None:
    # The commonest unknown, a call stopped at the deadline: docs/contract.md §12 says the command
    # looks "at once (a present ends it)", and the job is held already, so one look decides it.
    job = lab.make_job("held_user")
    try:
        hang = wrapper(tmp_path / "bin", "hold", "none", "hang")
        # The calls get 8 - (2 + 2) = 4 s (run.keyed keeps the rest for settling), then the look.
        done = cli_process(["hold", job, "--settle", "--settle-delay", DELAY, "--timeout", "8", "--json",
                            "--scontrol", hang, "--ledger", ledger_location])
        row = json_rows(done.stdout)[job]
        assert row["result"] == "unknown" and row["reason"] == "timed_out", done.stdout + done.stderr
        assert row["effect"] == "present", row
    finally:
        lab.cancel(job)


# Last in the file: it restarts the shared lab's slurmctld.
def test_keyed_retry_after_slurmctld_stopped_mid_hold_holds_exactly_the_rest(
    tmp_path: Path, ledger_location: str
) -> None:
    on_one_major_for_mariadb(ledger_location)
    jobs = [lab.submit("--begin=now+3600", *lab.SLEEP_JOB) for _ in range(4)]  # pending: no CPU
    for job in jobs:
        assert lab.wait_for(job, lab.Expect("PENDING", "BeginTime")).priority > 0
    common = ["--ledger", ledger_location]
    directory = tmp_path / "bin"
    cut = wrapper(directory, "hold", "half", "go-die")
    try:
        proc = subprocess.Popen(
            [*COMMAND, "hold", *jobs, "--key", KEY, "--settle", "--settle-delay", DELAY, "--timeout", "15", "--json",
             "--scontrol", cut, *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_marker(directory, proc)
            lab.stop_slurmctld()
            (directory / "go").touch()  # the call dies now: the command settles with slurmctld down
            try:
                out, err = proc.communicate(timeout=60)
            finally:
                lab.start_slurmctld()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        rows = json_rows(out)
        # Its own settling could not ask slurmctld: no verdict, every row unknown.
        assert {j: (r["result"], r["effect"]) for j, r in rows.items()} == dict.fromkeys(jobs, ("unknown", None)), (
            out + err)
        assert proc.returncode == 15
        for job in jobs:
            (entry,) = ops_of(ledger_location, job, Op.HOLD)
            assert entry.result is Result.UNKNOWN and entry.settlement is None

        again = cli_process(["hold", *jobs, "--key", KEY, "--retry", "1", "--settle-delay", DELAY,
                             "--timeout", "30", "--json", *common])
        rows = json_rows(again.stdout)
        assert again.returncode == 0, again.stdout + again.stderr
        for job in jobs[:2]:  # held by the first run's list call before slurmctld stopped
            assert rows[job]["effect"] == "present", rows[job]
            (entry,) = ops_of(ledger_location, job, Op.HOLD)
            assert entry.settlement is not None and entry.settlement.verdict is Verdict.PRESENT
        for job in jobs[2:]:
            assert rows[job]["result"] == "ok", rows[job]
            earlier, now = ops_of(ledger_location, job, Op.HOLD)
            assert earlier.settlement is not None and earlier.settlement.verdict is Verdict.ABSENT
            assert now.key == KEY and now.result is Result.OK
        for job in jobs:
            state = lab.job_state(job)
            assert state is not None and state.priority == 0, state
    finally:
        lab.cancel(*jobs)

