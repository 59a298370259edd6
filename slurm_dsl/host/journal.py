"""One line to the system log (``/dev/log``), for ``--reason``'s audit trail (docs/contract.md §10.4).

A datagram sent without waiting: a missing, refusing or full socket loses the line (``False``) and
never holds the command up."""

from __future__ import annotations

import os
import socket

from . import world

LOG_SOCKET = "/dev/log"
_PRIORITY = 8 * 1 + 6  # facility user, severity info (RFC 3164)
MAX_LINE = 4096  # bytes of one message: the rest is cut


def note(message: str, tag: str = "slurm-dsl") -> bool:
    """Send ``message`` (one line) to the system log as ``tag``; whether it was taken."""
    simulated = world.current().edge("journal")
    if simulated is not None:
        return bool(simulated(message))
    line = message.replace("\n", " ").encode("utf-8", "backslashreplace")[:MAX_LINE]
    datagram = f"<{_PRIORITY}>{tag}[{os.getpid()}]: ".encode() + line
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(datagram, LOG_SOCKET)
    except OSError:  # missing, refused, full: the line is lost, the command goes on
        return False
    return True
