"""How many examples a property test tries in this run (docs/testing.md §2, the time budget).

A property test explores the pure core's input space, which is the same on every Slurm major;
the host's major (``SLURM_DSL_TEST_MAJOR`` unset or ``host``, as in a plain ``contrib/test``)
explores it in full every run.  The other majors of ``contrib/test --majors`` run the same code on
another Python, and there each property tries a tenth of its examples, never fewer than
``FLOOR`` (nor more than it asks for): enough for a Python that runs the code differently to
fail, without paying for a second exploration of the same space.
"""

from __future__ import annotations

import os

from hypothesis import settings

SHARE = 10
FLOOR = 25


def full() -> bool:
    """True where the properties run in full: the host's major, or no major named."""
    return os.environ.get("SLURM_DSL_TEST_MAJOR", "host") in ("", "host")


def examples(wanted: int) -> int:
    """The examples to try of a property that asks for ``wanted``."""
    if full():
        return wanted
    return min(wanted, max(wanted // SHARE, FLOOR))


# Properties that do not name their count ask for Hypothesis's default (100).  No property has a
# deadline: Hypothesis's (200 ms an example) is a timed assertion, which a loaded CI machine fails
# for code that is right; speed is measured in benchmarks/.
settings.register_profile("slurm-dsl", deadline=None)
settings.register_profile("slurm-dsl-other-major", deadline=None, max_examples=examples(100))
settings.load_profile("slurm-dsl" if full() else "slurm-dsl-other-major")
