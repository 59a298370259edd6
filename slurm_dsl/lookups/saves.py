"""slurmctld's state on disk, and slurm.conf as slurmctld reads it (docs/contract.md §13): no RPC.

Every file is read by ``host.files``.  slurmctld links each new ``job_state`` into place, so the name
is missing for a moment: it is looked at again, once."""

from __future__ import annotations

import os
import socket
from typing import List, Mapping, NamedTuple, Optional, Tuple, Union

from ..core.durable import (
    HEADER_BYTES,
    HEARTBEAT_BYTES,
    HELD_FOR,
    controllers,
    heartbeat,
    held_for,
    may_hand_back,
    save_started,
)
from ..core.slurmconf import SlurmConf, Unreadable, read
from ..host import world
from ..host.files import FILE_TIMEOUT, Identity, NotRead, identity, read_identified, read_regular

STATE_ENV = "SLURM_DSL_STATE_SAVE_LOCATION"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
DEFAULT_STATE_SAVE_LOCATION = "/var/spool"
MAX_CONF = 4 << 20  # bytes of slurm.conf, and of each file it includes, read at most


def conf_path(environ: Optional[Mapping[str, str]] = None) -> str:
    """Where slurm.conf is: ``$SLURM_CONF``, else /etc/slurm/slurm.conf."""
    env = os.environ if environ is None else environ
    return env.get("SLURM_CONF") or DEFAULT_SLURM_CONF


def slurm_conf(environ: Optional[Mapping[str, str]] = None, timeout: float = FILE_TIMEOUT) -> SlurmConf:
    """slurm.conf and the files it includes, each read within ``timeout``; ``unreadable`` says why one was not."""
    path = conf_path(environ)

    def text(name: str) -> Union[str, Unreadable]:
        found = read_regular(name, MAX_CONF, timeout)
        return Unreadable(found.why) if isinstance(found, NotRead) else found.decode("utf-8", "replace")

    top = text(path)
    if isinstance(top, Unreadable):
        return SlurmConf(unreadable=f"{path}: {top.why}")
    return read(top, lambda name: text(name if name.startswith("/") else os.path.join(os.path.dirname(path), name)))


def state_save_location(environ: Optional[Mapping[str, str]] = None, conf: Optional[SlurmConf] = None) -> Optional[str]:
    """The directory slurmctld saves its state in (``$SLURM_DSL_STATE_SAVE_LOCATION``, else slurm.conf's, else
    Slurm's default); None when slurm.conf cannot be read whole."""
    env = os.environ if environ is None else environ
    given = env.get(STATE_ENV)
    if given:
        return given
    conf = slurm_conf(env) if conf is None else conf
    if conf.unreadable is not None:
        return None
    return conf.last("StateSaveLocation") or DEFAULT_STATE_SAVE_LOCATION


def hand_back_possible(environ: Optional[Mapping[str, str]] = None, conf: Optional[SlurmConf] = None) -> bool:
    """Whether slurm.conf may name a backup controller (one that cannot be read whole may)."""
    return may_hand_back(slurm_conf(environ) if conf is None else conf)


# Seconds a controller is given to accept a connection (``listens``): a listening socket accepts
# at once, even while its slurmctld holds the requests on it back (docs/contract.md §13.6).
PROBE_TIMEOUT = 2.0


def listens(address: str, port: int, timeout: float = PROBE_TIMEOUT) -> Optional[bool]:
    """Whether a slurmctld listens on ``address``:``port``: True, False (refused), None (no answer: it may)."""
    simulated = world.current().edge("listens")
    if simulated is not None:
        return simulated(address, port)  # type: ignore[no-any-return]
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except ConnectionRefusedError:  # ECONNREFUSED, whichever call raised it
        return False
    except OSError:
        return None


class Controllers(NamedTuple):
    """What ``core.durable`` Rules 6 and 7 read of the controllers before a lookup (``beat`` None: no heartbeat)."""

    beat: Optional[str]
    writer: Optional[int]
    listening: Tuple[Optional[bool], ...] = ()
    held_for: float = HELD_FOR


def read_controllers(environ: Optional[Mapping[str, str]] = None, location: Optional[str] = None,
                     conf: Optional[SlurmConf] = None) -> Controllers:
    """The heartbeat in ``location``, which controllers before its writer listen, and MessageTimeout."""
    conf = slurm_conf(environ) if conf is None else conf
    listed = controllers(conf)
    where = location or state_save_location(environ, conf)
    if where is None or listed is None:
        return Controllers(None, None)
    read = read_identified(os.path.join(where, "heartbeat"), HEARTBEAT_BYTES)
    found = None if isinstance(read, NotRead) else heartbeat(read[0])
    if isinstance(read, NotRead) or found is None or found[1] >= len(listed):
        return Controllers(None, None)
    writer = found[1]
    asked: List[Optional[bool]] = []
    for address, port in listed[:writer]:
        asked.append(listens(address, port))
        if asked[-1] is not False:
            break  # one that may hold a request is enough: the rest are not asked
    return Controllers(f"{read[1]}#{writer}", writer, tuple(asked), held_for(conf))


class Seen(NamedTuple):
    """``job_state`` as one look found it: its ``Identity`` in ``path`` (None: it could not, ``why`` says why)."""

    identity: Optional[Identity]
    path: str
    why: str = ""


def look_at_save(location: Optional[str], timeout: float = FILE_TIMEOUT) -> Seen:
    """Which save of ``location``'s job_state is there now (its ``Identity``, from its status alone)."""
    if location is None:
        return Seen(None, "job_state", "where slurmctld saves its state cannot be told (slurm.conf)")
    path = os.path.join(location, "job_state")
    why = ""
    for _ in range(2):
        found = identity(path, timeout)
        if not isinstance(found, NotRead):
            return Seen(found, path)
        why = found.why
        if not found.missing:
            break
    return Seen(None, path, why)


class LastSave(NamedTuple):
    """When the last save of ``path`` began (the controller's clock, shown only, never compared), or None and why."""

    started: Optional[int]
    path: str
    why: str = ""


def last_save(location: Optional[str] = None, timeout: float = FILE_TIMEOUT) -> LastSave:
    """The header of ``location``'s job_state (default: ``state_save_location()``), read now."""
    where = location or state_save_location()
    if where is None:
        return LastSave(None, "job_state", "where slurmctld saves its state cannot be told (slurm.conf)")
    path = os.path.join(where, "job_state")
    why = ""
    for _ in range(2):
        # The header alone: a job_state of 100,000 jobs is read no further than its first bytes.
        header = read_regular(path, HEADER_BYTES, timeout, head=True)
        if isinstance(header, NotRead):
            why = header.why
            if header.missing:
                continue
            return LastSave(None, path, why)
        started = save_started(header)
        return LastSave(started, path, "" if started is not None else "not a job_state this slurm-dsl knows")
    return LastSave(None, path, why)
