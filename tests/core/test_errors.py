"""docs/contract.md §8: the exceptions, decided in one place from the outcome; one tree, one CLI boundary."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil
from pathlib import Path
from typing import Callable, List, NoReturn, Type

import pytest

import slurm_dsl
from slurm_dsl import (
    ConfigError,
    DSLError,
    Expired,
    InvalidInput,
    LedgerError,
    LookupFailed,
    NotFound,
    NotRun,
    Op,
    OutcomeUnknown,
    Rejected,
    RequeueBitSet,
    SweepBusy,
    UsageError,
)
from slurm_dsl.admin import cli
from slurm_dsl.admin.commands import doctor
from slurm_dsl.core.jobid import validate_job_id
from slurm_dsl.core.reader import read_outcome
from slurm_dsl.core.script import render
from slurm_dsl.ledger.sqlite import SweepLock
from slurm_dsl.run.deadlines import resolve_deadline
from tests.ground import ALREADY_FINISHED, INVALID_JOB_ID, NONCE, UNEXPECTED, frame, plain, suspend

J = "31"


@pytest.mark.parametrize(
    ("op", "calls", "exc", "may_be_set"),
    [
        ("hold", [(suspend(ALREADY_FINISHED, J), 1, 1)], Rejected, False),
        ("hold", [(suspend(INVALID_JOB_ID, J), 1, 1)], NotFound, False),
        ("hold", [(b"", 1, 75)], Expired, False),
        ("hold", [(b"", 1, 124)], OutcomeUnknown, False),
        ("hold", [(b"", 1, 127)], NotRun, False),
        ("requeue", [(b"", 1, 0), (b"", 2, 0), (b"", 3, 75)], RequeueBitSet, True),
        ("requeue", [(plain(UNEXPECTED, J), 1, 1), (b"", 3, 0)], OutcomeUnknown, True),
        ("requeue", [(b"", 1, 75)], Expired, False),
    ],
)
def test_raise_for_result(op: str, calls: list, exc: Type[DSLError], may_be_set: bool) -> None:  # type: ignore[type-arg]
    out = read_outcome(op, J, frame(NONCE, calls), calls[-1][2], NONCE)
    with pytest.raises(exc) as info:
        out.raise_for_result()
    err = info.value
    assert type(err) is exc
    assert (err.job_id, err.op, err.outcome) == (J, op, out)
    assert err.requeue_bit_may_be_set is may_be_set
    assert J in str(err)


def test_ok_raises_nothing() -> None:
    read_outcome("hold", J, frame(NONCE, [(b"", 1, 0)]), 0, NONCE).raise_for_result()


def test_sentinel_hierarchy() -> None:
    assert issubclass(NotFound, Rejected)
    for cls in (Rejected, Expired, OutcomeUnknown, RequeueBitSet, NotRun):
        assert issubclass(cls, DSLError)
    for carrier in (RequeueBitSet, NotRun):
        for sentinel in (Rejected, Expired, OutcomeUnknown):
            assert not issubclass(carrier, sentinel)
    for a in (Rejected, Expired, OutcomeUnknown):
        for b in (Rejected, Expired, OutcomeUnknown):
            assert issubclass(a, b) == (a is b)


def _exception_classes() -> List[Type[BaseException]]:
    """Every exception class defined in any module of the package."""
    found: List[Type[BaseException]] = []
    for info in pkgutil.walk_packages(slurm_dsl.__path__, "slurm_dsl."):
        if info.name == "slurm_dsl.__main__":  # runs the CLI when imported
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found.append(obj)
    return found


def test_one_exported_tree() -> None:
    classes = _exception_classes()
    assert DSLError in classes and LedgerError in classes and UsageError in classes  # the walk found them
    for cls in classes:
        assert issubclass(cls, DSLError), f"{cls.__module__}.{cls.__name__} is outside DSLError"
        assert cls.__name__ in slurm_dsl.__all__, f"{cls.__name__} is not exported"
        assert getattr(slurm_dsl, cls.__name__) is cls


def test_invalid_input_is_also_a_value_error() -> None:
    """docs/contract.md §8 promises ValueError for bad input: callers catching it keep working."""
    bad_calls: List[Callable[[], object]] = [
        lambda: validate_job_id("12_3"),
        lambda: resolve_deadline(None, None),
        lambda: resolve_deadline(10**6, None),
        lambda: read_outcome("bogus", J, b"", 0, NONCE),
        lambda: read_outcome("hold", "0", b"", 0, NONCE),
        lambda: Op("bogus"),
        lambda: render(Op.HOLD, "1", 2e9, NONCE, "relative/scontrol"),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidInput) as info:
            call()
        assert isinstance(info.value, ValueError)


def _raiser(exc: BaseException) -> Callable[..., NoReturn]:
    def handler(*_: object) -> NoReturn:
        raise exc

    return handler


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (UsageError("--limit must be at least 1"), 2),
        (SweepBusy("/l.sweep.lock"), 3),
        (ConfigError("--lookup pyslurm: no pyslurm"), 1),
        (LedgerError("cannot open ledger /l", path="/l"), 1),
        (LookupFailed("squeue did not answer"), 1),
        (InvalidInput("scontrol path must be absolute"), 1),
        (DSLError("cannot write metrics file /m"), 1),
    ],
)
def test_cli_exit_status_of_each_error(
    exc: DSLError, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(doctor.COMMAND.handlers, "doctor", _raiser(exc))
    assert cli.main(["doctor"], out=io.StringIO()) == code
    assert capsys.readouterr().err == f"slurm-dsl: {exc}\n"


@pytest.mark.parametrize("exc", [RuntimeError("a bug"), ValueError("a bug too"), KeyError("x")])
def test_cli_lets_anything_else_crash(exc: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(doctor.COMMAND.handlers, "doctor", _raiser(exc))
    with pytest.raises(type(exc)):
        cli.main(["doctor"], out=io.StringIO())


def test_cli_usage_error_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["hold", "1", "--timeout", "1", "--parallel", "0"], out=io.StringIO()) == 2
    assert capsys.readouterr().err.startswith("slurm-dsl: argument --parallel: must be a whole number of jobs at once"
                                              " from 1 to 1000")
    assert cli.main(["hold", "1_2", "--timeout", "1"], out=io.StringIO()) == 2
    assert capsys.readouterr().err.endswith("Try 'slurm-dsl --help' for more information.\n")


def test_cli_sweep_busy_is_3(capsys: pytest.CaptureFixture[str], _private_ledger: Path) -> None:
    with SweepLock(str(_private_ledger)):
        assert cli.main(["sweep"], out=io.StringIO()) == 3
    assert "another sweep is running" in capsys.readouterr().err


def test_cli_config_error_is_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SLURM_DSL_LOOKUP", "bogus")  # the default of --lookup, not checked by argparse
    assert cli.main(["sweep"], out=io.StringIO()) == 1
    assert capsys.readouterr().err.startswith("slurm-dsl: unknown lookup 'bogus'")


def test_cli_ledger_error_is_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert cli.main(["sweep", "--ledger", str(tmp_path / "file" / "ledger")], out=io.StringIO()) == 1
    assert capsys.readouterr().err.startswith("slurm-dsl: ")


def test_cli_lookup_failed_is_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-squeue")
    assert cli.main(["hold", "7", "--timeout", "5", "--squeue", missing], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.startswith("slurm-dsl: job lookup failed: ") and "nothing ran" in err
