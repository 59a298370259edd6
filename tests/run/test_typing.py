"""The public operations have real signatures: a type checker catches a misspelt keyword.

``hold``, ``release``, ``requeue``, ``restore`` and ``open_job`` are written out (no factory
returning ``Callable[..., Outcome]``), so ``mypy --strict`` rejects ``hold("1", timeot=10)``
before it runs.  One mypy run checks a snippet that must fail and one that must pass.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]
OPS = ("hold", "release", "requeue", "restore", "open_job")

GOOD = textwrap.dedent(
    """\
    import slurm_dsl
    from slurm_dsl import Outcome
    from slurm_dsl.run.tracked import Tracker

    def use(tracker: Tracker) -> None:
        out: Outcome = slurm_dsl.hold("1", timeout=10)
        slurm_dsl.release(2, deadline=1e9, scontrol="/usr/bin/scontrol", ledger="/tmp/l.sqlite3")
        slurm_dsl.requeue("3", timeout=1.5, ledger=tracker)
        slurm_dsl.restore(4, timeout=10, ledger=None)
        slurm_dsl.open_job("5", deadline=2e9)
        print(out.result)
    """
)

# One misspelt keyword per operation, each on its own line (line i + 3 is OPS[i]).
BAD = "import slurm_dsl\n\n\n" + "".join(f'slurm_dsl.{op}("1", timeot=10)\n' for op in OPS)


def test_a_misspelt_keyword_fails_mypy(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\nmypy_path = {ROOT}\nfollow_imports = silent\n"
        "[mypy-pyslurm.*]\nignore_missing_imports = True\n"
    )
    stdout, stderr, status = mypy_api.run(
        [
            "--config-file", str(config),
            "--cache-dir", str(tmp_path / "cache"),
            "--no-error-summary", "--show-error-codes", "--hide-error-context",
            str(tmp_path / "good.py"), str(tmp_path / "bad.py"),
        ]
    )
    assert stderr == ""
    errors = [line.split("/")[-1] for line in stdout.splitlines() if ": error: " in line]
    # mypy may add '; did you mean "timeout"?' before the code.
    assert [e.split(";")[0].replace("  [call-arg]", "") for e in errors] == [
        f'bad.py:{i + 4}: error: Unexpected keyword argument "timeot" for "{op}"' for i, op in enumerate(OPS)
    ], stdout
    assert all(e.endswith("[call-arg]") for e in errors), stdout
    assert status == 1
