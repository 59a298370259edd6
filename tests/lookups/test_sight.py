"""Who may read "gone" (lookups/sight.py, docs/contract.md §9.3): the pure readings of ``scontrol show config``
and sacctmgr, the account's sight asked of a fake scontrol and sacctmgr that print the real texts,
and ``trusted`` against the contract's words written apart.  The live behaviour, with PrivateData=jobs:
tests/integration/test_private_data_live.py."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.lookups import sight as sight_module
from slurm_dsl.lookups.sight import Sight, accounting_on, operator_level, parse_config, sight, slurm_user, trusted

# `scontrol show config`, as 22.05 prints it on the lab (SlurmUser NAME(UID); no accounting).
SHOW_CONFIG = (
    "Configuration data as of 2026-12-04T10:50:01\n"
    "AccountingStorageType   = {accounting}\n"
    "PrivateData             = {private}\n"
    "SlurmUser               = {user}\n"
    "SlurmdUser              = root(0)\n"
)


def fake(directory: Path, user: str = "slurm(64030)", accounting: str = "accounting_storage/none",
         level: str = "None", show_fails: bool = False, private: str = "jobs", show_hangs: bool = False) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    scontrol = directory / "scontrol"
    shown = SHOW_CONFIG.format(user=user, accounting=accounting, private=private)
    show = "exit 1" if show_fails else f"printf '%s' '{shown}'"
    if show_hangs:
        show = "exec sleep 30"
    scontrol.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{directory}/calls.log'\n{show}\n")
    sacctmgr = directory / "sacctmgr"
    # sacctmgr -n -P show user NAME format=adminlevel: one line, the level's word.
    sacctmgr.write_text(f"#!/bin/sh\nprintf 'sacctmgr %s\\n' \"$*\" >> '{directory}/calls.log'\necho '{level}'\n")
    scontrol.chmod(0o755)
    sacctmgr.chmod(0o755)
    return str(scontrol)


@pytest.fixture(autouse=True)
def forget() -> None:
    sight_module._known.clear()


def test_the_config_is_read_as_scontrol_prints_it() -> None:
    config = parse_config(SHOW_CONFIG.format(user="slurm(64030)", accounting="(null)", private="jobs"))
    assert slurm_user(config) == ("slurm", 64030)
    assert not accounting_on(config)
    assert slurm_user({}) is None and slurm_user({"SlurmUser": "slurm"}) is None
    for none in ("accounting_storage/none", "(null)", ""):
        assert not accounting_on({"AccountingStorageType": none})
    assert accounting_on({"AccountingStorageType": "accounting_storage/slurmdbd"})


@pytest.mark.parametrize(("output", "operator"), [
    ("Operator\n", True), ("Administrator\n", True), ("None\n", False), ("", False),
    ("Operator\nNone\n", False),  # more than one line: not a plain answer
])
def test_the_admin_level(output: str, operator: bool) -> None:
    assert operator_level(output) is operator


def test_root_sees_every_job_without_asking(tmp_path: Path) -> None:
    scontrol = fake(tmp_path)
    assert sight(scontrol, 0).every_job
    assert not (tmp_path / "calls.log").exists()


def test_the_slurm_user_sees_every_job(tmp_path: Path) -> None:
    seen = sight(fake(tmp_path), 64030)
    assert seen.every_job and "SlurmUser" in seen.why


def test_another_account_without_accounting_does_not(tmp_path: Path) -> None:
    seen = sight(fake(tmp_path), 1001)
    assert not seen.every_job and seen.run_as == "root or slurm"
    assert (tmp_path / "calls.log").read_text().splitlines() == ["show config"]  # no sacctmgr
    assert "run it as root or slurm" in seen.gone_note(2)


def test_an_operator_by_admin_level_does(tmp_path: Path) -> None:
    scontrol = fake(tmp_path, accounting="accounting_storage/slurmdbd", level="Operator")
    assert sight(scontrol, 1001).every_job
    sight_module._known.clear()
    assert not sight(fake(tmp_path / "b", accounting="accounting_storage/slurmdbd", level="None"), 1001).every_job


def test_a_config_that_cannot_be_read_counts_as_blind(tmp_path: Path) -> None:
    seen = sight(fake(tmp_path, show_fails=True), 1001)
    assert not seen.every_job and "could not be read" in seen.why


@pytest.mark.parametrize(("private", "hides"), [
    ("jobs", True), ("accounts,jobs,usage", True), ("all", True), ("none", False), ("usage,users", False),
])
def test_private_data_says_whether_other_users_jobs_are_hidden(tmp_path: Path, private: str, hides: bool) -> None:
    """What a selection listed by such an account may miss (docs/contract.md §10.3)."""
    seen = sight(fake(tmp_path, private=private), 1001)
    assert not seen.every_job and seen.hides_jobs is hides
    assert "may not see every job" in seen.selection_note() and "run it as root or slurm" in seen.selection_note()


def test_an_ask_cut_short_by_its_deadline_is_blind_and_not_kept(tmp_path: Path) -> None:
    scontrol = fake(tmp_path, show_hangs=True)
    seen = sight(scontrol, 1001, timeout=0.3)
    assert not seen.every_job and not seen.kept and seen.hides_jobs is None
    assert "could not be read" in seen.selection_note()
    assert (scontrol, 1001) not in sight_module._known


def test_the_answer_is_asked_once_per_process(tmp_path: Path) -> None:
    scontrol = fake(tmp_path)
    sight(scontrol, 1001)
    sight(scontrol, 1001)
    assert (tmp_path / "calls.log").read_text().splitlines() == ["show config"]


def naive_trusted(answers: Dict[str, Optional[JobInfo]], every_job: bool) -> Dict[str, Optional[JobInfo]]:
    """The contract's rule (docs/contract.md §9.3): an answer of gone counts only from a lookup made
    by an account that sees every job; from any other account it decides nothing, as could not ask."""
    if every_job:
        return dict(answers)
    return {job: info for job, info in answers.items() if info is not None}


ids = st.from_regex(r"[1-9][0-9]{0,3}", fullmatch=True)
records = st.builds(lambda j: JobInfo(j, "RUNNING", True, 0, 1, "None"), ids)


@given(st.dictionaries(ids, st.none() | records), st.booleans())
def test_trusted_is_the_specs_words(answers: Dict[str, Optional[JobInfo]], every_job: bool) -> None:
    sight_module._known.clear()
    sight_module._known[("/x/scontrol", 4242)] = Sight(every_job, "uid 4242 (x)", "test", "root")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("os.geteuid", lambda: 4242)
        got, blind = trusted(answers, "/x/scontrol")
    assert got == naive_trusted(answers, every_job)
    assert (blind is not None) == (not every_job and None in answers.values())
