"""``slurm-dsl doctor``'s options and handler; the checks are ``admin/doctor.py``'s."""

from __future__ import annotations

import argparse
from typing import IO

from .. import render as show
from ..exits import EXIT_ERROR, EXIT_OK
from ..options import Command, common_options, lookup_options, output_options


def add(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        name,
        help="check that this machine is ready for slurm-dsl",
        description="Check the scontrol to run, the deadline wrapper's tools, slurmctld, the Slurm version and"
        " lookup, the lookup helper slurm-dsl-jobinfo, JobRequeue and the job_submit companion, the ledger (whether"
        " the units' account can write its directory), and who is asking. It only looks: it creates and changes"
        " nothing, a missing ledger included. Exit 0 unless a check fails (warnings do not).",
    )
    output_options(p, "one JSON object per check")
    lookup_options(p)
    common_options(p)
    p.set_defaults(handler="doctor")


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from ..doctor import FAIL, run_checks

    checks = run_checks(args.scontrol, args.squeue, args.ledger, args.lookup,
                        became_owner_of=args.became_owner_of,
                        service_account=args.configuration.value("service_account"),
                        config_file=args.configuration.file)
    out.write(show.checks_text(checks, args.json))
    return EXIT_ERROR if any(c.status == FAIL for c in checks) else EXIT_OK


COMMAND = Command(add, {"doctor": run})
