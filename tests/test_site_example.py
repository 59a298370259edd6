"""contrib/examples/drain_requeue.py, the site plugin example, uses what the ``slurm-dsl`` command
uses (docs/contract.md §8, issue 31 item 5): with the config file naming a ledger, a scontrol and
an squeue that neither PATH nor the environment names, the example asks those programs and its
requeues' intents land in that ledger, the one the host's sweeps read.  Fakes stand for Slurm
(the lab's own run of the example is tests/integration/test_examples_live.py)."""

from __future__ import annotations

import importlib.util
import stat
from pathlib import Path
from types import ModuleType
from typing import List

import pytest

from slurm_dsl.ledger.choose import open_ledger
from tests.fakes import _q, calls_made, write_fake, write_fake_squeue

EXAMPLE = Path(__file__).resolve().parents[1] / "contrib" / "examples" / "drain_requeue.py"
NODE_LINE = "NodeName=node17 Arch=x86_64 State=IDLE+DRAIN Reason=disk [root@2025-03-01T10:00:00]"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drain_requeue", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def squeue_listing(directory: Path, jobs: List[str]) -> Path:
    """An squeue that lists ``jobs`` for the example's ``-o %A`` and answers every lookup of
    slurm-dsl's (``-O``) as a running job each."""
    inner = write_fake_squeue(directory / "inner", "".join(f"{j}|RUNNING|0|0|4294901000|None\n" for j in jobs))
    path = directory / "squeue"
    path.write_text("#!/bin/sh\n"
                    f"case \" $* \" in *' %A '*) printf '%s\\n' {' '.join(jobs)}; exit 0 ;; esac\n"
                    f"exec {_q(str(inner))} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The host's config file (``$SLURM_DSL_CONFIG``), naming the ledger, scontrol and squeue;
    nothing in the environment does, and PATH holds none of them."""
    scontrol = write_fake(tmp_path / "sbin", {}, default=f"case $1 in show) echo {_q(NODE_LINE)} ;; esac; exit 0")
    squeue = squeue_listing(tmp_path / "squeue-bin", ["5", "6"])
    config = tmp_path / "slurm-dsl.conf"
    config.write_text(f"[slurm-dsl]\nledger = {tmp_path / 'site' / 'ledger.sqlite3'}\nscontrol = {scontrol}\n"
                      f"squeue = {squeue}\n")
    config.chmod(0o644)
    for name in ("SLURM_DSL_LEDGER", "SLURM_DSL_SCONTROL", "SLURM_DSL_SQUEUE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_DSL_CONFIG", str(config))
    # Were the file not read, the built-in ledger would be opened: this one, never the host's.
    monkeypatch.setattr("slurm_dsl.ledger.base.DEFAULT_PATH", str(tmp_path / "default" / "ledger.sqlite3"))
    monkeypatch.setattr("slurm_dsl.run.tracked.DEFAULT_PATH", str(tmp_path / "default" / "ledger.sqlite3"),
                        raising=False)
    return config


def test_the_example_asks_the_configured_programs_and_records_in_the_configured_ledger(
    configured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = example().main(["node17", "--key", "drain:node17:t1", "--timeout", "30", "--settle-delay", "2"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert out.out.splitlines() == ["5 requeue ok", "6 requeue ok"]
    scontrol = tmp_path / "sbin" / "scontrol"
    asked = [call for call in calls_made(scontrol) if call != "show config"]  # a keyed run reads MinJobAge too
    assert asked == ["show node node17 -o", "update JobId=5,6 Requeue=1", "requeue 5,6", "update JobId=5,6 Requeue=0"]
    with open_ledger(str(tmp_path / "site" / "ledger.sqlite3")) as ledger:
        assert [(h.op.value, h.key) for j in ("5", "6") for h in ledger.history(j)] == [
            ("requeue", "drain:node17:t1"), ("requeue", "drain:node17:t1")]
    assert not (tmp_path / "default").exists()


def test_a_bad_config_file_stops_the_example_before_it_asks_anything(
    configured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configured.write_text(configured.read_text() + "timeout = soon\n")
    code = example().main(["node17", "--timeout", "30"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(f"drain_requeue: {configured}, line 5: timeout must be"), err
    assert calls_made(tmp_path / "sbin" / "scontrol") == []
