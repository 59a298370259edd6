"""Losing a controller host, on the real lab with a shared MariaDB ledger (docs/contract.md §9.1.1):
no Requeue flag is ever lost.

Two "controller hosts" are two processes (tests/failover_child.py), each in a UTS namespace of its
own named ctl-a or ctl-b, so that the history's actor and the lease owners name them; ctl-b's clock
runs 7 minutes ahead (its time.time only: Slurm's munge credentials keep the real clock).  ctl-a is
SIGKILLed between intent and result of real requeues, single and bulk, and mid-sweep; ctl-b's
`slurm-dsl sweep` puts everything right.  Sweeps on both hosts at once never act on one job twice;
leases are decided on the server's clock, whatever ctl-b's says; and the ledger's server stopped
before or during an operation loses no outcome and no intent (restarted during one, the result is
recorded on a new connection).

Every flag is read the unforgeable way (tests/lab.py: squeue -O, docs/slurm-behaviour.md §9).  A
host's leases outlast its operations by 0.5 s instead of 30 s (``--lease-slack``), so that a killed
host's leases lapse within seconds.  The jobs to run stay PENDING when someone else's jobs fill
the node's 8 slots (a benchmark): requeued all the same, except under CI=true, whose lab is its
own.  Needs root (namespaces, the lab's MariaDB); without the lab or
MariaDB the tests skip, and under CI=true they fail.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.core.model import LedgerError, NotRecorded, Outcome
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import HistoryEntry
from slurm_dsl.run.calls import new_nonce
from slurm_dsl.run.tracked import Tracker
from tests import lab
from tests.integration.test_bulk_live import calls, shim
from tests.integration.test_sweeper_live import crash
from tests.ledger_backends import Raw, shown
from tests.ledger_ops import begin_operation, finish_operation

pytestmark = pytest.mark.integration

CHILD = Path(__file__).resolve().parents[1] / "failover_child.py"
LAB_MARIADB = lab.REPO_ROOT / "contrib" / "lab" / "mariadb"
SCONTROL = lab.SCONTROL
SKEW = 420.0  # ctl-b's clock: 7 minutes ahead
SLACK = "0.5"  # seconds a host's leases outlast its operation (30 s in production)
SETTLE_WITHIN = 60.0  # seconds for sweeps to settle what a killed host left (its leases last ~6-9 s)


def host(name: str, skew: float, *args: str) -> List[str]:
    """The argv of a controller host: ``name`` its host name (``-``: this machine's), ``skew`` its
    clock's lead; ``args`` the child's options and mode (tests/failover_child.py)."""
    return [sys.executable, str(CHILD), name, repr(skew), *args]


def on_b(*args: str) -> subprocess.CompletedProcess[str]:
    """``slurm-dsl ARGS`` on ctl-b (clock 7 minutes ahead), waited for."""
    return subprocess.run(host("ctl-b", SKEW, "cli", *args), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def sweep_on_b(url: str) -> Tuple[subprocess.CompletedProcess[str], List[Dict[str, Any]], Dict[str, Any]]:
    """One ``slurm-dsl sweep --json`` on ctl-b: the process, its job lines and its summary."""
    done = on_b("sweep", "--ledger", url, "--lookup", "squeue", "--json")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary: Dict[str, Any] = next((x for x in lines if x["kind"] == "summary"), {})
    return done, [x for x in lines if x["kind"] == "job"], summary


def sweep_on_b_until_settled(url: str) -> Tuple[int, List[Dict[str, Any]]]:
    """Sweep on ctl-b until the ledger has no object that is not clear (a killed host's leases
    must lapse first); every sweep must exit 0.  How many sweeps it took, and their job lines."""
    deadline = time.monotonic() + SETTLE_WITHIN
    swept: List[Dict[str, Any]] = []
    sweeps = 0
    while True:
        with lab.saving():  # what the sweeps clear or restore is watched until seen saved (§13.3)
            done, jobs, summary = sweep_on_b(url)
        sweeps += 1
        lab.sweep_exited(done)
        swept += jobs
        if summary["not_clear"] == 0:
            return sweeps, swept
        assert time.monotonic() < deadline, f"not settled after {sweeps} sweeps: {summary}"
        time.sleep(0.2)  # the poll interval of this loop: the leases lapse by the server's clock


def server_now(url: str) -> float:
    with Raw(url) as raw:
        return float(raw.execute("SELECT UNIX_TIMESTAMP(NOW(6))")[0][0])


def leases(url: str) -> Dict[str, Tuple[str, float]]:
    """Every lease row in the ledger: job -> (owner, expiry on the server's clock)."""
    with Raw(url) as raw:
        return {str(j): (str(o), float(e)) for j, o, e in raw.execute("SELECT job_id, owner, expires_at FROM leases")}


def history(url: str, job: str) -> List[HistoryEntry]:
    with open_ledger(url) as ledger:
        return ledger.history(job)


def bit(url: str, job: str) -> Optional[RequeueBit]:
    with open_ledger(url) as ledger:
        obj = ledger.get(job)
    return None if obj is None else obj.bit


def flag(job: str) -> int:
    """The job's real Requeue flag (squeue -O: a job name cannot forge it)."""
    state = lab.job_state(job)
    assert state is not None, f"job {job} is gone"
    return state.requeue


def wait_for_file(path: Path, proc: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the host exited {proc.returncode} before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} within {timeout:g} s"
        time.sleep(lab.POLL_INTERVAL)


def held_jobs(count: int) -> List[str]:
    """Fresh PENDING/JobHeldUser jobs at Requeue=0."""
    jobs = [lab.submit("--hold", *lab.SLEEP_JOB) for _ in range(count)]
    for job in jobs:
        lab.wait_for(job, lab.Expect("PENDING", "JobHeldUser", requeue=0))
    return jobs


def jobs_to_run(count: int, within: float = 30.0) -> List[str]:
    """Fresh jobs at Requeue=0, RUNNING if the node has room: another engineer's jobs may fill its
    8 slots (a benchmark), and then they stay PENDING/Resources, still jobs to requeue."""
    jobs = [lab.submit("--no-requeue", *lab.SLEEP_JOB) for _ in range(count)]
    deadline = time.monotonic() + within
    while True:
        states = [lab.job_state(j) for j in jobs]
        if all(s is not None and s.state == "RUNNING" for s in states) or time.monotonic() >= deadline:
            break
        time.sleep(lab.POLL_INTERVAL)
    assert all(s is not None and s.state in ("RUNNING", "PENDING") and s.requeue == 0 for s in states), states
    return jobs


def mark_may_be_set(url: str, jobs: Sequence[str], actor: str) -> None:
    """What a requeue on ``actor`` whose outcome was unknown leaves: Requeue=1 in Slurm, and its
    object may_be_set, in the order given (the sweep serves the oldest first)."""
    with open_ledger(url) as ledger:
        for job in jobs:
            lab.check(["scontrol", "update", f"JobId={job}", "Requeue=1"])
            op_id = begin_operation(ledger, job, Op.REQUEUE, new_nonce(), ledger.now(), actor=actor)
            outcome = Outcome(Op.REQUEUE, job, Result.UNKNOWN, RequeueBit.MAY_BE_SET)
            finish_operation(ledger, op_id, outcome, b"", ledger.now())


@pytest.fixture(scope="module")
def hosts() -> None:
    """Skip (or fail under CI=true) where a process cannot have a host name and a clock of its own."""
    reason: Optional[str] = None
    if os.geteuid() != 0:
        reason = "a UTS namespace of its own for each host needs root"
    else:
        done = subprocess.run(host("ctl-a", SKEW, "probe"), capture_output=True, text=True, timeout=60)
        words = done.stdout.split()
        if done.returncode != 0 or len(words) != 2 or words[0] != "ctl-a":
            reason = f"a host in its own UTS namespace does not work here: {done.stderr.strip() or done.stdout}"
        elif abs(float(words[1]) - time.time() - SKEW) > 30:
            reason = f"the host's skewed clock reads {words[1]}"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: these tests must run)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def url(mariadb_location: str, hosts: None) -> str:
    """A fresh database on the lab's MariaDB, shared by both hosts."""
    open_ledger(mariadb_location).close()  # created and migrated before any host opens it
    return mariadb_location


class LabMariaDb:
    """The lab's MariaDB server, to stop and start (contrib/lab/mariadb)."""

    def run(self, command: str) -> int:
        done = subprocess.run([str(LAB_MARIADB), command], capture_output=True, text=True, timeout=120)
        if command != "status" and done.returncode != 0:
            raise lab.LabError(f"{LAB_MARIADB} {command} exited {done.returncode}: {done.stderr.strip()}")
        return done.returncode

    def stop(self) -> None:
        self.run("stop")

    def start(self) -> None:
        self.run("start")

    def answers(self) -> bool:
        return self.run("status") == 0


@pytest.fixture
def lab_mariadb(url: str) -> Iterator[LabMariaDb]:
    """The server, restarted at the end whatever happened (set up after ``url``, so torn down before
    its database is dropped)."""
    reason: Optional[str] = None
    if os.geteuid() != 0:
        reason = "contrib/lab/mariadb stop/start needs root"
    else:
        status = subprocess.run([str(LAB_MARIADB), "status"], capture_output=True, text=True, timeout=30)
        if "started by the lab" not in status.stdout:
            reason = f"the ledger's server was not started by the lab: {status.stdout.strip() or status.stderr.strip()}"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: this test must run)", pytrace=False)
        pytest.skip(reason)
    server = LabMariaDb()
    try:
        yield server
    finally:
        if not server.answers():
            server.start()


# -- 1. a host killed mid-requeue ----------------------------------------------------------------

ROUNDS = ("single", "bulk", "single", "bulk", "single")


def test_a_host_killed_mid_requeue_leaves_every_flag_to_the_other_host(url: str, tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("SLURM_DSL_CRASH_SEED", "2718")))
    to_run = jobs_to_run(len(ROUNDS))
    running = [j for j in to_run if lab.job_state(j).state == "RUNNING"]  # type: ignore[union-attr]
    if os.environ.get("CI") == "true":
        assert running == to_run, "CI's lab is its own: every job to run runs"
    rounds: List[Tuple[str, List[str]]] = []
    for kind, job in zip(ROUNDS, to_run):
        jobs = [job, *held_jobs(3 if kind == "single" else 11)]
        rng.shuffle(jobs)
        rounds.append((kind, jobs))
    played: List[Tuple[str, List[str]]] = []  # every round played, one the kill missed too
    with Raw(url) as raw:

        def play(number: int, kind: str, jobs: List[str]) -> bool:
            """One round, ctl-a killed mid-way; whether an operation of it was left unfinished."""
            if kind == "single":  # one tracked requeue after another
                argv = host("ctl-a", 0.0, "--lease-slack", SLACK, "requeue", url, SCONTROL, "3", *jobs)
                window = 0.01  # a tracked requeue of a held job takes some 15-25 ms here
            else:  # the CLI with several ids: the bulk path, one chunk
                argv = host("ctl-a", 0.0, "--lease-slack", SLACK, "cli", "requeue", *jobs, "--timeout", "3",
                            "--ledger", url, "--scontrol", SCONTROL)
                window = 0.035  # a 12-id requeue chunk takes some 50-60 ms here, intents to results
            with open(tmp_path / f"a{number}.stderr", "wb") as stderr:
                child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
            assert child.stdout is not None and child.stdout.readline() == b"go\n"
            # The crash point: a random moment after the first intent of the round is committed, shorter
            # than the operation, so that the kill falls between that intent and its result.
            marks = ",".join("?" * len(jobs))
            deadline = time.monotonic() + 30
            while not raw.execute(f"SELECT 1 FROM history WHERE finished_at IS NULL AND job_id IN ({marks})", jobs):
                assert child.poll() is None, f"round {number}: ctl-a finished before any intent was seen"
                assert time.monotonic() < deadline, f"round {number}: no intent within 30 s"
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, window))
            crash(child)
            return bool(raw.execute(f"SELECT 1 FROM history WHERE finished_at IS NULL AND job_id IN ({marks})", jobs))

        hits: List[bool] = []
        for number, (kind, jobs) in enumerate(rounds):
            for attempt in range(3):
                if attempt:
                    # The kill fell after the round's operations (a loaded machine saw its first
                    # intent late): nothing of it was mid-way, so it tested nothing. Again, fresh jobs.
                    jobs = [*jobs_to_run(1), *held_jobs(3 if kind == "single" else 11)]
                    rng.shuffle(jobs)
                played.append((kind, jobs))
                if play(number, kind, jobs):
                    hits.append(True)
                    break
            else:
                hits.append(False)
    everything = [j for _, jobs in played for j in jobs]
    killed_at = server_now(url)
    left = leases(url)
    flagged = [j for j in everything if flag(j) == 1]
    marked = [j for j in everything if bit(url, j) not in (None, RequeueBit.CLEAR)]
    unfinished = [h for j in everything for h in history(url, j) if not h.finished]
    requeued = [j for j in running if lab.job_state(j).restarts > 0]  # type: ignore[union-attr]
    print(f"\n{len(everything)} jobs ({len(running)} running, {len(requeued)} of them requeued) in"
          f" {len(ROUNDS)} killed rounds:"
          f" {len(flagged)} left at Requeue=1, {len(marked)} tracked, {len(unfinished)} operations"
          f" without a result, {len(left)} leases left")
    assert set(flagged) <= set(marked), "every job left at Requeue=1 is tracked"
    assert all(hits), "every round was killed between an intent and its result (within three tries)"
    assert len({h.job_id for h in unfinished}) >= len(ROUNDS)
    assert all(":ctl-a:" in owner for owner, _ in left.values()), left
    assert all(h.actor is not None and " on ctl-a, " in h.actor for j in everything for h in history(url, j))
    assert any(expires > killed_at for _, expires in left.values()), "some lease was live when ctl-b began"

    sweeps, swept = sweep_on_b_until_settled(url)
    print(f"ctl-b settled them in {sweeps} sweeps")
    assert [j for j in everything if flag(j) == 1] == [], "every flag is back at Requeue=0"
    assert all(bit(url, j) in (None, RequeueBit.CLEAR) for j in everything)
    restored = [s["job_id"] for s in swept if s["done"] == "restored"]
    assert sorted(restored) == sorted(flagged), "each job left at Requeue=1 was restored, once"
    for job in everything:
        rows = history(url, job)
        for row in rows:
            if row.op is Op.RESTORE:
                assert row.actor is not None and " on ctl-b, " in row.actor and row.actor.endswith(", sweep")
                assert row.result is Result.OK
        if job in left:
            # ctl-b (7 minutes ahead) acted on the job only once ctl-a's lease had lapsed by the
            # server's clock: a restore started, or the object was cleared, no earlier.
            expires = left[job][1]
            with open_ledger(url) as ledger:
                obj = ledger.get(job)
            assert obj is not None and obj.updated_at >= expires, (job, obj, expires)
            assert all(r.started_at >= expires for r in rows if r.op is Op.RESTORE), (job, rows, expires)


# -- 2. sweeps on both hosts at once ---------------------------------------------------------------

RACES = 8


def restores_per_period(rows: Sequence[HistoryEntry]) -> List[int]:
    """How many restores each not-clear period holds (a period opens at each requeue's intent)."""
    counts: List[int] = []
    for row in rows:
        if row.op is Op.REQUEUE:
            counts.append(0)
        elif row.op is Op.RESTORE:
            assert counts, f"a restore before any requeue: {row}"
            counts[-1] += 1
    return counts


def test_sweeps_on_both_hosts_never_act_on_a_job_twice(url: str) -> None:
    jobs = held_jobs(5)
    wins = {"ctl-a": 0, "ctl-b": 0}
    busy = 0
    for _ in range(RACES):
        mark_may_be_set(url, jobs, "uid 0 (root) on ctl-a, pid 1")
        racers = {name: subprocess.Popen(host(name, skew, "--wait", "cli", "sweep", "--ledger", url, "--lookup",
                                              "squeue", "--json"),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
                  for name, skew in (("ctl-a", 0.0), ("ctl-b", SKEW))}
        for proc in racers.values():
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in racers.values():  # both at the same moment
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        restored: Dict[str, List[str]] = {}
        for name, proc in racers.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode in (0, 3), (name, proc.returncode, out, err)
            if proc.returncode == 3:
                busy += 1
                assert "another sweep is running" in err and out == "go\n", err
                continue
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            restored[name] = [x["job_id"] for x in lines if x["kind"] == "job" and x["done"] == "restored"]
            wins[name] += bool(restored[name])
        assert sorted(j for ids in restored.values() for j in ids) == sorted(jobs), restored
        assert [j for j in jobs if flag(j) == 1] == []
    print(f"\n{RACES} races: ctl-a restored in {wins['ctl-a']}, ctl-b in {wins['ctl-b']}; {busy} sweeps exited 3")
    for job in jobs:
        rows = history(url, job)
        assert restores_per_period(rows) == [1] * RACES, rows
        assert all(r.result is Result.OK for r in rows if r.op is Op.RESTORE)
        assert bit(url, job) is RequeueBit.MAY_BE_SET  # restored: watched until saved (§13.3)
    sweep_on_b_until_settled(url)
    assert all(bit(url, job) is RequeueBit.CLEAR for job in jobs)


def test_a_sweep_killed_on_one_host_leaves_the_lock_and_the_work_to_the_other(url: str, tmp_path: Path) -> None:
    jobs = held_jobs(4)
    mark_may_be_set(url, jobs, "uid 0 (root) on ctl-a, pid 1")
    last = jobs[-1]  # the last one the sweep serves (oldest first): the others are restored by then
    blocked = tmp_path / "blocked"
    hanging = shim(tmp_path / "a", f'case "$*" in "update JobId={last} Requeue=0") echo $$ > {blocked};'
                   f' exec sleep 60 ;; esac\nexec {SCONTROL} "$@"')
    # Its restores' deadline is far away (30 s): were the lease all that kept its job, ctl-b would
    # wait some 30 s for it to lapse.
    with open(tmp_path / "a.stderr", "wb") as stderr:
        sweeper = subprocess.Popen(host("ctl-a", 0.0, "--lease-slack", SLACK, "cli", "sweep", "--ledger", url,
                                        "--scontrol", hanging, "--lookup", "squeue", "--restore-timeout", "30"),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    wait_for_file(blocked, sweeper)
    while not blocked.read_text().strip():
        time.sleep(lab.POLL_INTERVAL)
    hung = int(blocked.read_text())  # the hung call (the shim exec'd sleep: same pid)
    # ctl-a's sweep holds the lock, stuck in its last restore: ctl-b's sweep gives up at once.
    start = time.monotonic()
    busy = on_b("sweep", "--ledger", url, "--lookup", "squeue")
    took = time.monotonic() - start
    assert busy.returncode == 3 and "another sweep is running" in busy.stderr, busy
    assert took < 3.0, f"exit 3 after {took:.1f} s, not at once"
    assert sweeper.poll() is None, "ctl-a's sweep was still running"
    assert [len(history(url, j)) for j in jobs] == [2, 2, 2, 2], "ctl-b did nothing"

    # It restored the others and gave their leases back; the job it is restoring is leased for that
    # restore (a job still waiting in its batch would keep the sweep's lease, some 2 minutes).
    assert set(leases(url)) == {last}
    # ctl-a's sweep dies mid-restore: the CLI process alone is killed; its script and the hung call
    # die with it (the lifeline), within 2 s.
    sweeper.kill()
    sweeper.wait()
    killed = time.monotonic()
    while sleeping(hung):
        assert time.monotonic() - killed < 2.0, "ctl-a's hung call outlived its sweep"
        time.sleep(lab.POLL_INTERVAL)
    lease = leases(url)[last]
    assert ":ctl-a:" in lease[0] and lease[0].startswith("sweep:")
    # The server released the dead host's lock with its connection: ctl-b's next sweep runs, takes
    # over the dead sweep's lease (docs/contract.md §9.5) before it lapses (below) and settles everything.
    done, swept, _ = sweep_on_b(url)
    assert done.returncode == 0, done
    assert [s["job_id"] for s in swept if s["done"] == "restored"] == [last]
    # What it cleared or restored is watched until slurmctld saves it (§13.3): the next sweeps.
    sweep_on_b_until_settled(url)
    assert [j for j in jobs if flag(j) == 1] == []
    for job in jobs:
        restores = [r for r in history(url, job) if r.op is Op.RESTORE]
        if job != last:  # restored by ctl-a before it died, once
            assert [(r.result, " on ctl-a, " in (r.actor or "")) for r in restores] == [(Result.OK, True)]
            continue
        # ctl-a's restore never got its result (its call never reached slurmctld: the shim hung
        # before it); ctl-b's ran before ctl-a's lease would have lapsed by the server's clock.
        killed_restore, by_b = restores
        assert not killed_restore.finished and " on ctl-a, " in (killed_restore.actor or "")
        assert by_b.result is Result.OK and " on ctl-b, " in (by_b.actor or "") and by_b.started_at < lease[1]
    assert calls(hanging).count(f"update JobId={last} Requeue=0") == 1


def sleeping(pid: int) -> bool:
    """Whether ``pid`` is still a live ``sleep`` (not a zombie, not a reused pid)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z" and cmd.startswith(b"sleep\0")


# -- 3. leases on the server's clock ---------------------------------------------------------------


def test_a_lease_is_kept_and_lapses_by_the_servers_clock_not_the_other_hosts(url: str, tmp_path: Path) -> None:
    (job,) = held_jobs(1)
    blocked = tmp_path / "blocked"
    # ctl-a's requeue: call 1 sets the flag, then call 2 hangs, the lease held (its deadline: 15 s,
    # well past ctl-b's wait, sweep and checks below on a loaded CI machine: 6 s was not, once).
    hanging = shim(tmp_path / "a", f'case "$1" in requeue) : > {blocked}; exec sleep 60 ;; esac\nexec {SCONTROL} "$@"')
    with open(tmp_path / "a.stderr", "wb") as stderr:
        holder = subprocess.Popen(host("ctl-a", 0.0, "--lease-slack", SLACK, "requeue", url, hanging, "15", job),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    wait_for_file(blocked, holder)
    assert flag(job) == 1
    owner, expires = leases(url)[job]
    assert ":ctl-a:" in owner
    # By ctl-b's clock (7 minutes ahead) that lease lapsed long ago; by the server's it has not.
    logged = shim(tmp_path / "b", f'exec {SCONTROL} "$@"')
    start = time.monotonic()
    waited = on_b("requeue", job, "--timeout", "2", "--ledger", url, "--scontrol", logged, "--json")
    took = time.monotonic() - start
    assert waited.returncode == 12, waited  # expired
    result = json.loads(waited.stdout.splitlines()[-1])
    assert result["result"] == "expired" and "held the job" in result["detail"], result
    assert took >= 2.0, "it waited for the lease until its deadline"
    assert calls(logged) == [], "nothing ran on ctl-b"
    assert leases(url)[job] == (owner, expires), "the lease is still ctl-a's, unchanged"
    done, swept, summary = sweep_on_b(url)
    assert done.returncode == 0 and swept == [] and summary["not_clear"] == 1, "a sweep leaves a held job alone"
    assert holder.poll() is None, "ctl-a still held it all along"

    crash(holder)  # ctl-a dies holding the lease, the flag set
    assert server_now(url) < expires
    # ctl-b's restore waits until the lease lapses by the server's clock, then runs.
    done = on_b("restore", job, "--timeout", "40", "--ledger", url, "--scontrol", logged, "--json")
    assert done.returncode == 0, done
    requeue, restore = history(url, job)
    assert requeue.op is Op.REQUEUE and not requeue.finished and " on ctl-a, " in (requeue.actor or "")
    assert restore.op is Op.RESTORE and restore.result is Result.OK and " on ctl-b, " in (restore.actor or "")
    assert restore.started_at >= expires, (restore.started_at, expires)
    assert calls(logged) == [f"update JobId={job} Requeue=0"]
    assert flag(job) == 0 and bit(url, job) is RequeueBit.MAY_BE_SET  # watched until saved (§13.3)


# -- 4. the ledger's server stopped or restarted ---------------------------------------------------


def test_a_ledger_server_down_before_the_script_runs_nothing(url: str, lab_mariadb: LabMariaDb,
                                                             tmp_path: Path) -> None:
    jobs = held_jobs(2)
    before = [lab.job_state(j) for j in jobs]
    logged = shim(tmp_path / "bin", f'exec {SCONTROL} "$@"')
    with Tracker(url, scontrol=logged) as tracker:  # a process that opened the ledger earlier
        lab_mariadb.stop()
        try:
            for ids in ([jobs[0]], jobs):  # one id, and the bulk path
                done = subprocess.run(host("ctl-a", 0.0, "cli", "requeue", *ids, "--timeout", "5", "--ledger", url,
                                           "--scontrol", logged), capture_output=True, text=True, timeout=120)
                assert done.returncode == 1, done
                assert done.stdout == "go\n", "no result: nothing ran"
                assert f"slurm-dsl: ledger {shown(url)}: open: cannot reach the server" in done.stderr, done.stderr
            with pytest.raises(LedgerError, match="cannot reach the server") as info:
                tracker.run(Op.REQUEUE, jobs[0], time.time() + 5)
            assert not isinstance(info.value, NotRecorded) and info.value.path == shown(url)
        finally:
            lab_mariadb.start()
    assert calls(logged) == [], "scontrol was never called"
    assert [lab.job_state(j) for j in jobs] == before
    assert all(history(url, j) == [] and bit(url, j) is None for j in jobs)


@pytest.mark.parametrize(("server", "kind"), [("stop", "single"), ("stop", "bulk"), ("restart", "single")])
def test_a_ledger_server_lost_while_the_script_runs_loses_no_outcome_and_no_intent(
    url: str, lab_mariadb: LabMariaDb, tmp_path: Path, server: str, kind: str
) -> None:
    jobs = held_jobs(1 if kind == "single" else 3)
    once = tmp_path / "once"
    # Call 1 (Requeue=1) first stops or restarts the ledger's server, then runs.  Its output goes to
    # a file: a byte on the script's stderr would be read as scontrol's.  This host keeps the
    # machine's own name: a server started from a UTS namespace would keep its host name.
    dropping = shim(tmp_path / "bin", f'case "$1 $3" in "update Requeue=1") [ -e {once} ] || {{ : > {once};'
                    f' {LAB_MARIADB} {server} </dev/null >>{tmp_path}/mariadb.log 2>&1; }} ;; esac\n'
                    f'exec {SCONTROL} "$@"')
    # 20 s: stopping or restarting the server inside call 1 takes seconds on a loaded machine, and a
    # call cut at the deadline would read unknown (3 s was seen to be too short for a restart on sid).
    done = subprocess.run(host("-", 0.0, "--lease-slack", SLACK, "cli", "requeue", *jobs, "--timeout", "20",
                               "--ledger", url, "--scontrol", dropping), capture_output=True, text=True, timeout=120)
    assert once.exists()
    rows = [r.split() for r in done.stdout.splitlines()[1:]]
    assert [r[:2] for r in rows] == [[j, "requeue"] for j in jobs], "every job's row is printed"
    # Held jobs: call 2 is refused (pending execution), call 3 clears the flag again.
    assert [r[2:4] for r in rows] == [["rejected", "clear"]] * len(jobs), rows
    assert [flag(j) for j in jobs] == [0] * len(jobs), "the requeues ran to their end"
    if server == "restart":
        # The server was back before the result: the dropped connection is replaced, the result recorded.
        assert done.returncode == 10 and "ledger error" not in done.stderr, done
        # Call 3 cleared each flag: watched until saved (§13.3).
        assert all(history(url, j)[-1].result is Result.REJECTED and bit(url, j) is RequeueBit.MAY_BE_SET
                   for j in jobs)
        return
    assert done.returncode >= 1, done
    # The log has each outcome, naming the ledger as every message does: the URL without its query
    # (docs/contract.md §9.1.1); and the error names the ledger.
    for job in jobs:
        assert re.search(f"^slurm-dsl: could not record requeue {job}: rejected .* in {re.escape(shown(url))}$",
                         done.stderr, re.M), done.stderr
    assert re.search(f"^slurm-dsl: ledger error: requeue {jobs[0]}: rejected .*could not be recorded: ledger"
                     f" {re.escape(shown(url))}: batch: cannot reach the server", done.stderr, re.M), done.stderr
    assert not lab_mariadb.answers()
    lab_mariadb.start()
    # The intents stayed: may_be_set, no result, under leases that lapse by the server's clock.
    assert all(bit(url, j) is RequeueBit.MAY_BE_SET and not history(url, j)[-1].finished for j in jobs)
    held = leases(url)
    deadline = time.monotonic() + SETTLE_WITHIN
    with open_ledger(url) as ledger:
        while len(ledger.due_objects(ledger.now())) < len(jobs):
            assert time.monotonic() < deadline, "the lost host's leases never lapsed"
            time.sleep(0.1)
        assert ledger.now() >= max(e for _, e in held.values())
    with lab.saving():  # the flags the requeues cleared are seen saved: one sweep settles them (§13.3)
        done, swept, summary = sweep_on_b(url)
    assert done.returncode == 0, done
    assert sorted((s["job_id"], s["done"]) for s in swept) == sorted((j, "cleared") for j in jobs)
    assert summary["not_clear"] == 0
