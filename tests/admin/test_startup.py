"""What ``slurm-dsl hold`` imports before its first Slurm call, guarded without timing anything.

An operation is the command run on every job, so before its first call (the squeue of the array
check) it loads only what it needs: none of the sweep, the doctor, the admin's views, MariaDB,
pyslurm, the public api, a thread pool or ``shutil`` (docs/benchmarks.md §7 has the figures:
each costs milliseconds at every start).  A child process runs the real ``python -m slurm_dsl
hold 7 --timeout 5`` up to the moment it would start its first process, and reports
``sys.modules`` then.  ``import slurm_dsl`` alone loads nothing of the package, yet every public
name still comes from where it always did.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slurm_dsl
from slurm_dsl.admin.parser import COMMANDS, _help_width, build_parser, command_named
from slurm_dsl.core.model import UsageError
from tests.examples import examples

# Modules the op path must not import before its first Slurm call.
NOT_ON_THE_OP_PATH = (
    "slurm_dsl.api",
    "slurm_dsl.admin.doctor",
    "slurm_dsl.admin.view",
    *(f"slurm_dsl.admin.commands.{name}" for name in ("sweep", "settle", "doctor", "script", "read", "history",
                                                       "ledger", "config")),
    "slurm_dsl.ledger.mariadb",
    "slurm_dsl.ledger.mariadb_config",
    "slurm_dsl.ledger.records",
    "slurm_dsl.lookups.choose",
    "slurm_dsl.lookups.pyslurm",
    "slurm_dsl.run.sweep",
    "slurm_dsl.run.bulk",
    "slurm_dsl.core.bulk_reader",
    "concurrent.futures",
    "pymysql",
    "pyslurm",
    "shutil",
)

# The child: the console script's own code path (runpy, as ``python -m``), stopped at the first
# process it would start, which it reports instead of starting it.  The first call (the array
# check's squeue) is in a thread of its own while the command goes on loading and opening the
# ledger: the report waits a second, so that the command has gone as far as it goes before the
# check's answer (it then waits for it), whichever thread ran first (sid once, 2026-12-07).
CHILD = textwrap.dedent(
    """\
    import json, os, runpy, subprocess, sys, time

    def first_call(argv, *args, **kwargs):
        time.sleep(1.0)
        sys.__stdout__.write(json.dumps({"argv": list(argv), "modules": sorted(sys.modules)}))
        sys.__stdout__.flush()
        os._exit(0)

    subprocess.Popen = first_call
    sys.argv = ["slurm-dsl", "hold", "7", "--timeout", "5"]
    runpy.run_module("slurm_dsl", run_name="__main__", alter_sys=True)
    """
)


def child_env(tmp_path: Path) -> Dict[str, str]:
    root = str(Path(slurm_dsl.__file__).resolve().parents[1])
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ left in the checkout
        "PYTHONPATH": root,
        "SLURM_DSL_LEDGER": str(tmp_path / "ledger.sqlite3"),
        "SLURM_DSL_SCONTROL": "/bin/true",
        "SLURM_DSL_SQUEUE": "/bin/false",
    }


def modules_at_first_call(tmp_path: Path) -> Dict[str, List[str]]:
    # json, runpy and subprocess are the child's own; subprocess is on the op path anyway.
    done = subprocess.run([sys.executable, "-c", CHILD], env=child_env(tmp_path), capture_output=True,
                          text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    report: Dict[str, List[str]] = json.loads(done.stdout)
    return report


def test_hold_reaches_its_first_call_without_what_only_other_commands_need(tmp_path: Path) -> None:
    report = modules_at_first_call(tmp_path)
    assert "/bin/false" in report["argv"]  # the first call is the array check's squeue (in its guard)
    loaded = set(report["modules"])
    assert sorted(m for m in NOT_ON_THE_OP_PATH if m in loaded) == []


def test_importing_the_package_loads_none_of_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, slurm_dsl; print(json.dumps(sorted(sys.modules)))"],
        env=child_env(tmp_path), capture_output=True, text=True, check=True, timeout=120,
    )
    assert [m for m in json.loads(done.stdout) if m.startswith("slurm_dsl")] == ["slurm_dsl"]


def test_every_public_name_is_the_one_from_its_home() -> None:
    from slurm_dsl import api
    from slurm_dsl.core import jobid, model, reader, script, settle
    from slurm_dsl.run import calls, config

    homes = (api, config, jobid, model, reader, script, settle, calls)
    for name in slurm_dsl.__all__:
        value = getattr(slurm_dsl, name)
        assert any(getattr(home, name, None) is value for home in homes), name
    assert set(slurm_dsl.__all__) <= set(dir(slurm_dsl))
    assert slurm_dsl.__version__ == "0.1.0"


def test_the_ledger_s_records_have_one_home() -> None:
    """The records a ledger's reads return are imported from ``ledger.records`` only: the interface
    (``ledger.base``) names them for its types and holds none of them."""
    from slurm_dsl.ledger import base, records

    for name in ("JobObject", "CallRecord", "HistoryEntry", "SweepRecord", "PruneResult", "Unfinished",
                 "ImportResult", "iso_utc"):
        assert hasattr(records, name) and not hasattr(base, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        slurm_dsl.no_such_name  # noqa: B018  (typed as object: the module has a __getattr__)
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


# -- the grammar built for one command parses as the whole grammar does ---------------------------

WORDS = (
    *COMMANDS, "status", "prune", "migrate", "7", "12", "-", "--timeout", "5", "0", "--json", "--one-by-one",
    "--parallel", "2", "--scontrol", "/usr/bin/scontrol", "--scontrol=/x", "--ledger", "/tmp/l.sqlite3",
    "--ledger=/tmp/l", "-v", "-vv", "--verbose", "--help", "-h", "--version", "--", "--sc", "--led", "-x",
    "--dry-run", "--limit", "--older-than", "--from", "--to", "--exit-status", "--nonce", "hold7", "",
)


def parsed(parser: argparse.ArgumentParser, argv: List[str]) -> Tuple[str, object]:
    """What parsing ``argv`` gives: the Namespace, the usage error, or what argparse printed and
    its exit status (``--help``, ``--version``)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            args, extra = parser.parse_known_args(argv)
    except UsageError as exc:
        return "usage error", str(exc)
    except SystemExit as exc:
        return "exit", (exc.code, out.getvalue())
    return "parsed", (vars(args), extra)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=7))
def test_the_pruned_grammar_parses_as_the_whole_one(argv: List[str]) -> None:
    # The naive second implementation: the whole grammar, every command built, as before.
    name = command_named(argv)
    if name is not None:
        assert parsed(build_parser(name), argv) == parsed(build_parser(), argv)


@pytest.mark.parametrize("argv", [
    ["hold", "7", "--timeout", "5"],
    ["-vv", "--scontrol", "/usr/bin/scontrol", "--ledger=/tmp/l", "requeue", "7", "8", "--timeout", "5", "--json"],
    ["--ledger", "hold", "release", "7", "--timeout", "5"],  # a value that is a command's name
    ["ledger", "prune", "--older-than", "3"],
    ["hold", "--help"],
    ["read", "hold", "7", "--exit-status", "0", "--nonce", "ab", "file"],
])
def test_a_named_command_parses_as_before(argv: List[str]) -> None:
    assert command_named(argv) is not None
    assert parsed(build_parser(command_named(argv)), argv) == parsed(build_parser(), argv)


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["--version"], ["--sc", "/x", "hold"], ["--", "hold"], ["hol", "7"], ["--scontrol"], ["-vx"],
])
def test_anything_unsure_gets_the_whole_grammar(argv: List[str]) -> None:
    assert command_named(argv) is None


def test_the_commands_are_the_grammar_s() -> None:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert tuple(sub.choices) == COMMANDS


def test_the_help_width_is_shutil_s(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    for columns in ("", "100", "-3", "x", "0"):
        monkeypatch.setenv("COLUMNS", columns)
        assert _help_width() == shutil.get_terminal_size().columns - 2
    monkeypatch.delenv("COLUMNS")
    assert _help_width() == shutil.get_terminal_size().columns - 2
