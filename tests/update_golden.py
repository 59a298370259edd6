"""Rewrite tests/golden/*.sh from the renderer: run by hand, review the diff, commit."""

from __future__ import annotations

from slurm_dsl import Op, render
from tests.test_script import GOLDEN, GOLDEN_ARGS

if __name__ == "__main__":
    for op in Op:
        if op.wrapped:
            (GOLDEN / f"{op.value}.sh").write_text(render(op, **GOLDEN_ARGS))
            print(f"wrote {GOLDEN / (op.value + '.sh')}")
