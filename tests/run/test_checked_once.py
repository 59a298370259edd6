"""An id, a key and a timeout are checked once, where they come in (docs/contract.md §1, §10.0,
§12): a bulk hold through the library and through the command line validates each id once on its
way down to scontrol, and the ledger checks what it stores (a begun operation's id, its baseline's
record) itself; a keyed run checks its key once, and the ledger once per transaction that records
it; a timeout or deadline is checked once, whatever the path, and handed down as a ``Deadline``."""

from __future__ import annotations

import importlib
import io
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, Tuple

import pytest

from slurm_dsl import api
from slurm_dsl.admin import options
from slurm_dsl.admin.cli import main
from slurm_dsl.core import jobid, keys
from slurm_dsl.run import deadlines
from tests.fakes import write_fake_squeue, write_list_fake

N = 40
IDS = [str(500 + n) for n in range(N)]
# Every module an operation's path may reach, loaded before the counting starts (some are
# imported lazily), so that each one's own name for the checking function is counted too.
MODULES = (
    "slurm_dsl.api", "slurm_dsl.admin.options", "slurm_dsl.admin.commands.ops", "slurm_dsl.run.driver",
    "slurm_dsl.run.bulk", "slurm_dsl.run.tracked", "slurm_dsl.run.keyed", "slurm_dsl.run.calls",
    "slurm_dsl.core.script", "slurm_dsl.core.bulk_reader", "slurm_dsl.core.reader", "slurm_dsl.lookups.squeue",
    "slurm_dsl.ledger.store", "slurm_dsl.ledger.rows", "slurm_dsl.ledger.sqlite", "slurm_dsl.run.config",
    "slurm_dsl.run.arrays",
)

Where = Counter[str]  # calls by the module that made them


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_DSL_SQUEUE")
    fake = write_list_fake(tmp_path / "bin", {j: {"hold": "ok"} for j in IDS})
    write_fake_squeue(tmp_path / "bin", "".join(f"{j}|PENDING|0|0|1|None\n" for j in IDS))
    return fake


def counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> Where:
    """Count the calls of ``module.name`` (every module's own binding of it), by the module that made them."""
    real: Callable[..., object] = getattr(module, name)
    where: Where = Counter()

    def counted(*args: object) -> object:
        where[sys._getframe(1).f_globals["__name__"]] += 1
        return real(*args)

    for loaded in [importlib.import_module(m) for m in MODULES] + [module]:
        if getattr(loaded, name, None) is real:
            monkeypatch.setattr(loaded, name, counted)
    if name == "validate_job_id":  # the command line's argument type holds its own reference
        monkeypatch.setattr(options, "job_id", options.refusing(counted))
    return where


def split(where: Where) -> Tuple[int, int]:
    """(calls outside the ledger, calls in it)."""
    ledger = sum(n for m, n in where.items() if m.startswith("slurm_dsl.ledger."))
    return sum(where.values()) - ledger, ledger


def hold_cli(tmp_path: Path, fake: Path, *more: str) -> None:
    argv = ["hold", *IDS, "--timeout", "30", "--ledger", str(tmp_path / "l.sqlite3"), "--scontrol", str(fake), *more]
    out = io.StringIO()
    assert main(argv, out=out) == 0
    assert out.getvalue().count("ok") == N


def test_a_bulk_hold_through_the_library_validates_each_id_once(tmp_path: Path, fakes: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    where = counting(monkeypatch, jobid, "validate_job_id")
    outcomes = api.run_ops("hold", IDS, timeout=30, ledger=str(tmp_path / "l.sqlite3"), scontrol=str(fakes))
    assert [o.job_id for o in outcomes] == IDS
    outside, ledger = split(where)
    assert outside == N, where  # api.run_ops, the door
    # The ledger checks what it stores: each begun operation's id, its baseline's record.
    assert ledger <= 2 * N, where


def test_a_bulk_hold_through_the_command_line_validates_each_id_once(tmp_path: Path, fakes: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    where = counting(monkeypatch, jobid, "validate_job_id")
    hold_cli(tmp_path, fakes)
    outside, ledger = split(where)
    assert outside == N, where  # the parser's type, the door
    assert ledger <= 2 * N, where


def test_a_keyed_bulk_hold_checks_its_key_once(tmp_path: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = counting(monkeypatch, keys, "check_key")
    hold_cli(tmp_path, fakes, "--key", "nightly-1")
    outside, ledger = split(where)
    # The parser's type, and ``run_settled``, the library's door the command line goes through
    # (a key is a plain str: nothing can carry that it was checked); never again per run or chunk.
    assert outside <= 2, where
    # The ledger's reads and writes of the key: its look-back, its reading again under the
    # leases, the intents.
    assert ledger <= 3, where


def test_a_keyed_bulk_hold_through_the_library_checks_its_key_once(tmp_path: Path, fakes: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    where = counting(monkeypatch, keys, "check_key")
    outcomes = api.run_ops("hold", IDS, timeout=30, ledger=str(tmp_path / "l.sqlite3"), scontrol=str(fakes),
                           key="nightly-1")
    assert [o.result.value for o in outcomes] == ["ok"] * N
    outside, ledger = split(where)
    assert outside == 1, where  # run_settled
    assert ledger <= 3, where


def test_scontrol_and_squeue_are_resolved_once_per_run_not_per_chunk(tmp_path: Path, fakes: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from slurm_dsl.host import binaries
    from slurm_dsl.run import bulk

    monkeypatch.setattr(bulk, "MAX_CHUNK", N // 4)  # four chunks
    squeues = counting(monkeypatch, binaries, "find_squeue")
    scontrols = counting(monkeypatch, binaries, "find_scontrol")
    outcomes = api.run_ops("hold", IDS, timeout=30, ledger=str(tmp_path / "l.sqlite3"), scontrol=str(fakes))
    assert [o.result.value for o in outcomes] == ["ok"] * N
    assert len([c for c in (fakes.parent / "calls.log").read_text().splitlines() if c.startswith("hold ")]) == 4
    # The array check's lookup, and the run's corroborating squeue: once each, whatever the chunks.
    assert squeues["slurm_dsl.run.bulk"] == 1 and squeues["slurm_dsl.run.arrays"] == 1, squeues
    assert scontrols["slurm_dsl.run.bulk"] == 1, scontrols


@pytest.mark.parametrize("more", [(), ("--one-by-one",), ("--key", "nightly-1"), ("--key", "nightly-1", "--settle")])
def test_a_timeout_is_checked_once_on_every_path_of_the_command_line(
    tmp_path: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch, more: Tuple[str, ...]
) -> None:
    bounds = counting(monkeypatch, deadlines, "timeout_in_bounds")
    checked = counting(monkeypatch, deadlines, "_checked")
    hold_cli(tmp_path, fakes, *more)
    # The parser's type (``timeout_of``); the Timeout and then the Deadline it makes go down unchecked.
    assert sum(bounds.values()) == 1 and sum(checked.values()) == 0, (bounds, checked)


@pytest.mark.parametrize("given", ["timeout", "deadline"])
def test_a_timeout_or_deadline_is_checked_once_through_the_library(
    tmp_path: Path, fakes: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    import time

    bounds = counting(monkeypatch, deadlines, "timeout_in_bounds")
    checked = counting(monkeypatch, deadlines, "_checked")
    when = {"timeout": 30} if given == "timeout" else {"deadline": time.time() + 30}
    outcomes = api.run_ops("hold", IDS, ledger=str(tmp_path / "l.sqlite3"), scontrol=str(fakes), key="k-1",
                           **when)
    assert [o.result.value for o in outcomes] == ["ok"] * N
    assert sum(bounds.values()) + sum(checked.values()) == 1, (bounds, checked)  # resolve_deadline, the door


def test_a_copy_or_pickle_of_a_checked_value_is_a_plain_one_never_an_error() -> None:
    import copy
    import pickle

    from slurm_dsl.core.jobid import distinct_ids

    timeout = deadlines.timeout_of("5")
    assert timeout is not None
    for checked, plain in ((deadlines.resolve_deadline(30, None), float), (timeout, float),
                           (distinct_ids(["1", "2"]), tuple)):
        for made in (copy.copy(checked), copy.deepcopy(checked), pickle.loads(pickle.dumps(checked))):
            assert type(made) is plain and made == checked  # checked again where it is used next
