"""``--dry-run`` (issue 45 item 4): the ids looked up once, per job the calls a run would make and
the result its record predicts; no scontrol call, no ledger row, not even a ledger file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Tuple

import pytest

from tests.cli_run import cli
from tests.fakes import calls_made, write_fake, write_fake_squeue

RECORDS = "11|RUNNING|0|0|1|None\n12|PENDING|0|0|0|JobHeldAdmin\n13|COMPLETED|1|0|1|None\n"


@pytest.fixture
def tools(tmp_path: Path) -> Tuple[Path, Path]:
    return write_fake(tmp_path / "bin", {}), write_fake_squeue(tmp_path / "bin", RECORDS)


def dry(tmp_path: Path, tools: Tuple[Path, Path], *argv: str) -> Tuple[int, str, str]:
    scontrol, squeue = tools
    ledger = tmp_path / "ledger" / "l.sqlite3"
    code, out, err = cli([*argv, "--dry-run", "--scontrol", str(scontrol), "--squeue", str(squeue),
                          "--ledger", str(ledger), "--timeout", "10"])
    assert calls_made(scontrol) == [] and not ledger.parent.exists()  # nothing run, nothing recorded
    return code, out, err


def test_each_job_gets_its_calls_and_its_predicted_result(tmp_path: Path, tools: Tuple[Path, Path]) -> None:
    code, out, _ = dry(tmp_path, tools, "requeue", "11", "12", "13", "14", "--json")
    rows: List[dict] = [json.loads(line) for line in out.splitlines()]  # type: ignore[type-arg]
    assert code == 0
    assert [(r["job_id"], r["would"]) for r in rows] == [("11", "ok"), ("12", "rejected"), ("13", "rejected"),
                                                         ("14", "not_found")]
    assert rows[0]["calls"] == [["scontrol", "update", "JobId=11", "Requeue=1"], ["scontrol", "requeue", "11"],
                                ["scontrol", "update", "JobId=11", "Requeue=0"]]
    assert rows[0]["record"] == {"state": "RUNNING", "requeue": False, "restarts": 0, "priority": 1}
    assert rows[3]["record"] is None and {r["kind"] for r in rows} == {"dry_run"}


def test_the_text_rows_say_what_changes_nothing(tmp_path: Path, tools: Tuple[Path, Path]) -> None:
    code, out, _ = dry(tmp_path, tools, "hold", "11", "12")
    assert code == 0
    first, second = out.splitlines()
    assert "would ok" in first and "would be held" in first and "[calls: scontrol hold 11]" in first
    assert "already held: nothing changes" in second


def test_a_restore_is_looked_up_too(tmp_path: Path, tools: Tuple[Path, Path]) -> None:
    code, out, _ = dry(tmp_path, tools, "restore", "13", "14")
    assert code == 0
    assert "would rejected" in out.splitlines()[0] and "would ok" in out.splitlines()[1]


@pytest.mark.parametrize("flag", [["--key", "k1"], ["--settle"], ["--retry", "1"], ["--durable"]])
def test_it_only_looks(tmp_path: Path, tools: Tuple[Path, Path], flag: List[str]) -> None:
    code, out, err = dry(tmp_path, tools, "hold", "11", *flag)
    assert code == 2 and out == "" and "--dry-run only looks" in err


def test_a_lookup_that_cannot_ask_predicts_nothing(tmp_path: Path) -> None:
    scontrol = write_fake(tmp_path / "bin", {})
    squeue = write_fake_squeue(tmp_path / "bin", "", exit_code=1,
                               stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
    code, out, err = cli(["hold", "11", "--dry-run", "--scontrol", str(scontrol), "--squeue", str(squeue),
                          "--ledger", str(tmp_path / "l" / "l.sqlite3"), "--timeout", "10"])
    assert code == 1 and out == "" and "Unable to contact" in err
    assert calls_made(scontrol) == []
