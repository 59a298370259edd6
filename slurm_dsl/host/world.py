"""The outside world in one object: clocks, processes, outside files, which run this is (docs/testing.md §7).

Every edge asks ``current()`` first; a ``World`` whose fields are None is this machine.  A simulator
binds its own (``bound``); ``strict`` makes an edge it left None raise RuntimeError, never a ``DSLError``,
so nothing takes it for an answer.  Threads slurm-dsl starts run in their starter's world (``carry``)."""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator, Optional, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class World:
    """Each field replaces one edge (None: this machine's)."""

    monotonic: Optional[Callable[[], float]] = None  # one process's clock, epoch-anchored (``deadlines.steady``)
    wall: Optional[Callable[[], float]] = None  # this host's wall clock (the SQLite ledger's, ``resolve``)
    boot_clock: Optional[Callable[[], float]] = None  # CLOCK_BOOTTIME: never steps, per host and boot
    sleep: Optional[Callable[[float], None]] = None
    run_script: Optional[Callable[..., Any]] = None  # as ``host.process.run_script``
    run_argv: Optional[Callable[..., Any]] = None  # as ``host.process.run_argv``
    read_regular: Optional[Callable[..., Any]] = None  # as ``host.files.read_regular``
    read_identified: Optional[Callable[..., Any]] = None  # as ``host.files.read_identified``
    identity: Optional[Callable[..., Any]] = None  # as ``host.files.identity``
    this_run: Optional[Callable[[], str]] = None  # ``host/boot/pid/start`` of the calling run
    alive: Optional[Callable[[Optional[str]], Optional[bool]]] = None  # as ``host.runs.alive``
    listens: Optional[Callable[[str, int], Optional[bool]]] = None  # as ``lookups.saves.listens``
    journal: Optional[Callable[[str], bool]] = None  # as ``host.journal.note``
    strict: bool = False

    def edge(self, name: str) -> Optional[Callable[..., Any]]:
        """The replacement of edge ``name``, None for this machine's; RuntimeError if strict."""
        found: Optional[Callable[..., Any]] = getattr(self, name)
        if found is None and self.strict:
            raise RuntimeError(f"the simulated world has no {name}: a run would have reached the real machine")
        return found


EDGES = tuple(f.name for f in fields(World) if f.name != "strict")
REAL = World()
_CURRENT: contextvars.ContextVar[World] = contextvars.ContextVar("slurm_dsl_world", default=REAL)


def current() -> World:
    """The world of this context (``REAL`` unless a simulator bound one)."""
    return _CURRENT.get()


@contextlib.contextmanager
def bound(world: World) -> Iterator[World]:
    """Run the block in ``world``."""
    token = _CURRENT.set(world)
    try:
        yield world
    finally:
        _CURRENT.reset(token)


def carry(work: _F) -> _F:
    """``work`` to be run in another thread (or a pool's), in the world of this context."""
    world = current()

    def run(*args: Any, **kwargs: Any) -> Any:
        token = _CURRENT.set(world)
        try:
            return work(*args, **kwargs)
        finally:
            _CURRENT.reset(token)

    return run  # type: ignore[return-value]


def monotonic() -> float:
    """Seconds on a clock that never steps, for differences only (the world's own)."""
    simulated = current().edge("monotonic")
    return simulated() if simulated is not None else time.monotonic()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` (the world's sleep: a simulator's moves its clock)."""
    simulated = current().edge("sleep")
    (simulated or time.sleep)(seconds)
