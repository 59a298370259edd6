"""slurm-dsl's own scripts and reader against the simulated slurmctld.

The product renders each wrapped op's script (``core.script.render``), the simulator's shell runs
it on a simulated cluster, and the product's reader (``core.reader.read_outcome``) reads what it
printed.  The expected result comes from docs/contract.md §7's words, written here apart from the
reader: hold, release and restore are ok on a job slurmctld knows that has not finished and
rejected on a finished one, hold and release not_found on an id it does not know; a requeue is ok
on a running job, rejected on a pending or finished one; nothing started is expired; a call TERMed
at the deadline makes the result unknown.  And each ok is checked in the simulated record.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import pytest

from slurm_dsl.core.model import Op, RequeueBit, Result
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.script import render
from tests.sim import shell
from tests.sim.slurmctld import Cluster, Job

NONCE = "9f3c2a7b1e4d5f60718293a4b5c6d7e8"
STATES: Dict[str, Callable[[Cluster], str]] = {
    "pending": lambda c: c.submit(c.t, state="PENDING"),
    "held": lambda c: c.submit(c.t, held=True),
    "running0": lambda c: c.submit(c.t),
    "running1": lambda c: c.submit(c.t, requeue=1),
    "completed0": lambda c: _finished(c, 0),
    "completed1": lambda c: _finished(c, 1),
    "never": lambda c: "999999",
}


def _finished(c: Cluster, requeue: int) -> str:
    job = c.submit(c.t, requeue=requeue)
    c.finish(c.t, job)
    return job


def expected(op: Op, state: str) -> Tuple[Result, Optional[RequeueBit]]:
    """§7: restore of an id slurmctld does not know is ok (the flag went with the job); a requeue
    whose call 1 was refused as finished ran call 3, refused the same way: rejected, may_be_set."""
    bit = RequeueBit.CLEAR if op is Op.REQUEUE else None
    if state == "never":
        return (Result.OK if op is Op.RESTORE else Result.NOT_FOUND), bit
    if state.startswith("completed"):
        return Result.REJECTED, RequeueBit.MAY_BE_SET if op is Op.REQUEUE else None
    if op is Op.REQUEUE and state in ("pending", "held"):
        return Result.REJECTED, bit
    return Result.OK, bit


def effect_shown(op: Op, before: Job, after: Job) -> bool:
    return {
        Op.HOLD: after.priority == 0,
        Op.RELEASE: after.priority > 0,
        Op.RESTORE: after.requeue == 0,
        Op.REQUEUE: after.restarts == before.restarts + 1 and after.requeue == 0,
    }[op]


@pytest.mark.parametrize("major", ["22.05", "24.11", "26.05"])
@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.RESTORE, Op.REQUEUE])
def test_each_op_reads_as_the_contract_says(op: Op, state: str, major: str) -> None:
    c = Cluster(major=major)
    c.start(0.0)
    job = STATES[state](c)
    before = (c.jobs(1.0, [job]) or {}).get(job)
    ran = shell.run(c, 1.0, render(op, job, 1e9, NONCE, "/usr/bin/scontrol"), deadline=100.0)
    outcome = read_outcome(op, job, ran.stderr, ran.status, NONCE)
    assert (outcome.result, outcome.requeue_bit) == expected(op, state), ran.stderr
    after = (c.jobs(ran.ends, [job]) or {}).get(job)
    if outcome.result is Result.OK and state != "never":
        assert before is not None and after is not None and effect_shown(op, before, after)


def test_nothing_starts_after_the_deadline() -> None:
    c = Cluster()
    c.start(0.0)
    job = c.submit(0.0, requeue=1)
    ran = shell.run(c, 5.0, render(Op.REQUEUE, job, 1e9, NONCE, "/usr/bin/scontrol"), deadline=5.0)
    outcome = read_outcome(Op.REQUEUE, job, ran.stderr, ran.status, NONCE)
    assert outcome.result is Result.EXPIRED
    assert (c.jobs(6.0, [job]) or {})[job].restarts == 0


def test_a_call_cut_off_at_the_deadline_is_unknown_and_may_have_happened() -> None:
    """slurmctld down: call 1 of a requeue waits MessageTimeout - 1 s; TERMed at the deadline it is
    unknown, the bit may be set."""
    c = Cluster()
    c.start(0.0)
    job = c.submit(0.0)
    c.kill(0.5)
    ran = shell.run(c, 1.0, render(Op.REQUEUE, job, 1e9, NONCE, "/usr/bin/scontrol"), deadline=3.0)
    outcome = read_outcome(Op.REQUEUE, job, ran.stderr, ran.status, NONCE)
    assert (outcome.result, outcome.requeue_bit) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET)


def test_a_controller_down_reads_unknown() -> None:
    c = Cluster()
    c.start(0.0)
    job = c.submit(0.0)
    c.kill(0.5)
    ran = shell.run(c, 1.0, render(Op.HOLD, job, 1e9, NONCE, "/usr/bin/scontrol"), deadline=30.0)
    assert read_outcome(Op.HOLD, job, ran.stderr, ran.status, NONCE).result is Result.UNKNOWN


def test_a_script_the_simulator_does_not_know_is_refused() -> None:
    script = render(Op.HOLD, "12", 1e9, NONCE, "/usr/bin/scontrol") + "rm -rf /\n"
    with pytest.raises(ValueError, match="does not know"):
        shell.parse(script)
