"""Who may read "gone" (docs/contract.md §9.3 "Who may read gone", issue 31 item 4) on the real slurmctld with
``PrivateData=jobs``: a lookup by an account that may not see a job answers ``Invalid job id
specified``, byte for byte what slurmctld says of a job it no longer knows.

The lab is brought up with ``PrivateData=jobs`` for this module (contrib/lab/up,
``SLURM_DSL_LAB_PRIVATE_DATA``; restarted with and without it), and slurm-dsl runs as the lab's
plain account (``slurmdsl-alice``: not root, not the SlurmUser, no accounting, so no AdminLevel) on
root's job, whose Requeue flag is really 1, with a ledger of that account's that says the flag may
be set (an unknown requeue ended a minute ago).  Then:

- ``sweep``: the object stays ``may_be_set`` (it would have been cleared as gone, the flag left
  at 1 untracked), no verdict ``gone`` is written, and the sweep exits non-zero saying whom to run
  as;
- ``settle``: no verdict, the same words;
- a keyed hold whose earlier unknown hold of the key is settled in its look-back: no ``gone``;
- a selection (``--name``) lists only the account's own job, and says the account may not see every job.

The account runs Debian's python3 on a copy of the package in a directory it can read, so the
test passes from a checkout it cannot read (a clone under /root).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Tuple

import pytest

from slurm_dsl.core.model import Op
from tests import lab

pytestmark = pytest.mark.integration

RECORD_UNKNOWN = """
import sys, time
from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result
from slurm_dsl.ledger.choose import open_ledger
path, job, op, key = sys.argv[1], sys.argv[2], Op(sys.argv[3]), sys.argv[4] or None
bit = RequeueBit.MAY_BE_SET if op is Op.REQUEUE else None
with open_ledger(path) as ledger:
    op_id = ledger.begin_operations([(job, op, "0" * 32)], time.time() - 61, key=key, ends_by=time.time() - 60)[0]
    ledger.finish_operations([(op_id, Outcome(op, job, Result.UNKNOWN, bit), b"")], time.time() - 60)
"""


class Plain(NamedTuple):
    name: str
    python: str
    code: str  # a directory holding slurm_dsl, readable by the account
    ledger: str


def lab_up(private_data: str) -> None:
    env = {**os.environ, "SLURM_DSL_LAB_PRIVATE_DATA": private_data}
    done = subprocess.run([str(lab.LAB_UP)], capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode != 0:
        raise lab.LabError(f"{lab.LAB_UP} (PrivateData={private_data or 'none'}): {done.stderr.strip()}")


@pytest.fixture(scope="module")
def private_jobs() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("acts as another account (runuser) and reconfigures the lab: root only")
    reason = lab.lab_available()
    if reason is not None:
        pytest.skip(f"Slurm lab not usable: {reason}")
    lab_up("jobs")
    try:
        yield
    finally:
        lab_up("")


@pytest.fixture
def plain(private_jobs: None) -> Iterator[Plain]:
    entry = pwd.getpwnam(lab.TEST_USER)
    top = Path(tempfile.mkdtemp(prefix="slurm-dsl-private-", dir="/tmp"))
    try:
        top.chmod(0o755)
        shutil.copytree(lab.REPO_ROOT / "slurm_dsl", top / "code" / "slurm_dsl",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for path in [top / "code", *(top / "code").rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        state = top / "state"
        state.mkdir(mode=0o700)
        os.chown(state, entry.pw_uid, entry.pw_gid)
        yield Plain(entry.pw_name, "/usr/bin/python3", str(top / "code"), str(state / "ledger.sqlite3"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def as_plain(who: Plain, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DSL_")}
    env.update(PYTHONPATH=who.code, SLURM_DSL_JOBINFO="")
    command = [who.python, *argv] if argv[0] == "-c" else [who.python, "-m", "slurm_dsl", *argv]
    return subprocess.run(["runuser", "-u", who.name, "--", *command], capture_output=True, text=True,
                          timeout=120, cwd="/", env=env, check=False)


def record_unknown(who: Plain, job: str, op: Op, key: str = "") -> None:
    done = as_plain(who, "-c", RECORD_UNKNOWN, who.ledger, job, op.value, key)
    assert done.returncode == 0, done.stderr


HISTORY = """
import json, sys
from slurm_dsl.ledger.choose import open_ledger
with open_ledger(sys.argv[1]) as ledger:
    obj = ledger.get(sys.argv[2])
    print(json.dumps([obj and obj.bit.value, [e.settlement and e.settlement.verdict.value
                                              for e in ledger.history(sys.argv[2])]]))
"""


def history(who: Plain, job: str) -> Tuple[Optional[str], List[Optional[str]]]:
    """The job's object's bit and each operation's verdict, read as the account (its ledger is
    its own: root's commands do not open another account's)."""
    done = as_plain(who, "-c", HISTORY, who.ledger, job)
    assert done.returncode == 0, done.stderr
    bit, verdicts = json.loads(done.stdout)
    return bit, verdicts


def hidden(job: str, who: Plain) -> None:
    """The job is there for root and "gone" for the account: what the lab must show first."""
    state = lab.job_state(job)
    assert state is not None and state.requeue == 1, state
    seen = subprocess.run(["runuser", "-u", who.name, "--", "squeue", "-h", "-j", job], capture_output=True,
                          text=True, check=False)
    assert seen.returncode == 1 and "Invalid job id specified" in seen.stderr, (seen.stdout, seen.stderr)


def test_an_unprivileged_sweep_keeps_a_flag_it_cannot_see(plain: Plain) -> None:
    job = lab.make_job("running_rq1")  # root's job, its flag really at 1
    try:
        record_unknown(plain, job, Op.REQUEUE)
        hidden(job, plain)
        swept = as_plain(plain, "sweep", "--ledger", plain.ledger, "--json", "--settle-delay", "2")
        assert swept.returncode == 15, swept.stdout + swept.stderr
        assert "may not see every job" in swept.stderr and "run it as root" in swept.stderr, swept.stderr
        summary = json.loads(swept.stdout.splitlines()[-1])
        assert summary["unseen"] and summary["summary"]["lookup_failed"] == 1, summary
        assert history(plain, job) == ("may_be_set", [None])  # no verdict gone, the object kept
        assert lab.job_state(job) is not None  # the flag the ledger still watches is really there

        settled = as_plain(plain, "settle", job, "--ledger", plain.ledger, "--json", "--settle-delay", "2")
        (row,) = [json.loads(line) for line in settled.stdout.splitlines()]
        assert row["effect"] is None and settled.returncode == 15, settled.stdout + settled.stderr
        assert "may not see every job" in settled.stderr
        assert history(plain, job) == ("may_be_set", [None])
    finally:
        lab.cancel(job)


def test_a_keyed_look_back_never_trusts_a_gone_it_cannot_see(plain: Plain) -> None:
    job = lab.make_job("running_rq1")
    try:
        record_unknown(plain, job, Op.HOLD, "nightly-31")
        hidden(job, plain)
        done = as_plain(plain, "hold", job, "--key", "nightly-31", "--timeout", "15", "--settle-delay", "2",
                        "--ledger", plain.ledger, "--json")
        (row,) = [json.loads(line) for line in done.stdout.splitlines()]
        # The earlier hold cannot be settled from what this account sees: nothing ran, and no
        # verdict gone was written for it.
        assert row["result"] == "expired" and "not settled yet" in row["detail"], done.stdout + done.stderr
        assert "may not see every job" in done.stderr
        assert history(plain, job) == ("clear", [None])
    finally:
        lab.cancel(job)


def test_a_selection_by_an_account_that_may_not_see_every_job_says_so(plain: Plain) -> None:
    """docs/contract.md §10.3: squeue lists only the jobs the account may see, so a selection by it
    holds only those, and the command says so (on stderr: it still acts on what it found)."""
    name = f"sight-{os.getpid()}"
    roots = lab.make_job("held_user", f"--job-name={name}")
    own = lab.make_job("held_user", f"--job-name={name}", user=plain.name)
    try:
        done = as_plain(plain, "release", "--name", name, "--dry-run", "--json", "--ledger", plain.ledger)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [json.loads(line)["job_id"] for line in done.stdout.splitlines()] == [own]  # not root's
        assert "may not see every job" in done.stderr, done.stderr
        assert "PrivateData hides other users' jobs" in done.stderr and "run it as root" in done.stderr
        seen = lab.job_state(roots)
        assert seen is not None and seen.reason == "JobHeldUser"  # looked at only, as a dry run does
    finally:
        lab.cancel(roots, own)



def test_a_requeue_into_hold_by_an_account_that_may_not_see_every_job_says_what_happened(plain: Plain) -> None:
    """The plain account's ``requeue --hold`` of its own job and of root's, which it may not see.
    Its own: 22.05 takes its ``Requeue=1`` (exit 0) but leaves the flag at 0 under JobRequeue=0 and
    then refuses the requeue (docs/slurm-behaviour.md §3); wherever a major lets it through, the
    job comes back held.  Either way the result says which, and the record agrees.  Root's: every
    call refused, nothing changed."""
    own = lab.make_job("running_rq0", user=plain.name)
    roots = lab.make_job("running_rq0")
    try:
        rows = {}
        for job in (own, roots):
            done = as_plain(plain, "requeue", job, "--hold", "--json", "--timeout", "30", "--settle-delay", "2",
                            "--ledger", plain.ledger)
            (rows[job],) = [json.loads(line) for line in done.stdout.splitlines()]
            assert done.returncode == {"ok": 0, "rejected": 10}.get(str(rows[job]["result"])), done.stdout + done.stderr
        mine, theirs = rows[own], rows[roots]
        state = lab.job_state(own)
        assert state is not None and state.requeue == 0 and mine["requeue_bit"] == "clear", (state, mine)
        if mine["result"] == "ok":
            assert (state.restarts, state.priority) == (1, 0), state  # requeued, and held
        else:
            assert [c["outcome"] for c in mine["calls"]] == ["success", "rejected", "success"], mine
            assert mine["calls"][1]["message"] == "Requested operation is presently disabled", mine
            assert (state.state, state.restarts) == ("RUNNING", 0) and state.priority > 0, state
        print(f"own job: {mine['result']}; root's: {theirs['result']} ({theirs['calls'][0]['message']})")
        assert theirs["result"] == "rejected" and [c["outcome"] for c in theirs["calls"]] == ["rejected", "rejected"]
        other = lab.job_state(roots)
        assert other is not None and (other.state, other.restarts, other.requeue) == ("RUNNING", 0, 0), other
        assert other.priority > 0, other  # not held
    finally:
        lab.cancel(own, roots)
