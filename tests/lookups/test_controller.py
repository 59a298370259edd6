"""Which slurmctld is in control (``lookups.controller``, docs/contract.md §12 Rule 16): BOOT_TIME
as ``scontrol show config`` prints it (22.05.8, this lab), with the heartbeat's writer where
slurm.conf names a backup; "cannot tell" (None) for anything else, within the deadline."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurm_dsl.lookups.controller import boot_time, in_control
from tests.conftest import TWO_CONTROLLERS
from tests.fakes import FAKE_CTL, write_fake, write_heartbeat

# The lines around it in 22.05.8's ``scontrol show config``.
SHOWN = (b"Configuration data as of 2026-12-07T13:00:00\nAccountingStorageBackupHost = (null)\n"
         b"BOOT_TIME               = 2026-12-07T12:59:58\nBcastExclude            = /lib,/usr/lib\n")


def test_boot_time_is_read_from_its_one_line() -> None:
    assert boot_time(SHOWN) == "2026-12-07T12:59:58"
    assert boot_time(b"MinJobAge               = 300 sec\n") is None
    assert boot_time(SHOWN + b"BOOT_TIME = 2026-12-07T13:00:01\n") is None  # two: not one process's
    assert boot_time(b"XBOOT_TIME = 1\n") is None


def test_one_controller_is_its_boot_time(tmp_path: Path) -> None:
    fake = write_fake(tmp_path / "bin", {})
    assert in_control(str(fake)) == FAKE_CTL


@pytest.mark.parametrize("default", ["case $1 in show) exit 1 ;; esac",
                                     "case $1 in show) echo 'MinJobAge = 300 sec' ;; esac",
                                     "case $1 in show) sleep 5 ;; esac"])
def test_anything_else_cannot_tell(tmp_path: Path, default: str) -> None:
    fake = write_fake(tmp_path / "bin", {}, default=default)
    began = time.monotonic()
    assert in_control(str(fake), timeout=0.5) is None
    assert time.monotonic() - began < 4.0  # the deadline, not the sleep
    assert in_control(str(fake), timeout=0.0) is None


def test_with_a_backup_the_heartbeats_writer_is_part_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(TWO_CONTROLLERS)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    fake = write_fake(tmp_path / "bin", {})
    location = Path(os.environ["SLURM_DSL_STATE_SAVE_LOCATION"])
    assert in_control(str(fake)) is None  # no heartbeat: which controller is in control cannot be told
    write_heartbeat(location, int(time.time()), 1)
    assert in_control(str(fake)) == f"{FAKE_CTL}#1"
    write_heartbeat(location, int(time.time()), 0)
    assert in_control(str(fake)) == f"{FAKE_CTL}#0"  # a takeover's backup and its primary differ
