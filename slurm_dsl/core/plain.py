"""Plain built-in copies of whatever a Python caller passed (docs/contract.md §1, §2).

A subclass of ``str``, ``int`` or ``float`` can override every method, so each value going into a
script, an argv or a deadline is copied through the base type's own method (``str.__str__``,
``int.__int__``, ``float.__float__``) and validated as that copy.  What a reader cannot copy reads
as unknown, never as an exception (§6, §11).
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
    """``value`` (an int or a float, never a bool) as an exact ``float``, not checked finite; else ``ValueError``."""
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
    """``value`` (bytes-like, or a subclass) as exact ``bytes`` through the base type's slot, or None: not
    bytes-like, or not readable (a released memoryview)."""
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
    """A short, safe description of a caller's value: a str's or int's plain ``repr``, else its type's name."""
    if isinstance(value, bool) and type(value) is bool:
        return repr(value)
    if isinstance(value, int) and issubclass(type(value), int):
        return int.__repr__(int.__int__(value))
    if isinstance(value, str) and issubclass(type(value), str):
        return repr(str.__str__(value)[:40])
    return f"<{type.__dict__['__name__'].__get__(type(value))}>"


def not_empty(value: str, name: str) -> str:
    """``value``, unless it is empty: then ``InvalidInput`` naming ``name`` (``--ledger``, ``ledger=``),
    never taken as given nor as not given (docs/contract.md §8)."""
    if value == "":
        raise InvalidInput(f"{name} is empty: give a value, or leave it out to take the environment's, the config"
                           " file's or the built-in one (slurm-dsl config shows which)")
    return value
