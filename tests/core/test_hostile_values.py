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
from slurm_dsl import Op, Reason, RequeueBit, Result, run_op
from slurm_dsl.admin.cli import main
from slurm_dsl.core.bulk_reader import read_list_call, read_list_output, read_open_list
from slurm_dsl.core.jobid import validate_job_id
from slurm_dsl.core.model import CallOutcome
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.script import render
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.calls import execute
from slurm_dsl.run.deadlines import MAX_TIMEOUT, resolve_deadline
from slurm_dsl.run.tracked import Tracker
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


# -- hostile values into the readers (docs/contract.md §6, §11): a plain copy, or unknown --------------


class Boom(Exception):
    """Raised by every hostile method below: a reader that lets it out has called one."""


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise Boom()


def hostile(base: type, value: Any) -> Any:
    """A ``base`` subclass worth ``value`` whose own methods (conversions, comparisons, length,
    hashing, slicing, searching) all raise."""
    names = ["__bytes__", "__len__", "__getitem__", "__iter__", "__eq__", "__ne__", "__lt__", "__le__",
             "__gt__", "__ge__", "__hash__", "__index__", "__int__", "__str__", "__repr__", "__format__",
             "find", "split", "strip", "decode", "encode", "startswith", "endswith", "rpartition", "tobytes"]
    kind = type("Hostile", (base,), {name: _boom for name in names if hasattr(base, name)})
    return kind(value)


class Pretender:
    """Claims to be bytes and str through ``__class__``; is neither."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return bytes


SCRIPT_OUT = b"Job has already finished for job 5\n" + f"\x1eDSL {NONCE} call 1 1\n".encode()


@pytest.mark.parametrize("which", ["stderr", "bytearray", "exit_int", "exit_str", "op", "nonce"])
def test_read_outcome_reads_a_hostile_value_by_its_plain_copy(which: str) -> None:
    args: dict = {"op": "hold", "stderr": SCRIPT_OUT, "exit_status": 1, "nonce": NONCE}  # type: ignore[type-arg]
    args.update({
        "stderr": {"stderr": hostile(bytes, SCRIPT_OUT)},
        "bytearray": {"stderr": hostile(bytearray, SCRIPT_OUT)},
        "exit_int": {"exit_status": hostile(int, 1)},
        "exit_str": {"exit_status": hostile(str, "1")},
        "op": {"op": hostile(str, "hold")},
        "nonce": {"nonce": hostile(str, NONCE)},
    }[which])
    got = read_outcome(args["op"], "5", stderr=args["stderr"], exit_status=args["exit_status"], nonce=args["nonce"])
    assert (got.result, got.reason) == (Result.REJECTED, None)


@pytest.mark.parametrize("exit_status", [hostile(int, 300), hostile(int, -1), hostile(str, "01"), Pretender()],
                         ids=["300", "-1", "01", "pretender"])
def test_read_outcome_reads_an_unreadable_hostile_exit_status_as_unknown(exit_status: object) -> None:
    got = read_outcome("open", "5", stderr=b"", exit_status=exit_status)
    assert (got.result, got.reason) == (Result.UNKNOWN, Reason.UNREADABLE_EXIT_STATUS)
    got = read_outcome("hold", "5", stderr=SCRIPT_OUT, exit_status=exit_status, nonce=NONCE)
    assert got.result is Result.UNKNOWN


def test_stderr_that_cannot_be_copied_reads_as_unknown() -> None:
    released = memoryview(SCRIPT_OUT)
    released.release()
    for stderr in (released, Pretender()):
        got = read_outcome("requeue", "5", stderr=stderr, exit_status=1, nonce=NONCE)
        assert (got.result, got.requeue_bit, got.reason) == (Result.UNKNOWN, RequeueBit.MAY_BE_SET,
                                                            Reason.STDERR_NOT_BYTES)


def test_a_hostile_op_that_is_no_op_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown op"):
        read_outcome(hostile(str, "kill"), "5", stderr=SCRIPT_OUT, exit_status=1, nonce=NONCE)


LIST_OWN = b"Job has already finished for job 5\nslurm_suspend error: Job has already finished\n"


@pytest.mark.parametrize("which", ["stderr", "status_int", "status_str", "op", "number", "ids"])
def test_the_bulk_readers_read_hostile_values_by_their_plain_copies(which: str) -> None:
    args: dict = {"op": "hold", "number": 1, "ids": ["5", "6"], "stderr": LIST_OWN, "status": 1}  # type: ignore[type-arg]
    args.update({
        "stderr": {"stderr": hostile(bytes, LIST_OWN)},
        "status_int": {"status": hostile(int, 1)},
        "status_str": {"status": hostile(str, "1")},
        "op": {"op": hostile(str, "hold")},
        "number": {"number": hostile(int, 1)},
        "ids": {"ids": [hostile(str, "5"), hostile(int, 6)]},
    }[which])
    got = read_list_call(args["op"], args["number"], args["ids"], args["stderr"], args["status"])
    assert [(j, c.outcome, c.message) for j, c in got.items()] == [
        ("5", CallOutcome.REJECTED, "Job has already finished"), ("6", CallOutcome.SUCCESS, None)]
    framed = LIST_OWN + f"\x1eDSL {NONCE} call 1 1\n".encode()
    exit_status = args["status"]
    stderr = hostile(bytes, framed) if which == "stderr" else framed
    got = read_list_output(args["op"], args["number"], args["ids"], stderr, exit_status, hostile(str, NONCE))
    assert [(j, c.outcome) for j, c in got.items()] == [("5", CallOutcome.REJECTED), ("6", CallOutcome.SUCCESS)]


def test_the_bulk_readers_read_values_that_cannot_be_copied_as_unknown() -> None:
    for stderr in (Pretender(), "Job has already finished for job 5\n"):
        got = read_list_call("hold", 1, ["5", "6"], stderr, 1)
        assert {c.reason for c in got.values()} == {Reason.STDERR_NOT_BYTES}
        got = read_list_output("hold", 1, ["5", "6"], stderr, 1, NONCE)
        assert {c.reason for c in got.values()} == {Reason.STDERR_NOT_BYTES}
    for status in (hostile(int, 300), Pretender(), hostile(str, "1 ")):
        got = read_list_call("hold", 1, ["5", "6"], LIST_OWN, status)
        assert all(c.outcome is CallOutcome.UNKNOWN for j, c in got.items() if j == "6")


def test_a_hostile_id_list_is_invalid_input() -> None:
    class Sequence(list):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            raise Boom()

    with pytest.raises(ValueError, match="job ids must be a sequence"):
        read_list_call("hold", 1, Sequence(["5"]), b"", 0)


@pytest.mark.parametrize("ids", [["5"], ["5", "6"]], ids=["one", "two"])
def test_an_open_list_reads_hostile_values_as_unknown_never_raising(ids: List[str]) -> None:
    """``read_open_list``: a hostile stderr with an unreadable status, or a hostile status."""
    for stderr, status in ((hostile(bytes, LIST_OWN), "junk"), (LIST_OWN, hostile(int, 300)),
                           (hostile(bytes, LIST_OWN), hostile(str, "01"))):
        got = read_open_list(ids, stderr, status)
        assert list(got) == ids and all(c.outcome is CallOutcome.UNKNOWN for j, c in got.items() if j == "6")
        assert got["5"].outcome is (CallOutcome.UNKNOWN if len(ids) == 1 else CallOutcome.REJECTED)
