"""The pyslurm lookup against the real pyslurm, on the lab built from source (docs/slurm-25.11.md §2).

``contrib/lab/chroot 25.11`` builds Slurm 25.11 and pyslurm 25.11.2 against it; elsewhere this module
skips, and under CI=true it fails where the lab is 25.11 but pyslurm cannot be used. The squeue
lookup is the reference (tests/integration/test_lookup_live.py checks it against the lab): both
must give the same ``JobInfo``, field by field, for every kind of job.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import logging
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterator, List, Optional

import pytest

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import LookupFailed
from slurm_dsl.lookups.pyslurm import INVALID_JOB_ID, ModernPyslurmLookup, find_pyslurm_lookup
from slurm_dsl.lookups.squeue import SqueueLookup, slurm_version
from tests import lab

pytestmark = pytest.mark.integration

MAJOR = (25, 11)
MISSING = "999999"  # never reached by the lab's job ids
# What the adapter reads of a pyslurm.Job (slurm_dsl/lookups/pyslurm.py, _modern), and the types
# docs/pyslurm.md §2 promises; None where Slurm has no value (a plain job's array ids).
READS = {
    "id": (int,), "state": (str,), "is_requeueable": (bool,), "requeue_count": (int,), "priority": (int,),
    "state_reason": (str,), "array_id": (int, type(None)), "array_task_id": (int, type(None)),
}
FAKE = Path(__file__).resolve().parents[1] / "fake_pyslurm" / "pyslurm" / "__init__.py"


@pytest.fixture(scope="module")
def pyslurm() -> ModuleType:
    running = slurm_version()
    if running != MAJOR:
        pytest.skip(f"the lab is Slurm {running[0]}.{running[1]:02d}: the real pyslurm is tested on 25.11's")
    try:
        return importlib.import_module("pyslurm")
    except Exception as exc:  # a broken build raises anything at import
        message = f"pyslurm does not import on the 25.11 lab: {type(exc).__name__}: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: contrib/lab/chroot 25.11 builds it)", pytrace=False)
        pytest.skip(message)


@pytest.fixture
def lookup(pyslurm: ModuleType) -> ModernPyslurmLookup:
    found, _, why = find_pyslurm_lookup(MAJOR)
    assert isinstance(found, ModernPyslurmLookup), why
    return found


def array_ids(master: str) -> List[str]:
    """Every record of an array, by its own JobId, as squeue lists them (the master's among them)."""
    out = subprocess.run([lab.SQUEUE, "-h", "-r", "-j", master, "-O", "JobID:|"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return [line.strip().rstrip("|") for line in out.splitlines() if line.strip()]


def fields(answer: Dict[str, Optional[JobInfo]]) -> Dict[str, Optional[Dict[str, Any]]]:
    return {k: None if v is None else dataclasses.asdict(v) for k, v in answer.items()}


def reach_apart(answer: Dict[str, Optional[Dict[str, Any]]], array: str) -> Dict[str, Optional[Dict[str, Any]]]:
    """The answer with the reach of ``array``'s own JobId (a pending range of tasks and one split off
    by a release) put as "at least 2": there the two lookups differ, squeue 4 (one line a task) and
    pyslurm 3 (a range record counts as two) on 25.11.7 (docs/slurm-25.11.md §2, open). Every other
    field stays exact."""
    own = answer.get(array)
    if own is None:
        return answer
    assert own["array_tasks"] >= 2, own
    return {**answer, array: {**own, "array_tasks": ">= 2"}}


def test_every_kind_of_job_reads_as_squeue_reads_it(lookup: ModernPyslurmLookup) -> None:
    """Pending, running (Requeue 1 and 0), held by user and by admin, finished, failed, cancelled,
    requeued, another account's, array tasks by their own JobIds and the arrays' own JobIds (one
    running, one pending with a task split off), an unknown id: the same JobInfo as the squeue
    lookup's, field by field, asked one id at a time, a handful at once, and in one load of all."""
    requeued = lab.make_job("running_rq1")
    lab.check([lab.SCONTROL, "requeue", requeued])
    lab.wait_for(requeued, lab.Expect("PENDING"))
    running_array = lab.submit("--array=1-2", *lab.SLEEP_JOB)
    lab.wait_for(running_array, lab.Expect("RUNNING"))
    held_array = lab.submit("--hold", "--array=1-4", *lab.SLEEP_JOB)
    lab.wait_for(held_array, lab.Expect("PENDING", "JobHeldUser"))
    lab.check([lab.SCONTROL, "release", f"{held_array}_2"])
    kinds = {
        "pending": lab.make_job("pending"), "running_rq1": lab.make_job("running_rq1"),
        "running_rq0": lab.make_job("running_rq0"), "held_user": lab.make_job("held_user"),
        "held_admin": lab.make_job("held_admin"), "completed": lab.make_job("completed"),
        "failed": lab.make_job("failed"), "cancelled": lab.make_job("cancelled"), "requeued": requeued,
        "another_account": lab.make_job("held_user", user=lab.TEST_USER),
    }
    ids = [*kinds.values(), *array_ids(running_array), *array_ids(held_array), MISSING]
    assert running_array in ids and held_array in ids
    squeue = SqueueLookup(many=0).jobs(ids)
    assert squeue[MISSING] is None and all(squeue[i] is not None for i in ids if i != MISSING), squeue
    want = reach_apart(fields(squeue), held_array)
    one_by_one = {i: lookup.jobs([i])[i] for i in ids}
    assert reach_apart(fields(one_by_one), held_array) == want
    for start in range(0, len(ids), 3):  # handfuls: one Job.load each, plus a Jobs.load for an array's own id
        few = ids[start:start + 3]
        assert reach_apart(fields(lookup.jobs(few)), held_array) == {i: want[i] for i in few}
    lookup.many = 0  # one Jobs.load() of every job
    assert reach_apart(fields(lookup.jobs(ids)), held_array) == want
    lab.cancel(running_array, held_array)


def test_the_fakes_surface_is_the_real_ones(pyslurm: ModuleType) -> None:
    """tests/fake_pyslurm stands in for pyslurm where none is built: what the adapter reads of it
    has the real module's names and types (docs/pyslurm.md §2, §3)."""
    spec = importlib.util.spec_from_file_location("fake_pyslurm_checked", FAKE)
    assert spec is not None and spec.loader is not None
    fake = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(fake)
    finally:
        del sys.modules[spec.name]
    for name in ("Job", "Jobs", "RPCError"):
        assert hasattr(pyslurm, name) and hasattr(fake, name), name
    assert isinstance(pyslurm.__version__, str) and pyslurm.__version__.startswith("25.11.")
    job_id = lab.make_job("held_user")
    real = pyslurm.Job.load(int(job_id))
    fake.add_job(int(job_id), state="PENDING", reason="JobHeldUser", priority=0)
    stand_in = fake.Job.load(int(job_id))
    for name, types in READS.items():
        assert hasattr(pyslurm.Job, name) and hasattr(fake.Job, name), name
        assert isinstance(getattr(real, name), types), (name, getattr(real, name))
        assert type(getattr(real, name)) is type(getattr(stand_in, name)), name
    every = pyslurm.Jobs.load()
    assert int(job_id) in every and all(type(k) is int for k in every)  # a mapping keyed by int, as the fake's
    with pytest.raises(pyslurm.RPCError) as raised:
        pyslurm.Job.load(int(MISSING))
    assert (raised.value.errno, str(raised.value)) == (INVALID_JOB_ID, "Invalid job id specified")
    with pytest.raises(fake.RPCError) as faked:
        fake.Job.load(int(MISSING))
    assert (faked.value.errno, str(faked.value)) == (raised.value.errno, str(raised.value))


def test_a_pyslurm_built_for_another_slurm_is_refused_naming_both(pyslurm: ModuleType) -> None:
    found, level, why = find_pyslurm_lookup((24, 11))
    assert found is None and level == logging.WARNING
    assert why == f"pyslurm {pyslurm.__version__} is built for Slurm 25.11, but Slurm 24.11 is running"


@pytest.mark.slow
def test_slurmctld_down_is_lookup_failed_never_gone(lookup: ModernPyslurmLookup) -> None:
    """errno 1800 (Unable to contact slurm controller) is LookupFailed, one id or all; pyslurm has
    no timeout of its own: how long it takes is printed (docs/slurm-25.11.md §2), never asserted."""
    known = lab.make_job("held_user")
    lab.stop_slurmctld()
    try:
        for ids, many in (([known], 4), ([known, MISSING], 0)):
            lookup.many = many
            start = time.monotonic()
            with pytest.raises(LookupFailed, match="errno 1800") as raised:
                lookup.jobs(ids)
            print(f"pyslurm lookup of {len(ids)} id(s), many={many}, slurmctld down:"
                  f" {time.monotonic() - start:.2f} s: {raised.value.reason}", file=sys.stderr)
    finally:
        lab.start_slurmctld()
    lookup.many = 4
    assert lookup.jobs([known])[known] is not None


ASK_BOTH = """
import dataclasses, json, sys
from slurm_dsl.lookups.pyslurm import find_pyslurm_lookup
from slurm_dsl.lookups.squeue import SqueueLookup
ids = sys.argv[1:]
pys, _, why = find_pyslurm_lookup((25, 11))
assert pys is not None, why
out = {}
for name, answer in (("squeue", SqueueLookup(many=0, jobinfo=None).jobs(ids)), ("pyslurm", pys.jobs(ids))):
    out[name] = {k: v and dataclasses.asdict(v) for k, v in answer.items()}
print(json.dumps(out))
"""


@pytest.fixture
def private_jobs(pyslurm: ModuleType) -> Iterator[None]:
    """The lab with PrivateData=jobs for this test (as test_private_data_live.py brings it up)."""
    if os.geteuid() != 0:
        pytest.skip("acts as another account (runuser) and reconfigures the lab: root only")

    def up(private_data: str) -> None:
        env = {**os.environ, "SLURM_DSL_LAB_PRIVATE_DATA": private_data}
        done = subprocess.run([str(lab.LAB_UP)], capture_output=True, text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0, done.stderr

    up("jobs")
    try:
        yield
    finally:
        up("")


def test_with_private_data_another_accounts_job_reads_as_squeue_reads_it(private_jobs: None) -> None:
    """PrivateData=jobs: the plain account asks of root's job (hidden from it) and of its own; the
    pyslurm lookup answers what the squeue lookup answers, as that account."""
    roots = lab.make_job("running_rq1")
    own = lab.make_job("held_user", user=lab.TEST_USER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_DSL_")}
    env["PYTHONPATH"] = str(lab.REPO_ROOT)
    entry = pwd.getpwnam(lab.TEST_USER)
    done = subprocess.run(["runuser", "-u", entry.pw_name, "--", sys.executable, "-c", ASK_BOTH, roots, own, MISSING],
                          capture_output=True, text=True, env=env, cwd="/", timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["pyslurm"] == seen["squeue"]
    assert seen["squeue"][roots] is None and seen["squeue"][own] is not None
