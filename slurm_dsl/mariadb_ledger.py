"""The ledger on a MariaDB/MySQL server (docs/contract.md §9.1): not built yet."""

from __future__ import annotations

from typing import Callable, Optional

from .errors import ConfigError
from .ledger import LedgerStore


class MariaDbLedger:
    """Placeholder: opening one says the backend is not there yet."""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        busy_timeout: float,
        backoff_base: float,
        backoff_cap: float,
        clock: Optional[Callable[[], float]] = None,
    ) -> LedgerStore:
        raise ConfigError(f"{url}: this slurm-dsl has no MariaDB ledger yet")
