"""slurm-dsl doctor: each check against a fake scontrol/squeue that print the real texts."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from slurm_dsl.cli import main
from slurm_dsl.doctor import parse_config
from tests.fakes import write_fake, write_fake_squeue

CONFIG = "Configuration data as of 2026-11-29T18:00:00\nJobRequeue              = {requeue}\n" \
         "JobSubmitPlugins        = {plugins}\nMessageTimeout          = 3 sec\n"


def test_parse_config() -> None:
    config = parse_config(CONFIG.format(requeue=0, plugins="lua"))
    assert config["JobRequeue"] == "0" and config["JobSubmitPlugins"] == "lua"
    assert config["MessageTimeout"] == "3 sec"


def doctor(
    tmp_path: Path, requeue: int = 0, plugins: str = "lua", up: bool = True, lookup: str = "squeue"
) -> Tuple[int, Dict[str, str]]:
    ping = "echo 'Slurmctld(primary) at vm is UP'" if up else "echo 'Slurmctld(primary) at vm is DOWN'; exit 1"
    config = CONFIG.format(requeue=requeue, plugins=plugins).replace("\n", "\\n")
    fake = write_fake(tmp_path / "bin", {}, default=f'case $1 in ping) {ping} ;; show) printf "{config}" ;; esac')
    squeue = write_fake_squeue(tmp_path / "sq", "")
    out = io.StringIO()
    code = main(["doctor", "--json", "--scontrol", str(fake), "--squeue", str(squeue), "--lookup", lookup,
                 "--ledger", str(tmp_path / "ledger.sqlite3")], out=out)
    checks: Dict[str, str] = {c["check"]: c["status"] for c in map(json.loads, out.getvalue().splitlines())}
    return code, checks


def test_a_ready_controller(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path)
    assert code == 0
    want: List[str] = [
        "scontrol", "wrapper", "slurmctld", "slurm", "lookup", "JobRequeue", "job_submit", "ledger", "caller"
    ]
    assert list(checks) == want
    assert {k: v for k, v in checks.items() if k != "caller"} == dict.fromkeys(want[:-1], "ok")


def test_the_lookup_is_reported_and_a_missing_pyslurm_asked_for_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm raises ImportError
    code, checks = doctor(tmp_path, lookup="pyslurm")
    assert code == 1 and checks["lookup"] == "fail"
    code, checks = doctor(tmp_path, lookup="auto")
    assert code == 0 and checks["lookup"] == "ok"


def test_warnings_do_not_fail(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path, requeue=1, plugins="(null)")
    assert code == 0
    assert (checks["JobRequeue"], checks["job_submit"]) == ("warn", "warn")


def test_a_down_controller_fails(tmp_path: Path) -> None:
    code, checks = doctor(tmp_path, up=False)
    assert code == 1 and checks["slurmctld"] == "fail"
    assert "JobRequeue" not in checks


def test_an_unusable_ledger_fails(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = io.StringIO()
    code = main(["doctor", "--scontrol", "/nonexistent/scontrol", "--squeue", "/nonexistent/squeue",
                 "--ledger", str(tmp_path / "file" / "ledger.sqlite3")], out=out)
    assert code == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fail  scontrol") and any(line.startswith("fail  ledger") for line in lines)
