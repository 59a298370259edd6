"""contrib/examples/drain_requeue.py, the site plugin example, on the real lab.

It requeues the running jobs of a node through ``slurm_dsl.run_ops(..., select=..., key=...)``.
Run twice with the same key (as after a crash), it requeues each job exactly once: the jobs'
real RestartCnt says so, and the second run's rows name the first run's operations.  Only this
test's own jobs are touched (a job name of its own; the lab node is never drained: --any-state).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests import lab

pytestmark = pytest.mark.integration

EXAMPLE = lab.REPO_ROOT / "contrib" / "examples" / "drain_requeue.py"


def node() -> str:
    out = lab.run_cmd(["sinfo", "-h", "-N", "-o", "%N"]).stdout.split()
    assert out, "the lab has a node"
    return out[0]


def example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(lab.REPO_ROOT)}
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=180,
                          env=env, check=False)


def test_a_drain_requeue_run_twice_with_its_key_requeues_each_job_once(tmp_path: Path) -> None:
    name = f"sdsl-drain-{uuid.uuid4().hex[:8]}"
    jobs = [lab.make_job("running_rq0", f"--job-name={name}") for _ in range(2)]
    before = {j: lab.job_state(j) for j in jobs}
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir(mode=0o700)
    args = [node(), "--name", name, "--any-state", "--key", f"test:{name}", "--retry", "1",
            "--settle-delay", "2", "--timeout", "60", "--ledger", str(ledger_dir / "ledger.sqlite3")]
    first = example(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(line.split()[0] for line in first.stdout.splitlines()) == sorted(jobs)
    assert all(" requeue ok" in line for line in first.stdout.splitlines())
    for j in jobs:
        state, was = lab.job_state(j), before[j]
        assert state is not None and was is not None and state.restarts == was.restarts + 1
    # As after a crash, the same logical operation again: the key recorded the set its first run
    # selected (the jobs now pending, no longer RUNNING), so the rerun answers for those, acting on none.
    again = example(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(line.split()[0] for line in again.stdout.splitlines()) == sorted(jobs)
    assert again.stdout.count("with this key took effect: not run again") == 2, again.stdout
    for j in jobs:
        state, was = lab.job_state(j), before[j]
        assert state is not None and was is not None and state.restarts == was.restarts + 1  # not twice


def test_without_ledger_the_example_records_in_the_config_file_s_ledger(tmp_path: Path) -> None:
    # Issue 31, item 5: with the documented ledger in the config file, the example's intents land
    # there, the ledger the host's sweeps read, not in a built-in one of its own.
    name = f"sdsl-drain-{uuid.uuid4().hex[:8]}"
    jobs = [lab.make_job("running_rq0", f"--job-name={name}") for _ in range(2)]
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir(mode=0o700)
    ledger = ledger_dir / "ledger.sqlite3"
    config = tmp_path / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nledger = {ledger}\n")
    config.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if k != "SLURM_DSL_LEDGER"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), node(), "--name", name, "--any-state", "--key", f"test:{name}", "--timeout",
         "60"],
        capture_output=True, text=True, timeout=180, check=False,
        env={**env, "PYTHONPATH": str(lab.REPO_ROOT), "SLURM_DSL_CONFIG": str(config)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with open_ledger(str(ledger)) as opened:
        assert sorted((j, h.op.value, h.key) for j in jobs for h in opened.history(j)) == sorted(
            (j, "requeue", f"test:{name}") for j in jobs)


def test_a_node_that_is_not_draining_is_refused() -> None:
    done = example(node(), "--name", "sdsl-none", "--timeout", "5")
    assert done.returncode == 2 and "not draining: nothing done" in done.stderr


def test_a_bad_node_name_is_refused_before_anything() -> None:
    done = example("vm;id", "--timeout", "5")
    assert done.returncode == 2 and "not a node name" in done.stderr
