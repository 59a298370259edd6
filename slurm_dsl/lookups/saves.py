"""slurmctld's last save of its job state, read from its StateSaveLocation (docs/contract.md §13).

The header of ``<StateSaveLocation>/job_state`` says when the save that wrote it began
(``core.durable.save_started``): no RPC, a read of a few dozen bytes.  The directory is
``$SLURM_DSL_STATE_SAVE_LOCATION`` when set, else slurm.conf's ``StateSaveLocation`` (the file
``$SLURM_CONF`` names, else /etc/slurm/slurm.conf; keys are case-insensitive, ``#`` starts a
comment), else Slurm's default, /var/spool (``DEFAULT_SAVE_STATE_LOC``, src/common/read_config.h).
On a primary/backup pair the directory is shared: whichever controller is in charge writes it.

The file is the SlurmUser's, mode 0600: root and the SlurmUser read it, nobody else (then nothing
is known saved, and ``LastSave.why`` says so).  slurmctld replaces it by linking a new file into
place (``save_buf_to_state``: ``job_state.new``, fsync, link), so a read sees a whole header or
no file for a moment (read again: once).
"""

from __future__ import annotations

import os
import re
import socket
from typing import List, Mapping, NamedTuple, Optional

from ..core.durable import (
    HEADER_BYTES,
    HEARTBEAT_BYTES,
    UNREAD,
    Control,
    controllers,
    heartbeat,
    held_for,
    may_hand_back,
    save_started,
)

STATE_ENV = "SLURM_DSL_STATE_SAVE_LOCATION"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
DEFAULT_STATE_SAVE_LOCATION = "/var/spool"
_KEY = re.compile(r"\s*StateSaveLocation\s*=\s*(\S+)", re.IGNORECASE)


class LastSave(NamedTuple):
    """When the last save of ``path`` began (whole seconds, the controller's clock), or None and
    why it could not be told."""

    started: Optional[int]
    path: str
    why: str = ""


def state_save_location(environ: Optional[Mapping[str, str]] = None) -> str:
    """The directory slurmctld saves its state in (see the module)."""
    env = os.environ if environ is None else environ
    given = env.get(STATE_ENV)
    if given:
        return given
    try:
        with open(env.get("SLURM_CONF") or DEFAULT_SLURM_CONF, encoding="utf-8", errors="replace") as conf:
            for line in conf:
                found = _KEY.match(line.split("#", 1)[0])
                if found:
                    return found.group(1)
    except OSError:
        pass
    return DEFAULT_STATE_SAVE_LOCATION


def _slurm_conf(environ: Optional[Mapping[str, str]]) -> Optional[str]:
    """slurm.conf's text (the file ``$SLURM_CONF`` names, else /etc/slurm/slurm.conf), or None."""
    env = os.environ if environ is None else environ
    try:
        with open(env.get("SLURM_CONF") or DEFAULT_SLURM_CONF, encoding="utf-8", errors="replace") as conf:
            return conf.read()
    except OSError:
        return None


def hand_back_possible(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether slurm.conf (the file ``$SLURM_CONF`` names, else /etc/slurm/slurm.conf) may name a
    backup controller (``core.durable.may_hand_back``; a file that cannot be read may)."""
    return may_hand_back(_slurm_conf(environ))


# Seconds a controller is given to accept a connection (``listens``): a listening socket accepts
# at once, even while its slurmctld holds the requests on it back (docs/contract.md §13.6).
PROBE_TIMEOUT = 2.0


def listens(address: str, port: int, timeout: float = PROBE_TIMEOUT) -> Optional[bool]:
    """Whether a slurmctld listens on ``address``:``port``: True (the connection was accepted),
    False (refused: nothing listens, so nothing is held there), None (no answer, or the host cannot
    be reached: it may).  The connection is closed at once, nothing sent: slurmctld reads an empty
    connection and drops it."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except ConnectionRefusedError:  # ECONNREFUSED, whichever call raised it
        return False
    except OSError:
        return None


def read_control(environ: Optional[Mapping[str, str]] = None, location: Optional[str] = None) -> Control:
    """What ``core.durable`` Rule 6 reads of the controllers, now, before a lookup: the heartbeat
    in ``location`` (default: ``state_save_location()``), then whether each controller slurm.conf
    lists before its writer listens, and how long a request may wait on a controller's socket
    (slurm.conf's MessageTimeout, Rule 7).  ``UNREAD`` (all may hold a request back) when slurm.conf
    or the heartbeat cannot be read.  No heartbeat read before is in it (``Control.seen``: the
    caller remembers them)."""
    text = _slurm_conf(environ)
    listed = controllers(text)
    path = os.path.join(location or state_save_location(environ), "heartbeat")
    try:
        with open(path, "rb") as beat:  # replaced by a rename: a read sees a whole file
            data = beat.read(HEARTBEAT_BYTES + 1)
    except OSError:
        return UNREAD
    found = heartbeat(data)
    if listed is None or found is None or found[1] >= len(listed):
        return UNREAD
    at, writer = found
    asked: List[Optional[bool]] = []
    for address, port in listed[:writer]:
        asked.append(listens(address, port))
        if asked[-1] is not False:
            break  # one that may hold a request is enough: the rest are not asked
    return Control(at, writer, tuple(asked), held_for=held_for(text))


def last_save(location: Optional[str] = None) -> LastSave:
    """The header of ``location``'s job_state (default: ``state_save_location()``), read now."""
    path = os.path.join(location or state_save_location(), "job_state")
    why = ""
    for _ in range(2):  # the file is missing for a moment while slurmctld links a new one in
        try:
            with open(path, "rb") as state:
                header = state.read(HEADER_BYTES)
        except FileNotFoundError:
            why = "no such file"
            continue
        except OSError as exc:
            return LastSave(None, path, exc.strerror or str(exc))
        started = save_started(header)
        return LastSave(started, path, "" if started is not None else "not a job_state this slurm-dsl knows")
    return LastSave(None, path, why)
