"""What the sweep benchmarks (bench_sweep, bench_settle) share to build and sweep their ledgers:
the job ids their gone objects use, and the squeue runner that counts the job-info RPCs."""

from __future__ import annotations

from typing import Any, Sequence

from slurm_dsl.run.process import Completed, run_argv

GONE_BASE = 3_000_000  # ids the lab never reaches: objects for jobs slurmctld no longer knows


class Counting:
    """A runner.run_argv that counts the processes it starts."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, argv: Sequence[str], **kwargs: Any) -> Completed:
        self.calls += 1
        return run_argv(argv, **kwargs)
