"""One configuration for the command line and the library (docs/contract.md §8, issue 31 item 5):
a site plugin that imports the package and the ``slurm-dsl`` command on the same host use the
same ledger, scontrol, squeue and defaults unless the caller passes its own.

The evidence is what a call did (which ledger file it wrote, which fake scontrol ran, what
refused it), never the resolver's own answer; and where the command and the library must agree,
the command's ``config --json`` is set beside what the library did.  The programs the config file
names are not on PATH, so only a reading of the file finds them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Dict, List

import pytest

import slurm_dsl
from slurm_dsl.core.model import Op
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.calls import execute
from slurm_dsl.run.config import ConfigFileError
from slurm_dsl.run.deadlines import DEFAULT_TIMEOUT
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import calls_made, write_empty_squeue, write_fake
from tests.ledger_backends import timeouts_given


class Site:
    """A host's /etc/slurm-dsl/slurm-dsl.conf (``$SLURM_DSL_CONFIG``) naming a ledger, a fake
    scontrol and an squeue none of which the environment or PATH names."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> None:
        self.ledger = tmp_path / "configured" / "ledger.sqlite3"
        self.default = tmp_path / "default" / "ledger.sqlite3"
        self.scontrol = write_fake(tmp_path / "sbin", {})
        self.squeue = write_empty_squeue(tmp_path / "squeue-bin")
        self.config = tmp_path / "slurm-dsl.conf"
        self.write(f"ledger = {self.ledger}", f"scontrol = {self.scontrol}", f"squeue = {self.squeue}", *extra)
        for name in ("SLURM_DSL_LEDGER", "SLURM_DSL_SCONTROL", "SLURM_DSL_SQUEUE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SLURM_DSL_CONFIG", str(self.config))
        # Were the file not read, the built-in ledger would be opened: this one, never the host's.
        monkeypatch.setattr("slurm_dsl.ledger.base.DEFAULT_PATH", str(self.default))
        monkeypatch.setattr("slurm_dsl.run.tracked.DEFAULT_PATH", str(self.default), raising=False)

    def write(self, *lines: str) -> None:
        self.config.write_text("[slurm-dsl]\n" + "".join(line + "\n" for line in lines))
        self.config.chmod(0o644)

    def recorded(self) -> Dict[str, List[str]]:
        """The ops the configured ledger holds, by job (empty if it was never made)."""
        if not self.ledger.exists():
            return {}
        with open_ledger(str(self.ledger)) as ledger:
            return {job: [h.op.value for h in ledger.history(job)] for job in ("5", "6")}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    return Site(tmp_path, monkeypatch)


def test_an_operation_of_the_library_uses_the_config_file_s_ledger_and_scontrol(site: Site) -> None:
    assert slurm_dsl.hold("5", timeout=5).ok
    assert calls_made(site.scontrol) == ["hold 5"]
    assert site.recorded() == {"5": ["hold"], "6": []}
    assert not site.default.exists()


def test_a_requeue_s_intent_lands_in_the_configured_ledger_the_sweep_reads(site: Site) -> None:
    outcomes = slurm_dsl.run_ops("requeue", ["5", "6"], timeout=10)
    # Every call ran on the configured scontrol; the configured squeue knows no job, so the bulk
    # path's corroboration (docs/contract.md §11) reads them not_found.
    assert [o.result.value for o in outcomes] == ["not_found", "not_found"]
    assert calls_made(site.scontrol) == ["update JobId=5,6 Requeue=1", "requeue 5,6", "update JobId=5,6 Requeue=0"]
    assert site.recorded() == {"5": ["requeue"], "6": ["requeue"]}
    assert not site.default.exists()
    # The command, given no --ledger either, reads that ledger.
    code, out, err = cli(["history", "5", "6", "--json"])
    assert code == 0, err
    assert [(r["job_id"], r["op"]) for r in map(json.loads, out.splitlines()) if r["kind"] == "operation"] == [
        ("5", "requeue"), ("6", "requeue")]


def test_the_command_and_the_library_agree_on_every_setting(
    site: Site, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLURM_DSL_SCONTROL", str(write_fake(tmp_path / "env-bin", {})))  # env beats the file
    site.write(f"ledger = {site.ledger}", f"squeue = {site.squeue}", "timeout = 7", "settle_delay = 3")
    shown = {s["key"]: s["value"] for s in json.loads(cli(["config", "--json"]).out)["settings"]}
    got = slurm_dsl.configuration()
    assert {key: got.value(key) for key in shown} == shown
    assert (got.ledger, got.scontrol, got.timeout, got.settle_delay) == (
        str(site.ledger), os.environ["SLURM_DSL_SCONTROL"], 7.0, 3.0)
    assert got.scontrol_path == os.environ["SLURM_DSL_SCONTROL"] and got.squeue_path == str(site.squeue)


def test_a_tracker_and_execute_read_it_too(site: Site) -> None:
    with Tracker() as tracker:
        assert tracker.path == str(site.ledger)
        assert tracker.run(Op.RELEASE, "6", time.time() + 5).ok
    outcome = execute("hold", "5", time.time() + 5)
    assert outcome.ok and calls_made(site.scontrol) == ["release 6", "hold 5"]
    assert site.recorded() == {"5": [], "6": ["release"]}


def test_the_caller_s_own_arguments_beat_the_file(site: Site, tmp_path: Path) -> None:
    mine = tmp_path / "mine" / "ledger.sqlite3"
    other = write_fake(tmp_path / "other-bin", {})
    assert slurm_dsl.hold("5", timeout=5, ledger=str(mine), scontrol=str(other)).ok
    assert calls_made(other) == ["hold 5"] and calls_made(site.scontrol) == []
    assert mine.exists() and not site.ledger.exists()


def test_no_timeout_is_the_config_file_s_timeout_else_the_built_in_one(site: Site) -> None:
    """A plugin's call given neither timeout nor deadline runs as the command given no --timeout:
    under the config file's timeout, else ``DEFAULT_TIMEOUT`` (docs/choices.md, item 10)."""
    assert slurm_dsl.hold("5").ok and calls_made(site.scontrol) == ["hold 5"]
    site.write(f"ledger = {site.ledger}", f"scontrol = {site.scontrol}", f"squeue = {site.squeue}", "timeout = 5")
    assert slurm_dsl.hold("5").ok and calls_made(site.scontrol) == ["hold 5", "hold 5"]
    first, second = timeouts_given(str(site.ledger))
    assert DEFAULT_TIMEOUT - 2 < first <= DEFAULT_TIMEOUT and 3 < second <= 5


def test_no_settle_delay_is_the_config_file_s(site: Site) -> None:
    site.write(f"ledger = {site.ledger}", f"scontrol = {site.scontrol}", f"squeue = {site.squeue}",
               "settle_delay = 30")
    # --settle needs the settle delay before the deadline: 30 s from the file, not the built-in 10.
    with pytest.raises(slurm_dsl.InvalidInput, match=r"settle delay, 30 s"):
        slurm_dsl.hold("5", timeout=20, settle=True)
    assert slurm_dsl.hold("5", timeout=20, settle=True, settle_delay=2).ok


@pytest.mark.parametrize("call", ["hold", "run_ops", "tracker", "execute", "configuration"])
def test_a_bad_config_file_fails_the_call_before_anything_runs(site: Site, call: str) -> None:
    site.write(f"ledger = {site.ledger}", f"scontrol = {site.scontrol}", "settle_delay = soon")
    with pytest.raises(ConfigFileError, match=r"line 4: settle_delay must be a number of seconds"):
        if call == "hold":
            slurm_dsl.hold("5", timeout=5)
        elif call == "run_ops":
            slurm_dsl.run_ops("requeue", ["5", "6"], timeout=5, ledger=str(site.ledger))
        elif call == "tracker":
            Tracker(str(site.ledger))
        elif call == "execute":
            execute("hold", "5", time.time() + 5)
        else:
            slurm_dsl.configuration()
    assert calls_made(site.scontrol) == [] and not site.ledger.exists() and not site.default.exists()


# -- an empty value: refused, the same at the command line and in the library --------------------


@pytest.mark.parametrize("argument", ["ledger", "scontrol"])
def test_an_empty_argument_is_refused_before_anything_runs(site: Site, argument: str) -> None:
    ledger, scontrol = ("", None) if argument == "ledger" else (None, "")
    with pytest.raises(slurm_dsl.InvalidInput, match=f"{argument}= is empty"):
        slurm_dsl.hold("5", timeout=5, ledger=ledger, scontrol=scontrol)
    with pytest.raises(slurm_dsl.InvalidInput, match="is empty"):
        Tracker(ledger, scontrol=scontrol)
    assert calls_made(site.scontrol) == [] and not site.ledger.exists() and not site.default.exists()


@pytest.mark.parametrize("flag", ["--ledger", "--scontrol", "--squeue", "--config"])
@pytest.mark.parametrize("command", [["config"], ["hold", "5", "--timeout", "5"]])
def test_an_empty_flag_is_the_same_usage_error_for_config_and_the_command(
    site: Site, flag: str, command: List[str]
) -> None:
    code, out, err = cli([*command, flag, ""])
    assert (code, out) == (2, ""), err
    assert err.startswith(f"slurm-dsl: argument {flag}: an empty value is refused"), err
    assert calls_made(site.scontrol) == [] and not site.ledger.exists() and not site.default.exists()


def test_an_empty_variable_is_an_unset_one_for_config_and_the_command(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_DSL_LEDGER", "")
    monkeypatch.setenv("SLURM_DSL_SCONTROL", "")
    shown = {s["key"]: s for s in json.loads(cli(["config", "--json"]).out)["settings"]}
    assert (shown["ledger"]["value"], shown["ledger"]["source"]) == (str(site.ledger), "file")
    assert (shown["scontrol"]["value"], shown["scontrol"]["source"]) == (str(site.scontrol), "file")
    code, _, err = cli(["hold", "5", "--timeout", "5"])
    assert code == 0, err
    assert calls_made(site.scontrol) == ["hold 5"] and site.recorded()["5"] == ["hold"]
    assert slurm_dsl.configuration().ledger == str(site.ledger)
