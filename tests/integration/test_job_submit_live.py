"""The job_submit companion (contrib/slurm/job_submit.lua) on the real lab.

Contract: with JobSubmitPlugins=lua and the companion installed (contrib/lab/up does both),
a plain user's jobs and updates come out at Requeue=0, the user is told at submit, every
other update still works, and root (exempt) keeps full control: the first call of a
slurm-dsl requeue, root's ``update Requeue=1``, still sets the flag. A slurm-dsl account
that is *not* exempt gets its requeues rejected with the bit clear, never half done.

Exact outputs are the ones seen on Debian 12's Slurm 22.05.8. There, a message that the
script sends from slurm_job_modify is discarded by slurmctld (fixed in 23.02), so the user's
``scontrol update ... Requeue=1`` exits 0 with no output. On 24.11.5 (Debian 13) it exits 0 and
prints ``scontrol: error: <message>``.

The last test runs the companion's logic, outside Slurm, under each Debian Lua (5.1 is the
one Debian builds the plugin against; the others are checked where installed).
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

from slurm_dsl import Op, RequeueBit, Result
from slurm_dsl.run.calls import execute
from tests import lab

pytestmark = pytest.mark.integration

COMPANION = lab.REPO_ROOT / "contrib" / "slurm" / "job_submit.lua"
INSTALLED = lab.SLURM_CONF.parent / "job_submit.lua"  # the plugin reads it next to slurm.conf
MARKER = "-- slurm-dsl job_submit companion"
TIMEOUT = 15.0
SUBMIT_MESSAGE = "Requeue=1 is not allowed on this cluster: the job is submitted with Requeue=0"
MODIFY_MESSAGE = "Requeue=1 is not allowed on this cluster: job {} keeps Requeue=0"


def _companion_problem() -> Optional[str]:
    """None if the lab runs this checkout's companion, else why not."""
    plugins = ""
    try:
        for line in lab.SLURM_CONF.read_text().splitlines():
            key, sep, value = line.split("#", 1)[0].partition("=")
            if sep and key.strip().lower() == "jobsubmitplugins":
                plugins = value.strip()
    except OSError as exc:
        return f"cannot read {lab.SLURM_CONF}: {exc}"
    if "lua" not in [p.strip() for p in plugins.split(",")]:
        return f"{lab.SLURM_CONF} has no JobSubmitPlugins=lua"
    try:
        installed = INSTALLED.read_text()
    except OSError as exc:
        return f"cannot read {INSTALLED}: {exc}"
    if not installed.startswith(MARKER):
        return f"{INSTALLED} is not the slurm-dsl companion (no '{MARKER}' first line)"
    if installed != COMPANION.read_text():
        return f"{INSTALLED} differs from {COMPANION}"
    return None


@pytest.fixture(autouse=True, scope="module")
def _companion_installed() -> None:
    """Skip the module on a lab without the companion (a foreign lab, an old up),
    except under CI=true, where contrib/lab/up must have installed it."""
    problem = _companion_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"job_submit companion not active under CI=true: {problem}", pytrace=False)
        pytest.skip(f"job_submit companion not active: {problem} (run contrib/lab/up as root)")


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("acting as the lab's plain user needs root (runuser)")


@pytest.fixture
def jobs() -> Iterator[List[str]]:
    """Job ids submitted by hand (not through lab.submit); cancelled afterwards."""
    ids: List[str] = []
    try:
        yield ids
    finally:
        lab.cancel(*ids)


def as_user(*argv: str) -> subprocess.CompletedProcess[str]:
    return lab.run_cmd(["runuser", "-u", lab.TEST_USER, "--", *argv], cwd=tempfile.gettempdir())


def user_sbatch(jobs: List[str], *args: str) -> Tuple[str, str]:
    """sbatch a sleep job as the plain user; return (job id, sbatch's stderr)."""
    proc = as_user("sbatch", "--parsable", "-o", "/dev/null", *args, *lab.SLEEP_JOB)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().split(";")[0]
    assert job_id.isdigit(), proc.stdout
    jobs.append(job_id)
    return job_id, proc.stderr


def time_limit(job_id: str) -> str:
    proc = lab.run_cmd(["squeue", "-h", "-j", job_id, "-O", "TimeLimit"])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def slurm_major() -> int:
    out = lab.run_cmd(["scontrol", "-V"]).stdout  # "slurm-wlm 22.05.8" on Debian 12
    found = re.search(r"(\d+)\.\d+", out)
    assert found, out
    return int(found.group(1))


# --- a plain user ----------------------------------------------------------------------


@pytest.mark.parametrize("request_", [("--requeue",), ("--requeue", "--hold")], ids=["running", "held"])
def test_user_sbatch_requeue_comes_out_at_0(jobs: List[str], request_: Tuple[str, ...]) -> None:
    job_id, stderr = user_sbatch(jobs, *request_)
    assert stderr == f"sbatch: {SUBMIT_MESSAGE}\n"
    js = lab.job_state(job_id)
    assert js is not None and js.requeue == 0, js
    if "--hold" not in request_:
        assert lab.wait_for(job_id, lab.Expect("RUNNING")).requeue == 0


@pytest.mark.parametrize("value", ["1", ""], ids=["1", "empty"])
def test_user_sbatch_requeue_from_the_environment_comes_out_at_0(jobs: List[str], value: str) -> None:
    proc = lab.run_cmd(
        ["runuser", "-u", lab.TEST_USER, "--", "env", f"SBATCH_REQUEUE={value}",
         "sbatch", "--parsable", "-o", "/dev/null", *lab.SLEEP_JOB],
        cwd=tempfile.gettempdir(),
    )
    if value and slurm_major() >= 26:
        # 26.05 reads SBATCH_REQUEUE's value and refuses "1" itself: nothing is submitted
        # (docs/slurm-24.11-26.05.md §10). Any value did on 22.05 and 24.11; an empty one still does.
        refused = (255, "", "sbatch: error: Invalid --requeue specification\n")
        assert (proc.returncode, proc.stdout, proc.stderr) == refused
        return
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip()
    jobs.append(job_id)
    assert proc.stderr == f"sbatch: {SUBMIT_MESSAGE}\n"
    assert lab.job_state(job_id).requeue == 0  # type: ignore[union-attr]


@pytest.mark.parametrize("request_", [(), ("--no-requeue",)], ids=["default", "no-requeue"])
def test_user_sbatch_without_requeue_is_silent(jobs: List[str], request_: Tuple[str, ...]) -> None:
    job_id, stderr = user_sbatch(jobs, *request_)
    assert stderr == ""
    assert lab.wait_for(job_id, lab.Expect("RUNNING")).requeue == 0


def test_user_update_requeue_1_leaves_0() -> None:
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    proc = as_user("scontrol", "update", f"JobId={job_id}", "Requeue=1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    if slurm_major() < 23:
        assert proc.stderr == ""  # 22.05 discards log_user() from slurm_job_modify
    else:
        # 24.11.5 (Debian 13): the message comes back and scontrol prints it with error(), exit 0
        assert proc.stderr == f"scontrol: error: {MODIFY_MESSAGE.format(job_id)}\n"
    js = lab.job_state(job_id)
    assert js is not None and (js.state, js.requeue) == ("RUNNING", 0), js


def test_user_update_of_other_fields_still_works() -> None:
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    assert time_limit(job_id) == "10:00"
    proc = as_user("scontrol", "update", f"JobId={job_id}", "TimeLimit=9")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert time_limit(job_id) == "9:00"
    # Requeue=1 with another field: the Requeue part is clamped, the rest goes through.
    proc = as_user("scontrol", "update", f"JobId={job_id}", "Requeue=1", "TimeLimit=8")
    assert proc.returncode == 0, proc.stderr
    assert time_limit(job_id) == "8:00"
    assert lab.job_state(job_id).requeue == 0  # type: ignore[union-attr]
    # The user may still clear the flag, and hold and release are updates too.
    assert as_user("scontrol", "update", f"JobId={job_id}", "Requeue=0").returncode == 0


def test_user_hold_and_release_still_work() -> None:
    # A begin time an hour away keeps the released job pending: with a free slot the scheduler
    # could start it between the release and the hold, and a running job stays RUNNING when held.
    job_id = lab.make_job("held_user", "--begin=now+3600", user=lab.TEST_USER)
    assert as_user("scontrol", "release", job_id).returncode == 0
    js = lab.job_state(job_id)
    assert js is not None and js.reason != "JobHeldUser" and js.priority > 0, js
    assert as_user("scontrol", "hold", job_id).returncode == 0
    lab.wait_for(job_id, lab.Expect("PENDING", "JobHeldUser"))


def test_user_cannot_requeue_a_job_at_requeue_0() -> None:
    # Why Requeue=0 matters: slurmctld refuses a requeue of such a job (22.05.8).
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    as_user("scontrol", "update", f"JobId={job_id}", "Requeue=1")
    proc = as_user("scontrol", "requeue", job_id)
    assert (proc.returncode, proc.stderr) == (1, f"Requested operation is presently disabled for job {job_id}\n")
    js = lab.job_state(job_id)
    assert js is not None and (js.state, js.requeue, js.restarts) == ("RUNNING", 0, 0), js


# --- root, and slurm-dsl --------------------------------------------------------------


def test_root_sets_requeue_1_on_a_user_job() -> None:
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    lab.check(["scontrol", "update", f"JobId={job_id}", "Requeue=1"])
    assert lab.job_state(job_id).requeue == 1  # type: ignore[union-attr]
    lab.check(["scontrol", "update", f"JobId={job_id}", "Requeue=0"])
    assert lab.job_state(job_id).requeue == 0  # type: ignore[union-attr]


def test_root_sbatch_requeue_gives_1() -> None:
    assert lab.job_state(lab.make_job("running_rq1")).requeue == 1  # type: ignore[union-attr]


def test_slurm_dsl_requeue_of_a_user_job() -> None:
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    out = execute("requeue", job_id, time.time() + TIMEOUT, scontrol=lab.SCONTROL)
    assert (out.result, out.requeue_bit) == (Result.OK, RequeueBit.CLEAR), out
    assert [c.status for c in out.calls] == [0, 0, 0]
    js = lab.wait_for(job_id, lambda s: s.restarts == 1)
    assert js.requeue == 0, js


def test_slurm_dsl_as_an_account_that_is_not_exempt(tmp_path: Path) -> None:
    # What a site sees if it forgets to list slurm-dsl's account in EXEMPT: call 1 is
    # clamped (exit 0), call 2 is refused, call 3 clears: rejected, bit clear, job untouched.
    shim = tmp_path / "scontrol"
    shim.write_text(f'#!/bin/sh\nexec runuser -u {lab.TEST_USER} -- {lab.SCONTROL} "$@"\n')
    shim.chmod(0o755)
    job_id = lab.make_job("running_rq0", user=lab.TEST_USER)
    out = execute(Op.REQUEUE, job_id, time.time() + TIMEOUT, scontrol=str(shim))
    assert (out.result, out.requeue_bit) == (Result.REJECTED, RequeueBit.CLEAR), out
    assert [(c.status, c.message) for c in out.calls] == [
        (0, None),
        (1, "Requested operation is presently disabled"),
        (0, None),
    ]
    js = lab.job_state(job_id)
    assert js is not None and (js.state, js.requeue, js.restarts) == ("RUNNING", 0, 0), js


# --- the logic under each Lua ---------------------------------------------------------

# Runs the companion (its source on stdin, after a line with the number of bytes) with a
# stub `slurm` table, the way job_submit/lua calls it: uids and values are Lua numbers
# (floats on 5.3+, as lua_pushnumber makes them).
HARNESS = r"""
local n = tonumber(io.read("*l"))
local src = io.read(n)
local out = {}
local function put(s) out[#out + 1] = s end
slurm = { SUCCESS = 0, ERROR = -1, NO_VAL16 = 65534 }
function slurm.log_info(...) put("info " .. string.format(...)) end
function slurm.log_error(...) put("error " .. string.format(...)) end
function slurm.log_user(...) put("user " .. string.format(...)) end
local chunk = assert((loadstring or load)(src, "=job_submit.lua"))
assert(chunk() == 0, "the chunk must return slurm.SUCCESS")
for line in io.lines() do
    local fn, uid, value = line:match("^(%a+) (%d+) (%d+)$")
    local desc = { requeue = tonumber(value) + 0.0 }
    local rc
    if fn == "submit" then
        rc = slurm_job_submit(desc, {}, tonumber(uid) + 0.0)
    else
        rc = slurm_job_modify(desc, { job_id = 77.0 }, {}, tonumber(uid) + 0.0)
    end
    put(string.format("%s %s %s -> %d rc %d", fn, uid, value, desc.requeue, rc))
end
io.write(table.concat(out, "\n"), "\n")
"""

EXEMPT_SHIPPED = 'local EXEMPT = {\n    -- "slurm-dsl",\n    -- 1234,\n}'
EXEMPT_TEST = 'local EXEMPT = { "nobody", 4242, "slurmdsl-no-such-user", true }'
PLAIN_UID = 4243
NO_VAL16 = 65534


def run_companion(interp: str, cases: List[Tuple[str, int, int]], user: Optional[str] = None) -> List[str]:
    src = COMPANION.read_text()
    assert src.count(EXEMPT_SHIPPED) == 1, "the EXEMPT table changed shape: update this test"
    src = src.replace(EXEMPT_SHIPPED, EXEMPT_TEST)
    body = src.encode()
    stdin = b"%d\n" % len(body) + body + b"".join(b"%s %d %d\n" % (f.encode(), u, v) for f, u, v in cases)
    argv = [interp, "-e", HARNESS]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode().splitlines()


@pytest.mark.parametrize("interp", ["lua5.1", "lua5.2", "lua5.3", "lua5.4"])
@pytest.mark.parametrize("user", [None, lab.TEST_USER], ids=["as-root", "as-plain-user"])
def test_companion_logic_under_each_lua(interp: str, user: Optional[str]) -> None:
    if not any((Path(d) / interp).exists() for d in os.environ.get("PATH", "/usr/bin").split(os.pathsep)):
        pytest.skip(f"{interp} not installed (apt-get install {interp}; contrib/lab/up installs the plugin's)")
    # The SlurmUser is whoever runs the script (slurmctld's uid): root, or the plain user here.
    self_uid = 0 if user is None else pwd.getpwnam(user).pw_uid
    nobody = pwd.getpwnam("nobody").pw_uid  # exempt by name, through /etc/passwd
    exempt = {0, self_uid, nobody, 4242}
    callers = list(dict.fromkeys([0, self_uid, nobody, 4242, PLAIN_UID]))
    cases = [(fn, uid, value) for fn in ("submit", "modify") for uid in callers for value in (0, 1, 2, NO_VAL16)]
    lines = run_companion(interp, cases, user)
    expected: List[str] = [
        "error job_submit.lua: EXEMPT entry of type boolean ignored: give a uid or a user name",
        "error job_submit.lua: EXEMPT user slurmdsl-no-such-user not found in /etc/passwd: list it by uid",
    ]
    for fn, uid, value in cases:
        out = value
        if uid not in exempt and value != 0 and (fn == "submit" or value != NO_VAL16):
            out = 0
            if value != NO_VAL16:
                job = "at submit" if fn == "submit" else "for job 77"
                expected.append(f"info job_submit.lua: uid {uid} asked Requeue={value} {job}: set to 0")
                expected.append("user " + (SUBMIT_MESSAGE if fn == "submit" else MODIFY_MESSAGE.format(77)))
        expected.append(f"{fn} {uid} {value} -> {out} rc 0")
    assert lines == expected

