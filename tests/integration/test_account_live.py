"""slurm-dsl as the account slurmctld runs as (issue 19): on a lab whose SlurmUser is not root
(trixie's, ``SlurmUser=slurm`` as Debian ships it: contrib/test --majors), the command runs as
that account (``runuser -u slurm``) on jobs root submitted, with a ledger in a directory of its
own: hold, release, requeue (flag cleared), a bulk hold, open, a sweep that restores a flag left
set, settle and doctor, each checked against the job's real record; then root's hold and doctor
on that ledger, which run as its owner and leave its files slurm's.  Then a plain account (the
lab's test user): doctor says it cannot act on other users' jobs and how to fix that, and its
hold of root's job is rejected with slurmctld's own words, the job unchanged.

Skipped, with the reason, on a lab whose SlurmUser is root (the host's) or when not root.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple

import pytest

from tests import lab
from tests.accounts import python_for, readable_package

pytestmark = pytest.mark.integration

TIMEOUT = "20"

# As the account, the ledger API (the sweeper tests' way to leave a flag "may be set"): an
# unknown outcome recorded for a job, its end a minute ago (long past any settle delay).
RECORD_UNKNOWN = """
import sys, time
from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result
from slurm_dsl.ledger.choose import open_ledger
path, job, op = sys.argv[1], sys.argv[2], Op(sys.argv[3])
bit = RequeueBit.MAY_BE_SET if op is Op.REQUEUE else RequeueBit.CLEAR
with open_ledger(path) as ledger:
    op_id = ledger.begin_operations([(job, op, "0" * 32)], time.time() - 61)[0]
    ledger.finish_operations([(op_id, Outcome(op, job, Result.UNKNOWN, bit), b"")], time.time() - 60)
"""


class Account(NamedTuple):
    name: str
    uid: int
    ledger: str
    pythonpath: str  # where it imports slurm_dsl from: a copy it can read (``readable``)


def slurm_user() -> str:
    """slurm.conf's SlurmUser as ``scontrol show config`` prints it: ``NAME(UID)``."""
    shown = lab.run_cmd(["scontrol", "show", "config"])
    found = re.search(r"^SlurmUser\s*=\s*(\S+)\((\d+)\)$", shown.stdout, re.M)
    return found.group(1) if found else ""


@pytest.fixture(scope="module")
def service() -> str:
    if os.geteuid() != 0:
        pytest.skip("acts as other accounts (runuser): root only")
    reason = lab.lab_available()
    if reason is not None:
        pytest.skip(f"Slurm lab not usable: {reason}")
    name = slurm_user()
    if name in ("", "root"):
        pytest.skip(f"this lab's SlurmUser is {name or 'unknown'}, not a service account: these run on a lab"
                    " with SlurmUser=slurm (contrib/test --majors trixie; SLURM_DSL_LAB_SLURM_USER=slurm)")
    return name


def account(name: str, pythonpath: str) -> Iterator[Account]:
    """``name`` with a ledger path in a directory of its own (0700), removed afterwards."""
    entry = pwd.getpwnam(name)
    top = tempfile.mkdtemp(prefix="slurm-dsl-account-")
    os.chmod(top, 0o700)
    os.chown(top, entry.pw_uid, entry.pw_gid)
    try:
        yield Account(name, entry.pw_uid, f"{top}/ledger.sqlite3", pythonpath)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def readable() -> Iterator[str]:
    """This checkout's slurm_dsl where every account can read it (a clone under /root is 0700)."""
    top = Path(tempfile.mkdtemp(prefix="slurm-dsl-account-python-"))
    top.chmod(0o755)
    try:
        yield str(readable_package(top))
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def slurm(service: str, readable: str) -> Iterator[Account]:
    yield from account(service, readable)


@pytest.fixture
def plain(service: str, readable: str) -> Iterator[Account]:
    yield from account(lab.TEST_USER, readable)


def as_account(who: Account, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m slurm_dsl ARGV --ledger``, or ``python -c`` with ``-c``, as ``who``, from /, with
    the module's readable copy of the package (``readable``) and a Python the account can run."""
    # Root's command on another account's ledger runs as that account: a Python it can run too.
    runs_as = who.name if who.uid != 0 else pwd.getpwuid(os.stat(os.path.dirname(who.ledger)).st_uid).pw_name
    python = python_for(runs_as)
    command = [python, *argv] if argv[0] == "-c" else [python, "-m", "slurm_dsl", *argv]
    env = {**os.environ, "PYTHONPATH": who.pythonpath}
    env.pop("SLURM_DSL_LEDGER", None)
    if who.uid == 0:  # root itself, as an admin types it
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/", env=env, check=False)
    return subprocess.run(["runuser", "-u", who.name, "--", *command], capture_output=True, text=True,
                          timeout=120, cwd="/", env=env, check=False)


def op(who: Account, *argv: str) -> List[Dict[str, Any]]:
    done = as_account(who, *argv, "--json", "--ledger", who.ledger, "--timeout", TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def state(job: str) -> lab.JobState:
    found = lab.job_state(job)
    assert found is not None, job
    return found


def test_the_slurm_user_operates_sweeps_and_settles_other_users_jobs(slurm: Account) -> None:
    a, b, c, d, e = (lab.make_job("running_rq0") for _ in range(5))  # root's jobs

    assert [r["result"] for r in op(slurm, "hold", a)] == ["ok"]
    assert state(a).priority == 0 and state(a).state == "RUNNING"
    assert [r["result"] for r in op(slurm, "release", a)] == ["ok"]
    assert state(a).priority > 0

    assert [(r["result"], r["requeue_bit"]) for r in op(slurm, "requeue", b)] == [("ok", "clear")]
    lab.wait_for(b, lambda s: s.restarts == 1)
    assert state(b).requeue == 0

    rows = op(slurm, "hold", c, d, e)
    assert {r["job_id"]: r["result"] for r in rows} == dict.fromkeys((c, d, e), "ok")
    assert [state(j).priority for j in (c, d, e)] == [0, 0, 0]
    rows = op(slurm, "open", c, d)
    assert {r["job_id"]: r["result"] for r in rows} == dict.fromkeys((c, d), "ok")
    assert state(c).priority > 0 and state(d).priority > 0 and state(e).priority == 0

    # A requeue whose outcome was unknown, its flag really left set: the sweep, as slurm, clears it.
    lab.check(["scontrol", "update", f"JobId={b}", "Requeue=1"])
    recorded = as_account(slurm, "-c", RECORD_UNKNOWN, slurm.ledger, b, "requeue")
    assert recorded.returncode == 0, recorded.stderr
    swept = as_account(slurm, "sweep", "--json", "--ledger", slurm.ledger, "--lookup", "squeue")
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert state(b).requeue == 0
    # Its restore's clear (and the requeue's above) are watched until slurmctld saves them; the
    # sweep after a save, as slurm (job_state is the SlurmUser's), clears them (contract §13.3).
    with lab.saving():
        swept = as_account(slurm, "sweep", "--json", "--ledger", slurm.ledger, "--lookup", "squeue")
    assert swept.returncode == 0 and json.loads(swept.stdout.splitlines()[-1])["not_clear"] == 0, swept.stdout

    # An unknown hold of e, which is held: settle, as slurm, finds its effect present.
    recorded = as_account(slurm, "-c", RECORD_UNKNOWN, slurm.ledger, e, "hold")
    assert recorded.returncode == 0, recorded.stderr
    settled = as_account(slurm, "settle", e, "--json", "--ledger", slurm.ledger, "--lookup", "squeue",
                         "--settle-delay", "2")
    rows = [json.loads(line) for line in settled.stdout.splitlines()]
    assert [(r["op"], r["effect"]) for r in rows] == [("hold", "present")], settled.stdout + settled.stderr

    st = os.stat(slurm.ledger)
    assert (st.st_uid, st.st_mode & 0o777) == (slurm.uid, 0o600)

    doctor = as_account(slurm, "doctor", "--json", "--ledger", slurm.ledger)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["caller"]["status"] == "ok", checks["caller"]
    assert checks["caller"]["detail"].startswith(f"uid {slurm.uid} ({slurm.name}) is slurm.conf's SlurmUser"
                                                 f" ({slurm.name}({slurm.uid}))")
    assert checks["ledger"]["status"] == "ok", checks["ledger"]

    # Root, on the SlurmUser's ledger directory: the command runs as its owner (admin/account.py),
    # the hold done and recorded there, doctor checking as slurm, every file still slurm's.
    root = slurm._replace(name="root", uid=0)
    as_root = as_account(root, "-v", "hold", a, "--json", "--ledger", slurm.ledger, "--timeout", TIMEOUT)
    assert as_root.returncode == 0, as_root.stdout + as_root.stderr
    assert [json.loads(line)["result"] for line in as_root.stdout.splitlines()] == ["ok"]
    assert f"running as {slurm.name} (uid {slurm.uid}), the owner of the ledger directory" in as_root.stderr
    assert state(a).priority == 0
    doctor = as_account(root, "doctor", "--json", "--ledger", slurm.ledger)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["caller"]["status"] == "ok" and checks["ledger"]["status"] == "ok", doctor.stdout
    assert checks["caller"]["detail"].startswith(f"uid {slurm.uid} ({slurm.name}) is slurm.conf's SlurmUser")
    directory = os.path.dirname(slurm.ledger)
    assert {f: os.stat(os.path.join(directory, f)).st_uid for f in os.listdir(directory)} == dict.fromkeys(
        os.listdir(directory), slurm.uid)


def test_a_plain_account_is_told_it_cannot_and_its_hold_of_roots_job_is_rejected(
    service: str, plain: Account
) -> None:
    doctor = as_account(plain, "doctor", "--json", "--ledger", plain.ledger)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert doctor.returncode == 1 and checks["caller"]["status"] == "fail", checks["caller"]
    detail = checks["caller"]["detail"]
    assert f"is neither root nor the SlurmUser ({service}(" in detail
    assert f"run slurm-dsl as root or {service}" in detail

    job = lab.make_job("running_rq0")
    before = state(job)
    done = as_account(plain, "hold", job, "--json", "--ledger", plain.ledger, "--timeout", TIMEOUT)
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["result"] for r in rows] == ["rejected"], done.stdout + done.stderr
    # slurmctld's words for a non-owner's hold (docs/slurm-behaviour.md §3): "Invalid user id".
    assert "Invalid user id" in json.dumps(rows), rows
    assert state(job) == before
