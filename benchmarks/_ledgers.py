"""What the sweep benchmarks (bench_sweep, bench_settle) share to build and sweep their ledgers:
the job ids their gone objects use, and the squeue runner that counts the job-info RPCs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

from slurm_dsl.host.process import Completed, run_argv

GONE_BASE = 3_000_000  # ids the lab never reaches: objects for jobs slurmctld no longer knows


class Counting:
    """A runner.run_argv that counts the processes it starts."""

    def __init__(self) -> None:
        self.calls = 0
        self.programs: Dict[str, int] = {}  # by program name: squeue, sdiag, ...

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> Completed:
        self.calls += 1
        name = Path(argv[0]).name
        self.programs[name] = self.programs.get(name, 0) + 1
        return run_argv(argv, **kwargs)
