"""Rewrite tests/golden/*.sh from the renderer: run by hand, review the diff, commit.

One golden per wrapped op (``render``), and one per op and call of a list script on three
ids (``render_list``)."""

from __future__ import annotations

from slurm_dsl import Op
from slurm_dsl.core.script import render
from tests.core.test_script import GOLDEN, GOLDEN_ARGS, LIST_CALLS, list_golden, render_golden_list

if __name__ == "__main__":
    for op in Op:
        if op.wrapped:
            (GOLDEN / f"{op.value}.sh").write_text(render(op, **GOLDEN_ARGS))
            print(f"wrote {GOLDEN / (op.value + '.sh')}")
    for op, number in LIST_CALLS:
        list_golden(op, number).write_text(render_golden_list(op, number))
        print(f"wrote {list_golden(op, number)}")
