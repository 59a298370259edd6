"""Job ids (docs/contract.md §1): validated once, where they come in, and echoed bounded when refused.
``distinct_ids`` hands back ``JobIds`` (canonical, none twice, in order), which every layer below
takes as they are, checking nothing again.
"""

from __future__ import annotations

import re
from typing import Container, Iterable, List, Sequence, Tuple, Union

from .model import InvalidInput

MAX_JOB_ID = 4294967294
_JOB_ID = re.compile(r"[1-9][0-9]*\Z", re.ASCII)
_MAX_DIGITS = len(str(MAX_JOB_ID))
SHOWN_TOKEN = 40  # characters of a refused token an error message echoes (``token``)


def validate_job_id(job_id: Union[str, int]) -> str:
    """``job_id`` as its canonical, exact ``str``, or ``InvalidInput`` (a ``ValueError``) whatever its
    length; a ``bool`` is refused."""
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
    """A token as an error message echoes it: its first ``SHOWN_TOKEN`` characters, escaped, and its length."""
    if len(text) <= SHOWN_TOKEN:
        return repr(text)
    return f"{text[:SHOWN_TOKEN]!r}... ({len(text)} characters)"


def canonical_ids(job_ids: Sequence[str]) -> List[str]:
    """The ids as canonical strings, first occurrence first; ``ValueError`` for a bad one (docs/contract.md §1)."""
    if isinstance(job_ids, (str, bytes)):
        raise InvalidInput("job_ids must be a sequence of job ids, not one string")
    return list(distinct_ids(job_ids))


class JobIds(Tuple[str, ...]):
    """Job ids checked once: exact canonical ``str``, none twice, in the order first given.  Made only by
    ``distinct_ids``, ``checked_already`` or as a part of one."""

    __slots__ = ()

    def __new__(cls, *args: object, **kwargs: object) -> JobIds:
        raise TypeError("JobIds are made by distinct_ids, which checks each id")

    def __reduce__(self) -> Tuple[type, Tuple[Tuple[str, ...]]]:  # a copy or a pickle is a plain tuple
        return tuple, (tuple(self),)

    def part(self, start: int, stop: int) -> JobIds:
        """The ids from ``start`` to ``stop`` (a slice): checked already."""
        return _sealed(tuple.__getitem__(self, slice(start, stop)))

    def among(self, keep: Container[str]) -> JobIds:
        """Those of the ids that are in ``keep``, in their order: checked already."""
        return _sealed([j for j in self if j in keep])

    def pick(self, chosen: Iterable[str]) -> JobIds:
        """Those of ``chosen`` that are among the ids, in the order of ``chosen``, each once."""
        mine = {j: j for j in self}  # a chosen id equal to one of them is that one, an exact str
        return _sealed(dict.fromkeys(mine[j] for j in chosen if j in mine))

    def without(self, drop: Container[str]) -> JobIds:
        """Those of the ids that are not in ``drop``, in their order: checked already."""
        return _sealed([j for j in self if j not in drop])


def _sealed(ids: Iterable[str]) -> JobIds:
    return tuple.__new__(JobIds, ids)


def distinct_ids(job_ids: Iterable[Union[str, int]]) -> JobIds:
    """The ids, each validated (``InvalidInput`` at the first bad one), first occurrence first."""
    if type(job_ids) is JobIds:
        return job_ids
    return _sealed(dict.fromkeys(validate_job_id(j) for j in job_ids))


def checked_already(ids: Iterable[str]) -> JobIds:
    """``JobIds`` of ids a boundary validated itself with ``validate_job_id``: nothing is checked again."""
    return _sealed(dict.fromkeys(ids))


def checked_list(job_ids: Iterable[Union[str, int]]) -> List[str]:
    """The ids, each validated, duplicates kept; ``JobIds`` as they are, checked already."""
    if type(job_ids) is JobIds:
        return list(job_ids)
    return [validate_job_id(j) for j in job_ids]
