"""Hostile values from Python callers (docs/contract.md §1, §2): subclasses of str, int and float that
pass validation and then render as something else, and deadlines too far away for poll().

The subclasses' values are valid; only their own methods lie.  What reaches a script must
be a plain copy of the validated value, never the object itself."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any, Callable, List

import pytest

import slurm_dsl
from slurm_dsl import Op, Reason, Result, execute, read_outcome, render, run_op, validate_job_id
from slurm_dsl.cli import main
from slurm_dsl.deadlines import MAX_TIMEOUT, resolve_deadline
from slurm_dsl.ledger import open_ledger
from slurm_dsl.tracked import Tracker
from tests.fakes import calls_made, write_fake
from tests.ground import NONCE, OTHER_NONCE, frame

SCONTROL = "/usr/bin/scontrol"
DEADLINE = 1767225600.5


def sly_str(value: str, payload: str) -> str:
    """A str whose value is ``value`` and whose own methods all produce ``payload``."""

    class Sly(str):
        def __str__(self) -> str:
            return payload

        def __repr__(self) -> str:
            return payload

        def __format__(self, spec: str) -> str:
            return payload

        def __add__(self, other: str) -> str:
            return payload

        def __radd__(self, other: str) -> str:
            return payload

        def replace(self, *args: Any, **kwargs: Any) -> str:
            return payload

        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            return payload.encode()

        def startswith(self, *args: Any, **kwargs: Any) -> bool:
            return True

    return Sly(value)


def sly_int(value: int, payload: str) -> int:
    class Sly(int):
        def __str__(self) -> str:
            return payload

        def __repr__(self) -> str:
            return payload

        def __format__(self, spec: str) -> str:
            return payload

    return Sly(value)


class _Floored:
    def __init__(self, payload: str) -> None:
        self.payload = payload

    def __floor__(self) -> str:
        return self.payload


def sly_float(value: float, payload: str, lie: float = 1e308) -> float:
    """A float worth ``value`` whose arithmetic and ``__float__`` say something else."""

    class Sly(float):
        def __mul__(self, other: Any) -> Any:
            return _Floored(payload)

        def __rmul__(self, other: Any) -> Any:
            return _Floored(payload)

        def __add__(self, other: Any) -> Any:
            return lie

        def __radd__(self, other: Any) -> Any:
            return lie

        def __float__(self) -> float:
            return lie

    return Sly(value)


def injection(target: Path) -> str:
    return f"5\ntouch {target}\n: "


# -- str, int and float subclasses ----------------------------------------------------------------


def test_validate_job_id_returns_a_plain_str_for_a_str_subclass(tmp_path: Path) -> None:
    got = validate_job_id(sly_str("5", injection(tmp_path / "x")))
    assert type(got) is str and str.__eq__(got, "5")


@pytest.mark.parametrize("payload", ["6", "5\ntouch /tmp/x\n: ", "05"])
def test_validate_job_id_reads_an_int_subclass_by_its_value(payload: str) -> None:
    got = validate_job_id(sly_int(5, payload))
    assert type(got) is str and got == "5"


def test_render_of_a_sly_job_id_holds_only_the_plain_id(tmp_path: Path) -> None:
    target = tmp_path / "touched"
    for job in (sly_str("5", injection(target)), sly_int(5, injection(target))):
        script = render(Op.HOLD, job, DEADLINE, NONCE, SCONTROL)  # type: ignore[arg-type]
        assert script == render(Op.HOLD, "5", DEADLINE, NONCE, SCONTROL)
        assert "touch" not in script


@pytest.mark.parametrize("which", ["nonce", "scontrol", "deadline"])
def test_render_takes_plain_copies_of_nonce_path_and_deadline(tmp_path: Path, which: str) -> None:
    payload = f"x'\ntouch {tmp_path / 'touched'}\n: '"
    args: dict = {"deadline": DEADLINE, "nonce": NONCE, "scontrol": SCONTROL}  # type: ignore[type-arg]
    if which == "deadline":
        args["deadline"] = sly_float(DEADLINE, f"1\ntouch {tmp_path / 'touched'}\n")
    else:
        args[which] = sly_str(args[which], payload)
    script = render(Op.REQUEUE, "5", **args)
    assert script == render(Op.REQUEUE, "5", DEADLINE, NONCE, SCONTROL)
    assert "touch" not in script


def test_the_reader_compares_the_nonce_it_was_given_not_what_its_encode_says() -> None:
    forged = frame(OTHER_NONCE, [(b"", 1, 0)])
    out = read_outcome(Op.HOLD, "5", forged, 0, sly_str(NONCE, OTHER_NONCE))
    assert (out.result, out.reason) == (Result.UNKNOWN, Reason.FOREIGN_NONCE)


def _execute(job: Any) -> Any:
    return execute(Op.HOLD, job, time.time() + 5)


def _run_op(job: Any) -> Any:
    return run_op(Op.HOLD, job, timeout=5)


def _hold(job: Any) -> Any:
    return slurm_dsl.hold(job, timeout=5)


@pytest.mark.parametrize("call", [_execute, _run_op, _hold])
@pytest.mark.parametrize("kind", ["str", "int"])
def test_a_sly_job_id_runs_the_plain_id_and_nothing_else(
    bin_dir: Path, tmp_path: Path, call: Callable[[Any], Any], kind: str
) -> None:
    target = tmp_path / "touched"
    fake = write_fake(bin_dir, {})
    job = sly_str("5", injection(target)) if kind == "str" else sly_int(5, injection(target))
    out = call(job)
    assert not target.exists(), "the injected command ran"
    assert calls_made(fake) == ["hold 5"]
    assert out.result is Result.OK and type(out.job_id) is str and out.job_id == "5"


# -- deadlines poll() cannot wait for ---------------------------------------------------------------


def test_resolve_deadline_reads_a_sly_timeout_by_its_value() -> None:
    now = time.time()
    assert resolve_deadline(sly_float(5.0, "x"), None, clock=lambda: now) == now + 5.0


@pytest.mark.parametrize(
    ("timeout", "deadline"),
    [(1e308, None), (2_200_000.0, None), (None, 1e308), (None, "far")],
)
def test_resolve_deadline_refuses_what_poll_cannot_wait_for(timeout: Any, deadline: Any) -> None:
    if deadline == "far":
        deadline = time.time() + 30 * 86400
    with pytest.raises(ValueError):
        resolve_deadline(timeout, deadline)


def test_resolve_deadline_takes_one_day_and_no_more() -> None:
    assert resolve_deadline(MAX_TIMEOUT, None, clock=lambda: 1000.0) == 1000.0 + MAX_TIMEOUT
    with pytest.raises(ValueError, match="at most 86400"):
        resolve_deadline(MAX_TIMEOUT + 1, None)


def history(job: str) -> List[Any]:
    with open_ledger(os.environ["SLURM_DSL_LEDGER"]) as ledger:
        return ledger.history(job)


@pytest.mark.parametrize(
    "kwargs", [{"timeout": 1e308}, {"timeout": 2_200_000}, {"deadline": 1e308}, {"deadline": "far"}]
)
def test_run_op_refuses_a_far_deadline_before_recording_anything(bin_dir: Path, kwargs: Any) -> None:
    fake = write_fake(bin_dir, {})
    if kwargs.get("deadline") == "far":
        kwargs = {"deadline": time.time() + 30 * 86400}
    with pytest.raises(ValueError):
        run_op("hold", "5", **kwargs)
    assert history("5") == []
    assert calls_made(fake) == []


@pytest.mark.parametrize("deadline", [1e308, "far"])
def test_execute_and_tracker_refuse_a_far_deadline(bin_dir: Path, deadline: Any) -> None:
    fake = write_fake(bin_dir, {})
    when = time.time() + 30 * 86400 if deadline == "far" else deadline
    with pytest.raises(ValueError):
        execute(Op.HOLD, "5", when)
    with Tracker() as t, pytest.raises(ValueError):
        t.run(Op.HOLD, "5", when)
    assert history("5") == []
    assert calls_made(fake) == []


@pytest.mark.parametrize(
    "argv",
    [["hold", "5", "--timeout", "1e308"], ["hold", "5", "--timeout", "2200000"],
     ["requeue", "5", "--timeout", "1e308", "--json"], ["script", "hold", "5", "--timeout", "2200000"],
     ["sweep", "--restore-timeout", "1e308"]],
)
def test_cli_refuses_a_timeout_poll_cannot_wait_for(
    bin_dir: Path, capsys: pytest.CaptureFixture[str], argv: List[str]
) -> None:
    fake = write_fake(bin_dir, {})
    out = io.StringIO()
    code = main(argv, out=out)
    err = capsys.readouterr().err
    assert (code, out.getvalue()) == (2, "")
    assert err.startswith("slurm-dsl: ") and "at most" in err
    assert history("5") == []
    assert calls_made(fake) == []
