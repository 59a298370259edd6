"""When a change slurmctld acknowledged is known saved (docs/contract.md §13.2, §13.4, §13.6).  Pure:
the caller looks at the files and reads the ledger.  "Rule N" is ``core.life.RULES["DN"]``.  No time
of slurmctld's is compared with this host's or a ledger server's (docs/durability.md §5).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

from .slurmconf import SlurmConf

# slurmctld's JOB_STATE_VERSION string, the first thing in every job_state it writes (22.05 to
# 26.05: src/slurmctld/job_mgr.c, "write header: version, time").
JOB_STATE_VERSION = b"PROTOCOL_VERSION"
HEADER_BYTES = 4 + len(JOB_STATE_VERSION) + 1 + 2 + 8  # what ``save_started`` needs of the file
# slurmctld's CONTROL_TIMEOUT (src/slurmctld/slurmctld.h) and MessageTimeout's default
# (src/common/read_config.h): together, how long a request may wait on a controller's socket (Rule 7).
CONTROL_TIMEOUT = 30
DEFAULT_MESSAGE_TIMEOUT = 10
HELD_FOR = float(CONTROL_TIMEOUT + DEFAULT_MESSAGE_TIMEOUT)
# Seconds an operation's history row is read again after it began, whatever it showed (Rule 4):
# far longer than the transaction that writes a row, so every lower id has committed by then.
MARK_GUARD = 60.0


# How many saves must be seen replaced after a look before what was acknowledged before it is
# known saved (Rule 2): the first may have begun packing before the acknowledgement.
REPLACEMENTS = 2
# Looks kept per observer in the ledger (Rule 2): an anchor older than all of them has more than
# enough after it.
LOOKS_KEPT = 64


class Look(NamedTuple):
    """Rule 1: one ``observer``'s look at ``job_state``, the file it ``seen``; stored as ``observer=seen``."""

    observer: str
    seen: str

    def __str__(self) -> str:
        return f"{self.observer}={self.seen}"

    @classmethod
    def parse(cls, text: Optional[str]) -> Optional[Look]:
        """The look stored as ``text`` (None: none, or not one)."""
        observer, sep, seen = (text or "").rpartition("=")
        return cls(observer, seen) if sep and observer and seen else None


# One observer's looks as the ledger keeps them: (place, what it saw), in the order they were taken,
# each one kept only when it saw another file than the one before.
Chain = Sequence[Tuple[int, str]]


def looks_needed(mark: Optional[int], own: Optional[Look], observer: str, chain: Chain) -> int:
    """Rule 2: how many more looks by ``observer`` that see another file must come before what was acknowledged
    before ``mark`` (None: no anchor yet; ``own``: its process's look then) is saved; 0: it is."""
    if mark is None:
        return REPLACEMENTS + 1
    seen = [s for place, s in chain if place > mark]
    if own is not None and own.observer == observer:
        seen.insert(0, own.seen)
    replaced = sum(1 for before, after in zip(seen, seen[1:]) if before != after)
    return max(0, REPLACEMENTS - replaced)


def save_started(header: bytes) -> Optional[int]:
    """Rule 1: when the save that wrote ``header`` began, in whole seconds of the controller's clock;
    None if it is no ``job_state`` header."""
    if not isinstance(header, (bytes, bytearray)) or len(header) < HEADER_BYTES:
        return None
    length = int.from_bytes(header[0:4], "big")
    if length != len(JOB_STATE_VERSION) + 1 or header[4:4 + length] != JOB_STATE_VERSION + b"\0":
        return None
    at = 4 + length + 2
    started = int.from_bytes(header[at:at + 8], "big", signed=True)
    return started if started > 0 else None


def next_acknowledged_from(
    mark: int, read: Sequence[Tuple[int, float, bool]], now: float, guard: float = MARK_GUARD
) -> int:
    """Rule 4: the lowest history id the next sweep reads again, from ``mark`` and the rows read from it
    in id order, ``(id, started_at, done)``; never past a row not read."""
    for op_id, started_at, done in read:
        if not done or started_at > now - guard:
            return max(mark, op_id)
    return max(mark, read[-1][0] + 1) if read else mark


def may_hand_back(conf: Optional[SlurmConf]) -> bool:
    """Rule 5: whether a hand-back can happen on this slurm.conf's cluster: False only when it was read
    whole and names one controller as slurmctld counts them (``_load_slurmctld_host``)."""
    if conf is None or conf.unreadable is not None:
        return True
    hosts = conf.every("SlurmctldHost")
    if hosts:
        return len(hosts) != 1
    return conf.last("ControlMachine") is None or conf.last("BackupController") is not None


class Beat(NamedTuple):
    """Rule 6: one look at the heartbeat kept in the ledger: the file ``seen``, its ``writer`` (index among
    the SlurmctldHost lines), and ``at``, this host's boot clock (s)."""

    place: int
    seen: str
    writer: int
    at: float


class Control(NamedTuple):
    """Rules 6 and 7: what was read of the controllers before a lookup: the heartbeat's ``writer`` (None:
    unread); for each controller before it, ``listening`` (False: refused; None: cannot tell); this
    observer's ``beats``, oldest first; ``held_for`` and ``now`` (boot clock), in seconds."""

    writer: Optional[int]
    listening: Tuple[Optional[bool], ...] = ()
    beats: Tuple[Beat, ...] = ()
    held_for: float = HELD_FOR
    now: Optional[float] = None  # this host's boot clock when the heartbeat was looked at (Rule 7)


# Nothing read: every request may still be held back.
UNREAD = Control(None)
HEARTBEAT_BYTES = 16  # two big-endian 64-bit integers: time, writer's index


def heartbeat(data: bytes) -> Optional[Tuple[int, int]]:
    """Rule 6: ``(time, writer's index)`` of a heartbeat file's bytes, or None; the time is shown only."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != HEARTBEAT_BYTES:
        return None
    at, writer = int.from_bytes(data[:8], "big"), int.from_bytes(data[8:], "big")
    return (at, writer) if at > 0 else None


def may_be_held(control: Control, mark: Optional[int]) -> bool:
    """Rules 6 and 7: whether a request sent before an operation's end (anchored at ``mark``; None: no
    anchor yet) may still be held back by a controller."""
    if control.writer is None or mark is None or not control.beats:
        return True
    before = control.listening[:control.writer]
    # Every controller before the writer asked, and each refused the connection.
    if len(before) < control.writer or any(listens is not False for listens in before):
        return True
    after = [b for b in control.beats if b.place > mark]
    # The first heartbeat seen written after the end: a look after the anchor that saw another file
    # than the look before it (which was after the anchor too).
    written = next((i for i in range(1, len(after)) if after[i].seen != after[i - 1].seen), None)
    if written is None or any(b.writer != control.writer for b in after[written:]):
        return True
    return control.now is None or control.now - after[written].at < control.held_for


def held_for(conf: Optional[SlurmConf]) -> float:
    """Rule 7: seconds a request may wait on a controller's socket: CONTROL_TIMEOUT + MessageTimeout
    (one that is no whole number counts as 100, the longest Slurm allows without a warning)."""
    found = None if conf is None else conf.last("MessageTimeout")
    if found is None:
        return HELD_FOR
    return float(CONTROL_TIMEOUT + (int(found) if found.isdigit() else 100))


DEFAULT_SLURMCTLD_PORT = 6817  # SLURMCTLD_PORT, src/common/slurm_protocol_defs.h


def controllers(conf: Optional[SlurmConf]) -> Optional[Tuple[Tuple[str, int], ...]]:
    """Rule 6: each controller's (address, port) in slurm.conf's order, or None when it cannot be told.
    ``SlurmctldHost=name(address)`` gives the address, as ``ControlAddr``/``BackupAddr`` do for the older
    keys; a ``SlurmctldPort`` range listens on its first port."""
    if conf is None or conf.unreadable is not None:
        return None
    hosts: List[str] = []
    for value in conf.every("SlurmctldHost"):
        name, _, rest = value.partition("(")
        hosts.append(rest.rstrip(")") if rest else name)
    primary = conf.last("ControlMachine")
    if not hosts and primary is not None:
        hosts.append(conf.last("ControlAddr") or primary)
        backup = conf.last("BackupController")
        if backup is not None:
            hosts.append(conf.last("BackupAddr") or backup)
    port = DEFAULT_SLURMCTLD_PORT
    given = conf.last("SlurmctldPort")
    if given is not None:
        first = given.split("-", 1)[0]
        if not first.isdigit() or not 0 < int(first) < 65536:
            return None
        port = int(first)
    if not hosts or any(not h for h in hosts):
        return None
    return tuple((h, port) for h in hosts)
