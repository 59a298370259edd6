"""host.journal: the audit line reaches the system log's socket as a syslog datagram, and a socket
that is missing or full loses it without holding the command up (docs/contract.md §10.4)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Iterator

import pytest

from slurm_dsl.host import journal


@pytest.fixture
def log_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    path = str(tmp_path / "log")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        monkeypatch.setattr(journal, "LOG_SOCKET", path)
        yield sock


def test_a_line_is_one_syslog_datagram_tagged_slurm_dsl(log_socket: socket.socket) -> None:
    assert journal.note("hold of 1 job(s) (7) by uid 0 (root) on vm: reason: firmware\nsecond")
    data = log_socket.recv(65536)
    assert data == f"<14>slurm-dsl[{os.getpid()}]: hold of 1 job(s) (7) by uid 0 (root) on vm: reason: firmware" \
        " second".encode()


def test_a_long_line_is_cut(log_socket: socket.socket) -> None:
    assert journal.note("x" * 10_000)
    assert len(log_socket.recv(65536).split(b": ", 1)[1]) == journal.MAX_LINE


def test_no_log_socket_loses_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "LOG_SOCKET", str(tmp_path / "none"))
    assert journal.note("lost") is False


def test_a_full_log_socket_never_holds_the_command_up(log_socket: socket.socket) -> None:
    # A stalled journald: nobody reads. Sends fill its queue; then the line is lost at once.
    taken = [journal.note("y" * 2000) for _ in range(2000)]
    assert taken[0] is True and taken[-1] is False
