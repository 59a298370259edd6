"""Outside files read within a deadline, never through a symbolic link, regular files only
(slurm_dsl/host/files.py, docs/contract.md §13.8): real files, FIFOs, devices and links."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurm_dsl.host.files import NotRead, identity, read_regular


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_regular(str(path), 100) == b"x" * 100
    assert read_regular(str(path), 10, head=True) == b"x" * 10


def test_a_file_longer_than_its_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 101)
    found = read_regular(str(path), 100)
    assert isinstance(found, NotRead) and "longer than 100 bytes" in found.why


@pytest.mark.parametrize("kind", ["fifo", "symlink", "device", "directory"])
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """A FIFO with no writer would hang a blocking open; /dev/zero would fill memory; a link
    could point anywhere: each is refused without waiting, and the target is never read."""
    path = tmp_path / "f"
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path.mkdir()
    started = time.monotonic()
    found = read_regular(str(path), 1 << 20, timeout=30.0)
    assert isinstance(found, NotRead)
    assert "refused" in found.why or kind == "directory"
    assert "no answer" not in found.why  # it did not wait for the deadline
    assert time.monotonic() - started < 30.0
    assert isinstance(identity(str(path), timeout=30.0), NotRead)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    for found in (read_regular(str(tmp_path / "none"), 10), identity(str(tmp_path / "none"))):
        assert isinstance(found, NotRead) and found.missing


def test_a_file_linked_into_place_has_another_identity(tmp_path: Path) -> None:
    """As slurmctld saves: the new file written beside, the old one linked away, the new one
    linked in.  Its identity changes; the same file looked at twice keeps its own."""
    state = tmp_path / "job_state"
    state.write_bytes(b"one")
    first = identity(str(state))
    assert identity(str(state)) == first
    new = tmp_path / "job_state.new"
    new.write_bytes(b"two")
    os.link(state, tmp_path / "job_state.old")
    state.unlink()
    os.link(new, state)
    new.unlink()
    assert identity(str(state)) != first
