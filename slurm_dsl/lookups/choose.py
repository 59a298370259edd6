"""Choosing how sweeps look jobs up: ``--lookup auto|squeue|pyslurm`` (docs/contract.md §9.3)."""

from __future__ import annotations

import logging
from typing import Optional

from ..core.jobinfo import LOOKUP_KINDS, Lookup
from ..core.model import ConfigError, LookupFailed
from ..host.binaries import find_squeue
from .pyslurm import find_pyslurm_lookup
from .squeue import SQUEUE_TIMEOUT, SqueueLookup, slurm_version

logger = logging.getLogger("slurm_dsl")


def make_lookup(kind: str = "auto", squeue_path: Optional[str] = None, timeout: float = SQUEUE_TIMEOUT) -> Lookup:
    """The lookup an admin chose: ``squeue``, ``pyslurm``, or ``auto`` (pyslurm where usable, else squeue).

    ``pyslurm`` raises ``ConfigError`` when no usable pyslurm is there; ``squeue`` never imports pyslurm."""
    if kind not in LOOKUP_KINDS:
        raise ConfigError(f"unknown lookup {kind!r}: choose one of {', '.join(LOOKUP_KINDS)}")
    squeue_path = find_squeue() if squeue_path is None else squeue_path  # first on PATH, else /usr/bin
    if kind == "squeue":
        return SqueueLookup(squeue_path, timeout)
    try:
        version = slurm_version(squeue_path)
    except LookupFailed as exc:
        if kind == "pyslurm":
            raise ConfigError(f"--lookup pyslurm: cannot tell the Slurm version: {exc.reason}") from None
        logger.warning("not using pyslurm, cannot tell the Slurm version: %s", exc.reason)
        return SqueueLookup(squeue_path, timeout)
    found, level, why = find_pyslurm_lookup(version)
    if found is not None:
        return found
    if kind == "pyslurm":
        raise ConfigError(f"--lookup pyslurm: {why}")
    logger.log(level, "%s; using squeue", why)
    return SqueueLookup(squeue_path, timeout)


def default_lookup(squeue_path: Optional[str] = None, timeout: float = SQUEUE_TIMEOUT) -> Lookup:
    """``make_lookup("auto")``: pyslurm where it imports and matches the running Slurm, else squeue."""
    return make_lookup("auto", squeue_path, timeout)
