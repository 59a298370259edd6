"""What is read of the controllers before a lookup (lookups/saves.py ``read_controllers``,
docs/contract.md §13.6, core.durable Rule 6): the heartbeat in the StateSaveLocation, then whether
each controller slurm.conf lists before its writer listens: a real socket on localhost that
listens, and a port nothing listens on."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from slurm_dsl.lookups.saves import (
    Controllers,
    hand_back_possible,
    last_save,
    listens,
    look_at_save,
    read_controllers,
    state_save_location,
)
from tests.conftest import Hung
from tests.fakes import write_heartbeat, write_job_state


@pytest.fixture
def listening() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never answers: a restarted primary holding
    the requests on its socket back."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


@pytest.fixture
def closed() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed: refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pair(tmp_path: Path, port: int) -> Tuple[dict, Path]:  # type: ignore[type-arg]
    """An environment naming a slurm.conf with two controllers on localhost, and their StateSaveLocation."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=unit\nSlurmctldHost=ctl-a(127.0.0.1)\nSlurmctldHost=ctl-b(127.0.0.1)\n"
                    f"SlurmctldPort={port}\n")
    state = tmp_path / "state"
    state.mkdir()
    return {"SLURM_CONF": str(conf), "SLURM_DSL_STATE_SAVE_LOCATION": str(state)}, state


def test_a_socket_that_listens_accepts_and_a_closed_port_refuses(listening: int, closed: int) -> None:
    assert listens("127.0.0.1", listening) is True
    assert listens("127.0.0.1", closed) is False


def test_the_primary_in_control_is_read_from_its_heartbeat_alone(tmp_path: Path, closed: int) -> None:
    env, state = pair(tmp_path, closed)
    write_heartbeat(state, 1796403600, 0)
    found = read_controllers(env)
    assert (found.writer, found.listening) == (0, ()) and found.beat is not None and found.beat.endswith("#0")
    assert hand_back_possible(env) is True


def test_the_backup_in_control_and_the_primary_listening_is_a_hand_back(tmp_path: Path, listening: int) -> None:
    env, state = pair(tmp_path, listening)
    write_heartbeat(state, 1796403600, 1)
    assert read_controllers(env)[1:3] == (1, (True,))


def test_the_backup_in_control_and_the_primary_down_holds_nothing(tmp_path: Path, closed: int) -> None:
    env, state = pair(tmp_path, closed)
    write_heartbeat(state, 1796403600, 1)
    assert read_controllers(env)[1:3] == (1, (False,))


@pytest.mark.parametrize("what", ["no heartbeat", "cut short", "writer not listed", "no slurm.conf", "include"])
def test_what_cannot_be_read_is_unread(tmp_path: Path, closed: int, what: str) -> None:
    env, state = pair(tmp_path, closed)
    write_heartbeat(state, 1796403600, 0)
    if what == "no heartbeat":
        (state / "heartbeat").unlink()
    elif what == "cut short":
        (state / "heartbeat").write_bytes(b"\0" * 8)
    elif what == "writer not listed":
        write_heartbeat(state, 1796403600, 2)
    elif what == "no slurm.conf":
        env["SLURM_CONF"] = str(tmp_path / "missing.conf")
    else:
        Path(env["SLURM_CONF"]).write_text(f"SlurmctldHost=a\nSlurmctldHost=b\nInclude {tmp_path}/x.conf\n")
    assert read_controllers(env) == Controllers(None, None)


def test_the_controllers_in_an_included_file_are_read(tmp_path: Path, closed: int) -> None:
    """A common layout: slurm.conf includes the file that names the controllers (it used to make
    every object a keep that never ends: docs/contract.md §13.8)."""
    env, state = pair(tmp_path, closed)
    hosts = tmp_path / "controllers.conf"
    hosts.write_text(f"SlurmctldHost=ctl-a(127.0.0.1)\nSlurmctldHost=ctl-b(127.0.0.1)\nSlurmctldPort={closed}\n")
    Path(env["SLURM_CONF"]).write_text("ClusterName=unit\nInclude controllers.conf\nMessageTimeout=3\n")
    write_heartbeat(state, 1796403600, 1)
    assert read_controllers(env)[1:] == (1, (False,), 33.0)
    assert hand_back_possible(env) is True


def test_the_last_state_save_location_counts(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("StateSaveLocation=/first\nStateSaveLocation=/last\n")
    assert state_save_location({"SLURM_CONF": str(conf)}) == "/last"
    assert state_save_location({"SLURM_CONF": str(tmp_path / "none")}) is None  # where: cannot be told
    conf.write_text("StateSaveLocation=/first\nInclude missing.conf\n")
    assert state_save_location({"SLURM_CONF": str(conf)}) is None


def test_a_state_save_location_that_hangs_is_given_up_within_the_deadline(tmp_path: Path,
                                                                          hung_directory: Hung) -> None:
    """A StateSaveLocation whose file server stopped answering (issue: it held a sweep, with its
    lock, for ever): every read gives up at its deadline and says so."""
    write_heartbeat(hung_directory.source, 1796403600, 0)
    write_job_state(hung_directory.source, 1796403600)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=unit\nSlurmctldHost=ctl-a(127.0.0.1)\nSlurmctldHost=ctl-b(127.0.0.1)\n")
    env = {"SLURM_CONF": str(conf)}
    where = str(hung_directory.path)
    assert last_save(where).started == 1796403600  # answering: read
    hung_directory.freeze()
    started = time.monotonic()
    assert "no answer within 0.5 s" in last_save(where, timeout=0.5).why
    assert "no answer within 0.5 s" in look_at_save(where, timeout=0.5).why
    assert read_controllers(env, where) == Controllers(None, None)  # unread: all may hold a request
    assert time.monotonic() - started < 10  # three reads of 0.5 s, and read_controllers' 2 s
