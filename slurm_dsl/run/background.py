"""A lookup in the background: ``work()`` in a thread of its own while the caller goes on
(the array check, ``run.driver``; a requeue's corroboration beside call 3, ``run.bulk``)."""

from __future__ import annotations

import threading
from typing import Callable, Generic, List, Optional, TypeVar

from ..host import world

T = TypeVar("T")


class Background(Generic[T]):
    """``work()`` in a thread, started at once; ``result()`` waits and gives its answer, or raises what it raised."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._answer: List[T] = []
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=world.carry(self._run), args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], T]) -> None:
        try:
            self._answer.append(work())
        except BaseException as exc:  # raised again in the caller's thread, by result()
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._answer[0]
