"""Numbers an admin types (docs/contract.md §10.1): one ASCII rule, whole or seconds, each held to the
range its caller names.  None means refused: the caller words the message (the option, the range).
"""

from __future__ import annotations

import re
from typing import Optional

# Digits are capped: a number longer than that is outside every range a caller names, and int()
# of a megabyte of digits is slow before it is Python's own ValueError (over 4300 digits).
_WHOLE = re.compile(r"[0-9]{1,30}", re.ASCII)
_SECONDS = re.compile(r"(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)


def whole_number(text: str, low: int, high: int) -> Optional[int]:
    """``text`` as a whole number from ``low`` to ``high``, or None (not the rule, or out of range)."""
    if not _WHOLE.fullmatch(text):
        return None
    value = int(text, 10)
    return value if low <= value <= high else None


def seconds(text: str, low: float, high: float) -> Optional[float]:
    """``text`` as a number of seconds from ``low`` to ``high``, or None (not the rule, or out of
    range: an exponent too large reads as infinity, which no range holds)."""
    if not _SECONDS.fullmatch(text):
        return None
    value = float(text)
    return value if low <= value <= high else None
