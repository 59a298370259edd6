"""When a change slurmctld acknowledged is known saved (docs/contract.md §13).  Pure: the caller
reads the state file and the ledger; these rules only read values.

slurmctld replies to an update or a requeue before it saves, and its save thread writes
``job_state`` at most once per 5 s (docs/contract.md §13.1 has the source lines).  A controller that
dies in that window comes back, or hands over, with the job as it was at the last save.

Strategy: "saved" is read from the controller's own state file, never guessed from a clock.

Rule 1, the save's start: every ``job_state`` begins with a header that ``dump_all_job_state``
packs before it takes the job lock: ``JOB_STATE_VERSION`` as a packed string (a 32-bit big-endian
length, the bytes, a NUL), a 16-bit protocol version, then ``time(NULL)`` as a 64-bit big-endian
integer taken when that save began (``save_started``).  A save whose start is after a change
includes it: an update replies while it holds the job write lock, and a save packs the jobs under
the job read lock, so a save that began after the reply packs the job as the reply left it.

Rule 2, whole seconds: the start is ``time(NULL)``, a whole second, so it proves a save began
after an instant ``t`` only when it is greater than ``t`` (``began_after``).  A change saved in the
very second it was made (the cold save right after a reply) is not proven by its own save; the
next save proves it.  ``t`` is on the ledger's clock (MariaDB's, or this host's), the start on the
controller's: ``CLOCK_MARGIN`` covers hosts kept within a second by NTP (doctor's clock check).

Rule 3, the save before the look: a change is known saved once a save began after it AND a
lookup made after reading that save still shows it (the caller reads the file first, then
looks).  The look is what makes a takeover or a restart harmless: a controller that took over,
or came back, with the job as it was before the change shows the job without it, however recent
its own saves are.  So an object (docs/contract.md §9) is cleared only when the job shows
Requeue=0 (or is gone) in a lookup made after reading a save that began after the last moment any
call of slurm-dsl's could have changed the job's flag (the object's ``quiet_at``).  Anything that
cannot be read (no state file, another format, an unreadable directory) proves nothing: the
object stays watched.

Rule 4, an acknowledged operation read again (docs/contract.md §13.4): an ``ok`` (or a requeue's
``bit_set``) is re-read from the record by every sweep until it is either known saved (Rule 3: a
lookup made after reading a save that began after the operation's end still shows its effect:
``saved``) or settled for good (found lost, gone, or undecidable).  The sweep keeps where it got to
as the lowest history id it must read again (``next_mark``): the first operation, in id order, that
is not yet done, or that began less than ``MARK_GUARD`` ago (an id handed out before a committed one
may still be in an open transaction on MariaDB, whose auto-increment ids can commit out of order).

Rule 5, a hand-back (``may_hand_back``): a request sent to a restarted primary while the backup
still holds control waits on the primary's socket and is applied when it takes control, up to
CONTROL_TIMEOUT after its client gave up (docs/contract.md §13.6).  Only a cluster whose slurm.conf
names one controller is known to have none.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

# slurmctld's JOB_STATE_VERSION string, the first thing in every job_state it writes (22.05 to
# 26.05: src/slurmctld/job_mgr.c, "write header: version, time").
JOB_STATE_VERSION = b"PROTOCOL_VERSION"
HEADER_BYTES = 4 + len(JOB_STATE_VERSION) + 1 + 2 + 8  # what ``save_started`` needs of the file
# Seconds the ledger's clock and the controller's may differ (Rule 2).
CLOCK_MARGIN = 1.0
# Seconds an operation's history row is read again after it began, whatever it showed (Rule 4):
# far longer than the transaction that writes a row, so every lower id has committed by then.
MARK_GUARD = 60.0


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


def began_after(started: Optional[int], instant: float, margin: float = CLOCK_MARGIN) -> bool:
    """Rule 2: whether a save that began at ``started`` (whole seconds, None: unknown) surely began
    after ``instant`` (seconds, on a clock within ``margin`` of the controller's)."""
    return started is not None and started > instant + margin


def next_mark(mark: int, read: Sequence[Tuple[int, float, bool]], now: float, guard: float = MARK_GUARD) -> int:
    """Rule 4: the lowest history id the next sweep reads again, given ``mark`` (this sweep's) and
    the rows it read from there in id order, each ``(id, started_at, done)``: the first one not
    done or begun after ``now - guard``; past the last one if none is; ``mark`` if none was read.
    Rows beyond a limit were not read, so the mark never passes them."""
    for op_id, started_at, done in read:
        if not done or started_at > now - guard:
            return max(mark, op_id)
    return max(mark, read[-1][0] + 1) if read else mark


_SETTING = re.compile(r"([A-Za-z]+)\s*=")


def may_hand_back(slurm_conf: Optional[str]) -> bool:
    """Rule 5: whether a hand-back (a restarted primary taking control back from a backup,
    docs/contract.md §13.6) can happen on the cluster of this slurm.conf text (None: it could not
    be read).  False only when the text is read, includes no other file, names exactly one
    controller (one ``SlurmctldHost``, or the older ``ControlMachine``) and no
    ``BackupController``; anything else may have a backup, which is the safe side: the longer
    settle delay of ``core.settle`` Rule 13.  Keys are case-insensitive, ``#`` starts a comment."""
    if slurm_conf is None:
        return True
    controllers = 0
    for line in slurm_conf.splitlines():
        text = line.split("#", 1)[0].strip()
        if text.split(None, 1)[:1] and text.split(None, 1)[0].lower() == "include":
            return True
        for key in _SETTING.findall(text):
            key = key.lower()
            if key == "backupcontroller":
                return True
            if key in ("slurmctldhost", "controlmachine"):
                controllers += 1
    return controllers != 1
