"""The pacing benchmark (issue 45 item 5, docs/benchmarks.md §12): what a 5,000-job run does to
slurmctld for the other users of the cluster, unpaced and at a few ``--rate`` values.

Not a test: it prints figures.  On the lab it submits ``--jobs`` held jobs of its own (as
bench_scale does: pending for a week, never started), then measures, in one run:

- **idle**: another account's ``squeue`` (``runuser -u ACCOUNT -- squeue -h -a -o %i``: a user
  listing the queue) back to back for a few seconds, and ``sdiag``'s server thread count and
  agent queue size;
- per rate and op (``release`` of all the jobs, then ``hold`` of them, then ``requeue`` of them:
  three calls per job, the requeue itself refused on a pending job, still three RPCs): the
  command's wall time, the same squeue's latency meanwhile (median and 95th percentile, and their
  ratio to idle), and the most server threads and agent queue ``sdiag`` showed meanwhile.

Then a markdown table.  At the end, however it ends, it scancels exactly its own jobs.

    python -m benchmarks.bench_pace [--jobs 5000] [--rates 0,2000,500] [--ops release,hold,requeue]
                                    [--account slurmdsl-alice]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from benchmarks.bench_scale import Jobs

SDIAG_FIELDS = {"threads": re.compile(r"^Server thread count:\s*(\d+)", re.M),
                "agents": re.compile(r"^Agent queue size:\s*(\d+)", re.M)}


def squeue_latency(account: str) -> float:
    """Seconds one ``squeue`` of ``account`` takes (listing every job it may see)."""
    start = time.perf_counter()
    subprocess.run(["runuser", "-u", account, "--", "squeue", "-h", "-a", "-o", "%i"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, timeout=120)
    return time.perf_counter() - start


def sdiag() -> Dict[str, int]:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=False, timeout=30).stdout
    found = {name: pattern.search(out) for name, pattern in SDIAG_FIELDS.items()}
    return {name: int(m.group(1)) for name, m in found.items() if m is not None}


class Watch:
    """Another account's squeue and sdiag, sampled back to back until ``stop``."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.latencies: List[float] = []
        self.peaks: Dict[str, int] = {}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._squeue, daemon=True),
                         threading.Thread(target=self._sdiag, daemon=True)]

    def _squeue(self) -> None:
        while not self._stop.is_set():
            self.latencies.append(squeue_latency(self.account))

    def _sdiag(self) -> None:
        while not self._stop.wait(0.25):
            for name, value in sdiag().items():
                self.peaks[name] = max(self.peaks.get(name, 0), value)

    def __enter__(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run_op(op: str, ids: Sequence[str], rate: float, ledger: str) -> Tuple[float, Dict[str, int]]:
    """``slurm-dsl OP - --rate RATE`` of ``ids``: its seconds and how many rows of each result."""
    argv = [sys.executable, "-m", "slurm_dsl", op, "-", "--rate", f"{rate:g}", "--timeout", "3600", "--json",
            "--ledger", ledger]
    start = time.perf_counter()
    done = subprocess.run(argv, input="\n".join(ids), capture_output=True, text=True, check=False, timeout=7200)
    took = time.perf_counter() - start
    results: Dict[str, int] = {}
    for line in done.stdout.splitlines():
        result = re.search(r'"result": "(\w+)"', line)
        if result:
            results[result.group(1)] = results.get(result.group(1), 0) + 1
    return took, results


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pace", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rates", default="0,2000,500")
    parser.add_argument("--ops", default="release,hold,requeue")
    parser.add_argument("--account", default="slurmdsl-alice")
    parser.add_argument("--idle-seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    jobs = Jobs()
    rows: List[str] = []
    try:
        print(f"submitting {args.jobs:,} held jobs ...", flush=True)
        took = jobs.fill(args.jobs, 3)
        print(f"  {took:.0f} s", flush=True)
        with Watch(args.account) as idle:
            time.sleep(args.idle_seconds)
        base_median, base_p95 = statistics.median(idle.latencies), p95(idle.latencies)
        print(f"idle: squeue of {args.account} median {base_median * 1000:.0f} ms, p95 {base_p95 * 1000:.0f} ms"
              f" ({len(idle.latencies)} samples); sdiag {idle.peaks}", flush=True)
        rows.append("| rate (calls/s) | op | seconds | squeue median (x idle) | squeue p95 (x idle) |"
                    " server threads max | agent queue max | results |")
        rows.append("|---|---|---|---|---|---|---|---|")
        rows.append(f"| idle | - | - | {base_median * 1000:.0f} ms (1.00) | {base_p95 * 1000:.0f} ms (1.00) |"
                    f" {idle.peaks.get('threads', '?')} | {idle.peaks.get('agents', '?')} | - |")
        with tempfile.TemporaryDirectory() as where:
            os.chmod(where, 0o700)
            for rate in rates:
                for op in args.ops.split(","):
                    ledger = os.path.join(where, f"ledger-{rate:g}-{op}.sqlite3")
                    with Watch(args.account) as busy:
                        seconds, results = run_op(op, jobs.ids, rate, ledger)
                    lat = busy.latencies or [float("nan")]
                    med, high = statistics.median(lat), p95(lat)
                    label = "unpaced" if rate == 0 else f"{rate:g}"
                    row = (f"| {label} | {op} | {seconds:.1f} | {med * 1000:.0f} ms ({med / base_median:.2f}) |"
                           f" {high * 1000:.0f} ms ({high / base_p95:.2f}) | {busy.peaks.get('threads', '?')} |"
                           f" {busy.peaks.get('agents', '?')} | {results} |")
                    rows.append(row)
                    print(row, flush=True)
    finally:
        jobs.cancel()
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
