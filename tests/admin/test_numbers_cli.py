"""Numbers on the command line (docs/contract.md §10.1, core/numbers.py): every numeric option
takes ASCII digits only, within a stated range; anything else is a usage error (exit 2) with a
message naming the option, never a traceback, and nothing runs."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake

HUGE = "1" + "0" * 20  # 1e20, as digits: int() takes it, SQLite's LIMIT and a date cannot

REFUSED = [
    # Too large for what they feed: a date back past year 1, an SQL LIMIT, threads.
    (["ledger", "prune", "--older-than", "9999999"], "--older-than"),
    (["ledger", "prune", "--older-than", HUGE], "--older-than"),
    (["sweep", "--limit", HUGE], "--limit"),
    (["sweep", "--settle-limit", HUGE], "--settle-limit"),
    (["settle", "--since", HUGE], "--since"),
    (["hold", "5", "--timeout", "5", "--parallel", HUGE], "--parallel"),
    # What int() and float() take and a job id refuses: underscores, other scripts' digits.
    (["hold", "5", "--timeout", "1_0"], "--timeout"),
    (["hold", "5", "--timeout", "\u0665"], "--timeout"),
    (["hold", "5", "--timeout", "5", "--parallel", "\u0663"], "--parallel"),
    (["hold", "5", "--timeout", "5", "--retry", "1_0"], "--retry"),
    (["hold", "5", "--timeout", "30", "--settle-delay", "1_0"], "--settle-delay"),
    (["sweep", "--limit", "1_0"], "--limit"),
    (["sweep", "--limit", "\uff11"], "--limit"),
    (["sweep", "--restore-timeout", "1_5"], "--restore-timeout"),
    (["ledger", "prune", "--older-than", "\u0669"], "--older-than"),
    (["settle", "--since", "1_0"], "--since"),
    (["script", "hold", "5", "--timeout", "\u0665"], "--timeout"),
]


@pytest.mark.parametrize(("argv", "option"), REFUSED)
def test_a_number_out_of_the_rule_or_range_is_a_usage_error_and_nothing_runs(
    argv: List[str], option: str, bin_dir: Path, _private_ledger: Path
) -> None:
    open_ledger(str(_private_ledger)).close()  # a ledger there, so that a command would reach it
    fake = write_fake(bin_dir, {})
    code, out, err = cli(argv)
    assert (code, out) == (2, ""), err
    assert err.startswith(f"slurm-dsl: argument {option}: ") and "Traceback" not in err, err
    assert err.endswith("Try 'slurm-dsl --help' for more information.\n")
    assert calls_made(fake) == []


@pytest.mark.parametrize(("argv", "words"), [
    (["ledger", "prune", "--older-than", "36501"], "a whole number of days from 1 to 36500"),
    (["sweep", "--limit", "0"], "a whole number from 1 to 1000000000"),
    (["hold", "5", "--timeout", "5", "--parallel", "1001"], "a whole number of jobs at once from 1 to 1000"),
])
def test_the_message_says_the_range(argv: List[str], words: str) -> None:
    code, _, err = cli(argv)
    assert code == 2 and words in err, err


def test_the_largest_of_each_range_is_taken(_private_ledger: Path) -> None:
    open_ledger(str(_private_ledger)).close()
    code, out, err = cli(["ledger", "prune", "--older-than", "36500", "--dry-run", "--json"])
    assert code == 0 and '"older_than_days": 36500' in out, out + err
