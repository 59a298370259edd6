"""When a change slurmctld acknowledged is known saved (docs/contract.md §13).  Pure: the caller
looks at the state files and reads the ledger; these rules only read values.

slurmctld replies to an update or a requeue before it saves, and its save thread writes
``job_state`` at most once per 5 s (docs/contract.md §13.1 has the source lines).  A controller that
dies in that window comes back, or hands over, with the job as it was at the last save.

Strategy: "saved" is read from what was seen of the controller's own state file, in the order it
was seen, never from a clock: no time of slurmctld's is compared with one of this host's or of a
ledger server's, nor ordered across a possible step of any of them (docs/durability.md §5 lists
every comparison of times).

Rule 1, a save is a new file: slurmctld writes each save of its job state to ``job_state.new``,
then links it in at ``job_state`` (``save_buf_to_state``), the new file made while the one it
replaces still exists, so a file seen there that is not the one seen before (``Look.seen``: its
inode, last write and size, compared for equality only) belongs to a later save.  The save thread
is one thread (``slurmctld_state_save``, the one caller of ``dump_all_job_state``): a save begins
packing only after the one before it was linked in.

Rule 2, two replacements after a look (``looks_needed``): a look made after a change was
acknowledged (its own look, by the process that made it, right after its calls; or, by anyone, a
look made once that process is over) is followed by a look that sees another file (a save was
linked after the first look), then by one more that sees yet another: the save that wrote the
third file began packing after the second file was linked, so after the first look, so after the
acknowledgement: it packed the job as the change left it.  The looks must be one observer's (one
host's view of one StateSaveLocation, ``observer``), in the order it took them: a file system
shared by two hosts may show one of them a file the other has already seen replaced.  A look
that cannot be taken (no such file, a file system that does not answer) sees nothing: it never
counts.  Inode numbers are reused: a later file that happens to get an earlier one's inode, last
write and size is taken for it, which can only delay "saved".

Rule 3, the save before the look: a change is known saved once Rule 2 holds AND a lookup made
after the last of those looks still shows it.  The lookup is what makes a takeover or a restart
harmless: a controller that took over, or came back, with the job as it was before the change
shows the job without it, however many saves it has made since.  So an object (docs/contract.md
§9) is cleared only when the job shows Requeue=0 (or is gone, Rule 8) in a lookup made after the
looks that prove its quiet moment saved (the object's ``quiet_mark``: where the looks stood when
the last call slurm-dsl made on the job was over).

Rule 4, an acknowledged operation read again (docs/contract.md §13.4): an ``ok`` (or a requeue's
``bit_set``) is re-read from the record by every sweep until it is either known saved (Rule 3 from
the looks at its end: a lookup after them still shows its effect: ``saved``) or settled for good
(found lost, gone, or undecidable).  The sweep keeps where it got to
as the lowest history id it must read again (``next_mark``): the first operation, in id order, that
is not yet done, or that began less than ``MARK_GUARD`` ago (an id handed out before a committed one
may still be in an open transaction on MariaDB, whose auto-increment ids can commit out of order).

Rule 5, a hand-back (``may_hand_back``): a request sent to a restarted primary while the backup
still holds control waits on the primary's socket and is applied when it takes control, up to
CONTROL_TIMEOUT after its client gave up (docs/contract.md §13.6).  Only a cluster whose slurm.conf
names one controller is known to have none.

Rule 6, no request held back (``may_be_held``): the bound of Rule 5 counts from the client's end,
but a restarted primary takes control only after its own start-up and the backup's relinquish,
which under load took longer (docs/contract.md §13.6).  So where a hand-back can happen, what an
operation may still do after its end is read from the controllers themselves, before the lookup
that is to show its effect absent (``Control``, taken by ``run.settling.controls``): the controller
in control writes ``<StateSaveLocation>/heartbeat`` (its time and its index among the SlurmctldHost
lines, two big-endian 64-bit integers, ``heartbeat``; every MIN(SlurmctldTimeout/4, 30) s, and at
once when it takes control: src/slurmctld/heartbeat.c 24.11: 70-147, started in
src/slurmctld/controller.c 24.11: 927-940, after the lock its queued requests wait on is released),
each a new file renamed into place, and a restarted primary holds requests on a socket it already
listens on.  No request sent before the end can still be held back once a heartbeat written after
the end was seen (looks at the heartbeat, as Rule 2's at job_state: after the end's anchor, a look
and then one that saw another file, ``Control.beats``) and every controller listed before its
writer is known not to listen (a connection refused): the writer took control after the end (the
primary: with the requests queued on it), and no controller that could take control from it holds a
socket with requests on it.  Anything else (no such heartbeat seen, a controller before the writer
that listens or cannot be reached) may hold one back: ``absent`` is not read yet, and no object is
cleared.  The heartbeat's own time is never read: it is slurmctld's clock.

Rule 7, in charge long enough (``may_be_held``): a heartbeat proves its writer in control, not that
it has worked through the requests that waited on its socket: in CI (24.11.5, under load) a lookup
made after the restarted primary's first heartbeat still showed the job without the requeue that
had waited on its socket, applied later.  So ``absent`` also waits until the writer has been in
control for longer than such a request could have waited (``CONTROL_TIMEOUT`` plus slurm.conf's
MessageTimeout, ``held_for``; docs/contract.md §13.6): measured on this host's boot clock (which
never steps and counts a suspend) between the look that first saw a heartbeat written after the end
and the look taken now, by one observer (one host, one boot), every heartbeat seen between them the
same writer's.  The writer was in control when it wrote that heartbeat, after the end and before
that look, so whatever waited on its socket from before the end has had at least ``held_for`` to be
applied; a controller restarted since then listened only after the end, so holds nothing sent
before it.  A writer that changes starts the wait again.

Rule 8, gone is saved too (docs/contract.md §13.8): a job's purge is a change slurmctld saves late
like any other, so a lookup that says "gone" clears an object, or settles an operation ``gone``,
only once Rule 2 holds from a look made after the lookup that first said so (the object's
``gone_mark``), and a lookup after those looks still says gone.  A lookup that shows the job again
forgets that mark.
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
    """One look at ``job_state`` (Rule 1): who looked (``observer``: one host's view of one
    StateSaveLocation) and which save's file it saw (``seen``).  Stored as ``observer=seen``."""

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
    """Rule 2: how many more looks by ``observer`` that see another file must come before what was
    acknowledged before the anchor (``mark``: where the looks stood then, None: no anchor yet;
    ``own``: the look its own process took then, if any) is known saved; 0: it is.  ``chain``:
    ``observer``'s looks, the latest ones at least."""
    if mark is None:
        return REPLACEMENTS + 1
    seen = [s for place, s in chain if place > mark]
    if own is not None and own.observer == observer:
        seen.insert(0, own.seen)
    replaced = sum(1 for before, after in zip(seen, seen[1:]) if before != after)
    return max(0, REPLACEMENTS - replaced)


def save_started(header: bytes) -> Optional[int]:
    """Rule 1: when the save that wrote ``header`` (the first ``HEADER_BYTES`` or more of a
    ``job_state``) began, in whole seconds of the controller's clock; None when the bytes are not
    such a header (another format, a file cut short)."""
    if not isinstance(header, (bytes, bytearray)) or len(header) < HEADER_BYTES:
        return None
    length = int.from_bytes(header[0:4], "big")
    if length != len(JOB_STATE_VERSION) + 1 or header[4:4 + length] != JOB_STATE_VERSION + b"\0":
        return None
    at = 4 + length + 2
    started = int.from_bytes(header[at:at + 8], "big", signed=True)
    return started if started > 0 else None


def next_mark(mark: int, read: Sequence[Tuple[int, float, bool]], now: float, guard: float = MARK_GUARD) -> int:
    """Rule 4: the lowest history id the next sweep reads again, given ``mark`` (this sweep's) and
    the rows it read from there in id order, each ``(id, started_at, done)``: the first one not
    done or begun after ``now - guard``; past the last one if none is; ``mark`` if none was read.
    Rows beyond a limit were not read, so the mark never passes them."""
    for op_id, started_at, done in read:
        if not done or started_at > now - guard:
            return max(mark, op_id)
    return max(mark, read[-1][0] + 1) if read else mark


def may_hand_back(conf: Optional[SlurmConf]) -> bool:
    """Rule 5: whether a hand-back (a restarted primary taking control back from a backup,
    docs/contract.md §13.6) can happen on the cluster of this slurm.conf (None, or ``unreadable``:
    it could not be read whole).  False only when it was read and names exactly one controller as
    slurmctld counts them (src/common/read_config.c ``_load_slurmctld_host``: the ``SlurmctldHost``
    lines when there is one, the older ``ControlMachine`` and ``BackupController`` ignored then; else
    ``ControlMachine``, and a ``BackupController`` is a second); anything else may have a backup,
    which is the safe side: the longer settle delay of ``core.settle`` Rule 13."""
    if conf is None or conf.unreadable is not None:
        return True
    hosts = conf.every("SlurmctldHost")
    if hosts:
        return len(hosts) != 1
    return conf.last("ControlMachine") is None or conf.last("BackupController") is not None


class Beat(NamedTuple):
    """Rule 6: one look at the heartbeat kept in the ledger: its place among the looks, which file
    it saw (``seen``), that file's writer (its index among the SlurmctldHost lines), and this
    host's boot clock when it was taken (``at``, seconds; Rule 7)."""

    place: int
    seen: str
    writer: int
    at: float


class Control(NamedTuple):
    """Rules 6 and 7: what was read of the controllers before a lookup: the writer of the heartbeat
    there now (None: none could be read), for each controller listed before it whether it listens
    (True), refused the connection (False) or could not be told (None), this observer's looks at the
    heartbeat kept in the ledger, oldest first (``beats``), how long a request may wait on a
    controller's socket (``held_for``, seconds), and this host's boot clock at the look just taken
    (``now``)."""

    writer: Optional[int]
    listening: Tuple[Optional[bool], ...] = ()
    beats: Tuple[Beat, ...] = ()
    held_for: float = HELD_FOR
    now: Optional[float] = None  # this host's boot clock when the heartbeat was looked at (Rule 7)


# Nothing read: every request may still be held back.
UNREAD = Control(None)
HEARTBEAT_BYTES = 16  # two big-endian 64-bit integers: time, writer's index


def heartbeat(data: bytes) -> Optional[Tuple[int, int]]:
    """Rule 6: ``(time, writer's index)`` of a heartbeat file's bytes, or None when they are not
    one (cut short, a time of 0).  The time is shown, never compared."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != HEARTBEAT_BYTES:
        return None
    at, writer = int.from_bytes(data[:8], "big"), int.from_bytes(data[8:], "big")
    return (at, writer) if at > 0 else None


def may_be_held(control: Control, mark: Optional[int]) -> bool:
    """Rules 6 and 7: whether a request sent before an operation's end (anchored at ``mark``, where
    the looks stood once it was over; None: no anchor yet) may still be held back by a controller,
    from what ``control`` read."""
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
    """Rule 7: how long a request may wait on a controller's socket, in seconds: CONTROL_TIMEOUT
    plus slurm.conf's MessageTimeout (its default, 10, when it is not set; one that is no whole
    number counts as 100, the longest Slurm allows without a warning, the safe side)."""
    found = None if conf is None else conf.last("MessageTimeout")
    if found is None:
        return HELD_FOR
    return float(CONTROL_TIMEOUT + (int(found) if found.isdigit() else 100))


DEFAULT_SLURMCTLD_PORT = 6817  # SLURMCTLD_PORT, src/common/slurm_protocol_defs.h


def controllers(conf: Optional[SlurmConf]) -> Optional[Tuple[Tuple[str, int], ...]]:
    """Rule 6: each controller's address and port, in slurm.conf's order (the heartbeat's index);
    None when it cannot be told (slurm.conf not read whole, no controller, a port that is no
    number).  As slurmctld reads them: ``SlurmctldHost=name(address)`` gives the address, else the
    name; with no SlurmctldHost, the older ``ControlMachine``/``ControlAddr``,
    ``BackupController``/``BackupAddr``; a ``SlurmctldPort`` range listens on its first port too."""
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
