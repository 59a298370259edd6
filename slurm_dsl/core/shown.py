"""Text from outside, made safe to show (docs/contract.md §10.1).

Rule: whatever did not come from slurm-dsl itself (squeue's and pyslurm's words, an exception's
text, a Slurm version line, a path, a job's State, what a ledger row holds) may carry control
characters: ``\\033]52;...\\007`` writes the clipboard of the terminal that shows it,
``\\033[2J`` clears it, ``\\r`` or ``\\n`` forge a line.  So every such text is passed through
``shown`` before it is printed, logged or stored to be printed later: each character that is not
printable (``str.isprintable``: the C0 and C1 controls, DEL, ``\\n``, ``\\t``, format characters
such as the bidi overrides, line and paragraph separators, surrogates, unassigned code points)
becomes the escape Python's ``repr`` writes for it (``\\x1b``, ``\\n``, ``\\u202e``), and the
result is at most ``cap`` characters, an over-long one cut at an escape's edge and ending with
``... (N characters)`` (or ``bytes``), N the length of the whole text.

Backslashes are left alone, so text already shown is shown unchanged (``shown(shown(t)) ==
shown(t)`` for one cap): a ledger row stored escaped and escaped again when printed reads the
same, while an old row that still holds raw bytes is escaped at printing.  Bytes are decoded
as UTF-8 first, an undecodable byte written ``\\xff`` (``backslashreplace``).  Pure: no I/O.
"""

from __future__ import annotations

from typing import List, Optional, Union

SHOWN_CAP = 300  # characters: one line of a diagnostic, a lookup error, a ledger's why
_UNCAPPED = 1 << 62


def shown(text: Union[str, bytes], cap: Optional[int] = SHOWN_CAP, *, lines: bool = False) -> str:
    """``text`` with every non-printable character escaped, in at most ``cap`` characters
    (``None``: escaped only, however long; for a whole message built from texts already capped).

    ``lines``: keep ``\\n`` and ``\\t`` as they are (a message of several lines, a traceback in
    a log record); everything else not printable is still escaped.  ``cap`` below 40 is taken
    as 40 (room for the ``... (N characters)`` that says a text was cut).
    """
    cap = _UNCAPPED if cap is None else max(int(cap), 40)
    if isinstance(text, (bytes, bytearray)):
        # A bounded prefix decoded only: what is past the cap is never shown, only counted.
        raw = bytes(text)
        total, unit, whole = len(raw), "bytes", len(raw) <= cap
        text = raw[: cap + 1].decode("utf-8", "backslashreplace")
    else:
        text = str.__str__(text)
        total, unit, whole = len(text), "characters", True
        if total <= cap and text.isprintable():  # the common case, nothing to do
            return text
    suffix = f"... ({total} {unit})"
    out: List[str] = []
    size = 0
    for ch in text:
        piece = ch if ch.isprintable() or (lines and ch in "\n\t") else repr(ch)[1:-1]
        if size + len(piece) > cap:
            break
        out.append(piece)
        size += len(piece)
    else:
        if whole:
            return "".join(out)
    # Cut: drop escapes from the end until the note of the length fits within the cap.
    while out and size + len(suffix) > cap:
        size -= len(out.pop())
    return "".join(out) + suffix
