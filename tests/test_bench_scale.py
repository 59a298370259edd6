"""The scale benchmark's pure parts: its targets' arithmetic, its table, its inputs
(benchmarks/bench_scale.py, docs/benchmarks.md §10).  The benchmark itself needs a lab of its
own and is never run by the suite."""

from __future__ import annotations

from typing import Dict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_scale import ROWS, parse_sizes, sdiag_held, table, verdicts

KEYS = [key for key, _ in ROWS]


def figures(**given_ms: float) -> Dict[str, float]:
    row = {key: 10.0 for key in KEYS}
    row.update({key.replace("_", " "): value for key, value in given_ms.items()})
    return row


def by_target(medians: Dict[int, Dict[str, float]]) -> Dict[str, bool]:
    return {v.target.split(":")[0]: v.met for v in verdicts(medians)}


def test_the_issues_targets_at_the_edges() -> None:
    # At 1k each command adds 40 ms over its bare call; at 100k, 60 ms: exactly 1.5x, met.
    small = figures(dsl_hold_1=45, bare_hold_1=5, dsl_hold_2=46, bare_hold_2=6, dsl_release_2=47,
                    bare_release_2=7, dsl_hold_100=120, bare_hold_100=80, dsl_sweep_100=200)
    large = figures(dsl_hold_1=65, bare_hold_1=5, dsl_hold_2=66, bare_hold_2=6, dsl_release_2=57,
                    bare_release_2=7, dsl_hold_100=150, bare_hold_100=100, dsl_sweep_100=300)
    # release A B: 50 ms over bare at 100k (met), which is also <= 1.5 x its 40 ms at 1k.
    met = by_target({1000: small, 100_000: large})
    assert met == {"hold 1": True, "hold 2": True, "release 2": True, "hold 100": True,
                   "release A B at 100,000": True, "hold of 100 ids at 100,000": True,
                   "sweep of 100 objects at 100,000": True}
    # A hair over each bound, each alone.
    for key, value in (("dsl hold 1", 65.01), ("dsl release 2", 57.01), ("dsl hold 100", 150.01),
                       ("dsl sweep 100", 300.01)):
        worse = dict(large, **{key: value})
        failed = {name for name, ok in by_target({1000: small, 100_000: worse}).items() if not ok}
        expected = {"dsl hold 1": {"hold 1"}, "dsl release 2": {"release A B at 100,000"},
                    "dsl hold 100": {"hold of 100 ids at 100,000"},  # adds 50.01 <= 60
                    "dsl sweep 100": {"sweep of 100 objects at 100,000"}}[key]
        assert failed == expected, key


ms = st.floats(min_value=0.5, max_value=5000, allow_nan=False)


@given(st.fixed_dictionaries({key: ms for key in KEYS}), st.fixed_dictionaries({key: ms for key in KEYS}))
def test_verdicts_follow_the_issues_words(small: Dict[str, float], large: Dict[str, float]) -> None:
    """Each target read from the issue, naively: 'what slurm-dsl adds over the bare calls (its time
    minus theirs) at 100k at most 1.5x what it adds at 1k' (nothing added counts as 0); 'release
    A B at most 50 ms more than bare release A,B'; 'a hold of 100 ids at most 1.5x the bare list
    call'; 'a sweep of 100 objects at most 1.5x its time at 1k'."""
    got = [v.met for v in verdicts({1000: small, 100_000: large})]
    want = []
    for ours, bare in (("dsl hold 1", "bare hold 1"), ("dsl hold 2", "bare hold 2"),
                       ("dsl release 2", "bare release 2"), ("dsl hold 100", "bare hold 100")):
        added_then = small[ours] - small[bare]
        added_now = large[ours] - large[bare]
        want.append(added_now <= 1.5 * (added_then if added_then > 0 else 0))
    want.append(large["dsl release 2"] - large["bare release 2"] <= 50)
    want.append(large["dsl hold 100"] <= 1.5 * large["bare hold 100"])
    want.append(large["dsl sweep 100"] <= 1.5 * small["dsl sweep 100"])
    assert got == want


def test_the_smallest_and_largest_sizes_are_compared_whatever_the_order() -> None:
    small, middle = figures(dsl_sweep_100=100), figures(dsl_sweep_100=1000)
    large = figures(dsl_sweep_100=140)
    met = by_target({50_000: middle, 100_000: large, 1000: small})
    assert met["sweep of 100 objects at 100,000"] is True


def test_the_table_has_a_row_per_measurement_and_a_column_per_size() -> None:
    medians = {10_000: figures(dsl_hold_1=70.25, bare_hold_1=5), 1000: figures(dsl_hold_1=50, bare_hold_1=4)}
    lines = table(medians, {1000: 1003, 10_000: 10_003}).splitlines()
    assert lines[0] == "| jobs queued | 1,000 | 10,000 |"
    assert lines[1] == "|---|---:|---:|"
    assert lines[2] == "| sdiag: pending + running | 1,003 | 10,003 |"
    assert "| `slurm-dsl hold A` (1 id) | 50.0 ms | 70.2 ms |" in lines
    assert "| slurm-dsl adds: `hold 1` | 46.0 ms | 65.2 ms |" in lines
    assert len(lines) == 3 + len(ROWS) + 4
    assert all(line.count("|") == 4 for line in lines)


def test_sizes_and_sdiags_count() -> None:
    assert parse_sizes("100000,1000,10000,1000") == [1000, 10_000, 100_000]
    for bad in ("", "1000,x", "299", "1000,-5"):
        with pytest.raises(ValueError):
            parse_sizes(bad)
    text = "Server thread count:  3\nJobs submitted: 900\nJobs started:   0\nJobs pending:   1003\nJobs running:   2\n"
    assert sdiag_held(text) == 1005
    with pytest.raises(ValueError):
        sdiag_held("Jobs pending: 4\n")
