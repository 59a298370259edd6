"""Which slurmctld is in control, read around a requeue's lookups and calls (docs/contract.md §12,
``core.settle`` Rule 16): ``BOOT_TIME``, with the heartbeat's writer where a backup may be.  One
text, compared for equality only; None is "cannot tell"."""

from __future__ import annotations

import os
import re
from typing import Optional

from ..core.durable import HEARTBEAT_BYTES, heartbeat
from ..host import process
from ..host.files import NotRead, read_identified
from . import saves

BOOT_TIME = re.compile(rb"^BOOT_TIME\s*=\s*(\S[^\n]*?)\s*$", re.MULTILINE)
TIMEOUT = 5.0  # seconds ``show config`` may take: one small RPC


def boot_time(text: bytes) -> Optional[str]:
    """``BOOT_TIME``'s value in ``scontrol show config``'s output; None when it holds none, or more than one."""
    found = BOOT_TIME.findall(text)
    return found[0].decode("utf-8", "backslashreplace") if len(found) == 1 else None


def in_control(scontrol: str, timeout: float = TIMEOUT) -> Optional[str]:
    """The controller in control now, ``BOOT_TIME[#writer]``; None when it cannot be told within ``timeout``."""
    if not timeout > 0:
        return None
    done = process.run_argv((scontrol, "show", "config"), timeout=timeout)
    if done.returncode != 0 or done.timed_out or done.truncated or done.pipes_held:
        return None
    boot = boot_time(done.stdout)
    if boot is None:
        return None
    conf = saves.slurm_conf()
    if not saves.hand_back_possible(conf=conf):
        return boot
    where = saves.state_save_location(conf=conf)
    if where is None:
        return None
    read = read_identified(os.path.join(where, "heartbeat"), HEARTBEAT_BYTES)
    beat = None if isinstance(read, NotRead) else heartbeat(read[0])
    return None if beat is None else f"{boot}#{beat[1]}"
