"""Text from outside made safe to show or keep (docs/contract.md §10.1): every non-printable character
escaped as ``repr`` writes it, the whole capped.  Bytes are decoded as UTF-8 first (``backslashreplace``);
a cut falls at an escape's edge.  Backslashes stay, so ``shown(shown(t)) == shown(t)`` for one cap.
"""

from __future__ import annotations

from typing import List, Optional, Union

SHOWN_CAP = 300  # characters: one line of a diagnostic, a lookup error, a ledger's why
_UNCAPPED = 1 << 62


def shown(text: Union[str, bytes], cap: Optional[int] = SHOWN_CAP, *, lines: bool = False) -> str:
    """``text`` escaped, in at most ``cap`` characters (None: no cap; below 40 taken as 40); ``lines``:
    keep ``\\n`` and ``\\t``."""
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
