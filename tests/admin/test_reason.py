"""``--reason`` (docs/contract.md §10.4): kept with each operation in the ledger (both backends, and
across ``ledger migrate``), shown by ``history`` and in ``--json`` rows, sent to the system log with
who ran it; a bad one is a usage error that changes nothing.  The library's ``reason=`` and
``select=`` likewise."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Iterator, List

import pytest

import slurm_dsl
from slurm_dsl.core.model import InvalidInput, Op
from slurm_dsl.host import journal
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.run.tracked import Tracker
from tests.cli_run import cli
from tests.fakes import calls_made, write_fake, write_fake_squeue

HELD = "7|PENDING|0|0|0|JobHeldAdmin\n8|PENDING|0|0|0|JobHeldAdmin\n"
WHY = "firmware upgrade, ticket OPS-1234"


@pytest.fixture
def log_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    path = str(tmp_path / "log")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        monkeypatch.setattr(journal, "LOG_SOCKET", path)
        yield sock


def argv(tmp_path: Path, *more: str) -> List[str]:
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(fake.parent, HELD)
    return [*more, "--ledger", str(tmp_path / "db" / "ledger.sqlite3"), "--scontrol", str(fake), "--squeue",
            str(fake.parent / "squeue"), "--timeout", "30"]


@pytest.mark.parametrize("ids", [["7"], ["7", "8"]], ids=["one", "bulk"])
def test_the_reason_is_kept_shown_and_logged_with_who_ran_it(
    tmp_path: Path, log_socket: socket.socket, ids: List[str]
) -> None:
    code, out, err = cli(argv(tmp_path, "release", *ids, "--reason", WHY, "--json"))
    assert code == 0, err
    assert [json.loads(line)["admin_reason"] for line in out.splitlines()] == [WHY] * len(ids)
    line = log_socket.recv(65536).decode()
    assert line.startswith("<14>slurm-dsl[") and f"release of {len(ids)} job(s) ({' '.join(ids)}) by uid " in line
    assert line.endswith(f": reason: {WHY}")
    with open_ledger(str(tmp_path / "db" / "ledger.sqlite3")) as ledger:
        assert [ledger.history(j)[0].admin_reason for j in ids] == [WHY] * len(ids)
    code, out, _ = cli(["history", "7", "--ledger", str(tmp_path / "db" / "ledger.sqlite3")])
    assert code == 0 and f"reason given: {WHY}" in out


def test_without_a_reason_nothing_is_logged_or_kept(tmp_path: Path, log_socket: socket.socket) -> None:
    code, out, err = cli(argv(tmp_path, "release", "7", "--json"))
    assert code == 0 and "admin_reason" not in out, err
    log_socket.settimeout(0.2)
    with pytest.raises(socket.timeout):
        log_socket.recv(65536)
    with open_ledger(str(tmp_path / "db" / "ledger.sqlite3")) as ledger:
        assert ledger.history("7")[0].admin_reason is None


@pytest.mark.parametrize("reason", ["", "two\nlines", "\x1b]0;title\x07", "x" * 1025])
def test_a_bad_reason_is_a_usage_error_and_changes_nothing(tmp_path: Path, reason: str) -> None:
    code, out, err = cli(argv(tmp_path, "hold", "7", "--reason", reason))
    assert (code, out) == (2, "") and "--reason" in err
    assert calls_made(tmp_path / "bin" / "scontrol") == [] and not (tmp_path / "db").exists()


def test_the_reason_is_kept_on_both_backends_and_across_a_migrate(ledger_location: str, tmp_path: Path) -> None:
    with open_ledger(ledger_location) as ledger:
        ledger.begin_operations([("7", Op.HOLD, "ab" * 16)], 10.0, actor="uid 0", admin_reason=WHY)
        ledger.begin_operations([("8", Op.HOLD, "cd" * 16)], 10.0, actor="uid 0")
        assert [ledger.history(j)[0].admin_reason for j in ("7", "8")] == [WHY, None]
    target = tmp_path / "copy" / "ledger.sqlite3"
    code, _, err = cli(["ledger", "migrate", "--from", ledger_location, "--to", str(target)])
    assert code == 0, err
    with open_ledger(str(target)) as copy:
        assert copy.history("7")[0].admin_reason == WHY


@pytest.mark.parametrize("ids", [["7"], ["7", "8"]], ids=["one", "bulk"])
def test_the_library_keeps_and_logs_a_reason_as_the_command_does(
    tmp_path: Path, log_socket: socket.socket, ids: List[str]
) -> None:
    """``reason=`` on the library's operations (docs/contract.md §8, §10.4): the same audit line and
    ledger column as ``--reason``, and a caller's own Tracker keeps no reason after the call."""
    fake = write_fake(tmp_path / "bin", {})
    write_fake_squeue(fake.parent, HELD)
    ledger = str(tmp_path / "db" / "ledger.sqlite3")
    with Tracker(ledger, scontrol=str(fake), squeue=str(fake.parent / "squeue")) as tracker:
        if len(ids) == 1:
            done = [slurm_dsl.release(ids[0], timeout=30, ledger=tracker, reason=WHY)]
        else:
            done = slurm_dsl.run_ops(Op.RELEASE, ids, timeout=30, ledger=tracker, reason=WHY)
        assert [o.result.value for o in done] == ["ok"] * len(ids)
        assert tracker.admin_reason is None
    line = log_socket.recv(65536).decode()
    assert f"release of {len(ids)} job(s) ({' '.join(ids)}) by uid " in line and line.endswith(f": reason: {WHY}")
    with open_ledger(ledger) as opened:
        assert [opened.history(j)[0].admin_reason for j in ids] == [WHY] * len(ids)


def test_the_library_selects_jobs_as_the_command_line_does(tmp_path: Path) -> None:
    """``run_ops(select=...)`` (docs/contract.md §8, §10.3): the selectors by name, one squeue listing
    with the command line's filters, the jobs it lists acted on; a bad selector refused first."""
    fake = write_fake(tmp_path / "bin", {})
    squeue = write_fake_squeue(fake.parent, HELD)
    ledger = str(tmp_path / "db" / "ledger.sqlite3")
    with Tracker(ledger, scontrol=str(fake), squeue=str(squeue)) as tracker:
        done = slurm_dsl.run_ops("release", select={"state": "pd", "name": "nightly"}, timeout=30, ledger=tracker)
    assert [(o.job_id, o.result.value) for o in done] == [("7", "ok"), ("8", "ok")]
    listing = (fake.parent / "squeue.log").read_text().splitlines()[0].split()
    assert "-t" in listing and listing[listing.index("-t") + 1] == "PENDING"
    assert "-n" in listing and listing[listing.index("-n") + 1] == "nightly"
    for bad in ({"nodes": "n1"}, {"state": "sleepy"}, {"name": "-x"}, {}):
        before = calls_made(fake)
        with pytest.raises(InvalidInput):
            slurm_dsl.run_ops("hold", select=bad, timeout=30, ledger=ledger, scontrol=str(fake))
        assert calls_made(fake) == before
