"""Job id validation (docs/contract.md §1).

Rule: a job id is a plain decimal ``[1-9][0-9]*`` of ASCII digits, at most
4294967294 (Slurm's NO_VAL, 0xfffffffe, and above are not job ids).  Anything
else (array expressions ``123_4``, lists, names, signs, spaces, leading zeros,
non-ASCII digits) is refused with ``InvalidInput``, a ``ValueError``, before it can go near a
shell, and is echoed bounded (``token``).
What comes out is an exact ``str`` of the value checked, whatever subclass came in.
"""

from __future__ import annotations

import re
from typing import List, Sequence, Union

from .model import InvalidInput

MAX_JOB_ID = 4294967294
_JOB_ID = re.compile(r"[1-9][0-9]*\Z", re.ASCII)
_MAX_DIGITS = len(str(MAX_JOB_ID))
SHOWN_TOKEN = 40  # characters of a refused token an error message echoes (``token``)


def validate_job_id(job_id: Union[str, int]) -> str:
    """Return ``job_id`` as the canonical string, an exact ``str``, or raise ``InvalidInput`` (a
    ``ValueError``), whatever the value's length.

    An ``int`` is read as its decimal value; a ``bool`` is refused (it is an int to Python,
    never a job id to an admin).  A refused string is echoed by its first ``SHOWN_TOKEN``
    characters (``repr``: escaped) and its length, never whole: a token can be megabytes.
    """
    if (
        type(job_id) is str and len(job_id) <= _MAX_DIGITS and job_id.isascii() and job_id.isdigit()
        and job_id[0] != "0" and (len(job_id) < _MAX_DIGITS or int(job_id) <= MAX_JOB_ID)
    ):
        # The common case, an exact str already canonical: the rule below, checked by str's own
        # methods (an ASCII isdigit() is [0-9]+, so with no leading zero it is ``_JOB_ID``) at
        # half a match's cost; a bulk run checks each id at every edge it crosses.
        return job_id
    if (
        isinstance(job_id, bool)
        or not isinstance(job_id, (str, int))
        or not issubclass(type(job_id), (str, int))
    ):
        raise InvalidInput(f"job id must be a decimal string or int, not {type(job_id).__name__}")
    if isinstance(job_id, int):
        # Compared as a number first: the decimal text of an int past 4300 digits is a ValueError
        # of Python's own (sys.set_int_max_str_digits), and any int that large is no job id.
        value = int.__int__(job_id)
        if value > MAX_JOB_ID:
            # 13000 bits is under 4000 digits: what Python will still write out.
            shown = token(int.__repr__(value)) if value.bit_length() <= 13000 else "(an int of over 3900 digits)"
            raise InvalidInput(f"invalid job id {shown}: larger than {MAX_JOB_ID}")
        text = int.__repr__(value)
    else:
        # Through the base type's own method, never the object's: a subclass keeps its value but
        # may override __str__/__format__/__add__, and what goes into a script must be what was
        # checked here (str.__str__ of a subclass is a plain copy; see ``plain``).
        text = str.__str__(job_id)
    if not _JOB_ID.match(text):
        raise InvalidInput(
            f"invalid job id {token(text)}: expected a plain decimal job id like 1234 (no arrays, lists, signs or"
            " spaces)"
        )
    # The length first: int() of more than 4300 digits is Python's ValueError, and slow before that.
    if len(text) > _MAX_DIGITS or int(text) > MAX_JOB_ID:
        raise InvalidInput(f"invalid job id {token(text)}: larger than {MAX_JOB_ID}")
    return text


def token(text: str) -> str:
    """A token as an error message echoes it: its first ``SHOWN_TOKEN`` characters, escaped
    (``repr``, as ``shown`` escapes: every non-printable character), and its length if longer."""
    if len(text) <= SHOWN_TOKEN:
        return repr(text)
    return f"{text[:SHOWN_TOKEN]!r}... ({len(text)} characters)"


def canonical_ids(job_ids: Sequence[str]) -> List[str]:
    """The ids as canonical strings, first occurrence first; ``ValueError`` for a bad one (docs/contract.md §1)."""
    if isinstance(job_ids, (str, bytes)):
        raise InvalidInput("job_ids must be a sequence of job ids, not one string")
    return list(dict.fromkeys(validate_job_id(j) for j in job_ids))
