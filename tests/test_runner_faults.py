"""The real runner against a fake scontrol first on PATH, for the faults real Slurm
cannot be made to show on demand.  Short real deadlines, no mocks of subprocess;
each test asserts the outcome and that no process was left behind."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Iterator

import pytest

from slurm_dsl import Op, Reason, RequeueBit, Result, execute
from slurm_dsl.runner import run_argv
from tests.fakes import alive_in_group, calls_made, refuse, write_fake
from tests.ground import ALREADY_FINISHED, OTHER_NONCE


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory put first on PATH, for the fake scontrol; checked empty of processes after."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_DSL_SCONTROL", raising=False)
    yield d
    assert alive_in_group(str(d)) is None, "a process outlived its call"


def soon(seconds: float = 1.0) -> float:
    return time.time() + seconds


def test_the_fake_on_path_is_the_one_run(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {"hold": refuse(ALREADY_FINISHED, suspend_line=True)})
    out = execute(Op.HOLD, "5", soon(5))
    assert out.result is Result.REJECTED
    assert calls_made(fake) == ["hold 5"]


@pytest.mark.parametrize("op", [Op.HOLD, Op.RELEASE, Op.RESTORE])
def test_a_call_hanging_past_the_deadline_is_unknown(bin_dir: Path, op: Op) -> None:
    write_fake(bin_dir, {}, default="sleep 30")
    out = execute(op, "5", soon())
    assert (out.result, out.reason) == (Result.UNKNOWN, Reason.TIMED_OUT)
    assert out.calls[0].status == 124


def test_a_call_ignoring_term_is_killed_and_unknown(bin_dir: Path) -> None:
    write_fake(bin_dir, {}, default="trap '' TERM; sleep 30")
    out = execute(Op.HOLD, "5", soon())
    assert out.result is Result.UNKNOWN
    assert out.calls[0].status == 137


def test_requeue_hanging_in_call_2_leaves_the_bit_set(bin_dir: Path) -> None:
    write_fake(bin_dir, {"requeue": "exec sleep 30"})
    out = execute(Op.REQUEUE, "5", soon())
    assert [c.status for c in out.calls] == [0, 124, 75]
    assert (out.result, out.requeue_bit) == (Result.UNKNOWN, RequeueBit.SET)


@pytest.mark.parametrize(("signal_name", "status"), [("KILL", 137), ("SEGV", 139), ("TERM", 143)])
def test_a_call_dying_by_signal_is_unknown(bin_dir: Path, signal_name: str, status: int) -> None:
    write_fake(bin_dir, {}, default=f"kill -{signal_name} $$")
    out = execute(Op.HOLD, "5", soon(5))
    assert (out.result, out.reason, out.calls[0].status) == (Result.UNKNOWN, Reason.KILLED_BY_SIGNAL, status)


def test_a_missing_scontrol_is_not_run(bin_dir: Path) -> None:
    out = execute(Op.REQUEUE, "5", soon(5), scontrol=str(bin_dir / "scontrol"))
    assert [c.status for c in out.calls] == [127, 127]
    assert (out.result, out.requeue_bit) == (Result.NOT_RUN, RequeueBit.CLEAR)


def test_a_scontrol_that_cannot_be_executed_is_not_run(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    fake.chmod(stat.S_IRUSR | stat.S_IWUSR)
    out = execute(Op.HOLD, "5", soon(5), scontrol=str(fake))
    assert (out.result, out.calls[0].status) == (Result.NOT_RUN, 126)


def test_garbage_is_unknown(bin_dir: Path) -> None:
    write_fake(bin_dir, {}, default="head -c 3000 /dev/urandom >&2; exit 1")
    out = execute(Op.HOLD, "5", soon(5))
    assert out.result is Result.UNKNOWN


@pytest.mark.parametrize(
    "forgery",
    [
        f"printf '\\036DSL {OTHER_NONCE} call 1 0\\n' >&2; exit 1",
        "printf '\\036' >&2; exit 0",
        "printf 'x\\036DSL' >&2; exit 0",
    ],
    ids=["another nonce", "a lone RS", "an RS mid-line"],
)
def test_a_forged_status_line_is_unknown(bin_dir: Path, forgery: str) -> None:
    write_fake(bin_dir, {}, default=forgery)
    for op in (Op.HOLD, Op.REQUEUE):
        out = execute(op, "5", soon(5))
        assert out.result is Result.UNKNOWN
        assert out.reason in (Reason.FOREIGN_NONCE, Reason.MALFORMED_STATUS_LINE)


@pytest.mark.parametrize("stream", [">&2", ""], ids=["stderr", "stdout"])
def test_100_mib_of_output_is_unknown_not_a_crash(bin_dir: Path, stream: str) -> None:
    write_fake(bin_dir, {}, default=f"head -c 104857600 /dev/zero {stream}; exit 0")
    out = execute(Op.REQUEUE, "5", soon(20))
    assert (out.result, out.reason, out.requeue_bit) == (Result.UNKNOWN, Reason.OUTPUT_TOO_LARGE, RequeueBit.MAY_BE_SET)


def test_open_hanging_is_stopped_at_the_deadline(bin_dir: Path) -> None:
    write_fake(bin_dir, {}, default="sleep 30")
    out = execute(Op.OPEN, "5", soon())
    assert out.result is Result.UNKNOWN
    assert out.exit_status == 143


def test_open_after_the_deadline_starts_nothing(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    out = execute(Op.OPEN, "5", time.time() - 1)
    assert out.result is Result.EXPIRED
    assert calls_made(fake) == []


def test_open_missing_is_not_run(bin_dir: Path) -> None:
    out = execute(Op.OPEN, "5", soon(), scontrol=str(bin_dir / "nothing"))
    assert out.result is Result.NOT_RUN


def test_open_runs_release_directly(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {"release": refuse(ALREADY_FINISHED, suspend_line=True)})
    out = execute(Op.OPEN, "5", soon(5))
    assert out.result is Result.REJECTED
    assert calls_made(fake) == ["release 5"]


def test_stragglers_in_the_group_are_killed(bin_dir: Path) -> None:
    # The fake leaves a child behind holding stderr open; the runner kills it when the
    # script exits (the fixture checks that nothing under bin_dir is still alive).
    write_fake(bin_dir, {}, default="sleep 30 & exit 0")
    out = execute(Op.HOLD, "5", soon(10))
    assert out.result is Result.OK


def test_hostile_job_ids_start_no_process(bin_dir: Path) -> None:
    fake = write_fake(bin_dir, {})
    for bad in ("1;id", "$(id)", "12_3", "042", "\u0661\u0662", "4294967295", ""):
        with pytest.raises(ValueError):
            execute(Op.HOLD, bad, soon())
    assert calls_made(fake) == []


def test_run_argv_reports_a_missing_binary_as_127() -> None:
    assert run_argv(["/nonexistent/squeue"], timeout=1).returncode == 127
