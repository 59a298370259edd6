"""Plain built-in values from whatever a Python caller passed (docs/contract.md §1, §2).

Rule: a subclass of ``str``, ``int`` or ``float`` keeps its value but can override every
method the code would call on it (``__format__``, ``__str__``, ``replace``, ``__add__``,
``encode``, ``__mul__``, ``__float__``...), so a value that passed validation could still
render as something else in a script.  Every string or number that goes into a script, an
argv or a deadline is therefore first copied to the exact built-in type through the base
type's own method (``str.__str__``, ``float.__float__``, ``int.__int__``), never the
object's, and validated as that copy.  (CPython's ``str.__str__`` returns a plain copy of a
subclass instance, ``float.__float__`` and ``int.__int__`` likewise.)
The readers take the same copies of what they read (``plain_bytes`` for stderr; the status and
the op through ``int.__int__`` and ``str.__str__``): a value that cannot be copied reads as
unknown, never as an exception (docs/contract.md §6, §11).
"""

from __future__ import annotations

from typing import Optional

from .model import InvalidInput


def plain_str(value: object, what: str) -> str:
    """``value`` as an exact ``str``; ``ValueError`` if it is not a string at all."""
    # type(), not only isinstance(): an object can claim to be a str through __class__.
    if not isinstance(value, str) or not issubclass(type(value), str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    return str.__str__(value)


def plain_float(value: object, what: str) -> float:
    """``value`` (an int or a float, never a bool) as an exact ``float``; ``ValueError`` otherwise.

    Not checked for being finite: the caller says what range it needs.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not issubclass(type(value), (int, float))
    ):
        raise InvalidInput(f"{what} must be a number, not {type(value).__name__}")
    if isinstance(value, float):
        return float.__float__(value)
    try:
        return float(int.__int__(value))
    except OverflowError:
        raise InvalidInput(f"{what} is too large") from None


def plain_bytes(value: object) -> Optional[bytes]:
    """``value`` (bytes, bytearray or memoryview, or a subclass) as exact ``bytes``, or None.

    None when it is not bytes-like at all, or when even the base type's own copy fails (a
    released memoryview): the readers then read it as unknown, never raise.  A subclass's own
    ``__bytes__``, ``__len__`` or ``__getitem__`` never runs: the copy goes through the base
    type's slot (``bytes.__getitem__``, ``bytearray.__getitem__``; memoryview cannot be subclassed).
    """
    kind = type(value)
    try:
        if issubclass(kind, bytes) and isinstance(value, bytes):
            return bytes.__getitem__(value, slice(None))
        if issubclass(kind, bytearray) and isinstance(value, bytearray):
            return bytes(bytearray.__getitem__(value, slice(None)))
        if kind is memoryview and isinstance(value, memoryview):
            return value.tobytes()
    except Exception:  # a released or otherwise unreadable buffer: nothing to read
        return None
    return None


def described(value: object) -> str:
    """A short, safe description of a caller's value for a ``detail``: its plain copy's ``repr``
    for a str or int (a subclass's own ``__repr__`` never runs), else its type's name."""
    if isinstance(value, bool) and type(value) is bool:
        return repr(value)
    if isinstance(value, int) and issubclass(type(value), int):
        return int.__repr__(int.__int__(value))
    if isinstance(value, str) and issubclass(type(value), str):
        return repr(str.__str__(value)[:40])
    return f"<{type.__dict__['__name__'].__get__(type(value))}>"


def not_empty(value: str, name: str) -> str:
    """``value``, unless it is empty: then ``InvalidInput`` naming ``name`` (``--ledger``,
    ``ledger=``).  An empty flag or argument is refused, never taken as given nor as not given
    (run/config.py): a script's unset variable must not open another ledger than ``config`` shows."""
    if value == "":
        raise InvalidInput(f"{name} is empty: give a value, or leave it out to take the environment's, the config"
                           " file's or the built-in one (slurm-dsl config shows which)")
    return value
